import { useQuery, useQueryClient } from '@tanstack/react-query';
import { Alert, App, AutoComplete, Button, Card, Col, Form, Grid, Input, InputNumber, Row, Segmented, Select, Space, Spin, Switch, Typography } from 'antd';
import { useEffect, useMemo, useRef, useState } from 'react';
import { useTranslation } from 'react-i18next';
import { useNavigate, useParams } from 'react-router';
import { CronHelper } from '../components/CronHelper';
import { ErrorView } from '../components/ErrorView';
import { ParamsForm } from '../components/ParamsForm';
import { mapFieldErrors } from '../lib/fieldErrors';
import { notFound, routeId } from '../lib/routeId';
import { handlerDescription, schemaProps, type JSONSchema } from '../lib/schema';
import { useDebounced } from '../lib/useDebounced';
import { listGroups } from '../services/admin';
import { listHandlers, listNodes } from '../services/cluster';
import { isApiError } from '../services/http';
import {
  blockStrategies, createJob, emptyJob, getJob, jobInputKeys, listJobs, misfirePolicies, routeStrategies,
  scheduleTypes, toInput, updateJob, type JobInput, type ScheduleType,
} from '../services/jobs';

const zones: string[] = (() => {
  try {
    return (Intl as unknown as { supportedValuesOf: (k: string) => string[] }).supportedValuesOf('timeZone');
  } catch {
    return ['UTC'];
  }
})();

export default function JobForm({ mode }: { mode: 'new' | 'edit' | 'copy' }) {
  const { t, i18n } = useTranslation();
  const { message } = App.useApp();
  const navigate = useNavigate();
  const qc = useQueryClient();
  const { id } = useParams();
  const parsedId = routeId(id);
  const jobId = parsedId ?? 0;
  const [form] = Form.useForm<JobInput>();
  const [paramErrors, setParamErrors] = useState<Record<string, string>>({});
  const [otherErrors, setOtherErrors] = useState<string[]>([]);
  const [scheduleErr, setScheduleErr] = useState<{ field: string; message: string } | null>(null);
  const [saving, setSaving] = useState(false);
  // Below md (768 px) the schedule types (468 px side by side) are a select, not a segmented control.
  const wide = Grid.useBreakpoint().md ?? false;
  // Each schedule type's last value, so switching types and back restores it.
  const schedules = useRef<Partial<Record<ScheduleType, string>>>({});
  const lastType = useRef<ScheduleType | null>(null);

  const existing = useQuery({ queryKey: ['job', jobId], queryFn: () => getJob(jobId), enabled: mode !== 'new' && parsedId !== null });
  const handlers = useQuery({ queryKey: ['handlers'], queryFn: listHandlers, staleTime: 30_000 });
  const nodes = useQuery({ queryKey: ['nodes'], queryFn: listNodes, staleTime: 10_000 });
  const groups = useQuery({ queryKey: ['groups'], queryFn: () => listGroups(), staleTime: 60_000 });

  const [blank] = useState(emptyJob);
  const initial = useMemo<JobInput | null>(() => {
    if (mode === 'new') return blank;
    if (!existing.data) return null;
    const j = toInput(existing.data);
    if (mode === 'copy') j.name = t('job.copyTitle', { name: j.name });
    return j;
  }, [mode, existing.data, t, blank]);

  // Fill the form once, when the job has loaded (a new job starts from initialValues).
  const filled = useRef(false);
  useEffect(() => {
    if (mode !== 'new' && initial && !filled.current) {
      filled.current = true;
      form.setFieldsValue(initial);
    }
  }, [mode, initial, form]);

  const scheduleType = Form.useWatch('schedule_type', form) ?? 'cron';
  const schedule = Form.useWatch('schedule', form) ?? '';
  const timezone = Form.useWatch('timezone', form) ?? '';
  const group = Form.useWatch('group', form) || 'default';
  const handlerName = Form.useWatch('handler', form) ?? '';
  const routeStrategy = Form.useWatch('route_strategy', form) ?? 'FIRST';
  const blockStrategy = Form.useWatch('block_strategy', form) ?? 'SERIAL_EXECUTION';
  const misfirePolicy = Form.useWatch('misfire_policy', form) ?? 'FIRE_ONCE_NOW';

  const groupNodes = (nodes.data?.items ?? []).filter((n) => n.group === group);
  const offered = new Set(groupNodes.flatMap((n) => (n.plugins ?? []).map((p) => p.name)));
  const handlerOptions = (handlers.data?.items ?? [])
    .filter((h) => offered.has(h.name) || h.name === handlerName)
    .map((h) => ({
      value: h.name,
      label: (
        <div>
          <strong>{h.name}</strong> <Typography.Text type="secondary">{h.version}</Typography.Text>
          {h.description && <div style={{ fontSize: 12, whiteSpace: 'normal' }}>{handlerDescription(h, i18n.language)}</div>}
        </div>
      ),
      title: h.name,
    }));
  const handler = (handlers.data?.items ?? []).find((h) => h.name === handlerName);
  const schema = (handler?.params_schema ?? null) as JSONSchema | null;

  const [childSearch, setChildSearch] = useState('');
  const childQ = useDebounced(childSearch, 250);
  const childJobs = useQuery({ queryKey: ['jobs', 'child-search', childQ], queryFn: () => listJobs({ q: childQ || undefined, page_size: 20 }) });
  const childIds: number[] = Form.useWatch('child_job_ids', form) ?? [];

  const groupOptions = useMemo(() => {
    const names = new Set<string>(['default', ...(groups.data?.items ?? []).map((g) => g.appname), ...(nodes.data?.items ?? []).map((n) => n.group)]);
    return [...names].map((g) => ({ value: g }));
  }, [groups.data, nodes.data]);

  const clearFieldErrors = (names: (keyof JobInput)[]) =>
    form.setFields(names.filter((name) => form.getFieldError(name).length > 0).map((name) => ({ name, errors: [] })));

  const onValuesChange = (changed: Partial<JobInput>) => {
    const names = Object.keys(changed) as (keyof JobInput)[];
    // A server error on a field goes once the field is changed.
    clearFieldErrors(names);
    if ('handler' in changed) {
      form.setFieldValue('params', {});
      setParamErrors({});
    } else if ('params' in changed) {
      setParamErrors({});
    }
    if (changed.schedule_type) {
      // A schedule of one type means nothing to another ("0 3 * * *" as a fixed rate):
      // the new type starts empty (its example is the placeholder) or with what it had.
      const prev = lastType.current ?? initial?.schedule_type ?? 'cron';
      schedules.current[prev] = form.getFieldValue('schedule') ?? '';
      lastType.current = changed.schedule_type;
      form.setFieldValue('schedule', schedules.current[changed.schedule_type] ?? '');
      clearFieldErrors(['schedule']);
    }
  };

  const onFinish = async (values: JobInput) => {
    const body = toInput({ ...(initial ?? emptyJob()), ...values, params: (values.params ?? {}) });
    body.alarm_emails = (values.alarm_emails ?? []).map((s) => s.trim()).filter(Boolean);
    setSaving(true);
    // The last reply's field errors go: the next reply names only what is still wrong.
    clearFieldErrors(jobInputKeys);
    setOtherErrors([]);
    setParamErrors({});
    try {
      const saved = mode === 'edit' ? await updateJob(jobId, body) : await createJob(body);
      await qc.invalidateQueries({ queryKey: ['jobs'] });
      qc.setQueryData(['job', saved.id], saved);
      void qc.invalidateQueries({ queryKey: ['versions', saved.id] });
      void message.success(t('common.saved'));
      navigate(`/jobs/${saved.id}`);
    } catch (e) {
      if (isApiError(e) && Object.keys(e.fields).length > 0) {
        const m = mapFieldErrors(e.fields, jobInputKeys, schemaProps(schema));
        form.setFields(m.form.map((f) => ({ name: f.name as keyof JobInput, errors: f.errors })));
        setParamErrors(m.params);
        setOtherErrors(m.other);
        const first = m.form[0];
        if (first) form.scrollToField(first.name as keyof JobInput);
      } else {
        setOtherErrors([isApiError(e, 403) ? t('common.forbidden') : e instanceof Error ? e.message : String(e)]);
      }
    } finally {
      setSaving(false);
    }
  };

  if (mode !== 'new' && parsedId === null) return <ErrorView error={notFound} />;
  if (mode !== 'new' && existing.error) return <ErrorView error={existing.error} />;
  if (!initial) return <Spin />;

  const title = mode === 'new' ? t('job.newTitle') : mode === 'edit' ? t('job.editTitle', { name: existing.data?.name }) : t('job.copyTitle', { name: existing.data?.name });
  const scheduleHelp = scheduleErr && scheduleErr.field === 'schedule' ? scheduleErr.message : undefined;
  const tzHelp = scheduleErr && scheduleErr.field === 'timezone' ? scheduleErr.message : undefined;

  return (
    <div>
      <div className="page-header"><h1>{title}</h1></div>
      <Form<JobInput>
        form={form}
        layout="vertical"
        initialValues={initial}
        onFinish={onFinish}
        scrollToFirstError
        onValuesChange={onValuesChange}
      >
        {otherErrors.length > 0 && (
          <Alert type="error" showIcon title={t('job.saveFailed')} description={otherErrors.join('\n')} style={{ marginBottom: 16 }} role="alert" />
        )}
        <Row gutter={16}>
          <Col xs={24} lg={12}>
            <Card title={t('job.basics')} size="small" style={{ marginBottom: 16 }}>
              <Form.Item label={t('job.name')} name="name" rules={[{ required: true }]}>
                <Input maxLength={200} />
              </Form.Item>
              <Form.Item label={t('job.group')} name="group">
                <AutoComplete options={groupOptions} />
              </Form.Item>
              <Form.Item label={t('job.description')} name="description">
                <Input.TextArea autoSize={{ minRows: 1, maxRows: 4 }} />
              </Form.Item>
              <Form.Item label={t('job.author')} name="author">
                <Input />
              </Form.Item>
              <Form.Item label={t('job.alarmEmails')} name="alarm_emails">
                <Select mode="tags" tokenSeparators={[',', ' ']} open={false} suffixIcon={null} aria-label={t('job.alarmEmails')} />
              </Form.Item>
              <Form.Item label={t('job.alertOnKill')} name="alert_on_kill" valuePropName="checked" extra={t('job.alertOnKillHelp')}>
                <Switch />
              </Form.Item>
              <Form.Item label={t('job.enabled')} name="enabled" valuePropName="checked">
                <Switch />
              </Form.Item>
            </Card>
            <Card title={t('job.scheduling')} size="small" style={{ marginBottom: 16 }}>
              <Form.Item label={t('job.scheduleType')} name="schedule_type">
                {wide ? (
                  <Segmented options={scheduleTypes.map((s) => ({ value: s, label: t(`job.scheduleTypes.${s}`) }))} />
                ) : (
                  <Select data-testid="schedule-type-select" options={scheduleTypes.map((s) => ({ value: s, label: t(`job.scheduleTypes.${s}`) }))} />
                )}
              </Form.Item>
              <Form.Item
                label={t('job.schedule')}
                name="schedule"
                validateStatus={scheduleHelp ? 'error' : undefined}
                help={scheduleHelp}
                extra={<CronHelper scheduleType={scheduleType} schedule={schedule} timezone={timezone} onError={setScheduleErr} />}
              >
                <Input className="code-input" placeholder={t(`job.schedulePlaceholder.${scheduleType}`)} disabled={scheduleType === 'none'} />
              </Form.Item>
              <Form.Item label={t('job.timezone')} name="timezone" validateStatus={tzHelp ? 'error' : undefined} help={tzHelp} extra={t('job.timezoneHelp')}>
                <AutoComplete
                  options={zones.filter((z) => z.toLowerCase().includes(timezone.toLowerCase())).slice(0, 50).map((z) => ({ value: z }))}
                  allowClear
                />
              </Form.Item>
              <Form.Item label={t('job.misfire')} name="misfire_policy" extra={t(`job.misfireHelp.${misfirePolicy}`)}>
                <Select options={misfirePolicies.map((v) => ({ value: v, label: v }))} />
              </Form.Item>
              {misfirePolicy === 'CATCH_UP' && (
                <Form.Item label={t('job.catchUp')} name="misfire_max_catch_up">
                  <InputNumber min={1} max={10000} />
                </Form.Item>
              )}
            </Card>
          </Col>
          <Col xs={24} lg={12}>
            <Card title={t('job.execution')} size="small" style={{ marginBottom: 16 }}>
              <Form.Item label={t('job.handler')} name="handler" rules={[{ required: true }]} extra={handlerOptions.length === 0 ? t('job.handlerNone') : handler && handlerDescription(handler, i18n.language)}>
                <Select options={handlerOptions} optionLabelProp="title" showSearch loading={handlers.isLoading} />
              </Form.Item>
              <Form.Item label={t('job.params')} name="params">
                <ParamsForm schema={schema} errors={paramErrors} value={{}} onChange={() => {}} key={handlerName} />
              </Form.Item>
              <Form.Item label={t('job.timeout')} name="timeout_seconds">
                <InputNumber min={0} max={86400} />
              </Form.Item>
              <Form.Item label={t('job.route')} name="route_strategy" extra={t(`job.routeHelp.${routeStrategy}`)}>
                <Select options={routeStrategies.map((v) => ({ value: v, label: v }))} />
              </Form.Item>
              <Form.Item label={t('job.node')} name="node_uuid">
                <Select
                  options={[{ value: '', label: t('job.nodeAny') }, ...groupNodes.map((n) => ({ value: n.uuid, label: `${n.uuid} (${n.address})` }))]}
                />
              </Form.Item>
              <Form.Item label={t('job.block')} name="block_strategy" extra={t(`job.blockHelp.${blockStrategy}`)}>
                <Select options={blockStrategies.map((v) => ({ value: v, label: v }))} />
              </Form.Item>
              <Space wrap>
                <Form.Item label={t('job.retryCount')} name="retry_count">
                  <InputNumber min={0} max={10} />
                </Form.Item>
                <Form.Item label={t('job.retryInterval')} name="retry_interval_seconds">
                  <InputNumber min={0} max={86400} />
                </Form.Item>
              </Space>
              <Form.Item label={t('job.children')} name="child_job_ids" extra={t('job.childrenHelp')}>
                <Select
                  mode="multiple"
                  showSearch
                  filterOption={false}
                  onSearch={setChildSearch}
                  options={[
                    ...childIds.filter((cid) => !(childJobs.data?.items ?? []).some((j) => j.id === cid)).map((cid) => ({ value: cid, label: `#${cid}` })),
                    ...(childJobs.data?.items ?? []).filter((j) => j.id !== jobId || mode !== 'edit').map((j) => ({ value: j.id, label: `#${j.id} ${j.name}` })),
                  ]}
                />
              </Form.Item>
            </Card>
          </Col>
        </Row>
        <Space>
          <Button type="primary" htmlType="submit" loading={saving} data-testid="save-job">{t('common.save')}</Button>
          <Button onClick={() => navigate(-1)}>{t('common.cancel')}</Button>
        </Space>
      </Form>
    </div>
  );
}
