import { useQuery } from '@tanstack/react-query';
import { Table, Tag } from 'antd';
import { useTranslation } from 'react-i18next';
import { Link } from 'react-router';
import { ErrorView } from '../components/ErrorView';
import { StatusTag } from '../components/StatusTag';
import { formatTime } from '../lib/format';
import { listNodes, type NodeInfo } from '../services/cluster';
import { listRuns } from '../services/runs';

export default function Nodes() {
  const { t } = useTranslation();
  const nodes = useQuery({ queryKey: ['nodes'], queryFn: listNodes, refetchInterval: 5000 });
  const running = useQuery({ queryKey: ['runs', 'running'], queryFn: () => listRuns({ status: 'running', page_size: 500 }), refetchInterval: 5000 });
  const procs = new Map<string, number>();
  for (const r of running.data?.items ?? []) procs.set(r.node, (procs.get(r.node) ?? 0) + 1);
  if (nodes.error) return <ErrorView error={nodes.error} />;
  return (
    <div>
      <div className="page-header"><h1>{t('nodes.title')}</h1></div>
      <Table<NodeInfo>
        rowKey="uuid"
        size="middle"
        loading={nodes.isLoading}
        dataSource={nodes.data?.items ?? []}
        scroll={{ x: 900 }}
        pagination={false}
        columns={[
          { title: t('nodes.uuid'), dataIndex: 'uuid', render: (v: string) => <Link to={`/nodes/${encodeURIComponent(v)}`}>{v}</Link> },
          { title: t('nodes.group'), dataIndex: 'group' },
          { title: t('nodes.address'), dataIndex: 'address' },
          { title: t('common.status'), dataIndex: 'status', render: (v: string) => <StatusTag status={v} /> },
          { title: t('nodes.version'), dataIndex: 'version' },
          { title: t('nodes.plugins'), dataIndex: 'plugins', render: (ps: NodeInfo['plugins']) => (ps ?? []).map((p) => <Tag key={p.name}>{p.name} {p.version}</Tag>) },
          { title: t('nodes.procs'), render: (_, n) => procs.get(n.uuid) ?? 0 },
          { title: t('nodes.started'), dataIndex: 'started', render: (v: string | null) => formatTime(v) },
        ]}
      />
    </div>
  );
}
