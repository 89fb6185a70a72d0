import { keepPreviousData, useQuery } from '@tanstack/react-query';
import { Input, Space, Table } from 'antd';
import { useTranslation } from 'react-i18next';
import { useSearchParams } from 'react-router';
import { PageError } from '../components/MissingApi';
import { formatTime } from '../lib/format';
import { listAudit, type AuditEntry } from '../services/admin';

export default function Audit() {
  const { t } = useTranslation();
  const [sp, setSp] = useSearchParams();
  const f = {
    user: sp.get('user') ?? undefined,
    object_type: sp.get('object_type') ?? undefined,
    object_id: sp.get('object_id') ?? undefined,
    page: Number(sp.get('page') ?? '1') || 1,
    page_size: Number(sp.get('page_size') ?? '50') || 50,
  };
  const audit = useQuery({ queryKey: ['audit', f], queryFn: () => listAudit(f), placeholderData: keepPreviousData });
  const set = (k: string, v: string) => {
    const next = new URLSearchParams(sp);
    if (v) next.set(k, v);
    else next.delete(k);
    next.delete('page');
    setSp(next, { replace: true });
  };
  return (
    <div>
      <div className="page-header"><h1>{t('audit.title')}</h1></div>
      <Space wrap style={{ marginBottom: 12 }}>
        <Input.Search aria-label={t('audit.user')} placeholder={t('audit.user')} defaultValue={f.user} onSearch={(v) => set('user', v.trim())} allowClear style={{ width: 160 }} />
        <Input.Search aria-label={t('audit.objectType')} placeholder={t('audit.objectType')} defaultValue={f.object_type} onSearch={(v) => set('object_type', v.trim())} allowClear style={{ width: 160 }} />
        <Input.Search aria-label={t('audit.objectId')} placeholder={t('audit.objectId')} defaultValue={f.object_id} onSearch={(v) => set('object_id', v.trim())} allowClear style={{ width: 140 }} />
      </Space>
      {audit.error ? <PageError error={audit.error} /> : (
        <Table<AuditEntry> rowKey="id" size="small" loading={audit.isFetching} dataSource={audit.data?.items ?? []} scroll={{ x: 900 }}
          pagination={{ current: f.page, pageSize: f.page_size, total: audit.data?.total ?? 0, onChange: (p, ps) => { const n = new URLSearchParams(sp); n.set('page', String(p)); n.set('page_size', String(ps)); setSp(n, { replace: true }); } }}
          expandable={{ expandedRowRender: (e) => <pre className="diff-view">{JSON.stringify(e.diff, null, 2)}</pre> }}
          columns={[
            { title: t('audit.at'), dataIndex: 'at', render: (v: string) => formatTime(v) },
            { title: t('audit.user'), dataIndex: 'user' },
            { title: t('audit.address'), dataIndex: 'address' },
            { title: t('audit.action'), dataIndex: 'action' },
            { title: t('audit.objectType'), dataIndex: 'object_type' },
            { title: t('audit.objectId'), dataIndex: 'object_id' },
          ]} />
      )}
    </div>
  );
}
