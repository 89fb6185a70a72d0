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

/** Every event kind the server knows (server/alert/event.go Kinds): webhooks may be limited to some. */
export const allAlertKinds = [
  'run.failed', 'run.timeout', 'run.lost', 'run.killed', 'schedule.missed', 'job.recovered', 'node.down', 'cluster.no_leader', 'security', 'test',
];
/** Why an event was recorded but not delivered (server/alert/service.go reason*). */
export const suppressionReasons = ['throttled', 'failure_episode', 'late'];

export interface AlertTestResult {
  channel: string;
  target: string;
  ok: boolean;
  error?: string;
}

export const testAlert = (body: { to?: string[]; webhook?: string } = {}) =>
  api<{ results: AlertTestResult[] }>('/alerts/test', { method: 'POST', body });

export interface SmtpSettings {
  host: string;
  /** 0 = the default of the security mode (587, 465, 25) */
  port: number;
  security: '' | 'starttls' | 'tls' | 'none';
  username: string;
  /** write-only: never returned; empty on PUT keeps the stored one (when the username is unchanged) */
  password?: string;
  from: string;
}

export interface WebhookSettings {
  name: string;
  url: string;
  /** write-only: never returned; empty on PUT keeps the stored secret of the webhook of this name */
  secret?: string;
  group: string;
  format: string;
  kinds: string[] | null;
}

/** The body of PUT /api/v1/settings/alerting (the server refuses unknown fields). */
export interface AlertSettings {
  smtp: SmtpSettings;
  webhooks: WebhookSettings[] | null;
  group_emails: Record<string, string[]> | null;
  admin_emails: string[] | null;
  /** Go durations ("10m0s"); "" = the default */
  throttle_window: string;
  missed_threshold: string;
  no_leader_after: string;
  language: string;
  public_url: string;
}

/** GET/PUT /api/v1/settings/alerting reply: the effective settings without secrets. */
export interface AlertSettingsReply extends AlertSettings {
  password_set: boolean;
  webhook_secrets_set: string[] | null;
  /** top-level fields set by server flags/env: "smtp", "webhooks", "group_emails", ... (they override what PUT stores) */
  from_flags: string[] | null;
}

export const getAlertSettings = () => api<AlertSettingsReply>('/settings/alerting');
export const putAlertSettings = (s: AlertSettings) => api<AlertSettingsReply>('/settings/alerting', { method: 'PUT', body: s });
