import { useQuery } from '@tanstack/react-query';
import { Card, Descriptions, Table, Tag } from 'antd';
import { useTranslation } from 'react-i18next';
import { ErrorView } from '../components/ErrorView';
import { getCluster, type Replica } from '../services/cluster';

export default function Cluster() {
  const { t } = useTranslation();
  const c = useQuery({ queryKey: ['cluster'], queryFn: getCluster, refetchInterval: 5000 });
  if (c.error) return <ErrorView error={c.error} />;
  const d = c.data;
  if (!d) return null;
  return (
    <div>
      <div className="page-header"><h1>{t('cluster.title')}</h1></div>
      <Descriptions bordered size="small" column={{ xs: 1, md: 2 }} style={{ marginBottom: 16 }} items={[
        { key: 'this', label: t('cluster.this'), children: d.this },
        { key: 'leader', label: t('cluster.leader'), children: d.leader.id || <Tag color="red">{t('dashboard.noLeader')}</Tag> },
        { key: 'term', label: t('cluster.term'), children: d.term },
        { key: 'state', label: t('cluster.state'), children: d.state },
      ]} />
      <Card size="small" title={t('cluster.replicas')} style={{ marginBottom: 16 }}>
        <Table<Replica> rowKey="id" size="small" pagination={false} dataSource={d.replicas ?? []} scroll={{ x: 720 }} columns={[
          { title: t('common.id'), dataIndex: 'id', render: (v: string) => (v === d.leader.id ? <strong>{v} ★</strong> : v) },
          { title: t('cluster.address'), dataIndex: 'address' },
          { title: t('cluster.url'), dataIndex: 'url' },
          { title: t('cluster.suffrage'), dataIndex: 'suffrage' },
          { title: t('cluster.alive'), dataIndex: 'alive', render: (v: boolean) => <Tag color={v ? 'green' : 'red'}>{v ? t('common.yes') : t('common.no')}</Tag> },
        ]} />
      </Card>
      <Card size="small" title={t('cluster.health')}>
        <Descriptions size="small" column={{ xs: 1, md: 2 }} items={[
          { key: 'lc', label: t('cluster.lastContact'), children: `${d.raft.last_contact_ms} ms` },
          { key: 'ci', label: t('cluster.commitIndex'), children: d.raft.commit_index },
          { key: 'ai', label: t('cluster.appliedIndex'), children: d.raft.applied_index },
          { key: 'fp', label: t('cluster.fsmPending'), children: d.raft.fsm_pending },
        ]} />
      </Card>
    </div>
  );
}
