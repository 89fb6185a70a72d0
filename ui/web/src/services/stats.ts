// Dashboard figures: the daily report for the per-day chart, the list APIs
// (counts via page_size=1 totals) for the live figures.
import { api, type Page } from './http';
import { listJobs } from './jobs';
import { listRuns, latenessMs, type Run, type RunStatus } from './runs';
import { percentile } from '../lib/format';

export const chartStatuses: RunStatus[] = ['success', 'failed', 'timeout', 'lost'];

const count = async (f: Parameters<typeof listRuns>[0]) => (await listRuns({ ...f, page: 1, page_size: 1 })).total;

export async function jobCounts(): Promise<{ enabled: number; disabled: number }> {
  const [e, d] = await Promise.all([
    listJobs({ enabled: 'true', page_size: 1 }),
    listJobs({ enabled: 'false', page_size: 1 }),
  ]);
  return { enabled: e.total, disabled: d.total };
}

function startOfDay(d: Date): Date {
  return new Date(d.getFullYear(), d.getMonth(), d.getDate());
}

export async function runsToday(statuses: RunStatus[]): Promise<Record<string, number>> {
  const from = startOfDay(new Date()).toISOString();
  const counts = await Promise.all(statuses.map((s) => count({ status: s, from })));
  return Object.fromEntries(statuses.map((s, i) => [s, counts[i]]));
}

export interface DaySeries {
  days: string[];
  series: Record<string, number[]>;
  /** Where the figures come from: the daily report, or run counts (many report rows). */
  source: 'report' | 'counts';
}

/** One row of GET /api/v1/reports/daily: a job's runs on one UTC day. */
export interface DailyReport {
  day: string;
  group: string;
  job_id: number;
  job_name: string;
  runs: Record<'total' | 'success' | 'failed' | 'timeout' | 'killed' | 'lost' | 'skipped' | 'unfinished', number>;
}

export const listDailyReports = (f: { from: string; to: string; group?: string; page?: number; page_size?: number }) =>
  api<Page<DailyReport>>('/reports/daily', { query: { ...f } });

const reportPageSize = 500;
/** Past this many report rows (jobs × days) the chart counts runs instead: 4 × n requests whatever the job count. */
export const maxReportPages = 4;

const utcDay = (d: Date) => d.toISOString().slice(0, 10);

/** The last n UTC days, oldest first, as YYYY-MM-DD (today included). */
export function lastUtcDays(n: number, now = new Date()): string[] {
  const today = Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), now.getUTCDate());
  const out: string[] = [];
  for (let i = n - 1; i >= 0; i--) out.push(utcDay(new Date(today - i * 86_400_000)));
  return out;
}

/**
 * runsPerDay is the runs by status for each of the last n UTC days (today
 * included), stacked in the dashboard chart. Past days sum the daily
 * report's per-job rows (one or a few requests); today is counted live (4
 * small requests), since the leader refreshes the open day's report only
 * every minute. With very many jobs the rows would take many pages, so it
 * then counts runs per day and status instead (4 × n small requests).
 */
export async function runsPerDay(n: number, now = new Date()): Promise<DaySeries> {
  const days = lastUtcDays(n, now);
  const labels = days.map((d) => d.slice(5));
  const from = days[0];
  const to = days[days.length - 1];
  // Today is counted live (4 small requests): the report of the open day
  // trails the runs by up to a minute, and is empty right after a start.
  const [first, todayLive] = await Promise.all([
    listDailyReports({ from, to, page: 1, page_size: reportPageSize }),
    countDays([to]),
  ]);
  const pages = Math.ceil(first.total / reportPageSize);
  if (pages > maxReportPages) {
    const earlier = await countDays(days.slice(0, -1));
    const series = Object.fromEntries(chartStatuses.map((s) => [s, [...earlier[s], ...todayLive[s]]]));
    return { days: labels, series, source: 'counts' };
  }
  const rest = await Promise.all(
    Array.from({ length: Math.max(0, pages - 1) }, (_, i) => listDailyReports({ from, to, page: i + 2, page_size: reportPageSize })),
  );
  const index = new Map(days.map((d, i) => [d, i]));
  const series: Record<string, number[]> = Object.fromEntries(chartStatuses.map((s) => [s, days.map(() => 0)]));
  for (const row of [first, ...rest].flatMap((p) => p.items)) {
    const i = index.get(row.day);
    if (i === undefined || i === days.length - 1) continue;
    for (const s of chartStatuses) series[s][i] += row.runs[s as keyof DailyReport['runs']] ?? 0;
  }
  for (const s of chartStatuses) series[s][days.length - 1] = todayLive[s][0];
  return { days: labels, series, source: 'report' };
}

/** countDays counts the runs of each chart status on each UTC day (YYYY-MM-DD). */
async function countDays(days: string[]): Promise<Record<string, number[]>> {
  const series: Record<string, number[]> = {};
  await Promise.all(
    chartStatuses.map(async (s) => {
      series[s] = await Promise.all(
        days.map((d) => {
          const start = new Date(d + 'T00:00:00Z');
          return count({ status: s, from: start.toISOString(), to: new Date(start.getTime() + 86_400_000).toISOString() });
        }),
      );
    }),
  );
  return series;
}

export interface Lateness {
  n: number;
  p50: number | null;
  p99: number | null;
}

export function lateness(runs: Run[]): Lateness {
  const v = runs.filter((r) => r.trigger === 'schedule').map(latenessMs).filter((x): x is number => x !== null);
  return { n: v.length, p50: percentile(v, 50), p99: percentile(v, 99) };
}

/** failingJobs: the jobs whose latest finished run (in the recent page) failed, timed out or was lost. */
export function failingJobs(runs: Run[]): Run[] {
  const latest = new Map<number, Run>();
  for (const r of runs) {
    if (r.status === 'running' || r.status === 'triggered' || r.status === 'skipped') continue;
    if (!latest.has(r.job_id)) latest.set(r.job_id, r);
  }
  return [...latest.values()].filter((r) => r.status === 'failed' || r.status === 'timeout' || r.status === 'lost');
}
