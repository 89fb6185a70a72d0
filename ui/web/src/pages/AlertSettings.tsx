import { DeleteOutlined, PlusOutlined } from '@ant-design/icons';
import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { Alert, App, Button, Card, Form, Input, InputNumber, Select, Space, Tag, Typography } from 'antd';
import { useEffect, useState } from 'react';
import { useTranslation } from 'react-i18next';
import { Link } from 'react-router';
import { useErrorText } from '../components/ErrorView';
import { PageError } from '../components/MissingApi';
import { mapNestedFieldErrors, type NamePath } from '../lib/fieldErrors';
import {
  allAlertKinds, getAlertSettings, putAlertSettings, testAlert,
  type AlertSettings as Settings, type AlertSettingsReply, type AlertTestResult,
} from '../services/alerts';
import { isApiError } from '../services/http';

const formats = ['json', 'slack', 'dingtalk', 'feishu', 'wecom'];
const securities = ['starttls', 'tls', 'none'] as const;
const defaultPort: Record<string, number> = { starttls: 587, tls: 465, none: 25 };
const smtpKeys = ['host', 'port', 'security', 'username', 'password', 'from'];
const webhookKeys = ['name', 'url', 'secret', 'group', 'format', 'kinds'];
const scalarKeys = ['admin_emails', 'throttle_window', 'missed_threshold', 'no_leader_after', 'language', 'public_url'];

interface WebhookValues { name?: string; url?: string; secret?: string; group?: string; format?: string; kinds?: string[] }
interface Values {
  smtp: { host?: string; port?: number | null; security?: string; username?: string; password?: string; from?: string };
  admin_emails?: string[];
  group_emails?: { group?: string; emails?: string[] }[];
  webhooks?: WebhookValues[];
  throttle_window?: string;
  missed_threshold?: string;
  no_leader_after?: string;
  language?: string;
  public_url?: string;
}

/** "10m0s" → "10m", "1h0m0s" → "1h": Go's duration strings, as people write them. */
export function shortDuration(d: string): string {
  return d.replace(/^(.*\d[hm])0s$/, '$1').replace(/^(.*\d)h0m$/, '$1h');
}

function toValues(s: AlertSettingsReply): Values {
  return {
    smtp: { host: s.smtp.host, port: s.smtp.port || null, security: s.smtp.security || 'starttls', username: s.smtp.username, password: '', from: s.smtp.from },
    admin_emails: s.admin_emails ?? [],
    group_emails: Object.entries(s.group_emails ?? {}).map(([group, emails]) => ({ group, emails })),
    webhooks: (s.webhooks ?? []).map((w) => ({ name: w.name, url: w.url, secret: '', group: w.group, format: w.format || 'json', kinds: w.kinds ?? [] })),
    throttle_window: shortDuration(s.throttle_window),
    missed_threshold: shortDuration(s.missed_threshold),
    no_leader_after: shortDuration(s.no_leader_after),
    language: s.language || 'en',
    public_url: s.public_url,
  };
}

const trimList = (l?: string[]) => (l ?? []).map((x) => x.trim()).filter(Boolean);

/** toBody is the PUT body: exactly the fields the server accepts; empty secrets keep the stored ones. */
export function toBody(v: Values): Settings {
  const group_emails: Record<string, string[]> = {};
  for (const g of v.group_emails ?? []) {
    const name = (g.group ?? '').trim();
    if (name) group_emails[name] = trimList(g.emails);
  }
  const smtp = v.smtp ?? {};
  return {
    smtp: {
      host: (smtp.host ?? '').trim(), port: smtp.port ?? 0, security: (smtp.security ?? '') as Settings['smtp']['security'],
      username: (smtp.username ?? '').trim(), password: smtp.password ?? '', from: (smtp.from ?? '').trim(),
    },
    webhooks: (v.webhooks ?? []).map((w) => ({
      name: (w.name ?? '').trim(), url: (w.url ?? '').trim(), secret: w.secret ?? '', group: (w.group ?? '').trim(), format: w.format ?? 'json', kinds: w.kinds ?? [],
    })),
    group_emails,
    admin_emails: trimList(v.admin_emails),
    throttle_window: (v.throttle_window ?? '').trim(),
    missed_threshold: (v.missed_threshold ?? '').trim(),
    no_leader_after: (v.no_leader_after ?? '').trim(),
    language: v.language ?? '',
    public_url: (v.public_url ?? '').trim(),
  };
}

export default function AlertSettings() {
  const { t } = useTranslation();
  const qc = useQueryClient();
  const { message } = App.useApp();
  const errText = useErrorText();
  const [form] = Form.useForm<Values>();
  const settings = useQuery({ queryKey: ['alert-settings'], queryFn: getAlertSettings });
  const [saveError, setSaveError] = useState<string[]>([]);
  const [dirty, setDirty] = useState(false);
  const [results, setResults] = useState<AlertTestResult[] | null>(null);
  const [testError, setTestError] = useState<string | null>(null);
  const data = settings.data;
  useEffect(() => {
    if (data) {
      form.resetFields();
      form.setFieldsValue(toValues(data));
      setDirty(false);
    }
  }, [data, form]);
  const security = Form.useWatch(['smtp', 'security'], form) ?? 'starttls';
  const username = Form.useWatch(['smtp', 'username'], form) ?? '';
  const hooks = (Form.useWatch('webhooks', form) ?? []) as WebhookValues[];
  const flags = new Set(data?.from_flags ?? []);
  const secretsSet = new Set(data?.webhook_secrets_set ?? []);

  const save = useMutation({
    mutationFn: (v: Values) => putAlertSettings(toBody(v)),
    onSuccess: (reply) => {
      setSaveError([]);
      qc.setQueryData(['alert-settings'], reply);
      void message.success(t('common.saved'));
    },
    onError: (e) => {
      if (isApiError(e, 400) && Object.keys(e.fields).length) {
        const groups = (form.getFieldValue('group_emails') ?? []) as { group?: string }[];
        const m = mapNestedFieldErrors(e.fields, (p) => place(p, groups));
        form.setFields(m.form.map((f) => ({ name: f.name as never, errors: f.errors })));
        setSaveError([e.message, ...m.other]);
        return;
      }
      setSaveError([errText(e)]);
    },
  });
  const test = useMutation({
    mutationFn: () => testAlert(),
    onMutate: () => {
      setResults(null);
      setTestError(null);
    },
    onSuccess: (r) => setResults(r.results),
    onError: (e) => setTestError(errText(e)),
  });

  if (settings.error) return <PageError error={settings.error} />;
  const byFlag = (field: string) => flags.has(field);
  const flagNote = (field: string) => (byFlag(field) ? t('alertSettings.fromFlag') : undefined);
  const passwordStored = !!data?.password_set && username.trim() === (data?.smtp.username ?? '');

  return (
    <div>
      <div className="page-header">
        <h1>{t('alertSettings.title')}</h1>
        <Link to="/alerts">{t('alertSettings.backToAlerts')}</Link>
      </div>
      {flags.size > 0 && (
        <Alert type="info" showIcon style={{ marginBottom: 12 }} data-testid="from-flags"
          title={t('alertSettings.flagsNote', { fields: [...flags].map((f) => t(`alertSettings.flagFields.${f}`, { defaultValue: f })).join(', ') })} />
      )}
      <Form<Values>
        form={form}
        layout="vertical"
        disabled={settings.isLoading}
        onValuesChange={() => setDirty(true)}
        onFinish={(v) => save.mutate(v)}
        style={{ maxWidth: 900 }}
      >
        <Card title={t('alertSettings.email')} size="small" style={{ marginBottom: 16 }}>
          {byFlag('smtp') && <Typography.Paragraph type="secondary">{t('alertSettings.fromFlag')}</Typography.Paragraph>}
          <Space wrap align="start" size="middle">
            <Form.Item label={t('alertSettings.smtpHost')} name={['smtp', 'host']} extra={t('alertSettings.smtpHostHelp')} style={{ width: 280 }}>
              <Input disabled={byFlag('smtp')} placeholder="smtp.example.com" />
            </Form.Item>
            <Form.Item label={t('alertSettings.smtpSecurity')} name={['smtp', 'security']} style={{ width: 200 }}>
              <Select disabled={byFlag('smtp')} aria-label={t('alertSettings.smtpSecurity')}
                options={securities.map((s) => ({ value: s, label: t(`alertSettings.securities.${s}`) }))} />
            </Form.Item>
            <Form.Item label={t('alertSettings.smtpPort')} name={['smtp', 'port']} extra={t('alertSettings.smtpPortHelp')} style={{ width: 160 }}>
              <InputNumber disabled={byFlag('smtp')} min={0} max={65535} placeholder={String(defaultPort[security] ?? 587)} style={{ width: '100%' }} />
            </Form.Item>
          </Space>
          <Space wrap align="start" size="middle">
            <Form.Item label={t('alertSettings.smtpUsername')} name={['smtp', 'username']} style={{ width: 280 }}>
              <Input disabled={byFlag('smtp')} autoComplete="off" />
            </Form.Item>
            <Form.Item label={t('alertSettings.smtpPassword')} name={['smtp', 'password']} style={{ width: 280 }}
              extra={data?.password_set && !passwordStored ? t('alertSettings.passwordUserChanged') : undefined}>
              <Input.Password disabled={byFlag('smtp')} autoComplete="new-password" placeholder={passwordStored ? t('alertSettings.secretStored') : ''} />
            </Form.Item>
            <Form.Item label={t('alertSettings.smtpFrom')} name={['smtp', 'from']} style={{ width: 280 }}>
              <Input disabled={byFlag('smtp')} placeholder="cronix@example.com" />
            </Form.Item>
          </Space>
          <Form.Item label={t('alertSettings.adminEmails')} name="admin_emails" extra={flagNote('admin_emails') ?? t('alertSettings.adminEmailsHelp')}>
            <Select mode="tags" tokenSeparators={[',', ' ']} open={false} suffixIcon={null} disabled={byFlag('admin_emails')} aria-label={t('alertSettings.adminEmails')} />
          </Form.Item>
          <Typography.Text strong>{t('alertSettings.groupEmails')}</Typography.Text>
          <Typography.Paragraph type="secondary">{flagNote('group_emails') ?? t('alertSettings.groupEmailsHelp')}</Typography.Paragraph>
          <Form.List name="group_emails">
            {(rows, { add, remove }) => (
              <>
                {rows.map((row) => (
                  <Space key={row.key} wrap align="start">
                    <Form.Item name={[row.name, 'group']} label={t('alertSettings.group')} rules={[{ required: true, whitespace: true, message: t('login.required') }]} style={{ width: 200 }}>
                      <Input disabled={byFlag('group_emails')} />
                    </Form.Item>
                    <Form.Item name={[row.name, 'emails']} label={t('alertSettings.recipients')} style={{ minWidth: 360 }}>
                      <Select mode="tags" tokenSeparators={[',', ' ']} open={false} suffixIcon={null} disabled={byFlag('group_emails')} aria-label={t('alertSettings.recipients')} />
                    </Form.Item>
                    <Form.Item label=" ">
                      <Button icon={<DeleteOutlined />} disabled={byFlag('group_emails')} onClick={() => remove(row.name)} aria-label={t('common.delete')} />
                    </Form.Item>
                  </Space>
                ))}
                <Form.Item>
                  <Button icon={<PlusOutlined />} disabled={byFlag('group_emails')} onClick={() => add({ group: '', emails: [] })}>{t('alertSettings.addGroupEmails')}</Button>
                </Form.Item>
              </>
            )}
          </Form.List>
        </Card>

        <Card title={t('alertSettings.webhooks')} size="small" style={{ marginBottom: 16 }}>
          <Typography.Paragraph type="secondary">{flagNote('webhooks') ?? t('alertSettings.webhooksHelp')}</Typography.Paragraph>
          <Form.List name="webhooks">
            {(rows, { add, remove }) => (
              <>
                {rows.map((row, i) => {
                  const stored = secretsSet.has((hooks[row.name]?.name ?? '').trim());
                  return (
                    <Card key={row.key} size="small" type="inner" style={{ marginBottom: 12 }} data-testid={`webhook-${i}`}
                      title={t('alertSettings.webhookN', { n: i + 1 })}
                      extra={<Button size="small" icon={<DeleteOutlined />} disabled={byFlag('webhooks')} onClick={() => remove(row.name)}>{t('common.delete')}</Button>}>
                      <Space wrap align="start" size="middle">
                        <Form.Item name={[row.name, 'name']} label={t('alertSettings.webhookName')} extra={t('alertSettings.webhookNameHelp')} style={{ width: 220 }}>
                          <Input disabled={byFlag('webhooks')} />
                        </Form.Item>
                        <Form.Item name={[row.name, 'url']} label={t('alertSettings.webhookUrl')} style={{ width: 420 }}>
                          <Input disabled={byFlag('webhooks')} placeholder="https://hooks.example.com/…" />
                        </Form.Item>
                      </Space>
                      <Space wrap align="start" size="middle">
                        <Form.Item name={[row.name, 'secret']} label={t('alertSettings.webhookSecret')} style={{ width: 280 }}
                          extra={stored ? t('alertSettings.secretRenameHelp') : t('alertSettings.webhookSecretHelp')}>
                          <Input.Password disabled={byFlag('webhooks')} autoComplete="new-password" placeholder={stored ? t('alertSettings.secretStored') : ''} />
                        </Form.Item>
                        <Form.Item name={[row.name, 'format']} label={t('alertSettings.webhookFormat')} style={{ width: 160 }}>
                          <Select disabled={byFlag('webhooks')} aria-label={t('alertSettings.webhookFormat')}
                            options={formats.map((f) => ({ value: f, label: t(`alertSettings.formats.${f}`) }))} />
                        </Form.Item>
                        <Form.Item name={[row.name, 'group']} label={t('alertSettings.webhookGroup')} extra={t('alertSettings.webhookGroupHelp')} style={{ width: 200 }}>
                          <Input disabled={byFlag('webhooks')} />
                        </Form.Item>
                      </Space>
                      <Form.Item name={[row.name, 'kinds']} label={t('alertSettings.webhookKinds')} extra={t('alertSettings.webhookKindsHelp')}>
                        <Select mode="multiple" allowClear disabled={byFlag('webhooks')} aria-label={t('alertSettings.webhookKinds')}
                          options={allAlertKinds.map((k) => ({ value: k, label: k }))} />
                      </Form.Item>
                    </Card>
                  );
                })}
                <Button icon={<PlusOutlined />} disabled={byFlag('webhooks')} data-testid="add-webhook"
                  onClick={() => add({ name: '', url: '', secret: '', group: '', format: 'json', kinds: [] })}>{t('alertSettings.addWebhook')}</Button>
              </>
            )}
          </Form.List>
        </Card>

        <Card title={t('alertSettings.thresholds')} size="small" style={{ marginBottom: 16 }}>
          <Typography.Paragraph type="secondary">{t('alertSettings.durationHelp')}</Typography.Paragraph>
          <Space wrap align="start" size="middle">
            <Form.Item name="throttle_window" label={t('alertSettings.throttleWindow')} extra={flagNote('throttle_window') ?? t('alertSettings.throttleWindowHelp')} style={{ width: 260 }}>
              <Input disabled={byFlag('throttle_window')} placeholder="10m" />
            </Form.Item>
            <Form.Item name="missed_threshold" label={t('alertSettings.missedThreshold')} extra={flagNote('missed_threshold') ?? t('alertSettings.missedThresholdHelp')} style={{ width: 260 }}>
              <Input disabled={byFlag('missed_threshold')} placeholder="30s" />
            </Form.Item>
            <Form.Item name="no_leader_after" label={t('alertSettings.noLeaderAfter')} extra={flagNote('no_leader_after') ?? t('alertSettings.noLeaderAfterHelp')} style={{ width: 260 }}>
              <Input disabled={byFlag('no_leader_after')} placeholder="30s" />
            </Form.Item>
          </Space>
          <Space wrap align="start" size="middle">
            <Form.Item name="language" label={t('alertSettings.language')} extra={flagNote('language')} style={{ width: 200 }}>
              <Select disabled={byFlag('language')} aria-label={t('alertSettings.language')} options={[{ value: 'en', label: 'English' }, { value: 'zh-CN', label: '简体中文' }]} />
            </Form.Item>
            <Form.Item name="public_url" label={t('alertSettings.publicUrl')} extra={flagNote('public_url') ?? t('alertSettings.publicUrlHelp')} style={{ width: 420 }}>
              <Input disabled={byFlag('public_url')} placeholder="https://cronix.example.com" />
            </Form.Item>
          </Space>
        </Card>

        {saveError.length > 0 && (
          <Alert type="error" showIcon style={{ marginBottom: 12 }} data-testid="save-error" title={t('alertSettings.saveFailed')}
            description={saveError.map((l) => <div key={l}>{l}</div>)} />
        )}
        <Space wrap>
          <Button type="primary" htmlType="submit" loading={save.isPending} data-testid="alert-settings-save">{t('common.save')}</Button>
          <Button htmlType="button" onClick={() => test.mutate()} loading={test.isPending} data-testid="alert-settings-test">{t('alerts.test')}</Button>
          {dirty && <Typography.Text type="secondary">{t('alertSettings.testUsesSaved')}</Typography.Text>}
        </Space>
      </Form>
      {testError && <Alert type="error" showIcon style={{ marginTop: 12, maxWidth: 900 }} data-testid="test-error" title={testError} />}
      {results && (
        <Card size="small" title={t('alertSettings.testResults')} data-testid="test-results" style={{ marginTop: 12, maxWidth: 900 }}>
          {results.map((r, i) => (
            <div key={i} data-testid="test-result" style={{ padding: '4px 0' }}>
              <Space wrap>
                <Tag>{t(`alertSettings.channels.${r.channel}`, { defaultValue: r.channel })}</Tag>
                <span>{r.target}</span>
                {r.ok ? <Tag color="green">{t('alertSettings.testOk')}</Tag> : <Tag color="red">{t('alertSettings.testFailed')}</Tag>}
                {r.error && <Typography.Text type="danger">{r.error}</Typography.Text>}
              </Space>
            </div>
          ))}
        </Card>
      )}
    </div>
  );
}

/** place puts an API field path on the form: "group_emails.ops" on the recipients of the row of group ops. */
function place(p: NamePath, groups: { group?: string }[]): NamePath | null {
  const [top, second, third] = p;
  if (top === 'smtp') return typeof second === 'string' && smtpKeys.includes(second) ? ['smtp', second] : null;
  if (top === 'webhooks') {
    if (typeof second !== 'number') return null;
    return typeof third === 'string' && webhookKeys.includes(third) ? ['webhooks', second, third] : null;
  }
  if (top === 'group_emails') {
    const g = p.slice(1).join('.');
    const i = groups.findIndex((x) => (x.group ?? '').trim() === g);
    return i >= 0 ? ['group_emails', i, 'emails'] : null;
  }
  if (typeof top === 'string' && scalarKeys.includes(top)) return [top];
  return null;
}
