import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { App, Button, Card, Descriptions, Popconfirm, Space, Typography } from 'antd';
import { useEffect, useState } from 'react';
import { notFound, routeId } from '../lib/routeId';
import { useTranslation } from 'react-i18next';
import { Link, useParams } from 'react-router';
import { useAuth } from '../auth';
import { ErrorView, useErrorText } from '../components/ErrorView';
import { LogConsole } from '../components/LogConsole';
import { StatusTag } from '../components/StatusTag';
import { formatDuration, formatTime } from '../lib/format';
import { canWrite } from '../services/auth';
import { getJob } from '../services/jobs';
import { followOutput, getRun, killRun, latenessMs, terminal } from '../services/runs';

export default function RunDetail() {
  const { t } = useTranslation();
  const { id } = useParams();
  const parsedId = routeId(id);
  const runId = parsedId ?? 0;
  const { me } = useAuth();
  const qc = useQueryClient();
  const { message } = App.useApp();
  const errText = useErrorText();
  const run = useQuery({
    queryKey: ['run', runId],
    queryFn: () => getRun(runId),
    enabled: parsedId !== null,
    refetchInterval: (q) => (q.state.data && terminal(q.state.data.status) ? false : 1000),
  });
  const job = useQuery({ queryKey: ['job', run.data?.job_id], queryFn: () => getJob(run.data!.job_id), enabled: !!run.data });
  const r = run.data;
  const active = !!r && !terminal(r.status);
  const [live, setLive] = useState<string | null>(null);
  const [following, setFollowing] = useState(false);

  // While the run is active, stream its output; when it ends, show the stored copy.
  useEffect(() => {
    if (!active) return;
    const ctl = new AbortController();
    let text = '';
    setFollowing(true);
    setLive('');
    followOutput(runId, (chunk) => {
      text += chunk;
      setLive(text);
    }, ctl.signal)
      .catch(() => {})
      .finally(() => {
        if (!ctl.signal.aborted) {
          setFollowing(false);
          void qc.invalidateQueries({ queryKey: ['run', runId] });
        }
      });
    return () => ctl.abort();
  }, [active, runId, qc]);

  const kill = useMutation({
    mutationFn: () => killRun(runId),
    onSuccess: () => void message.info(t('run.killRequested')),
    onError: (e) => void message.error(errText(e)),
  });

  if (parsedId === null) return <ErrorView error={notFound} />;
  if (run.error) return <ErrorView error={run.error} onRetry={() => void run.refetch()} />;
  if (!r) return null;
  const zone = job.data?.timezone || undefined;
  const timeCell = (v: string | null) => (
    <span>
      {formatTime(v)}
      {zone && v && <Typography.Text type="secondary"> ({formatTime(v, zone)} {zone})</Typography.Text>}
    </span>
  );
  const items = [
    { label: t('common.status'), children: <span data-testid="run-status"><StatusTag status={r.status} /></span> },
    { label: t('run.job'), children: <Link to={`/jobs/${r.job_id}`}>{job.data?.name ?? `#${r.job_id}`}</Link> },
    { label: t('run.node'), children: r.node || '—' },
    { label: t('run.trigger'), children: t(`run.triggers.${r.trigger}`, { defaultValue: r.trigger }) },
    { label: t('run.fireId'), children: <code>{r.fire_id}</code> },
    { label: t('run.scheduled'), children: timeCell(r.scheduled_at) },
    { label: t('run.dispatched'), children: timeCell(r.dispatched_at) },
    { label: t('run.started'), children: timeCell(r.started_at) },
    { label: t('run.finished'), children: timeCell(r.finished_at) },
    { label: t('run.lateness'), children: formatDuration(latenessMs(r)) },
    { label: t('run.duration'), children: r.started_at ? formatDuration((r.finished_at ? Date.parse(r.finished_at) : Date.now()) - Date.parse(r.started_at)) : '—' },
    { label: t('run.attempt'), children: r.attempt ?? '—' },
    ...(r.shard_total ? [{ label: t('run.shard'), children: `${r.shard_index ?? 0} / ${r.shard_total}` }] : []),
    { label: t('run.exitCode'), children: r.exit_code ?? '—' },
    { label: t('run.message'), children: r.message || '—' },
  ];
  const output = following && live !== null ? live : active && live ? live : r.output;
  return (
    <div>
      <div className="page-header">
        <h1>{t('run.title', { id: r.id })}</h1>
        {active && canWrite(me) && (
          <Space>
            <Popconfirm title={t('run.killConfirm')} onConfirm={() => kill.mutate()} okButtonProps={{ 'data-testid': 'kill-ok' } as Record<string, string>}>
              <Button danger loading={kill.isPending} data-testid="kill-run">{t('run.kill')}</Button>
            </Popconfirm>
          </Space>
        )}
      </div>
      <Descriptions bordered size="small" column={{ xs: 1, sm: 1, md: 2, lg: 3 }} items={items.map((it, i) => ({ key: i, ...it }))} style={{ marginBottom: 16 }} />
      <Card size="small" title={t('run.output')}>
        <LogConsole text={output} truncated={r.output_truncated} live={following} fileName={`run-${r.id}.log`} />
      </Card>
    </div>
  );
}
