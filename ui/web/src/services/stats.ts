// Dashboard figures, computed from the list APIs (counts via page_size=1 totals).
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
}

/** runsPerDay counts runs by status for each of the last n local days (today included). */
export async function runsPerDay(n: number): Promise<DaySeries> {
  const today = startOfDay(new Date());
  const days: Date[] = [];
  for (let i = n - 1; i >= 0; i--) days.push(new Date(today.getFullYear(), today.getMonth(), today.getDate() - i));
  const series: Record<string, number[]> = {};
  await Promise.all(
    chartStatuses.map(async (s) => {
      series[s] = await Promise.all(
        days.map((d) => count({ status: s, from: d.toISOString(), to: new Date(d.getFullYear(), d.getMonth(), d.getDate() + 1).toISOString() })),
      );
    }),
  );
  return { days: days.map((d) => `${d.getMonth() + 1}/${d.getDate()}`), series };
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
