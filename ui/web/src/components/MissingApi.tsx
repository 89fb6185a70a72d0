import { Alert } from 'antd';
import { useTranslation } from 'react-i18next';
import { isApiError } from '../services/http';
import { ErrorView } from './ErrorView';

/** PageError: a 404 from a whole list route means this server has no such API yet. */
export function PageError({ error }: { error: unknown }) {
  const { t } = useTranslation();
  if (isApiError(error, 404) || isApiError(error, 405)) return <Alert type="info" showIcon title={t('common.apiMissing')} />;
  return <ErrorView error={error} />;
}
