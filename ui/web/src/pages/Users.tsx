import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { App, Button, Form, Input, Modal, Popconfirm, Select, Space, Table, Tag } from 'antd';
import { useState } from 'react';
import { useTranslation } from 'react-i18next';
import { useAuth } from '../auth';
import { useErrorText } from '../components/ErrorView';
import { PageError } from '../components/MissingApi';
import { mapFieldErrors } from '../lib/fieldErrors';
import { createUser, deleteUser, listGroups, listUsers, patchUser, setUserGroups, setUserPassword, type User } from '../services/admin';
import type { Role } from '../services/auth';
import { isApiError } from '../services/http';

const roles: Role[] = ['admin', 'operator', 'viewer'];

export default function Users() {
  const { t } = useTranslation();
  const qc = useQueryClient();
  const { message, modal } = App.useApp();
  const errText = useErrorText();
  const { me, refresh } = useAuth();
  const users = useQuery({ queryKey: ['users'], queryFn: () => listUsers() });
  const groups = useQuery({ queryKey: ['groups'], queryFn: () => listGroups() });
  const [creating, setCreating] = useState(false);
  const [pwFor, setPwFor] = useState<User | null>(null);
  const done = { onSuccess: () => void qc.invalidateQueries({ queryKey: ['users'] }), onError: (e: unknown) => void message.error(errText(e)) };
  // A change to a user says so; to one's own, the header and menu follow (refresh of me).
  const changed = (u: User) => {
    void message.success(t('users.updated', { name: u.username }));
    void qc.invalidateQueries({ queryKey: ['users'] });
    if (u.id === me?.id) void refresh();
  };
  const patch = useMutation({
    mutationFn: (a: { user: User; v: Partial<{ role: Role; disabled: boolean }> }) => patchUser(a.user.id, a.v),
    onSuccess: (_, a) => changed(a.user),
    onError: done.onError,
  });
  const setGroups = useMutation({
    mutationFn: (a: { user: User; groups: number[] }) => setUserGroups(a.user.id, a.groups),
    onSuccess: (_, a) => changed(a.user),
    onError: done.onError,
  });
  const remove = useMutation({ mutationFn: (id: number) => deleteUser(id), ...done });
  // Lowering one's own role or disabling oneself can lock one out: ask first.
  const update = (user: User, v: Partial<{ role: Role; disabled: boolean }>) => {
    const self = user.id === me?.id;
    if (self && (v.disabled === true || (v.role !== undefined && v.role !== user.role))) {
      modal.confirm({
        title: v.disabled ? t('users.confirmDisableSelf') : t('users.confirmOwnRole', { role: t(`users.roles.${v.role ?? user.role}`) }),
        content: v.disabled ? t('users.confirmDisableSelfHelp') : t('users.confirmOwnRoleHelp'),
        okButtonProps: { danger: true, 'data-testid': 'confirm-self' } as { danger: boolean },
        onOk: () => patch.mutateAsync({ user, v }),
      });
      return;
    }
    patch.mutate({ user, v });
  };
  const groupOptions = (groups.data?.items ?? []).map((g) => ({ value: g.id, label: g.title || g.appname }));
  return (
    <div>
      <div className="page-header">
        <h1>{t('users.title')}</h1>
        <Button type="primary" onClick={() => setCreating(true)}>{t('users.create')}</Button>
      </div>
      {users.error ? <PageError error={users.error} /> : (
        <Table<User> rowKey="id" size="middle" loading={users.isLoading} dataSource={users.data?.items ?? []} pagination={false} scroll={{ x: 800 }}
          columns={[
            { title: t('users.username'), dataIndex: 'username', render: (v: string, u) => <span>{v} {u.disabled && <Tag>{t('common.disabled')}</Tag>}</span> },
            { title: t('users.role'), dataIndex: 'role', render: (r: Role, u) => (
              <Select aria-label={`${t('users.role')} ${u.username}`} size="small" value={r} style={{ width: 140 }} onChange={(v) => update(u, { role: v })}
                options={roles.map((x) => ({ value: x, label: t(`users.roles.${x}`), title: t(`users.roleHelp.${x}`) }))} />
            ) },
            { title: t('users.groups'), dataIndex: 'groups', render: (g: number[] | null, u) => (
              <Select aria-label={`${t('users.groups')} ${u.username}`} size="small" mode="multiple" value={g ?? []} style={{ minWidth: 200 }} options={groupOptions}
                onChange={(v: number[]) => setGroups.mutate({ user: u, groups: v })} />
            ) },
            { title: t('common.actions'), render: (_, u) => (
              <Space wrap>
                <Button size="small" onClick={() => setPwFor(u)}>{t('users.setPassword')}</Button>
                <Button size="small" onClick={() => update(u, { disabled: !u.disabled })}>{u.disabled ? t('users.enable') : t('users.disable')}</Button>
                <Popconfirm title={t('common.confirmDelete', { what: u.username })} onConfirm={() => remove.mutate(u.id)}>
                  <Button size="small" danger>{t('common.delete')}</Button>
                </Popconfirm>
              </Space>
            ) },
          ]} />
      )}
      {creating && <CreateUser groupOptions={groupOptions} onClose={() => setCreating(false)} />}
      {pwFor && <PasswordModal user={pwFor} onClose={() => setPwFor(null)} />}
    </div>
  );
}

function CreateUser({ groupOptions, onClose }: { groupOptions: { value: number; label: string }[]; onClose: () => void }) {
  const { t } = useTranslation();
  const [form] = Form.useForm();
  const qc = useQueryClient();
  const errText = useErrorText();
  const [err, setErr] = useState<string | null>(null);
  const save = useMutation({
    mutationFn: (v: { username: string; password: string; role: Role; groups?: number[] }) => createUser({ ...v, groups: v.groups ?? [] }),
    onSuccess: () => { void qc.invalidateQueries({ queryKey: ['users'] }); onClose(); },
    onError: (e) => {
      if (isApiError(e, 409)) {
        // The one conflict here: the name is taken.
        form.setFields([{ name: 'username', errors: [t('users.nameTaken')] }]);
        setErr(null);
      } else if (isApiError(e) && Object.keys(e.fields).length) {
        const m = mapFieldErrors(e.fields, ['username', 'password', 'role', 'groups']);
        form.setFields(m.form.map((f) => ({ name: f.name, errors: f.errors })));
        setErr(m.other.join('; ') || null);
      } else setErr(errText(e));
    },
  });
  return (
    <Modal open title={t('users.create')} onCancel={onClose} onOk={() => form.submit()} confirmLoading={save.isPending} okButtonProps={{ 'data-testid': 'user-ok' } as Record<string, string>}>
      <Form form={form} layout="vertical" onFinish={(v) => save.mutate(v)} initialValues={{ role: 'viewer' }}>
        {err && <div role="alert" style={{ color: '#ff4d4f' }}>{err}</div>}
        <Form.Item label={t('users.username')} name="username" rules={[{ required: true }]}><Input autoComplete="off" /></Form.Item>
        <Form.Item label={t('users.password')} name="password" rules={[{ required: true }]}><Input.Password autoComplete="new-password" /></Form.Item>
        <Form.Item label={t('users.role')} name="role"><Select options={roles.map((x) => ({ value: x, label: `${t(`users.roles.${x}`)} — ${t(`users.roleHelp.${x}`)}` }))} /></Form.Item>
        <Form.Item label={t('users.groups')} name="groups"><Select mode="multiple" options={groupOptions} /></Form.Item>
      </Form>
    </Modal>
  );
}

function PasswordModal({ user, onClose }: { user: User; onClose: () => void }) {
  const { t } = useTranslation();
  const [form] = Form.useForm<{ password: string }>();
  const { message } = App.useApp();
  const errText = useErrorText();
  const save = useMutation({
    mutationFn: (v: { password: string }) => setUserPassword(user.id, v.password),
    onSuccess: () => { void message.success(t('users.passwordChanged')); onClose(); },
    onError: (e) => {
      if (isApiError(e) && e.fields.password) form.setFields([{ name: 'password', errors: [e.fields.password] }]);
      else void message.error(errText(e));
    },
  });
  return (
    <Modal open title={`${t('users.setPassword')}: ${user.username}`} onCancel={onClose} onOk={() => form.submit()} confirmLoading={save.isPending}>
      <Form form={form} layout="vertical" onFinish={(v) => save.mutate(v)}>
        <Form.Item label={t('users.newPassword')} name="password" rules={[{ required: true }]}><Input.Password autoComplete="new-password" /></Form.Item>
      </Form>
    </Modal>
  );
}
