import { Alert, Button, Card, Form, Input, Select, Typography } from 'antd';
import { useState } from 'react';
import { useTranslation } from 'react-i18next';
import { useAuth } from '../auth';
import { languages, rememberLang, type Lang } from '../i18n';

export default function Login() {
  const { t, i18n } = useTranslation();
  const { login, ended } = useAuth();
  const [error, setError] = useState<string | null>(null);
  const [busy, setBusy] = useState(false);

  const submit = async (v: { username: string; password: string }) => {
    setBusy(true);
    setError(null);
    try {
      // With the session set, the app leaves the login page for ?next= (App.tsx).
      await login(v.username, v.password);
    } catch (e) {
      setError(e instanceof Error ? e.message : String(e));
    } finally {
      setBusy(false);
    }
  };

  return (
    <div className="login-wrap">
      <Card style={{ width: 360, maxWidth: '100%' }}>
        <Typography.Title level={1} style={{ fontSize: 22, marginTop: 0 }}>{t('login.title')}</Typography.Title>
        {ended === 'expired' && !error && (
          <Alert type="warning" showIcon title={t('login.expired')} style={{ marginBottom: 16 }} role="status" data-testid="session-expired" />
        )}
        {error && <Alert type="error" showIcon title={t('login.failed')} description={error} style={{ marginBottom: 16 }} role="alert" />}
        <Form layout="vertical" onFinish={submit} requiredMark={false}>
          <Form.Item label={t('login.username')} name="username" rules={[{ required: true, message: t('login.required') }]}>
            <Input autoComplete="username" autoFocus />
          </Form.Item>
          <Form.Item label={t('login.password')} name="password" rules={[{ required: true, message: t('login.required') }]}>
            <Input.Password autoComplete="current-password" />
          </Form.Item>
          <Button type="primary" htmlType="submit" block loading={busy}>{t('login.submit')}</Button>
        </Form>
        <div style={{ marginTop: 16, textAlign: 'right' }}>
          <Select<Lang>
            aria-label={t('nav.language')}
            size="small"
            value={(i18n.language === 'zh-CN' ? 'zh-CN' : 'en') as Lang}
            options={languages}
            onChange={(l) => {
              void i18n.changeLanguage(l);
              rememberLang(l);
            }}
            style={{ width: 112 }}
          />
        </div>
      </Card>
    </div>
  );
}
