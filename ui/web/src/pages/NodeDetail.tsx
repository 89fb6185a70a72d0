import { useQuery } from '@tanstack/react-query';
import { Alert, Card, Col, Descriptions, Progress, Row, Table, Tag } from 'antd';
import { useTranslation } from 'react-i18next';
import { useParams } from 'react-router';
import { ErrorView } from '../components/ErrorView';
import { StatusTag } from '../components/StatusTag';
import { formatBytes, formatDuration, formatTime } from '../lib/format';
import { isApiError } from '../services/http';
import { getNode, nodeSystem, type PluginStatus } from '../services/cluster';

export default function NodeDetail() {
  const { t } = useTranslation();
  const { uuid = '' } = useParams();
  const node = useQuery({ queryKey: ['node', uuid], queryFn: () => getNode(uuid), refetchInterval: 10000 });
  const sys = useQuery({ queryKey: ['system', uuid], queryFn: () => nodeSystem(uuid), refetchInterval: 15000, retry: false });
  const n = node.data;
  const stateColor: Record<string, string> = { loaded: 'green', refused: 'red', backoff: 'orange', stopped: 'default' };
  const s = sys.data;
  return (
    <div>
      <div className="page-header"><h1>{t('nodes.uuid')} {uuid}</h1></div>
      {node.error && <ErrorView error={node.error} />}
      {n && (
        <Descriptions bordered size="small" column={{ xs: 1, md: 2 }} style={{ marginBottom: 16 }}
          items={[
            { key: 'g', label: t('nodes.group'), children: n.group },
            { key: 'a', label: t('nodes.address'), children: n.address },
            { key: 's', label: t('common.status'), children: <StatusTag status={n.status} /> },
            { key: 'v', label: t('nodes.version'), children: n.version },
            { key: 'st', label: t('nodes.started'), children: formatTime(n.started) },
            { key: 'p', label: t('nodes.plugins'), children: (n.plugins ?? []).map((p) => <Tag key={p.name}>{p.name} {p.version}</Tag>) },
          ]}
        />
      )}
      {n?.plugin_status && n.plugin_status.length > 0 && (
        <Card size="small" title={t('nodes.pluginStatus')} style={{ marginBottom: 16 }}>
          <Table<PluginStatus> rowKey="path" size="small" pagination={false} dataSource={n.plugin_status} scroll={{ x: 700 }}
            columns={[
              { title: t('nodes.plugin'), dataIndex: 'name' },
              { title: t('nodes.handler'), dataIndex: 'handler' },
              { title: t('nodes.version'), dataIndex: 'version', render: (v?: string) => v ?? '—' },
              { title: t('nodes.state'), dataIndex: 'state', render: (v: string) => <Tag color={stateColor[v] ?? 'default'}>{t(`nodes.states.${v}`, { defaultValue: v })}</Tag> },
              { title: t('nodes.reason'), render: (_, p) => (p.reason ? <span><code>{p.reason}</code> {p.message}</span> : '—') },
              { title: t('nodes.restarts'), dataIndex: 'restarts' },
              { title: t('nodes.path'), dataIndex: 'path', className: 'hide-narrow', render: (v: string) => <code>{v}</code> },
            ]} />
        </Card>
      )}
      <Card size="small" title={t('nodes.system')}>
        {sys.error ? (
          isApiError(sys.error, 504) ? <Alert type="warning" showIcon title={t('nodes.systemTimeout')} /> : <ErrorView error={sys.error} />
        ) : !s ? null : (
          <>
            <Row gutter={16} style={{ marginBottom: 16 }}>
              <Col xs={24} sm={8}><div>{t('nodes.cpu')} ({t('nodes.cores', { n: s.cpu_count })})</div><Progress percent={Math.round(s.cpu_percent)} aria-label={t('nodes.cpu')} /></Col>
              <Col xs={24} sm={8}><div>{t('nodes.memory')} ({formatBytes(s.memory_used)} / {formatBytes(s.memory_total)})</div><Progress percent={Math.round(s.memory_percent)} aria-label={t('nodes.memory')} /></Col>
              <Col xs={24} sm={8}><div>{t('nodes.load')}</div><strong>{s.load1.toFixed(2)} / {s.load5.toFixed(2)} / {s.load15.toFixed(2)}</strong></Col>
            </Row>
            <Descriptions size="small" column={{ xs: 1, md: 2 }} items={[
              { key: 'h', label: t('nodes.hostname'), children: s.hostname },
              { key: 'o', label: t('nodes.os'), children: `${s.os} ${s.platform}` },
              { key: 'u', label: t('nodes.uptime'), children: formatDuration(s.uptime_seconds * 1000) },
              { key: 'c', label: t('nodes.collected'), children: formatTime(s.collected_at) },
            ]} />
            <Table rowKey="path" size="small" pagination={false} dataSource={s.disks ?? []} style={{ marginTop: 12 }}
              columns={[
                { title: t('nodes.disk'), dataIndex: 'path' },
                { title: '', dataIndex: 'used_percent', render: (v: number) => <Progress percent={Math.round(v)} size="small" style={{ minWidth: 120 }} /> },
                { title: '', render: (_, d) => `${formatBytes(d.used)} / ${formatBytes(d.total)}` },
              ]} />
            {s.errors && s.errors.length > 0 && <Alert type="warning" title={s.errors.join('; ')} style={{ marginTop: 8 }} />}
          </>
        )}
      </Card>
    </div>
  );
}
