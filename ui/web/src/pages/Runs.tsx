import { keepPreviousData, useQuery } from '@tanstack/react-query';
import { Select, Space } from 'antd';
import { useTranslation } from 'react-i18next';
import { useSearchParams } from 'react-router';
import { ErrorView } from '../components/ErrorView';
import { listRuns, runStatuses } from '../services/runs';
import { RunsTable } from './JobDetail';

export default function Runs() {
  const { t } = useTranslation();
  const [sp, setSp] = useSearchParams();
  const f = {
    status: sp.get('status') ?? undefined,
    job_id: sp.get('job_id') ? Number(sp.get('job_id')) : undefined,
    page: Number(sp.get('page') ?? '1') || 1,
    page_size: Number(sp.get('page_size') ?? '20') || 20,
  };
  const runs = useQuery({ queryKey: ['runs', 'all', f], queryFn: () => listRuns(f), refetchInterval: 5000, placeholderData: keepPreviousData });
  const set = (k: string, v?: string) => {
    const next = new URLSearchParams(sp);
    if (v) next.set(k, v);
    else next.delete(k);
    if (k !== 'page') next.delete('page');
    setSp(next, { replace: true });
  };
  return (
    <div>
      <div className="page-header"><h1>{t('nav.runs')}</h1></div>
      <Space wrap style={{ marginBottom: 12 }}>
        <Select aria-label={t('common.status')} placeholder={t('common.status')} allowClear value={f.status} style={{ width: 140 }}
          onChange={(v?: string) => set('status', v)} options={runStatuses.map((s) => ({ value: s, label: t(`status.${s}`) }))} />
      </Space>
      {runs.error ? <ErrorView error={runs.error} /> : (
        <RunsTable showJob runs={runs.data?.items ?? []} loading={runs.isLoading} total={runs.data?.total ?? 0} page={f.page} pageSize={f.page_size}
          onPage={(p, ps) => { const next = new URLSearchParams(sp); next.set('page', String(p)); next.set('page_size', String(ps)); setSp(next, { replace: true }); }} />
      )}
    </div>
  );
}
