import { api } from './http';

export interface PluginInfo {
  name: string;
  version: string;
}

export interface NodeInfo {
  uuid: string;
  group: string;
  address: string;
  status: string;
  plugins: PluginInfo[] | null;
  version: string;
  started: string | null;
  [extra: string]: unknown;
}

export interface SystemInfo {
  node: string;
  hostname: string;
  os: string;
  platform: string;
  uptime_seconds: number;
  collected_at: string;
  cpu_count: number;
  cpu_percent: number;
  memory_total: number;
  memory_used: number;
  memory_percent: number;
  load1: number;
  load5: number;
  load15: number;
  disks: { path: string; total: number; used: number; free: number; used_percent: number }[] | null;
  errors?: string[];
}

export interface PluginStatus {
  name: string;
  path: string;
  handler: string;
  version?: string;
  protocol?: number;
  state: 'loaded' | 'refused' | 'backoff' | 'stopped' | string;
  reason?: string;
  message?: string;
  restarts: number;
  retry_at?: string;
}

export interface NodeDetail extends NodeInfo {
  plugin_status?: PluginStatus[] | null;
}

export const listNodes = () => api<{ items: NodeInfo[] }>('/nodes');
export const getNode = (uuid: string) => api<NodeDetail>(`/nodes/${encodeURIComponent(uuid)}`);
export const nodeSystem = (uuid: string) => api<SystemInfo>(`/nodes/${encodeURIComponent(uuid)}/system`);

export interface HandlerInfo {
  name: string;
  version: string;
  description: string;
  params_schema: Record<string, unknown>;
  nodes: number;
}
export const listHandlers = () => api<{ items: HandlerInfo[] }>('/handlers');

export interface Replica {
  id: string;
  address: string;
  suffrage: string;
  url: string;
  alive: boolean;
}

export interface ClusterStatus {
  this: string;
  leader: { id: string; address: string };
  term: number;
  state: string;
  replicas: Replica[];
  raft: { last_contact_ms: number; commit_index: number; applied_index: number; fsm_pending: number };
}
export const getCluster = () => api<ClusterStatus>('/cluster');

export interface Preview {
  schedule_type: string;
  schedule: string;
  timezone: string;
  next: string[];
}
export const previewSchedule = (q: { schedule_type: string; schedule: string; timezone: string; n: number }, signal?: AbortSignal) =>
  api<Preview>('/schedules/preview', { query: q, signal });
