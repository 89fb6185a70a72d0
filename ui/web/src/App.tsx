import {
  AlertOutlined, ApartmentOutlined, AuditOutlined, ClusterOutlined, DashboardOutlined, KeyOutlined, LogoutOutlined,
  ScheduleOutlined, TeamOutlined, UnorderedListOutlined, DesktopOutlined, FieldTimeOutlined, MenuFoldOutlined, MenuUnfoldOutlined,
} from '@ant-design/icons';
import { App as AntApp, Button, ConfigProvider, Layout, Menu, Select, Space, Spin, Switch, theme, Typography } from 'antd';
import enUS from 'antd/locale/en_US';
import zhCN from 'antd/locale/zh_CN';
import { lazy, Suspense, useEffect, useState, type ReactNode } from 'react';
import { useTranslation } from 'react-i18next';
import { Navigate, Route, Routes, useLocation, useNavigate } from 'react-router';
import { useAuth } from './auth';
import { languages, rememberLang, type Lang } from './i18n';
import { canSeeCluster, canSeeNodes, canWrite, isAdmin } from './services/auth';
import Login from './pages/Login';
import { safeNext } from './lib/next';

// The dashboard is the landing page: on a load of / its chunk is fetched and
// run alongside the session check, and rendered directly once there, not
// through React.lazy: a lazy component suspends at least once, and React
// holds a Suspense boundary's content back for up to 300 ms after its
// fallback showed (fallback throttling).
type DashboardPage = typeof import('./pages/Dashboard').default;
let dashboardPage: DashboardPage | null = null;
const dashboardModule = () =>
  import('./pages/Dashboard').then((m) => {
    dashboardPage = m.default;
    return m;
  });
if (window.location.pathname === '/') void dashboardModule();
const LazyDashboard = lazy(dashboardModule);
function Dashboard({ dark }: { dark: boolean }) {
  const Page = dashboardPage;
  return Page ? <Page dark={dark} /> : <LazyDashboard dark={dark} />;
}
const Jobs = lazy(() => import('./pages/Jobs'));
const JobForm = lazy(() => import('./pages/JobForm'));
const JobDetail = lazy(() => import('./pages/JobDetail'));
const Runs = lazy(() => import('./pages/Runs'));
const RunDetail = lazy(() => import('./pages/RunDetail'));
const Nodes = lazy(() => import('./pages/Nodes'));
const NodeDetail = lazy(() => import('./pages/NodeDetail'));
const Groups = lazy(() => import('./pages/Groups'));
const Users = lazy(() => import('./pages/Users'));
const Tokens = lazy(() => import('./pages/Tokens'));
const Audit = lazy(() => import('./pages/Audit'));
const Alerts = lazy(() => import('./pages/Alerts'));
const AlertSettings = lazy(() => import('./pages/AlertSettings'));
const Cluster = lazy(() => import('./pages/Cluster'));

const darkKey = 'cronix.dark';

export function App() {
  const { i18n } = useTranslation();
  const [dark, setDark] = useState(() => localStorage.getItem(darkKey) === '1');
  const lang = (i18n.language === 'zh-CN' ? 'zh-CN' : 'en') as Lang;
  useEffect(() => {
    document.documentElement.lang = lang;
    document.documentElement.dataset.theme = dark ? 'dark' : 'light';
  }, [lang, dark]);
  const toggleDark = (v: boolean) => {
    localStorage.setItem(darkKey, v ? '1' : '0');
    setDark(v);
  };
  return (
    <ConfigProvider
      locale={lang === 'zh-CN' ? zhCN : enUS}
      theme={{ algorithm: dark ? theme.darkAlgorithm : theme.defaultAlgorithm, cssVar: { key: 'cronix' }, hashed: false }}
    >
      <AntApp>
        <Routed dark={dark} setDark={toggleDark} />
      </AntApp>
    </ConfigProvider>
  );
}

function Routed({ dark, setDark }: { dark: boolean; setDark: (v: boolean) => void }) {
  const { me, ready, ended } = useAuth();
  const location = useLocation();
  if (!ready) return <FullSpin />;
  if (!me) {
    if (location.pathname === '/login') return <Login />;
    // After a logout the next user starts from the dashboard, not from the page the last one left.
    const next = ended === 'logout' ? '/' : location.pathname + location.search;
    return <Navigate to={`/login${next !== '/' ? '?next=' + encodeURIComponent(next) : ''}`} replace />;
  }
  const admin = isAdmin(me);
  // Guard each page like the API does (server/authz): a page the role cannot use says so.
  const only = (allowed: boolean, page: ReactNode) => (allowed ? page : <Forbidden />);
  const writer = canWrite(me);
  const nodes = canSeeNodes(me);
  const cluster = canSeeCluster(me);
  return (
    <Shell dark={dark} setDark={setDark}>
      <Suspense fallback={<FullSpin />}>
        <Routes>
          {/* Signed in (or already were): on to the page asked for before the login. */}
          <Route path="/login" element={<Navigate to={safeNext(new URLSearchParams(location.search).get('next'))} replace />} />
          <Route path="/" element={<Dashboard dark={dark} />} />
          <Route path="/jobs" element={<Jobs />} />
          <Route path="/jobs/new" element={only(writer, <JobForm mode="new" />)} />
          <Route path="/jobs/:id" element={<JobDetail />} />
          <Route path="/jobs/:id/edit" element={only(writer, <JobForm mode="edit" />)} />
          <Route path="/jobs/:id/copy" element={only(writer, <JobForm mode="copy" />)} />
          <Route path="/runs" element={<Runs />} />
          <Route path="/runs/:id" element={<RunDetail />} />
          <Route path="/nodes" element={only(nodes, <Nodes />)} />
          <Route path="/nodes/:uuid" element={only(nodes, <NodeDetail />)} />
          <Route path="/groups" element={<Groups />} />
          <Route path="/tokens" element={<Tokens />} />
          <Route path="/alerts" element={only(cluster, <Alerts />)} />
          <Route path="/alerts/settings" element={only(admin, <AlertSettings />)} />
          <Route path="/users" element={only(admin, <Users />)} />
          <Route path="/audit" element={only(admin, <Audit />)} />
          <Route path="/cluster" element={only(cluster, <Cluster />)} />
          <Route path="*" element={<Navigate to="/" replace />} />
        </Routes>
      </Suspense>
    </Shell>
  );
}

function Forbidden() {
  const { t } = useTranslation();
  return <Typography.Paragraph data-testid="forbidden">{t('common.forbidden')}</Typography.Paragraph>;
}

function FullSpin() {
  const { t } = useTranslation();
  return <div style={{ padding: 48, textAlign: 'center' }}><Spin /> <span className="sr-only">{t('app.loading')}</span></div>;
}

function Shell({ children, dark, setDark }: { children: ReactNode; dark: boolean; setDark: (v: boolean) => void }) {
  const { t, i18n } = useTranslation();
  const { me, logout } = useAuth();
  const navigate = useNavigate();
  const location = useLocation();
  const [collapsed, setCollapsed] = useState(false);
  const admin = isAdmin(me);
  const items = [
    { key: '/', icon: <DashboardOutlined />, label: t('nav.dashboard') },
    { key: '/jobs', icon: <ScheduleOutlined />, label: t('nav.jobs') },
    { key: '/runs', icon: <UnorderedListOutlined />, label: t('nav.runs') },
    ...(canSeeNodes(me) ? [{ key: '/nodes', icon: <DesktopOutlined />, label: t('nav.nodes') }] : []),
    { key: '/groups', icon: <ApartmentOutlined />, label: t('nav.groups') },
    ...(canSeeCluster(me) ? [{ key: '/alerts', icon: <AlertOutlined />, label: t('nav.alerts') }] : []),
    { key: '/tokens', icon: <KeyOutlined />, label: t('nav.tokens') },
    ...(admin
      ? [
          { key: '/users', icon: <TeamOutlined />, label: t('nav.users') },
          { key: '/audit', icon: <AuditOutlined />, label: t('nav.audit') },
        ]
      : []),
    ...(canSeeCluster(me) ? [{ key: '/cluster', icon: <ClusterOutlined />, label: t('nav.cluster') }] : []),
  ];
  const selected = items
    .map((i) => i.key)
    .filter((k) => (k === '/' ? location.pathname === '/' : location.pathname.startsWith(k)))
    .sort((a, b) => b.length - a.length)[0] ?? '/';
  const changeLang = (l: Lang) => {
    void i18n.changeLanguage(l);
    rememberLang(l);
  };
  return (
    <Layout style={{ minHeight: '100%' }}>
      <Layout.Sider breakpoint="md" collapsedWidth={0} collapsible collapsed={collapsed} onCollapse={setCollapsed} trigger={null} width={208}>
        <div className="app-logo"><FieldTimeOutlined aria-hidden /> Cronix</div>
        <nav aria-label="main">
          <Menu
            theme="dark"
            mode="inline"
            selectedKeys={[selected]}
            items={items}
            onClick={(e) => {
              navigate(e.key);
              if (window.innerWidth < 768) setCollapsed(true);
            }}
          />
        </nav>
      </Layout.Sider>
      <Layout>
        <Layout.Header style={{ padding: '0 16px', display: 'flex', alignItems: 'center', gap: 12, background: 'var(--cronix-color-bg-container)' }}>
          <Button type="text" aria-label="menu" aria-expanded={!collapsed} onClick={() => setCollapsed(!collapsed)} icon={collapsed ? <MenuUnfoldOutlined /> : <MenuFoldOutlined />} />
          <div style={{ flex: 1 }} />
          <Space size="middle" wrap>
            <Select<Lang>
              aria-label={t('nav.language')}
              data-testid="lang-select"
              value={(i18n.language === 'zh-CN' ? 'zh-CN' : 'en') as Lang}
              onChange={changeLang}
              options={languages}
              style={{ width: 112 }}
              size="small"
            />
            <span className="hide-narrow">
              <label htmlFor="dark-switch" style={{ marginRight: 6 }}>{t('nav.darkMode')}</label>
              <Switch id="dark-switch" size="small" checked={dark} onChange={setDark} />
            </span>
            <span data-testid="whoami" className="hide-narrow">{me?.username} <Typography.Text type="secondary">({t(`users.roles.${me?.role ?? 'viewer'}`)})</Typography.Text></span>
            <Button size="small" icon={<LogoutOutlined />} onClick={() => void logout()} data-testid="logout" aria-label={t('nav.logout')}>
              <span className="hide-narrow">{t('nav.logout')}</span>
            </Button>
          </Space>
        </Layout.Header>
        {/* Layout.Content is the page's <main> landmark. */}
        <Layout.Content style={{ padding: 16, minWidth: 0 }}>{children}</Layout.Content>
      </Layout>
    </Layout>
  );
}
