import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { lastUtcDays, maxReportPages, runsPerDay, statsSummary, withToday, type StatsSummary } from './stats';

function reply(body: unknown): Response {
  return new Response(JSON.stringify(body), { status: 200, headers: { 'Content-Type': 'application/json' } });
}

const now = new Date('2026-03-07T22:30:00Z');
const runs = (success: number, failed: number, extra: Record<string, number> = {}) => ({
  total: success + failed, success, failed, timeout: 0, killed: 0, lost: 0, skipped: 0, unfinished: 0, ...extra,
});

describe('runsPerDay', () => {
  const fetchMock = vi.fn();
  beforeEach(() => vi.stubGlobal('fetch', fetchMock));
  afterEach(() => {
    fetchMock.mockReset();
    vi.unstubAllGlobals();
  });

  it('lists the last n UTC days, today included', () => {
    expect(lastUtcDays(3, now)).toEqual(['2026-03-05', '2026-03-06', '2026-03-07']);
    expect(lastUtcDays(2, new Date('2026-03-01T00:10:00+02:00'))).toEqual(['2026-02-27', '2026-02-28']);
  });

  // runsCount answers GET /api/v1/runs?page_size=1 count requests: total
  // for (status, from) pairs in counts, 0 otherwise.
  const runsCount = (u: URL, counts: Record<string, number>) => {
    expect(u.pathname).toBe('/api/v1/runs');
    const total = counts[`${u.searchParams.get('status')} ${u.searchParams.get('from')}`] ?? 0;
    return Promise.resolve(reply({ items: [], total, page: 1, page_size: 1 }));
  };

  it('sums the daily report rows of every job and page', async () => {
    fetchMock.mockImplementation((url: string) => {
      const u = new URL(url, 'http://x');
      const q = u.searchParams;
      expect(u.pathname).toBe('/api/v1/reports/daily');
      expect(q.get('from')).toBe('2026-03-01');
      expect(q.get('to')).toBe('2026-03-07');
      const page = Number(q.get('page'));
      const rows = page === 1
        ? [
            { day: '2026-03-01', job_id: 1, runs: runs(5, 1) },
            { day: '2026-03-06', job_id: 1, runs: runs(2, 0, { lost: 1 }) },
            { day: '2026-03-07', job_id: 1, runs: runs(1, 0) }, // trails the live count
          ]
        : [{ day: '2026-03-06', job_id: 2, runs: runs(3, 2, { timeout: 4 }) }];
      return Promise.resolve(reply({ items: rows, total: 501, page, page_size: 500 }));
    });
    const got = await runsPerDay(7, now);
    expect(fetchMock).toHaveBeenCalledTimes(2);
    expect(got.source).toBe('report');
    expect(got.days).toEqual(['03-01', '03-02', '03-03', '03-04', '03-05', '03-06', '03-07']);
    expect(got.series.success).toEqual([5, 0, 0, 0, 0, 5, 1]);
    expect(got.series.failed).toEqual([1, 0, 0, 0, 0, 2, 0]);
    expect(got.series.timeout).toEqual([0, 0, 0, 0, 0, 4, 0]);
    expect(got.series.lost).toEqual([0, 0, 0, 0, 0, 1, 0]);

    // Today's bar takes the summary's live counts of the same UTC day.
    const live = { day: '2026-03-07', runs_today: { success: 6, failed: 0, timeout: 0, lost: 2 } } as unknown as StatsSummary;
    const merged = withToday(got, live);
    expect(merged.series.success).toEqual([5, 0, 0, 0, 0, 5, 6]);
    expect(merged.series.lost).toEqual([0, 0, 0, 0, 0, 1, 2]);
    expect(got.series.success[6]).toBe(1); // not changed in place
    // A summary of another day (midnight passed in between) leaves the series as it is.
    expect(withToday(got, { ...live, day: '2026-03-08' })).toBe(got);
    expect(withToday(got, undefined)).toBe(got);
  });

  it('counts runs per UTC day instead when the report has too many rows', async () => {
    fetchMock.mockImplementation((url: string) => {
      const u = new URL(url, 'http://x');
      if (u.pathname === '/api/v1/reports/daily') {
        return Promise.resolve(reply({ items: [], total: 500 * maxReportPages + 1, page: 1, page_size: 500 }));
      }
      return runsCount(u, { 'success 2026-03-06T00:00:00.000Z': 9, 'failed 2026-03-07T00:00:00.000Z': 3 });
    });
    const got = await runsPerDay(2, now);
    expect(got.source).toBe('counts');
    expect(got.days).toEqual(['03-06', '03-07']);
    expect(got.series.success).toEqual([9, 0]);
    expect(got.series.failed).toEqual([0, 0]); // today comes from the summary (withToday)
    expect(fetchMock).toHaveBeenCalledTimes(1 + 4 * 1);
    const toOf = fetchMock.mock.calls
      .map(([url]) => new URL(url as string, 'http://x').searchParams)
      .find((q) => q.get('from') === '2026-03-06T00:00:00.000Z')
      ?.get('to');
    expect(toOf).toBe('2026-03-07T00:00:00.000Z');
  });

  it('asks the summary for the runs since the start of the local day', async () => {
    const body = { jobs: { enabled: 3, disabled: 1 }, since: 'x', runs_since: {}, day: '2026-03-07', runs_today: {} };
    fetchMock.mockImplementation(() => Promise.resolve(reply(body)));
    const local = new Date(2026, 2, 7, 15, 4, 5);
    const got = await statsSummary(local);
    expect(got.jobs).toEqual({ enabled: 3, disabled: 1 });
    expect(fetchMock).toHaveBeenCalledTimes(1);
    const u = new URL(fetchMock.mock.calls[0][0] as string, 'http://x');
    expect(u.pathname).toBe('/api/v1/stats/summary');
    expect(new Date(u.searchParams.get('since')!).getTime()).toBe(new Date(2026, 2, 7).getTime());
  });
});
