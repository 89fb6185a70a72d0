import { PlusOutlined } from '@ant-design/icons';
import { keepPreviousData, useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { Alert, App, Button, Input, Popconfirm, Select, Space, Table, Tag, Typography } from 'antd';
import type { ColumnsType } from 'antd/es/table';
import { useEffect, useState } from 'react';
import { useTranslation } from 'react-i18next';
import { Link, useSearchParams } from 'react-router';
import { useAuth } from '../auth';
import { ErrorView, useErrorText } from '../components/ErrorView';
import { StatusTag } from '../components/StatusTag';
import { formatTime } from '../lib/format';
import { canWrite, isAdmin } from '../services/auth';
import { listGroups } from '../services/admin';
import { listHandlers } from '../services/cluster';
import { deleteJob, listJobs, setEnabled, triggerJob, type JobListItem } from '../services/jobs';
import { runStatuses } from '../services/runs';

const scheduleTypes = ['cron', 'fixed_rate', 'fixed_delay', 'once', 'none'];
// The API's sort keys and their labels (jobs.sorts.*).
const sorts = [['id', 'idAsc'], ['-id', 'idDesc'], ['name', 'nameAsc'], ['-name', 'nameDesc'], ['updated_at', 'updatedAsc'], ['-updated_at', 'updatedDesc']] as const;

// The list carries each job's next fire and latest run: a page of the
// table is one request, not one or two more per row.
function NextFire({ job }: { job: JobListItem }) {
  return <span>{job.next_fire_at ? formatTime(job.next_fire_at) : '—'}</span>;
}

function LastRun({ job }: { job: JobListItem }) {
  const { t } = useTranslation();
  const r = job.last_run;
  if (!r) return <Typography.Text type="secondary">{t('jobs.noRuns')}</Typography.Text>;
  return (
    <Space size={4}>
      <Link to={`/runs/${r.id}`}><StatusTag status={r.status} /></Link>
      <span>{formatTime(r.finished_at ?? r.started_at ?? r.scheduled_at)}</span>
    </Space>
  );
}

export default function Jobs() {
  const { t } = useTranslation();
  const { message } = App.useApp();
  const errText = useErrorText();
  const { me } = useAuth();
  const writer = canWrite(me);
  const qc = useQueryClient();
  const [sp, setSp] = useSearchParams();
  const page = Number(sp.get('page') ?? '1') || 1;
  const pageSize = Number(sp.get('page_size') ?? '20') || 20;
  const filter = {
    q: sp.get('q') ?? undefined,
    group: sp.get('group') ?? undefined,
    handler: sp.get('handler') ?? undefined,
    enabled: sp.get('enabled') ?? undefined,
    schedule_type: sp.get('schedule_type') ?? undefined,
    last_status: sp.get('last_status') ?? undefined,
    sort: sp.get('sort') ?? undefined,
    page,
    page_size: pageSize,
  };
  const set = (k: string, v: string | undefined | null, resetPage = true) => {
    const next = new URLSearchParams(sp);
    if (v) next.set(k, v);
    else next.delete(k);
    if (resetPage && k !== 'page') next.delete('page');
    setSp(next, { replace: true });
  };
  const [search, setSearch] = useState(filter.q ?? '');
  const [selected, setSelected] = useState<JobListItem[]>([]);
  // The selection is of the rows on screen: another page, filter or sort starts a new one
  // (a bulk delete must not reach rows the user no longer sees).
  const listKey = sp.toString();
  useEffect(() => setSelected([]), [listKey]);

  const jobs = useQuery({ queryKey: ['jobs', filter], queryFn: () => listJobs(filter), placeholderData: keepPreviousData });
  const groups = useQuery({ queryKey: ['groups'], queryFn: () => listGroups(), staleTime: 60_000 });
  const handlers = useQuery({ queryKey: ['handlers'], queryFn: listHandlers, staleTime: 60_000 });

  const bulk = useMutation({
    mutationFn: async (op: 'enable' | 'disable' | 'trigger' | 'delete') => {
      for (const j of selected) {
        if (op === 'enable' || op === 'disable') await setEnabled(j, op === 'enable');
        else if (op === 'trigger') await triggerJob(j.id);
        else await deleteJob(j.id);
      }
      return selected.length;
    },
    onSuccess: (n) => {
      void message.success(t('jobs.bulkDone', { count: n }));
      setSelected([]);
    },
    onError: (e) => void message.error(errText(e)),
    onSettled: () => void qc.invalidateQueries({ queryKey: ['jobs'] }),
  });

  const columns: ColumnsType<JobListItem> = [
    { title: t('common.id'), dataIndex: 'id', width: 70 },
    {
      title: t('common.name'),
      dataIndex: 'name',
      render: (_, j) => (
        <div>
          <Link to={`/jobs/${j.id}`}>{j.name}</Link>
          {j.description && <div><Typography.Text type="secondary" style={{ fontSize: 12 }}>{j.description}</Typography.Text></div>}
        </div>
      ),
    },
    { title: t('jobs.group'), dataIndex: 'group', className: 'hide-narrow' },
    { title: t('jobs.handler'), dataIndex: 'handler' },
    {
      title: t('jobs.schedule'),
      render: (_, j) => (
        <span>
          <Tag>{t(`job.scheduleTypes.${j.schedule_type}`)}</Tag>
          <code>{j.schedule}</code>
          {j.timezone && <Typography.Text type="secondary"> {j.timezone}</Typography.Text>}
        </span>
      ),
    },
    { title: t('jobs.nextFire'), render: (_, j) => <NextFire job={j} /> },
    { title: t('jobs.lastRun'), render: (_, j) => <LastRun job={j} /> },
    {
      title: t('common.status'),
      dataIndex: 'enabled',
      render: (v: boolean) => <Tag color={v ? 'green' : 'default'}>{v ? t('common.enabled') : t('common.disabled')}</Tag>,
    },
  ];

  return (
    <div>
      <div className="page-header">
        <h1>{t('jobs.title')}</h1>
        {writer && (
          <Link to="/jobs/new"><Button type="primary" icon={<PlusOutlined />} data-testid="create-job">{t('jobs.create')}</Button></Link>
        )}
      </div>
      {me && !isAdmin(me) && me.groups.length === 0 && (
        // A user sees the jobs of their groups only: with none the list is empty, and says why.
        <Alert type="info" showIcon data-testid="no-groups" style={{ marginBottom: 12 }} message={t('jobs.noGroups')} />
      )}
      <Space wrap style={{ marginBottom: 12 }}>
        <Input.Search
          aria-label={t('jobs.searchPlaceholder')}
          placeholder={t('jobs.searchPlaceholder')}
          allowClear
          value={search}
          onChange={(e) => setSearch(e.target.value)}
          onSearch={(v) => set('q', v.trim())}
          style={{ width: 260 }}
        />
        <Select
          aria-label={t('jobs.group')}
          placeholder={t('jobs.group')}
          allowClear
          value={filter.group}
          onChange={(v?: string) => set('group', v)}
          options={(groups.data?.items ?? []).map((g) => ({ value: g.appname, label: g.title || g.appname }))}
          style={{ width: 160 }}
        />
        <Select
          aria-label={t('jobs.handler')}
          placeholder={t('jobs.handler')}
          allowClear
          value={filter.handler}
          onChange={(v?: string) => set('handler', v)}
          options={(handlers.data?.items ?? []).map((h) => ({ value: h.name, label: h.name }))}
          style={{ width: 140 }}
        />
        <Select
          aria-label={t('jobs.enabledFilter')}
          placeholder={t('jobs.enabledFilter')}
          allowClear
          value={filter.enabled}
          onChange={(v?: string) => set('enabled', v)}
          options={[{ value: 'true', label: t('common.enabled') }, { value: 'false', label: t('common.disabled') }]}
          style={{ width: 120 }}
        />
        <Select
          aria-label={t('jobs.scheduleTypeFilter')}
          placeholder={t('jobs.scheduleTypeFilter')}
          data-testid="filter-schedule-type"
          allowClear
          value={filter.schedule_type}
          onChange={(v?: string) => set('schedule_type', v)}
          options={scheduleTypes.map((v) => ({ value: v, label: t(`job.scheduleTypes.${v}`) }))}
          style={{ width: 170 }}
        />
        <Select
          aria-label={t('jobs.lastStatusFilter')}
          placeholder={t('jobs.lastStatusFilter')}
          data-testid="filter-last-status"
          allowClear
          value={filter.last_status}
          onChange={(v?: string) => set('last_status', v)}
          options={[
            ...runStatuses.map((v) => ({ value: v, label: t(`status.${v}`) })),
            { value: 'none', label: t('jobs.noRuns') },
          ]}
          style={{ width: 140 }}
        />
        <Select
          aria-label={t('jobs.sort')}
          placeholder={t('jobs.sort')}
          allowClear
          value={filter.sort}
          onChange={(v?: string) => set('sort', v)}
          options={sorts.map(([v, key]) => ({ value: v, label: t(`jobs.sorts.${key}`) }))}
          popupMatchSelectWidth={false}
          style={{ width: 170 }}
        />
      </Space>
      {writer && selected.length > 0 && (
        <Space wrap style={{ marginBottom: 12 }} data-testid="bulk-bar">
          <span>{t('jobs.bulk', { count: selected.length })}</span>
          <Button onClick={() => bulk.mutate('enable')} loading={bulk.isPending}>{t('jobs.enable')}</Button>
          <Button onClick={() => bulk.mutate('disable')} loading={bulk.isPending}>{t('jobs.disable')}</Button>
          <Button onClick={() => bulk.mutate('trigger')} loading={bulk.isPending}>{t('jobs.trigger')}</Button>
          <Popconfirm title={t('jobs.confirmBulkDelete', { count: selected.length })} onConfirm={() => bulk.mutate('delete')}>
            <Button danger loading={bulk.isPending}>{t('common.delete')}</Button>
          </Popconfirm>
        </Space>
      )}
      {jobs.error ? (
        <ErrorView error={jobs.error} onRetry={() => void jobs.refetch()} />
      ) : (
        <Table<JobListItem>
          rowKey="id"
          size="middle"
          loading={jobs.isFetching}
          dataSource={jobs.data?.items ?? []}
          columns={columns}
          scroll={{ x: 900 }}
          rowSelection={writer ? { selectedRowKeys: selected.map((j) => j.id), onChange: (_, rows) => setSelected(rows) } : undefined}
          pagination={{
            current: page,
            pageSize,
            total: jobs.data?.total ?? 0,
            showSizeChanger: true,
            pageSizeOptions: [20, 50, 100, 200],
            showTotal: (n) => t('common.total', { count: n }),
            onChange: (p, ps) => {
              const next = new URLSearchParams(sp);
              next.set('page', String(p));
              next.set('page_size', String(ps));
              setSp(next, { replace: true });
            },
          }}
        />
      )}
    </div>
  );
}
