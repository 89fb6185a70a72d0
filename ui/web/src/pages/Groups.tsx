import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { App, Button, Form, Input, Modal, Popconfirm, Radio, Select, Space, Table, Tag } from 'antd';
import { useState } from 'react';
import { useTranslation } from 'react-i18next';
import { useAuth } from '../auth';
import { useErrorText } from '../components/ErrorView';
import { PageError } from '../components/MissingApi';
import { mapFieldErrors } from '../lib/fieldErrors';
import { createGroup, deleteGroup, listGroups, updateGroup, type Group, type GroupInput } from '../services/admin';
import { isAdmin } from '../services/auth';
import { listNodes } from '../services/cluster';
import { isApiError } from '../services/http';

export default function Groups() {
  const { t } = useTranslation();
  const { me } = useAuth();
  // Group writes are admin-only (server/authz); operators read them.
  const writer = isAdmin(me);
  const qc = useQueryClient();
  const { message } = App.useApp();
  const errText = useErrorText();
  const groups = useQuery({ queryKey: ['groups'], queryFn: () => listGroups() });
  const [editing, setEditing] = useState<Group | 'new' | null>(null);
  const remove = useMutation({
    mutationFn: (id: number) => deleteGroup(id),
    onSuccess: () => void qc.invalidateQueries({ queryKey: ['groups'] }),
    onError: (e) => void message.error(errText(e)),
  });
  return (
    <div>
      <div className="page-header">
        <h1>{t('groups.title')}</h1>
        {writer && <Button type="primary" onClick={() => setEditing('new')}>{t('groups.create')}</Button>}
      </div>
      {groups.error ? <PageError error={groups.error} /> : (
        <Table<Group> rowKey="id" size="middle" loading={groups.isLoading} dataSource={groups.data?.items ?? []} pagination={false} scroll={{ x: 700 }}
          columns={[
            { title: t('groups.appname'), dataIndex: 'appname' },
            { title: t('groups.titleField'), dataIndex: 'title' },
            { title: t('groups.addressType'), dataIndex: 'address_type', render: (v: string) => t(`groups.${v}`) },
            { title: t('groups.members'), dataIndex: 'nodes', render: (ns: Group['nodes']) => (ns ?? []).map((n) => <Tag key={n.uuid}>{n.address || n.uuid}</Tag>) },
            ...(writer ? [{
              title: t('common.actions'),
              render: (_: unknown, g: Group) => (
                <Space>
                  <Button size="small" onClick={() => setEditing(g)}>{t('common.edit')}</Button>
                  <Popconfirm title={t('common.confirmDelete', { what: g.appname })} onConfirm={() => remove.mutate(g.id)}>
                    <Button size="small" danger>{t('common.delete')}</Button>
                  </Popconfirm>
                </Space>
              ),
            }] : []),
          ]} />
      )}
      {editing && <GroupModal group={editing === 'new' ? null : editing} onClose={() => setEditing(null)} />}
    </div>
  );
}

function GroupModal({ group, onClose }: { group: Group | null; onClose: () => void }) {
  const { t } = useTranslation();
  const [form] = Form.useForm<GroupInput>();
  const qc = useQueryClient();
  const errText = useErrorText();
  const nodes = useQuery({ queryKey: ['nodes'], queryFn: listNodes });
  const [err, setErr] = useState<string | null>(null);
  const type = Form.useWatch('address_type', form);
  const save = useMutation({
    mutationFn: (v: GroupInput) => (group ? updateGroup(group.id, v) : createGroup(v)),
    onSuccess: () => {
      void qc.invalidateQueries({ queryKey: ['groups'] });
      onClose();
    },
    onError: (e) => {
      if (isApiError(e) && Object.keys(e.fields).length) {
        const m = mapFieldErrors(e.fields, ['appname', 'title', 'address_type', 'addresses']);
        form.setFields(m.form.map((f) => ({ name: f.name as keyof GroupInput, errors: f.errors })));
        setErr(m.other.join('; ') || null);
      } else setErr(errText(e));
    },
  });
  return (
    <Modal open title={group ? t('groups.edit') : t('groups.create')} onCancel={onClose} onOk={() => form.submit()} confirmLoading={save.isPending}>
      <Form form={form} layout="vertical" onFinish={(v) => save.mutate({ ...v, addresses: v.address_type === 'manual' ? v.addresses ?? [] : [] })}
        initialValues={group ? { appname: group.appname, title: group.title, address_type: group.address_type, addresses: group.addresses ?? [] } : { address_type: 'auto', addresses: [] }}>
        {err && <div role="alert" style={{ color: '#ff4d4f', marginBottom: 8 }}>{err}</div>}
        <Form.Item label={t('groups.appname')} name="appname" rules={[{ required: true }]}><Input /></Form.Item>
        <Form.Item label={t('groups.titleField')} name="title"><Input /></Form.Item>
        <Form.Item label={t('groups.addressType')} name="address_type">
          <Radio.Group options={[{ value: 'auto', label: t('groups.auto') }, { value: 'manual', label: t('groups.manual') }]} />
        </Form.Item>
        {type === 'manual' && (
          <Form.Item label={t('groups.addresses')} name="addresses">
            <Select mode="multiple" options={(nodes.data?.items ?? []).map((n) => ({ value: n.uuid, label: `${n.uuid} (${n.address})` }))} />
          </Form.Item>
        )}
      </Form>
    </Modal>
  );
}
