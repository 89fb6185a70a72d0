import { render, screen, waitFor } from '@testing-library/react';
import { describe, expect, it, vi } from 'vitest';
import i18n from '../i18n';
import { ApiError } from '../services/http';
import { withQuery } from '../test-utils';
import { CronHelper } from './CronHelper';

describe('CronHelper', () => {
  it('explains the expression and lists the next fires from the preview', async () => {
    await i18n.changeLanguage('en');
    const preview = vi.fn().mockResolvedValue({
      schedule_type: 'cron', schedule: '0 3 * * *', timezone: 'Europe/Berlin',
      next: ['2026-03-02T03:00:00+01:00', '2026-03-03T03:00:00+01:00'],
    });
    const onError = vi.fn();
    render(withQuery(<CronHelper scheduleType="cron" schedule="0 3 * * *" timezone="Europe/Berlin" preview={preview} onError={onError} debounceMs={0} />));
    expect(screen.getByTestId('cron-words')).toHaveTextContent('At 03:00, every day');
    const table = await screen.findByTestId('cron-preview');
    expect(table).toHaveTextContent('2026-03-02 03:00:00+01:00');
    expect(table).toHaveTextContent('Next 2 fires');
    expect(preview).toHaveBeenCalledWith({ schedule_type: 'cron', schedule: '0 3 * * *', timezone: 'Europe/Berlin', n: 10 });
    expect(onError).toHaveBeenLastCalledWith(null);
  });

  it('reports the parser message for the field it names', async () => {
    const msg = 'invalid cron expression "61 * * * *": end of range (61) above maximum (59): 61';
    const preview = vi.fn().mockRejectedValue(new ApiError(400, 'invalid schedule', { schedule: msg }));
    const onError = vi.fn();
    render(withQuery(<CronHelper scheduleType="cron" schedule="61 * * * *" timezone="" preview={preview} onError={onError} debounceMs={0} />));
    await waitFor(() => expect(onError).toHaveBeenLastCalledWith({ field: 'schedule', message: msg }));
    expect(screen.queryByTestId('cron-preview')).toBeNull();
  });

  it('does not ask the server for schedule type none, and speaks Chinese', async () => {
    await i18n.changeLanguage('zh-CN');
    const preview = vi.fn();
    render(withQuery(<CronHelper scheduleType="none" schedule="" timezone="" preview={preview} debounceMs={0} />));
    expect(screen.getByTestId('cron-words')).toHaveTextContent('仅手动或通过 API 触发');
    expect(preview).not.toHaveBeenCalled();
    await i18n.changeLanguage('en');
  });
});
