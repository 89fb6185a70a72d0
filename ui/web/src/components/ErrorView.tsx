import { Alert, Button, Result } from 'antd';
import { useTranslation } from 'react-i18next';
import { isApiError } from '../services/http';

/** ErrorView turns a failed query into a message people understand: 403 and 404 get their own words. */
export function ErrorView({ error, onRetry }: { error: unknown; onRetry?: () => void }) {
  const { t } = useTranslation();
  if (isApiError(error, 403)) return <Result status="403" title="403" subTitle={t('common.forbidden')} data-testid="forbidden" />;
  if (isApiError(error, 404)) return <Result status="404" title="404" subTitle={t('common.notFound')} />;
  return (
    <Alert
      type="error"
      showIcon
      title={t('app.error')}
      description={error instanceof Error ? error.message : String(error)}
      action={onRetry && <Button size="small" onClick={onRetry}>{t('app.retry')}</Button>}
    />
  );
}

/** errorText is a one-line message for notifications: 403 gets the friendly text. */
export function useErrorText(): (e: unknown) => string {
  const { t } = useTranslation();
  return (e) => (isApiError(e, 403) ? t('common.forbidden') : e instanceof Error ? e.message : String(e));
}
