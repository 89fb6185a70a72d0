import { api, isApiError, setCsrfToken } from './http';

export type Role = 'admin' | 'operator' | 'viewer';

export interface Me {
  id: number;
  username: string;
  role: Role;
  groups: number[];
  disabled: boolean;
}

interface MeWire extends Partial<Me> {
  csrf_token?: string;
}

interface LoginWire {
  csrf_token: string;
  user?: MeWire;
}

function toMe(w: MeWire, fallbackName = ''): Me {
  return {
    id: w.id ?? 0,
    username: w.username ?? fallbackName,
    role: (w.role as Role | undefined) ?? 'viewer',
    groups: w.groups ?? [],
    disabled: w.disabled ?? false,
  };
}

/**
 * me returns the logged-in user from the session cookie, or null when there
 * is no session. It also restores the session's CSRF token, which lives in
 * memory only and so is lost on every page load.
 */
export async function me(): Promise<Me | null> {
  try {
    const w = await api<MeWire>('/auth/me', { quiet401: true });
    setCsrfToken(w.csrf_token || null);
    return toMe(w);
  } catch (e) {
    if (isApiError(e, 401) || isApiError(e, 404)) {
      setCsrfToken(null);
      return null;
    }
    throw e;
  }
}

/**
 * login starts a cookie session (the server sets the HttpOnly cronix_session
 * cookie) and keeps its CSRF token in memory. The session token in the reply
 * is not kept: the cookie is the only credential the browser uses.
 */
export async function login(username: string, password: string): Promise<Me> {
  const w = await api<LoginWire>('/auth/login', { method: 'POST', body: { username, password }, quiet401: true });
  setCsrfToken(w.csrf_token || null);
  if (w.user) return toMe(w.user, username);
  const u = await me();
  if (!u) throw new Error('login did not start a session');
  return u;
}

export async function logout(): Promise<void> {
  try {
    await api('/auth/logout', { method: 'POST', quiet401: true });
  } catch (e) {
    if (!isApiError(e, 404) && !isApiError(e, 401)) throw e;
  } finally {
    setCsrfToken(null);
  }
}

export async function changePassword(oldPassword: string, newPassword: string): Promise<void> {
  await api('/auth/password', { method: 'POST', body: { old_password: oldPassword, new_password: newPassword } });
}

export const canWrite = (m: Me | null): boolean => m?.role === 'admin' || m?.role === 'operator';
export const isAdmin = (m: Me | null): boolean => m?.role === 'admin';
/** Operators and admins may read nodes (nodes:read); a viewer may not. */
export const canSeeNodes = (m: Me | null): boolean => m?.role === 'admin' || m?.role === 'operator';
/** Operators and admins read the cluster status and the alerts (cluster:read); a viewer may not. */
export const canSeeCluster = (m: Me | null): boolean => m?.role === 'admin' || m?.role === 'operator';

/** The roles, most powerful first. */
export const roles: Role[] = ['admin', 'operator', 'viewer'];
/** rolesUpTo lists the roles at or below role (what a token of its user may have). */
export const rolesUpTo = (role: Role): Role[] => roles.slice(Math.max(0, roles.indexOf(role)));
