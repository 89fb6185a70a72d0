// Groups, users, API tokens and the audit log.
import { api, type Page } from './http';
import type { NodeInfo } from './cluster';
import type { Role } from './auth';

export interface Group {
  id: number;
  appname: string;
  title: string;
  address_type: 'auto' | 'manual';
  addresses: string[] | null;
  nodes: NodeInfo[] | null;
  created_at: string;
  updated_at: string;
}
export type GroupInput = Pick<Group, 'appname' | 'title' | 'address_type'> & { addresses: string[] };

export const listGroups = (q: { appname?: string; page?: number; page_size?: number } = {}) =>
  api<Page<Group>>('/groups', { query: { page_size: 500, ...q } });
export const createGroup = (g: GroupInput) => api<Group>('/groups', { method: 'POST', body: g });
export const updateGroup = (id: number, g: GroupInput) => api<Group>(`/groups/${id}`, { method: 'PUT', body: g });
export const deleteGroup = (id: number) => api<void>(`/groups/${id}`, { method: 'DELETE' });

export interface User {
  id: number;
  username: string;
  role: Role;
  groups: number[] | null;
  disabled: boolean;
  created_at: string;
  updated_at: string;
}
export const listUsers = (q: { page?: number; page_size?: number } = {}) =>
  api<Page<User> | { items: User[] }>('/users', { query: { page_size: 200, ...q } });
export const createUser = (u: { username: string; password: string; role: Role; groups: number[] }) =>
  api<User>('/users', { method: 'POST', body: u });
export const patchUser = (id: number, u: Partial<{ role: Role; disabled: boolean }>) =>
  api<User>(`/users/${id}`, { method: 'PATCH', body: u });
export const deleteUser = (id: number) => api<void>(`/users/${id}`, { method: 'DELETE' });
export const setUserPassword = (id: number, password: string) =>
  api<void>(`/users/${id}/password`, { method: 'POST', body: { password } });
export const setUserGroups = (id: number, groups: number[]) =>
  api<unknown>(`/users/${id}/groups`, { method: 'PUT', body: { groups } });

export interface ApiToken {
  id: number;
  name: string;
  /** The user the token belongs to (an admin sees everyone's tokens). */
  user: string;
  role: Role;
  groups: number[] | null;
  created_at: string;
  expires_at: string | null;
  /** When a request last authenticated with it (to within a minute); null: never. */
  last_used_at: string | null;
  /** Only in the reply of createToken: the one time the secret is shown. */
  secret?: string;
}
export interface TokenInput {
  name: string;
  /** At most the caller's role. */
  role: Role;
  /** Among the caller's groups; an admin-role token sees every group. */
  groups: number[];
  /** RFC 3339, in the future; absent: never expires. */
  expires_at?: string;
}
export const listTokens = (q: { page?: number; page_size?: number } = {}) =>
  api<Page<ApiToken>>('/tokens', { query: { ...q } });
export const createToken = (t: TokenInput) => api<ApiToken>('/tokens', { method: 'POST', body: t });
export const deleteToken = (id: number) => api<void>(`/tokens/${id}`, { method: 'DELETE' });

export interface AuditEntry {
  id: number;
  at: string;
  user: string;
  address: string;
  action: string;
  object_type: string;
  object_id: string;
  diff: unknown;
}
export interface AuditFilter {
  user?: string;
  object_type?: string;
  object_id?: string;
  from?: string;
  to?: string;
  page?: number;
  page_size?: number;
}
export const listAudit = (f: AuditFilter) => api<Page<AuditEntry>>('/audit', { query: { ...f } });
