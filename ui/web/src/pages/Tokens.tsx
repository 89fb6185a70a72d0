import { keepPreviousData, useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { Alert, App, Button, DatePicker, Form, Input, Modal, Popconfirm, Select, Table, Tag, Typography } from 'antd';
import dayjs, { type Dayjs } from 'dayjs';
import { useEffect, useState } from 'react';
import { useTranslation } from 'react-i18next';
import { useAuth } from '../auth';
import { useErrorText } from '../components/ErrorView';
import { PageError } from '../components/MissingApi';
import { mapFieldErrors } from '../lib/fieldErrors';
import { formatTime } from '../lib/format';
import { createToken, deleteToken, listGroups, listTokens, type ApiToken, type TokenInput } from '../services/admin';
import { isAdmin, rolesUpTo, type Role } from '../services/auth';
import { isApiError } from '../services/http';

export default function Tokens() {
  const { t } = useTranslation();
  const qc = useQueryClient();
  const { me } = useAuth();
  const admin = isAdmin(me);
  const { message } = App.useApp();
  const errText = useErrorText();
  const [page, setPage] = useState(1);
  const [pageSize, setPageSize] = useState(20);
  const tokens = useQuery({
    queryKey: ['tokens', page, pageSize],
    queryFn: () => listTokens({ page, page_size: pageSize }),
    placeholderData: keepPreviousData,
  });
  // The last token of a page revoked: show the page before.
  const items = tokens.data?.items;
  useEffect(() => {
    if (items && items.length === 0 && page > 1) setPage(page - 1);
  }, [items, page]);
  const [creating, setCreating] = useState(false);
  const [secret, setSecret] = useState<string | null>(null);
  const remove = useMutation({
    mutationFn: (id: number) => deleteToken(id),
    onSuccess: () => {
      void message.success(t('common.deleted'));
      void qc.invalidateQueries({ queryKey: ['tokens'] });
    },
    onError: (e) => void message.error(errText(e)),
  });
  return (
    <div>
      <div className="page-header">
        <h1>{t('tokens.title')}</h1>
        <Button type="primary" data-testid="create-token" onClick={() => setCreating(true)}>{t('tokens.create')}</Button>
      </div>
      {secret && (
        <Alert type="success" showIcon closable onClose={() => setSecret(null)} style={{ marginBottom: 16 }} title={t('tokens.secretOnce')}
          description={<Typography.Text code copyable data-testid="token-secret">{secret}</Typography.Text>} />
      )}
      {tokens.error ? <PageError error={tokens.error} /> : (
        <Table<ApiToken> rowKey="id" size="middle" loading={tokens.isFetching} dataSource={items ?? []} scroll={{ x: 640 }}
          pagination={{
            current: page,
            pageSize,
            total: tokens.data?.total ?? 0,
            showSizeChanger: true,
            pageSizeOptions: [20, 50, 100],
            showTotal: (n) => t('common.total', { count: n }),
            onChange: (p, ps) => { setPage(ps !== pageSize ? 1 : p); setPageSize(ps); },
          }}
          columns={[
            { title: t('tokens.name'), dataIndex: 'name' },
            ...(admin ? [{ title: t('tokens.user'), dataIndex: 'user' }] : []),
            { title: t('tokens.role'), dataIndex: 'role', render: (r: Role) => <Tag>{t(`users.roles.${r}`, { defaultValue: r })}</Tag> },
            { title: t('common.created'), dataIndex: 'created_at', render: (v: string) => formatTime(v) },
            { title: t('tokens.expires'), dataIndex: 'expires_at', render: (v: string | null) => (v ? formatTime(v) : t('common.never')) },
            { title: t('tokens.lastUsed'), dataIndex: 'last_used_at', render: (v: string | null) => (v ? formatTime(v) : t('tokens.neverUsed')) },
            { title: t('common.actions'), render: (_: unknown, tok: ApiToken) => (
              <Popconfirm title={t('common.confirmDelete', { what: tok.name })} onConfirm={() => remove.mutate(tok.id)}>
                <Button size="small" danger>{t('common.delete')}</Button>
              </Popconfirm>
            ) },
          ]} />
      )}
      {creating && (
        <CreateToken
          onClose={() => setCreating(false)}
          onCreated={(tok) => {
            setCreating(false);
            setSecret(tok.secret ?? null);
            setPage(1);
            void qc.invalidateQueries({ queryKey: ['tokens'] });
          }}
        />
      )}
    </div>
  );
}

interface TokenForm {
  name: string;
  role: Role;
  groups?: number[];
  expires?: Dayjs | null;
}

const tokenFields = ['name', 'role', 'groups', 'expires_at'] as const;

/** CreateToken asks for a name, a role at most the user's, the groups (for a non-admin token) and an optional expiry. */
function CreateToken({ onClose, onCreated }: { onClose: () => void; onCreated: (tok: ApiToken) => void }) {
  const { t } = useTranslation();
  const { me } = useAuth();
  const errText = useErrorText();
  const [form] = Form.useForm<TokenForm>();
  const [err, setErr] = useState<string | null>(null);
  const role = Form.useWatch('role', form) ?? me?.role ?? 'viewer';
  const groups = useQuery({ queryKey: ['groups'], queryFn: () => listGroups() });
  const mine = new Set(me?.groups ?? []);
  const groupOptions = (groups.data?.items ?? [])
    .filter((g) => isAdmin(me) || mine.has(g.id))
    .map((g) => ({ value: g.id, label: g.title || g.appname }));
  const save = useMutation({
    mutationFn: (v: TokenForm) => {
      const body: TokenInput = { name: v.name.trim(), role: v.role, groups: v.role === 'admin' ? [] : v.groups ?? [] };
      if (v.expires) body.expires_at = v.expires.endOf('day').toISOString();
      return createToken(body);
    },
    onSuccess: onCreated,
    onError: (e) => {
      if (isApiError(e) && Object.keys(e.fields).length) {
        const m = mapFieldErrors(e.fields, tokenFields);
        form.setFields(m.form.map((f) => ({ name: (f.name === 'expires_at' ? 'expires' : f.name) as keyof TokenForm, errors: f.errors })));
        setErr(m.other.join('; ') || null);
      } else setErr(errText(e));
    },
  });
  return (
    <Modal open title={t('tokens.create')} onCancel={onClose} onOk={() => form.submit()} confirmLoading={save.isPending}
      okButtonProps={{ 'data-testid': 'token-ok' } as Record<string, string>}>
      <Form<TokenForm> form={form} layout="vertical"
        initialValues={{ role: me?.role ?? 'viewer', groups: isAdmin(me) ? [] : me?.groups ?? [], expires: null }}
        onFinish={(v) => { setErr(null); save.mutate(v); }}
        onValuesChange={(changed: Partial<TokenForm>) => {
          // A server message goes once the field it is about changes.
          form.setFields(Object.keys(changed).map((name) => ({ name: name as keyof TokenForm, errors: [] })));
        }}>
        {err && <Alert type="error" showIcon role="alert" title={err} style={{ marginBottom: 12 }} />}
        <Form.Item label={t('tokens.name')} name="name" rules={[{ required: true, whitespace: true, message: t('login.required') }]}>
          <Input maxLength={100} autoComplete="off" />
        </Form.Item>
        <Form.Item label={t('tokens.role')} name="role" extra={t(`users.roleHelp.${role}`)}>
          <Select options={rolesUpTo(me?.role ?? 'viewer').map((r) => ({ value: r, label: t(`users.roles.${r}`) }))} />
        </Form.Item>
        {role !== 'admin' && (
          <Form.Item label={t('tokens.groups')} name="groups" extra={t('tokens.groupsHelp')}>
            <Select mode="multiple" options={groupOptions} loading={groups.isLoading} />
          </Form.Item>
        )}
        <Form.Item label={t('tokens.expires')} name="expires" extra={t('tokens.expiresHelp')}>
          <DatePicker style={{ width: '100%' }} disabledDate={(d) => d.isBefore(dayjs().startOf('day'))} />
        </Form.Item>
      </Form>
    </Modal>
  );
}
