import { useQuery } from '@tanstack/react-query';
import { Card, Col, List, Row, Segmented, Space, Spin, Statistic, Tag, Typography } from 'antd';
import { lazy, Suspense, useMemo, useState } from 'react';
import { useTranslation } from 'react-i18next';
import { Link } from 'react-router';
import { useAuth } from '../auth';
import { StatusTag } from '../components/StatusTag';
import { formatDuration, formatTime } from '../lib/format';
import { isAdmin } from '../services/auth';
import { getCluster, listNodes } from '../services/cluster';
import { listRuns, runStatuses } from '../services/runs';
import { chartStatuses, failingJobs, jobCounts, lateness, runsPerDay, runsToday } from '../services/stats';

// The chart's code (ECharts) is not in the initial bundle; its download and
// compile start with the dashboard, alongside the API requests, not after them.
const chartModule = import('../components/Chart');
const Chart = lazy(() => chartModule);
const refresh = 10_000;
const colors: Record<string, string> = { success: '#52c41a', failed: '#ff4d4f', timeout: '#faad14', lost: '#fa541c' };

export default function Dashboard({ dark }: { dark: boolean }) {
  const { t } = useTranslation();
  const { me } = useAuth();
  const [days, setDays] = useState(7);
  const jobs = useQuery({ queryKey: ['dash', 'jobs'], queryFn: jobCounts, refetchInterval: refresh });
  const nodes = useQuery({ queryKey: ['nodes'], queryFn: listNodes, refetchInterval: refresh });
  const today = useQuery({ queryKey: ['dash', 'today'], queryFn: () => runsToday(runStatuses), refetchInterval: refresh });
  const perDay = useQuery({ queryKey: ['dash', 'perDay', days], queryFn: () => runsPerDay(days), refetchInterval: 60_000 });
  const recent = useQuery({ queryKey: ['dash', 'recent'], queryFn: () => listRuns({ page_size: 200 }), refetchInterval: refresh });
  const cluster = useQuery({ queryKey: ['cluster'], queryFn: getCluster, refetchInterval: refresh, enabled: isAdmin(me), retry: false });

  const late = lateness(recent.data?.items ?? []);
  const failing = failingJobs(recent.data?.items ?? []);
  const online = (nodes.data?.items ?? []).filter((n) => n.status === 'online').length;

  const option = useMemo(() => {
    if (!perDay.data) return null;
    return {
      tooltip: { trigger: 'axis' },
      legend: { top: 0, data: chartStatuses.map((s) => t(`status.${s}`)) },
      grid: { left: 40, right: 16, top: 36, bottom: 24 },
      xAxis: { type: 'category', data: perDay.data.days },
      yAxis: { type: 'value', minInterval: 1 },
      series: chartStatuses.map((s) => ({
        name: t(`status.${s}`), type: 'bar', stack: 'runs', data: perDay.data!.series[s], itemStyle: { color: colors[s] },
      })),
    };
  }, [perDay.data, t]);

  return (
    <div data-testid="dashboard">
      <div className="page-header">
        <h1>{t('dashboard.title')}</h1>
        <Typography.Text type="secondary">{t('common.autoRefresh')}: {refresh / 1000} s</Typography.Text>
      </div>
      <Row gutter={[16, 16]}>
        <Col xs={12} md={6}><Card size="small"><Statistic title={t('dashboard.jobsEnabled')} value={jobs.data?.enabled ?? '—'} /></Card></Col>
        <Col xs={12} md={6}><Card size="small"><Statistic title={t('dashboard.jobsDisabled')} value={jobs.data?.disabled ?? '—'} /></Card></Col>
        <Col xs={12} md={6}><Card size="small"><Statistic title={t('dashboard.nodesOnline')} value={nodes.data ? online : '—'} /></Card></Col>
        <Col xs={12} md={6}>
          <Card size="small">
            <Statistic title={t('dashboard.lateness', { n: late.n })} value={`${formatDuration(late.p50)} / ${formatDuration(late.p99)}`} />
            <Typography.Text type="secondary">{t('dashboard.p50')} / {t('dashboard.p99')}</Typography.Text>
          </Card>
        </Col>
        <Col xs={24}>
          <Card size="small" title={t('dashboard.runsToday')} data-testid="runs-today">
            <Space wrap size="large">
              {runStatuses.map((s) => (
                <Link key={s} to={`/runs?status=${s}`}><Space size={4}><StatusTag status={s} /><strong>{today.data?.[s] ?? '—'}</strong></Space></Link>
              ))}
            </Space>
          </Card>
        </Col>
        <Col xs={24} lg={16}>
          <Card size="small" title={t('dashboard.runsPerDay')} extra={
            <Segmented size="small" value={days} onChange={(v) => setDays(Number(v))} options={[{ value: 7, label: t('dashboard.days7') }, { value: 30, label: t('dashboard.days30') }]} />
          }>
            <Suspense fallback={<div style={{ height: 280 }}><Spin /></div>}>
              {option ? <Chart option={option} dark={dark} label={t('dashboard.runsPerDay')} /> : <div style={{ height: 280 }}><Spin /></div>}
            </Suspense>
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
                  <Link to={`/jobs/${r.job_id}`}>#{r.job_id}</Link>
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
