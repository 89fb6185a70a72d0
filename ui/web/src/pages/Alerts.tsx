import { SettingOutlined } from '@ant-design/icons';
import { keepPreviousData, useMutation, useQuery } from '@tanstack/react-query';
import { App, Button, Select, Space, Table, Tag, Typography } from 'antd';
import { useTranslation } from 'react-i18next';
import { Link, useSearchParams } from 'react-router';
import { useAuth } from '../auth';
import { useErrorText } from '../components/ErrorView';
import { PageError } from '../components/MissingApi';
import { formatTime } from '../lib/format';
import { alertKinds, alertStatuses, listAlerts, testAlert, type AlertDelivery, type AlertEvent } from '../services/alerts';
import { isAdmin } from '../services/auth';

const statusColor: Record<string, string> = { sent: 'green', pending: 'processing', failed: 'red', suppressed: 'default', none: 'default' };

export default function Alerts() {
  const { t } = useTranslation();
  const { me } = useAuth();
  const { message } = App.useApp();
  const errText = useErrorText();
  const [sp, setSp] = useSearchParams();
  const f = {
    kind: sp.get('kind') ?? undefined,
    status: sp.get('status') ?? undefined,
    page: Number(sp.get('page') ?? '1') || 1,
    page_size: Number(sp.get('page_size') ?? '20') || 20,
  };
  const alerts = useQuery({ queryKey: ['alerts', f], queryFn: () => listAlerts(f), refetchInterval: 10_000, placeholderData: keepPreviousData });
  const test = useMutation({
    mutationFn: () => testAlert(),
    onSuccess: (r) => {
      const failed = r.results.filter((x) => !x.ok);
      if (r.results.length === 0) void message.info(t('alerts.noChannel'));
      else if (failed.length) void message.error(failed.map((x) => `${x.channel} ${x.target}: ${x.error ?? ''}`).join('; '));
      else void message.success(t('alerts.testSent', { count: r.results.length }));
    },
    onError: (e) => void message.error(errText(e)),
  });
  const set = (k: string, v?: string) => {
    const next = new URLSearchParams(sp);
    if (v) next.set(k, v);
    else next.delete(k);
    next.delete('page');
    setSp(next, { replace: true });
  };
  return (
    <div>
      <div className="page-header">
        <h1>{t('alerts.title')}</h1>
        {isAdmin(me) && (
          <Space wrap>
            <Link to="/alerts/settings" data-testid="alert-settings-link"><Button icon={<SettingOutlined />}>{t('alerts.settings')}</Button></Link>
            <Button onClick={() => test.mutate()} loading={test.isPending}>{t('alerts.test')}</Button>
          </Space>
        )}
      </div>
      <Space wrap style={{ marginBottom: 12 }}>
        <Select aria-label={t('alerts.kind')} placeholder={t('alerts.kind')} allowClear value={f.kind} style={{ width: 180 }}
          onChange={(v?: string) => set('kind', v)} options={alertKinds.map((k) => ({ value: k, label: k }))} />
        <Select aria-label={t('common.status')} placeholder={t('common.status')} allowClear value={f.status} style={{ width: 160 }}
          onChange={(v?: string) => set('status', v)} options={alertStatuses.map((s) => ({ value: s, label: t(`alerts.statuses.${s}`) }))} />
      </Space>
      {alerts.error ? <PageError error={alerts.error} /> : (
        <Table<AlertEvent>
          rowKey="id"
          size="small"
          loading={alerts.isFetching}
          dataSource={alerts.data?.items ?? []}
          scroll={{ x: 900 }}
          pagination={{ current: f.page, pageSize: f.page_size, total: alerts.data?.total ?? 0, showTotal: (n) => t('common.total', { count: n }),
            onChange: (p, ps) => { const n = new URLSearchParams(sp); n.set('page', String(p)); n.set('page_size', String(ps)); setSp(n, { replace: true }); } }}
          expandable={{
            expandedRowRender: (e) => (
              <div>
                {e.output_tail && <pre className="log-output" style={{ maxHeight: 200 }}>{e.output_tail}</pre>}
                <Table<AlertDelivery> rowKey="id" size="small" pagination={false} dataSource={e.deliveries ?? []} columns={[
                  { title: t('alerts.channel'), dataIndex: 'channel' },
                  { title: t('alerts.target'), render: (_, d) => d.target || (d.recipients ?? []).join(', ') },
                  { title: t('common.status'), dataIndex: 'status', render: (v: string) => <Tag color={statusColor[v]}>{t(`alerts.statuses.${v}`, { defaultValue: v })}</Tag> },
                  { title: t('alerts.attempts'), dataIndex: 'attempts' },
                  { title: t('alerts.lastError'), dataIndex: 'last_error' },
                  { title: t('alerts.sentAt'), dataIndex: 'sent_at', render: (v: string | null) => formatTime(v) },
                ]} />
              </div>
            ),
          }}
          columns={[
            { title: t('alerts.occurred'), dataIndex: 'occurred_at', render: (v: string) => formatTime(v) },
            { title: t('alerts.kind'), dataIndex: 'kind', render: (v: string) => <code>{v}</code> },
            { title: t('run.job'), render: (_, e) => (e.job_id ? <Link to={`/jobs/${e.job_id}`}>{e.job_name || `#${e.job_id}`}</Link> : '—') },
            { title: t('alerts.run'), render: (_, e) => (e.run_id ? <Link to={`/runs/${e.run_id}`}>#{e.run_id}</Link> : '—') },
            { title: t('run.message'), dataIndex: 'message', render: (v: string) => <Typography.Text ellipsis style={{ maxWidth: 280 }}>{v}</Typography.Text> },
            { title: t('common.status'), dataIndex: 'status', render: (v: string, e) => (
              <span><Tag color={statusColor[v]}>{t(`alerts.statuses.${v}`, { defaultValue: v })}</Tag>{e.suppressed && e.suppressed_reason ? <Typography.Text type="secondary" data-testid="suppressed-reason"> {t(`alerts.reasons.${e.suppressed_reason}`, { defaultValue: e.suppressed_reason })}</Typography.Text> : null}</span>
            ) },
          ]}
        />
      )}
    </div>
  );
}
