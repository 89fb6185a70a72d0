import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { App, Button, Card, Checkbox, DatePicker, Descriptions, Form, Input, Modal, Popconfirm, Select, Space, Switch, Table, Tabs, Tag, Typography } from 'antd';
import type { Dayjs } from 'dayjs';
import { useState } from 'react';
import { useTranslation } from 'react-i18next';
import { Link, useNavigate, useParams, useSearchParams } from 'react-router';
import { useAuth } from '../auth';
import { ErrorView, useErrorText } from '../components/ErrorView';
import { StatusTag } from '../components/StatusTag';
import { VersionDiff } from '../components/VersionDiff';
import { fieldErrorLines } from '../lib/fieldErrors';
import { formatDuration, formatTime } from '../lib/format';
import { notFound, routeId } from '../lib/routeId';
import { canWrite } from '../services/auth';
import { listHandlers, listNodes } from '../services/cluster';
import { isApiError } from '../services/http';
import { deleteJob, getJob, listVersions, restoreVersion, setEnabled, triggerJob, versionText, type Job, type JobVersion } from '../services/jobs';
import { jobLabel, listJobRuns, runStatuses, type Run } from '../services/runs';

export default function JobDetail() {
  const { t } = useTranslation();
  const { id } = useParams();
  const parsedId = routeId(id);
  const jobId = parsedId ?? 0;
  const { me } = useAuth();
  const writer = canWrite(me);
  const navigate = useNavigate();
  const qc = useQueryClient();
  const { message } = App.useApp();
  const errText = useErrorText();
  const [sp, setSp] = useSearchParams();
  const tab = sp.get('tab') ?? 'runs';
  const [triggerOpen, setTriggerOpen] = useState(false);

  const job = useQuery({ queryKey: ['job', jobId], queryFn: () => getJob(jobId), enabled: parsedId !== null });
  const toggle = useMutation({
    mutationFn: (v: boolean) => setEnabled(job.data!, v),
    onSuccess: (j) => qc.setQueryData(['job', jobId], j),
    onError: (e) => void message.error(errText(e)),
  });
  const remove = useMutation({
    mutationFn: () => deleteJob(jobId),
    onSuccess: () => {
      void message.success(t('job.deleted', { name: job.data?.name ?? `#${jobId}` }));
      // Back to the list, with the deleted job's page out of the history. The dashboard's
      // cached runs may name the job: they are dropped, so it does not ask for the job again.
      navigate('/jobs', { replace: true });
      qc.removeQueries({ queryKey: ['dash'] });
      void qc.invalidateQueries({ queryKey: ['jobs'] });
    },
    onError: (e) => void message.error(errText(e)),
  });

  if (parsedId === null) return <ErrorView error={notFound} />;
  if (job.error) return <ErrorView error={job.error} onRetry={() => void job.refetch()} />;
  const j = job.data;
  if (!j) return null;
  const setTab = (k: string) => {
    const next = new URLSearchParams(sp);
    next.set('tab', k);
    setSp(next, { replace: true });
  };
  return (
    <div>
      <div className="page-header">
        <h1>{t('job.detail', { name: j.name })} <Typography.Text type="secondary">#{j.id} · r{j.revision}</Typography.Text></h1>
        {writer && (
          <Space wrap>
            <span>
              <label htmlFor="job-enabled" style={{ marginRight: 6 }}>{t('job.enabled')}</label>
              <Switch id="job-enabled" checked={j.enabled} loading={toggle.isPending} onChange={(v) => toggle.mutate(v)} />
            </span>
            <Button type="primary" onClick={() => setTriggerOpen(true)} data-testid="trigger-job">{t('jobs.trigger')}</Button>
            <Link to={`/jobs/${j.id}/edit`}><Button data-testid="edit-job">{t('common.edit')}</Button></Link>
            <Link to={`/jobs/${j.id}/copy`}><Button>{t('common.copy')}</Button></Link>
            <Popconfirm title={t('job.deleteConfirm', { name: j.name })} onConfirm={() => remove.mutate()}>
              <Button danger data-testid="delete-job">{t('common.delete')}</Button>
            </Popconfirm>
          </Space>
        )}
      </div>
      <Tabs
        activeKey={tab}
        onChange={setTab}
        items={[
          { key: 'runs', label: t('job.runs'), children: <JobRuns job={j} /> },
          { key: 'config', label: t('job.config'), children: <JobConfig job={j} /> },
          { key: 'versions', label: t('job.versions'), children: <Versions job={j} writer={writer} /> },
        ]}
      />
      {triggerOpen && <TriggerModal job={j} onClose={() => setTriggerOpen(false)} />}
    </div>
  );
}

function JobConfig({ job }: { job: Job }) {
  const { t } = useTranslation();
  const items: [string, React.ReactNode][] = [
    [t('job.group'), job.group],
    [t('job.scheduleType'), t(`job.scheduleTypes.${job.schedule_type}`)],
    [t('job.schedule'), <code key="s">{job.schedule}</code>],
    [t('job.timezone'), job.timezone || t('common.serverZone')],
    [t('job.handler'), job.handler],
    [t('job.params'), <pre key="p" className="diff-view">{JSON.stringify(job.params, null, 2)}</pre>],
    [t('job.timeout'), job.timeout_seconds],
    [t('job.route'), job.route_strategy],
    [t('job.node'), job.node_uuid || t('job.nodeAny')],
    [t('job.block'), job.block_strategy],
    [t('job.misfire'), job.misfire_policy],
    [t('job.retryCount'), job.retry_count],
    [t('job.retryInterval'), job.retry_interval_seconds],
    [t('job.children'), (job.child_job_ids ?? []).map((c) => <Link key={c} to={`/jobs/${c}`} style={{ marginRight: 8 }}>#{c}</Link>)],
    [t('job.alarmEmails'), (job.alarm_emails ?? []).join(', ')],
    [t('job.author'), job.author],
    [t('job.description'), job.description],
    [t('common.created'), formatTime(job.created_at)],
    [t('common.updated'), formatTime(job.updated_at)],
  ];
  return (
    <Descriptions bordered size="small" column={1} items={items.map(([label, children], i) => ({ key: i, label, children }))} />
  );
}

function JobRuns({ job }: { job: Job }) {
  const { t } = useTranslation();
  const [status, setStatus] = useState<string | undefined>();
  const [range, setRange] = useState<[Dayjs | null, Dayjs | null] | null>(null);
  const [page, setPage] = useState(1);
  const [pageSize, setPageSize] = useState(20);
  const f = {
    status,
    from: range?.[0]?.toISOString(),
    to: range?.[1]?.toISOString(),
    page,
    page_size: pageSize,
  };
  const runs = useQuery({ queryKey: ['runs', 'job', job.id, f], queryFn: () => listJobRuns(job.id, f), refetchInterval: 3000 });
  return (
    <div>
      <Space wrap style={{ marginBottom: 12 }}>
        <Select aria-label={t('common.status')} placeholder={t('common.status')} allowClear value={status} style={{ width: 140 }}
          onChange={(v?: string) => { setStatus(v); setPage(1); }}
          options={runStatuses.map((s) => ({ value: s, label: t(`status.${s}`) }))} />
        <DatePicker.RangePicker showTime value={range} onChange={(v) => { setRange(v as [Dayjs | null, Dayjs | null] | null); setPage(1); }} />
      </Space>
      {runs.error ? <ErrorView error={runs.error} /> : <RunsTable runs={runs.data?.items ?? []} loading={runs.isLoading} total={runs.data?.total ?? 0} page={page} pageSize={pageSize} onPage={(p, ps) => { setPage(p); setPageSize(ps); }} />}
    </div>
  );
}

export function RunsTable(props: { runs: Run[]; loading: boolean; total: number; page: number; pageSize: number; onPage: (p: number, ps: number) => void; showJob?: boolean }) {
  const { t } = useTranslation();
  return (
    <Table<Run>
      rowKey="id"
      size="small"
      loading={props.loading}
      dataSource={props.runs}
      scroll={{ x: 800 }}
      pagination={{ current: props.page, pageSize: props.pageSize, total: props.total, showSizeChanger: true, onChange: props.onPage, showTotal: (n) => t('common.total', { count: n }) }}
      columns={[
        { title: t('common.id'), dataIndex: 'id', render: (v: number) => <Link to={`/runs/${v}`} data-testid="run-link">#{v}</Link> },
        ...(props.showJob ? [{ title: t('run.job'), dataIndex: 'job_id', render: (v: number, r: Run) => <Link to={`/jobs/${v}`}>{jobLabel(r)}</Link> }] : []),
        { title: t('common.status'), dataIndex: 'status', render: (s: string) => <StatusTag status={s} /> },
        { title: t('run.trigger'), dataIndex: 'trigger', render: (v: string) => <Tag>{t(`run.triggers.${v}`, { defaultValue: v })}</Tag> },
        { title: t('run.scheduled'), dataIndex: 'scheduled_at', render: (v: string) => formatTime(v) },
        { title: t('run.duration'), render: (_: unknown, r: Run) => r.started_at && r.finished_at ? formatDuration(Date.parse(r.finished_at) - Date.parse(r.started_at)) : '—' },
        { title: t('run.node'), dataIndex: 'node', className: 'hide-narrow', render: (v: string) => <Typography.Text ellipsis style={{ maxWidth: 160 }}>{v}</Typography.Text> },
        { title: t('run.exitCode'), dataIndex: 'exit_code', render: (v: number | null) => v ?? '—' },
      ]}
    />
  );
}

function Versions({ job, writer }: { job: Job; writer: boolean }) {
  const { t } = useTranslation();
  const qc = useQueryClient();
  const { message } = App.useApp();
  const errText = useErrorText();
  const versions = useQuery({ queryKey: ['versions', job.id, job.revision], queryFn: () => listVersions(job.id) });
  const [picked, setPicked] = useState<number[]>([]);
  const restore = useMutation({
    mutationFn: (v: JobVersion) => restoreVersion(job, v),
    onSuccess: (j, v) => {
      qc.setQueryData(['job', job.id], j);
      void qc.invalidateQueries({ queryKey: ['versions', job.id] });
      void message.success(t('job.restored', { rev: v.revision }));
      setPicked([]);
    },
    onError: (e) => void message.error(errText(e)),
  });
  if (versions.error) return <ErrorView error={versions.error} />;
  const items = versions.data?.items ?? [];
  const pick = (rev: number, on: boolean) =>
    setPicked((p) => (on ? [...p.filter((r) => r !== rev), rev].slice(-2) : p.filter((r) => r !== rev)));
  const [a, b] = [...picked].sort((x, y) => x - y).map((r) => items.find((v) => v.revision === r));
  return (
    <div>
      <Typography.Paragraph type="secondary">{t('job.pickTwo')}</Typography.Paragraph>
      <Table<JobVersion>
        rowKey="revision"
        size="small"
        loading={versions.isLoading}
        dataSource={items}
        pagination={false}
        scroll={{ x: 720 }}
        columns={[
          {
            title: t('job.compare'),
            render: (_, v) => (
              <Checkbox aria-label={`${t('job.compare')} r${v.revision}`} data-testid={`pick-${v.revision}`} checked={picked.includes(v.revision)} onChange={(e) => pick(v.revision, e.target.checked)} />
            ),
            width: 80,
          },
          { title: t('job.revision'), dataIndex: 'revision', render: (r: number) => (r === job.revision ? <Tag color="blue">r{r}</Tag> : `r${r}`) },
          { title: t('job.schedule'), render: (_, v) => <code>{v.schedule}</code> },
          { title: t('job.handler'), dataIndex: 'handler' },
          { title: t('job.savedAt'), dataIndex: 'saved_at', render: (v: string) => formatTime(v) },
          { title: t('job.savedBy'), dataIndex: 'saved_by' },
          ...(writer
            ? [{
                title: t('common.actions'),
                render: (_: unknown, v: JobVersion) =>
                  v.revision === job.revision ? null : (
                    <Popconfirm title={t('job.restoreConfirm', { rev: v.revision })} onConfirm={() => restore.mutate(v)}>
                      <Button size="small" data-testid={`restore-${v.revision}`}>{t('job.restore')}</Button>
                    </Popconfirm>
                  ),
              }]
            : []),
        ]}
      />
      {a && b && (
        <Card size="small" title={t('job.diffTitle', { a: a.revision, b: b.revision })} style={{ marginTop: 12 }}>
          <VersionDiff before={versionText(a)} after={versionText(b)} />
        </Card>
      )}
    </div>
  );
}

function TriggerModal({ job, onClose }: { job: Job; onClose: () => void }) {
  const { t } = useTranslation();
  const { message } = App.useApp();
  const errText = useErrorText();
  const qc = useQueryClient();
  const nodes = useQuery({ queryKey: ['nodes'], queryFn: listNodes });
  const handlers = useQuery({ queryKey: ['handlers'], queryFn: listHandlers, staleTime: 30_000 });
  const schema = handlers.data?.items.find((h) => h.name === job.handler)?.params_schema ?? null;
  const [override, setOverride] = useState(false);
  const [params, setParams] = useState(() => JSON.stringify(job.params ?? {}, null, 2));
  const [node, setNode] = useState<string>('');
  const [err, setErr] = useState<string | null>(null);
  const go = useMutation({
    mutationFn: async () => {
      let p: Record<string, unknown> | undefined;
      if (override) {
        try {
          p = JSON.parse(params) as Record<string, unknown>;
        } catch {
          throw new Error(t('job.invalidJson'));
        }
      }
      return triggerJob(job.id, { node: node || undefined, params: p });
    },
    onSuccess: () => {
      void message.success(t('job.triggerAccepted'));
      void qc.invalidateQueries({ queryKey: ['runs'] });
      onClose();
    },
    // A schema error names the parameter, as the job form does, not the raw message.
    onError: (e) => setErr(isApiError(e) && Object.keys(e.fields).length ? fieldErrorLines(e.fields, schema).join('\n') : errText(e)),
  });
  return (
    <Modal open title={t('job.triggerTitle', { name: job.name })} onCancel={onClose} onOk={() => go.mutate()} confirmLoading={go.isPending} okButtonProps={{ 'data-testid': 'trigger-ok' } as Record<string, string>}>
      <Form layout="vertical">
        <Form.Item label={t('job.triggerNode')} htmlFor="trigger-node">
          <Select id="trigger-node" value={node} onChange={setNode}
            options={[{ value: '', label: t('job.nodeAny') }, ...(nodes.data?.items ?? []).filter((n) => n.group === job.group).map((n) => ({ value: n.uuid, label: `${n.uuid} (${n.address})` }))]} />
        </Form.Item>
        <Form.Item>
          <Checkbox checked={override} onChange={(e) => setOverride(e.target.checked)} data-testid="override-params">{t('job.overrideParams')}</Checkbox>
        </Form.Item>
        {override && (
          <Form.Item label={t('job.paramsJson')} htmlFor="trigger-params" validateStatus={err ? 'error' : undefined} help={err && <span style={{ whiteSpace: 'pre-line' }} data-testid="trigger-error">{err}</span>}>
            <Input.TextArea id="trigger-params" className="code-input" autoSize={{ minRows: 4, maxRows: 16 }} value={params} onChange={(e) => setParams(e.target.value)} />
          </Form.Item>
        )}
        {!override && err && <Typography.Text type="danger" role="alert" style={{ whiteSpace: 'pre-line' }} data-testid="trigger-error">{err}</Typography.Text>}
      </Form>
    </Modal>
  );
}

