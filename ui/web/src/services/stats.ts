// Dashboard figures: the stats summary (one request) for the live figures,
// the daily report for the per-day chart.
import { api, type Page } from './http';
import { listRuns, latenessMs, type Run, type RunStatus } from './runs';
import { percentile } from '../lib/format';

export const chartStatuses: RunStatus[] = ['success', 'failed', 'timeout', 'lost'];

const count = async (f: Parameters<typeof listRuns>[0]) => (await listRuns({ ...f, page: 1, page_size: 1 })).total;

/** GET /api/v1/stats/summary: the dashboard's figures in one request. */
export interface StatsSummary {
  jobs: { enabled: number; disabled: number };
  /** The start of runs_since (RFC 3339). */
  since: string;
  /** Runs scheduled at or after since, by status (every status present). */
  runs_since: Record<RunStatus, number>;
  /** Today, UTC (YYYY-MM-DD). */
  day: string;
  /** Runs scheduled on day (UTC), by status: the daily report's open day, counted live. */
  runs_today: Record<RunStatus, number>;
}

function startOfDay(d: Date): Date {
  return new Date(d.getFullYear(), d.getMonth(), d.getDate());
}

/** statsSummary: the caller's jobs and runs since the start of the browser's day (and today, UTC), by status. */
export const statsSummary = (now = new Date()) =>
  api<StatsSummary>('/stats/summary', { query: { since: startOfDay(now).toISOString() } });

export interface DaySeries {
  /** Labels (MM-DD). */
  days: string[];
  /** The UTC days (YYYY-MM-DD), oldest first. */
  isoDays: string[];
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
 * included), stacked in the dashboard chart: the daily report's per-job rows
 * summed (one or a few requests). With very many jobs the rows would take
 * many pages, so it then counts runs per past day and status instead (4 ×
 * (n − 1) small requests) and leaves today at 0. Today's bar is meant to be
 * replaced by the live counts of the stats summary (withToday): the leader
 * refreshes the open day's report only every minute.
 */
export async function runsPerDay(n: number, now = new Date()): Promise<DaySeries> {
  const days = lastUtcDays(n, now);
  const labels = days.map((d) => d.slice(5));
  const from = days[0];
  const to = days[days.length - 1];
  const first = await listDailyReports({ from, to, page: 1, page_size: reportPageSize });
  const pages = Math.ceil(first.total / reportPageSize);
  if (pages > maxReportPages) {
    const earlier = await countDays(days.slice(0, -1));
    const series = Object.fromEntries(chartStatuses.map((s) => [s, [...earlier[s], 0]]));
    return { days: labels, isoDays: days, series, source: 'counts' };
  }
  const rest = await Promise.all(
    Array.from({ length: Math.max(0, pages - 1) }, (_, i) => listDailyReports({ from, to, page: i + 2, page_size: reportPageSize })),
  );
  const index = new Map(days.map((d, i) => [d, i]));
  const series: Record<string, number[]> = Object.fromEntries(chartStatuses.map((s) => [s, days.map(() => 0)]));
  for (const row of [first, ...rest].flatMap((p) => p.items)) {
    const i = index.get(row.day);
    if (i === undefined) continue;
    for (const s of chartStatuses) series[s][i] += row.runs[s as keyof DailyReport['runs']] ?? 0;
  }
  return { days: labels, isoDays: days, series, source: 'report' };
}

/**
 * withToday replaces the last bar of a per-day series with the summary's
 * live counts of that UTC day (when the summary is of that day).
 */
export function withToday(d: DaySeries, s: StatsSummary | undefined): DaySeries {
  const last = d.isoDays.length - 1;
  if (!s || d.isoDays[last] !== s.day) return d;
  const series = Object.fromEntries(chartStatuses.map((st) => [st, [...d.series[st].slice(0, last), s.runs_today[st] ?? 0]]));
  return { ...d, series };
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
