import { api, type Page } from './http';

export interface AlertDelivery {
  id: number;
  channel: string;
  target: string;
  recipients: string[] | null;
  status: string;
  attempts: number;
  last_error: string;
  next_attempt_at: string | null;
  sent_at: string | null;
}

export interface AlertEvent {
  id: number;
  key: string;
  kind: string;
  job_id: number;
  job_name: string;
  group: string;
  run_id: number;
  fire_id: string;
  node: string;
  run_status: string;
  exit_code: number | null;
  message: string;
  output_tail: string;
  occurred_at: string;
  suppressed: boolean;
  suppressed_reason: string;
  suppressed_count: number;
  created_at: string;
  status: string;
  deliveries: AlertDelivery[] | null;
}

export const alertKinds = ['run.failed', 'run.timeout', 'run.lost', 'schedule.missed', 'job.recovered', 'cluster.no_leader', 'security'];
export const alertStatuses = ['pending', 'sent', 'failed', 'suppressed'];

export interface AlertFilter {
  kind?: string;
  job_id?: number;
  status?: string;
  page?: number;
  page_size?: number;
}

export const listAlerts = (f: AlertFilter) => api<Page<AlertEvent>>('/alerts', { query: { ...f } });
export const testAlert = () =>
  api<{ results: { channel: string; target: string; ok: boolean; error?: string }[] }>('/alerts/test', { method: 'POST', body: {} });
