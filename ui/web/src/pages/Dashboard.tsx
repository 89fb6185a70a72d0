import { useQuery } from '@tanstack/react-query';
import { Card, Col, List, Row, Segmented, Space, Spin, Statistic, Tag, Typography } from 'antd';
import { useEffect, useMemo, useState } from 'react';
import { useTranslation } from 'react-i18next';
import { Link } from 'react-router';
import { useAuth } from '../auth';
import { StatusTag } from '../components/StatusTag';
import { formatDuration, formatTime } from '../lib/format';
import { canSeeCluster, canSeeNodes } from '../services/auth';
import { dashboardQueries, dashboardRefresh, firstRange } from '../services/dashboard';
import { jobLabel, runStatuses } from '../services/runs';
import { chartStatuses, failingJobs, lateness, withToday } from '../services/stats';

// The chart's code (ECharts) is not in the initial bundle; its download and
// compile start with the dashboard, alongside the API requests, not after
// them. It is rendered once loaded (useChart), not through React.lazy and
// Suspense, whose fallback throttling would hold it back up to 300 ms.
type ChartComponent = typeof import('../components/Chart').default;
let chartComponent: ChartComponent | null = null;
const chartModule = import('../components/Chart').then((m) => {
  chartComponent = m.default;
  return m.default;
});

function useChart(): ChartComponent | null {
  const [chart, setChart] = useState<ChartComponent | null>(() => chartComponent);
  useEffect(() => {
    if (chart) return;
    let live = true;
    void chartModule.then((c) => live && setChart(() => c));
    return () => {
      live = false;
    };
  }, [chart]);
  return chart;
}
const refresh = dashboardRefresh;
const colors: Record<string, string> = { success: '#52c41a', failed: '#ff4d4f', timeout: '#faad14', lost: '#fa541c' };

export default function Dashboard({ dark }: { dark: boolean }) {
  const { t } = useTranslation();
  const { me } = useAuth();
  const [days, setDays] = useState(firstRange);
  const Chart = useChart();
  const summary = useQuery(dashboardQueries.summary());
  const nodesAllowed = canSeeNodes(me);
  const nodes = useQuery(dashboardQueries.nodes(nodesAllowed));
  const perDay = useQuery(dashboardQueries.perDay(days));
  const recent = useQuery(dashboardQueries.recent());
  const cluster = useQuery(dashboardQueries.cluster(canSeeCluster(me)));

  const late = lateness(recent.data?.items ?? []);
  const failing = failingJobs(recent.data?.items ?? []);
  const online = (nodes.data?.items ?? []).filter((n) => n.status === 'online').length;
  const stat = nodesAllowed ? 6 : 8;

  const option = useMemo(() => {
    if (!perDay.data || !summary.data) return null;
    const data = withToday(perDay.data, summary.data);
    return {
      tooltip: { trigger: 'axis' },
      legend: { top: 0, data: chartStatuses.map((s) => t(`status.${s}`)) },
      grid: { left: 40, right: 16, top: 36, bottom: 24 },
      xAxis: { type: 'category', data: data.days },
      yAxis: { type: 'value', minInterval: 1 },
      series: chartStatuses.map((s) => ({
        name: t(`status.${s}`), type: 'bar', stack: 'runs', data: data.series[s], itemStyle: { color: colors[s] },
      })),
    };
  }, [perDay.data, summary.data, t]);

  return (
    <div data-testid="dashboard">
      <div className="page-header">
        <h1>{t('dashboard.title')}</h1>
        <Typography.Text type="secondary">{t('common.autoRefresh')}: {refresh / 1000} s</Typography.Text>
      </div>
      <Row gutter={[16, 16]}>
        {/* Three or four figures share the row: no empty slot when the nodes' is hidden (a viewer). */}
        <Col xs={12} md={stat} data-testid="stat"><Card size="small"><Statistic title={t('dashboard.jobsEnabled')} value={summary.data?.jobs.enabled ?? '—'} /></Card></Col>
        <Col xs={12} md={stat} data-testid="stat"><Card size="small"><Statistic title={t('dashboard.jobsDisabled')} value={summary.data?.jobs.disabled ?? '—'} /></Card></Col>
        {nodesAllowed && <Col xs={12} md={stat} data-testid="stat"><Card size="small"><Statistic title={t('dashboard.nodesOnline')} value={nodes.data ? online : '—'} /></Card></Col>}
        <Col xs={nodesAllowed ? 12 : 24} md={stat} data-testid="stat">
          <Card size="small">
            <Statistic title={t('dashboard.lateness', { n: late.n })} value={`${formatDuration(late.p50)} / ${formatDuration(late.p99)}`} />
            <Typography.Text type="secondary">{t('dashboard.p50')} / {t('dashboard.p99')}</Typography.Text>
          </Card>
        </Col>
        <Col xs={24}>
          <Card size="small" title={t('dashboard.runsToday')} data-testid="runs-today">
            <Space wrap size="large">
              {runStatuses.map((s) => (
                <Link key={s} to={`/runs?status=${s}`}><Space size={4}><StatusTag status={s} /><strong>{summary.data?.runs_since[s] ?? '—'}</strong></Space></Link>
              ))}
            </Space>
          </Card>
        </Col>
        <Col xs={24} lg={16}>
          <Card size="small" title={t('dashboard.runsPerDay')} extra={
            <Segmented size="small" value={days} onChange={(v) => setDays(Number(v))} options={[{ value: 7, label: t('dashboard.days7') }, { value: 30, label: t('dashboard.days30') }]} />
          }>
            {option && Chart ? <Chart option={option} dark={dark} label={t('dashboard.runsPerDay')} /> : <div style={{ height: 280 }}><Spin /></div>}
          </Card>
        </Col>
        <Col xs={24} lg={8}>
          <Card size="small" title={t('dashboard.failingNow')} style={{ marginBottom: 16 }}>
            <List
              size="small"
              dataSource={failing}
              locale={{ emptyText: t('dashboard.noFailing') }}
              renderItem={(r) => (
                <List.Item>
                  <Link to={`/jobs/${r.job_id}`}>{jobLabel(r)}</Link>
                  <Space size={4}><Link to={`/runs/${r.id}`}><StatusTag status={r.status} /></Link> {formatTime(r.finished_at ?? r.scheduled_at)}</Space>
                </List.Item>
              )}
            />
          </Card>
          {cluster.data && (
            <Card size="small" title={t('nav.cluster')}>
              <div>{t('dashboard.leader')}: {cluster.data.leader.id ? <Tag color="blue">{cluster.data.leader.id}</Tag> : <Tag color="red">{t('dashboard.noLeader')}</Tag>} {t('dashboard.term')} {cluster.data.term}</div>
              <div style={{ marginTop: 8 }}>{t('dashboard.replicas')}: {(cluster.data.replicas ?? []).map((r) => <Tag key={r.id} color={r.alive ? 'green' : 'red'}>{r.id}</Tag>)}</div>
            </Card>
          )}
        </Col>
      </Row>
    </div>
  );
}
