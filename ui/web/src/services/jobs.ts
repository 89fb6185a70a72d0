import { api, type Page } from './http';
import type { RunStatus } from './runs';

export type ScheduleType = 'cron' | 'fixed_rate' | 'fixed_delay' | 'once' | 'none';

export const routeStrategies = [
  'FIRST', 'LAST', 'ROUND', 'RANDOM', 'CONSISTENT_HASH', 'LEAST_FREQUENTLY_USED',
  'LEAST_RECENTLY_USED', 'FAILOVER', 'BUSYOVER', 'SHARDING_BROADCAST',
] as const;
export const blockStrategies = ['SERIAL_EXECUTION', 'DISCARD_LATER', 'COVER_EARLY'] as const;
export const misfirePolicies = ['DO_NOTHING', 'FIRE_ONCE_NOW', 'CATCH_UP'] as const;
export const scheduleTypes: ScheduleType[] = ['cron', 'fixed_rate', 'fixed_delay', 'once', 'none'];

/** JobInput is the writable body of POST/PUT /jobs. */
export interface JobInput {
  name: string;
  group: string;
  schedule_type: ScheduleType;
  schedule: string;
  timezone: string;
  handler: string;
  params: Record<string, unknown>;
  timeout_seconds: number;
  enabled: boolean;
  description: string;
  author: string;
  route_strategy: string;
  block_strategy: string;
  misfire_policy: string;
  misfire_max_catch_up: number;
  retry_count: number;
  retry_interval_seconds: number;
  alarm_emails: string[];
  /** A killed run raises a run.killed alert. */
  alert_on_kill: boolean;
  child_job_ids: number[];
  node_uuid: string;
}

export interface Job extends JobInput {
  id: number;
  revision: number;
  created_at: string;
  updated_at: string;
}

export const jobInputKeys: (keyof JobInput)[] = [
  'name', 'group', 'schedule_type', 'schedule', 'timezone', 'handler', 'params', 'timeout_seconds',
  'enabled', 'description', 'author', 'route_strategy', 'block_strategy', 'misfire_policy',
  'misfire_max_catch_up', 'retry_count', 'retry_interval_seconds', 'alarm_emails', 'alert_on_kill', 'child_job_ids', 'node_uuid',
];

export function emptyJob(): JobInput {
  return {
    name: '', group: 'default', schedule_type: 'cron', schedule: '', timezone: '', handler: '', params: {},
    timeout_seconds: 0, enabled: true, description: '', author: '', route_strategy: 'FIRST',
    block_strategy: 'SERIAL_EXECUTION', misfire_policy: 'FIRE_ONCE_NOW', misfire_max_catch_up: 100,
    retry_count: 0, retry_interval_seconds: 0, alarm_emails: [], alert_on_kill: false, child_job_ids: [], node_uuid: '',
  };
}

/** toInput keeps only the writable fields of a job (the API rejects unknown ones). */
export function toInput(j: Partial<Job>): JobInput {
  const out = emptyJob() as unknown as Record<string, unknown>;
  for (const k of jobInputKeys) {
    const v = (j as Record<string, unknown>)[k];
    if (v !== undefined && v !== null) out[k] = v;
  }
  return out as unknown as JobInput;
}

export interface JobFilter {
  q?: string;
  group?: string;
  handler?: string;
  enabled?: string;
  author?: string;
  /** cron, fixed_rate, fixed_delay, once or none (server-side). */
  schedule_type?: string;
  /** The status of each job's latest run, or 'none' for jobs that never ran (server-side). */
  last_status?: string;
  sort?: string;
  page?: number;
  page_size?: number;
}

/** A job of the job list: the job, its latest run and its next fire (GET /api/v1/jobs). */
export interface JobListItem extends Job {
  /** The latest run by scheduled time; null when the job never ran. */
  last_run: { id: number; status: RunStatus; scheduled_at: string; started_at: string | null; finished_at: string | null } | null;
  /** The next scheduled fire after now; null when disabled, none or fixed_delay. */
  next_fire_at: string | null;
}

export const listJobs = (f: JobFilter) => api<Page<JobListItem>>('/jobs', { query: { ...f } });
export const getJob = (id: number) => api<Job>(`/jobs/${id}`);
/**
 * forSave is the body the API takes for j: a none job has no schedule (the
 * API refuses one), while the form keeps the text of its schedule input,
 * disabled for none, and a job or version stored before may carry one.
 */
export function forSave(j: JobInput): JobInput {
  return j.schedule_type === 'none' && j.schedule !== '' ? { ...j, schedule: '' } : j;
}

export const createJob = (j: JobInput) => api<Job>('/jobs', { method: 'POST', body: forSave(j) });
export const updateJob = (id: number, j: JobInput) => api<Job>(`/jobs/${id}`, { method: 'PUT', body: forSave(j) });
export const deleteJob = (id: number) => api<void>(`/jobs/${id}`, { method: 'DELETE' });

export interface TriggerInput {
  node?: string;
  params?: Record<string, unknown>;
}
export const triggerJob = (id: number, body?: TriggerInput) =>
  api<{ status: string }>(`/jobs/${id}/trigger`, { method: 'POST', body: body ?? {} });

export async function setEnabled(job: Job, enabled: boolean): Promise<Job> {
  return updateJob(job.id, { ...toInput(job), enabled });
}

export interface JobVersion {
  revision: number;
  name: string;
  schedule_type: ScheduleType;
  schedule: string;
  timezone: string;
  handler: string;
  params: Record<string, unknown>;
  saved_at: string;
  saved_by: string;
}

export const listVersions = (id: number, page = 1, pageSize = 100) =>
  api<Page<JobVersion>>(`/jobs/${id}/versions`, { query: { page, page_size: pageSize } });

/** restoreVersion saves the job again with a version's defining fields. */
export async function restoreVersion(job: Job, v: JobVersion): Promise<Job> {
  return updateJob(job.id, {
    ...toInput(job),
    name: v.name,
    schedule_type: v.schedule_type,
    schedule: v.schedule,
    timezone: v.timezone,
    handler: v.handler,
    params: v.params,
  });
}

/** versionText renders a version for a line diff. */
export function versionText(v: JobVersion): string {
  return [
    `name: ${v.name}`,
    `schedule_type: ${v.schedule_type}`,
    `schedule: ${v.schedule}`,
    `timezone: ${v.timezone}`,
    `handler: ${v.handler}`,
    `params: ${JSON.stringify(v.params ?? {}, null, 2)}`,
  ].join('\n') + '\n';
}
