import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { Alert, App, Button, Form, Input, Modal, Popconfirm, Table, Typography } from 'antd';
import { useState } from 'react';
import { useTranslation } from 'react-i18next';
import { useErrorText } from '../components/ErrorView';
import { PageError } from '../components/MissingApi';
import { formatTime } from '../lib/format';
import { createToken, deleteToken, listTokens, type ApiToken } from '../services/admin';

export default function Tokens() {
  const { t } = useTranslation();
  const qc = useQueryClient();
  const { message } = App.useApp();
  const errText = useErrorText();
  const tokens = useQuery({ queryKey: ['tokens'], queryFn: listTokens });
  const [creating, setCreating] = useState(false);
  const [secret, setSecret] = useState<string | null>(null);
  const [form] = Form.useForm<{ name: string }>();
  const create = useMutation({
    mutationFn: (v: { name: string }) => createToken(v),
    onSuccess: (tok) => { setCreating(false); setSecret(tok.secret ?? null); form.resetFields(); void qc.invalidateQueries({ queryKey: ['tokens'] }); },
    onError: (e) => void message.error(errText(e)),
  });
  const remove = useMutation({
    mutationFn: (id: number) => deleteToken(id),
    onSuccess: () => void qc.invalidateQueries({ queryKey: ['tokens'] }),
    onError: (e) => void message.error(errText(e)),
  });
  return (
    <div>
      <div className="page-header">
        <h1>{t('tokens.title')}</h1>
        <Button type="primary" onClick={() => setCreating(true)}>{t('tokens.create')}</Button>
      </div>
      {secret && (
        <Alert type="success" showIcon closable onClose={() => setSecret(null)} style={{ marginBottom: 16 }} title={t('tokens.secretOnce')}
          description={<Typography.Text code copyable>{secret}</Typography.Text>} />
      )}
      {tokens.error ? <PageError error={tokens.error} /> : (
        <Table<ApiToken> rowKey="id" size="middle" loading={tokens.isLoading} dataSource={tokens.data?.items ?? []} pagination={false}
          columns={[
            { title: t('tokens.name'), dataIndex: 'name' },
            { title: t('common.created'), dataIndex: 'created_at', render: (v: string) => formatTime(v) },
            { title: t('tokens.expires'), dataIndex: 'expires_at', render: (v: string | null) => (v ? formatTime(v) : t('common.never')) },
            { title: t('tokens.lastUsed'), dataIndex: 'last_used_at', render: (v: string | null | undefined) => (v ? formatTime(v) : t('common.never')) },
            { title: t('common.actions'), render: (_, tok) => (
              <Popconfirm title={t('common.confirmDelete', { what: tok.name })} onConfirm={() => remove.mutate(tok.id)}>
                <Button size="small" danger>{t('common.delete')}</Button>
              </Popconfirm>
            ) },
          ]} />
      )}
      <Modal open={creating} title={t('tokens.create')} onCancel={() => setCreating(false)} onOk={() => form.submit()} confirmLoading={create.isPending}>
        <Form form={form} layout="vertical" onFinish={(v) => create.mutate(v)}>
          <Form.Item label={t('tokens.name')} name="name" rules={[{ required: true }]}><Input /></Form.Item>
        </Form>
      </Modal>
    </div>
  );
}
