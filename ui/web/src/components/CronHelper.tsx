import { useQuery } from '@tanstack/react-query';
import { Typography } from 'antd';
import { useEffect } from 'react';
import { useTranslation } from 'react-i18next';
import { describeCron } from '../lib/cronText';
import { browserZone, formatTime } from '../lib/format';
import { useDebounced } from '../lib/useDebounced';
import { isApiError } from '../services/http';
import { previewSchedule, type Preview } from '../services/cluster';

export interface CronHelperProps {
  scheduleType: string;
  schedule: string;
  timezone: string;
  /** how many fires to show */
  n?: number;
  /** the preview call; tests pass their own */
  preview?: (q: { schedule_type: string; schedule: string; timezone: string; n: number }) => Promise<Preview>;
  /** receives the parser's message for the schedule (or timezone), null when it parses */
  onError?: (e: { field: string; message: string } | null) => void;
  debounceMs?: number;
}

/**
 * CronHelper explains a schedule in words and lists its next fires, from the
 * server's preview API, in the job's zone and the browser's, as the user types.
 */
export function CronHelper({ scheduleType, schedule, timezone, n = 10, preview = previewSchedule, onError, debounceMs = 300 }: CronHelperProps) {
  const { t } = useTranslation();
  const q = useDebounced({ schedule_type: scheduleType, schedule: schedule.trim(), timezone: timezone.trim(), n }, debounceMs);
  const enabled = q.schedule !== '' && q.schedule_type !== 'none';
  const res = useQuery({
    queryKey: ['preview', q],
    queryFn: () => preview(q),
    enabled,
    retry: false,
    staleTime: 60_000,
  });

  let error: { field: string; message: string } | null = null;
  if (enabled && res.error) {
    if (isApiError(res.error) && Object.keys(res.error.fields).length > 0) {
      const [field, message] = Object.entries(res.error.fields)[0];
      error = { field, message };
    } else {
      error = { field: 'schedule', message: (res.error as Error).message };
    }
  }
  const errKey = error ? error.field + '\u0000' + error.message : '';
  useEffect(() => {
    onError?.(error);
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, [errKey]);

  let words: string | null = null;
  if (scheduleType === 'cron') words = describeCron(schedule, t);
  else if (scheduleType === 'fixed_rate' && schedule.trim()) words = t('cron.fixedRate', { d: schedule.trim() });
  else if (scheduleType === 'fixed_delay' && schedule.trim()) words = t('cron.fixedDelay', { d: schedule.trim() });
  else if (scheduleType === 'once') words = t('cron.once');
  else if (scheduleType === 'none') words = t('cron.none');

  const next = !error && res.data && res.data.schedule === q.schedule ? res.data.next : null;
  const jobZone = timezone.trim() || res.data?.timezone || '';
  const local = browserZone();
  return (
    <div className="cron-helper" data-testid="cron-helper" aria-live="polite">
      {words && <Typography.Text type="secondary" data-testid="cron-words">{words}</Typography.Text>}
      {enabled && res.isFetching && !next && <div><Typography.Text type="secondary">{t('cron.checking')}</Typography.Text></div>}
      {next && next.length === 0 && <div><Typography.Text type="secondary">{t('cron.previewEmpty')}</Typography.Text></div>}
      {next && next.length > 0 && (
        <table className="cron-preview" data-testid="cron-preview">
          <caption>{t('cron.preview', { n: next.length })}</caption>
          <thead>
            <tr>
              <th scope="col">#</th>
              <th scope="col">{t('common.jobZone')} ({jobZone || t('common.serverZone')})</th>
              {jobZone !== local && <th scope="col">{t('common.yourZone')} ({local})</th>}
            </tr>
          </thead>
          <tbody>
            {next.map((at, i) => (
              <tr key={at}>
                <td>{i + 1}</td>
                <td>{at.replace('T', ' ')}</td>
                {jobZone !== local && <td>{formatTime(at)}</td>}
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </div>
  );
}
