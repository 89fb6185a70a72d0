import { api, raw, type Page } from './http';

export type RunStatus = 'triggered' | 'running' | 'success' | 'failed' | 'timeout' | 'killed' | 'lost' | 'skipped';
export const runStatuses: RunStatus[] = ['triggered', 'running', 'success', 'failed', 'timeout', 'killed', 'lost', 'skipped'];
export const terminal = (s: RunStatus) => s !== 'triggered' && s !== 'running';

export interface Run {
  id: number;
  fire_id: string;
  job_id: number;
  /** The job's name now ("" once the job is deleted; absent from servers before it). */
  job_name?: string;
  trigger: 'schedule' | 'manual' | string;
  status: RunStatus;
  scheduled_at: string | null;
  dispatched_at: string | null;
  started_at: string | null;
  finished_at: string | null;
  exit_code: number | null;
  node: string;
  output: string;
  output_truncated: boolean;
  message: string;
  attempt?: number;
  shard_index?: number;
  shard_total?: number;
}

export interface RunFilter {
  job_id?: number;
  status?: string;
  node?: string;
  from?: string;
  to?: string;
  page?: number;
  page_size?: number;
}

export const listRuns = (f: RunFilter) => api<Page<Run>>('/runs', { query: { ...f } });
export const listJobRuns = (jobId: number, f: RunFilter) =>
  api<Page<Run>>(`/jobs/${jobId}/runs`, { query: { ...f, job_id: undefined } });
export const getRun = (id: number) => api<Run>(`/runs/${id}`);
export const killRun = (id: number) => api<{ status: string }>(`/runs/${id}/kill`, { method: 'POST' });

/**
 * followOutput streams a run's output (GET /runs/{id}/output?follow=1),
 * calling onChunk with each piece of text until the run ends or signal aborts.
 */
export async function followOutput(id: number, onChunk: (text: string) => void, signal: AbortSignal): Promise<void> {
  const res = await raw(`/runs/${id}/output`, { query: { follow: 1 }, signal });
  if (!res.body) {
    onChunk(await res.text());
    return;
  }
  const reader = res.body.getReader();
  const decoder = new TextDecoder();
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    onChunk(decoder.decode(value, { stream: true }));
  }
  const rest = decoder.decode();
  if (rest) onChunk(rest);
}

/** lateness is started_at − scheduled_at in milliseconds, or null. */
export function latenessMs(r: Pick<Run, 'scheduled_at' | 'started_at'>): number | null {
  if (!r.scheduled_at || !r.started_at) return null;
  return Date.parse(r.started_at) - Date.parse(r.scheduled_at);
}

/** jobLabel names a run's job: its name, or "#id" once the job is deleted. */
export const jobLabel = (r: Pick<Run, 'job_id' | 'job_name'>): string => r.job_name || `#${r.job_id}`;
