import { Tag } from 'antd';
import { useTranslation } from 'react-i18next';

const colors: Record<string, string> = {
  triggered: 'default', running: 'processing', success: 'success', failed: 'error', timeout: 'warning',
  killed: 'magenta', lost: 'volcano', skipped: 'default', online: 'success', offline: 'default',
};

export function StatusTag({ status }: { status: string }) {
  const { t } = useTranslation();
  return (
    <Tag color={colors[status] ?? 'default'} data-status={status}>
      {t(`status.${status}`, { defaultValue: status })}
    </Tag>
  );
}
