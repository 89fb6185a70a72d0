import { api, isApiError, setBearerToken, setCsrfToken } from './http';

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
  token: string;
  expires_at: string;
  csrf_token?: string;
  user?: MeWire;
}

function toMe(w: MeWire, fallbackName = ''): Me {
  return {
    id: w.id ?? 0,
    username: w.username ?? fallbackName,
    role: (w.role as Role | undefined) ?? 'admin',
    groups: w.groups ?? [],
    disabled: w.disabled ?? false,
  };
}

/**
 * me returns the logged-in user from the session cookie, or null when there
 * is no session. It also picks up the session's CSRF token.
 */
export async function me(): Promise<Me | null> {
  try {
    const w = await api<MeWire>('/auth/me', { quiet401: true });
    if (w.csrf_token) setCsrfToken(w.csrf_token);
    return toMe(w);
  } catch (e) {
    if (isApiError(e, 401) || isApiError(e, 404)) return null;
    throw e;
  }
}

export async function login(username: string, password: string): Promise<Me> {
  const w = await api<LoginWire>('/auth/login', { method: 'POST', body: { username, password }, quiet401: true });
  if (w.csrf_token) {
    // Cookie session: the token in the reply is not needed by the browser.
    setCsrfToken(w.csrf_token);
    setBearerToken(null);
    if (w.user) return toMe(w.user, username);
    const u = await me();
    if (u) return u;
  }
  // A server without cookie sessions: keep its bearer token in memory only.
  setBearerToken(w.token);
  return toMe(w.user ?? {}, username);
}

export async function logout(): Promise<void> {
  try {
    await api('/auth/logout', { method: 'POST', quiet401: true });
  } catch (e) {
    if (!isApiError(e, 404) && !isApiError(e, 401)) throw e;
  } finally {
    setCsrfToken(null);
    setBearerToken(null);
  }
}

export async function changePassword(oldPassword: string, newPassword: string): Promise<void> {
  await api('/auth/password', { method: 'POST', body: { old_password: oldPassword, new_password: newPassword } });
}

export const canWrite = (m: Me | null): boolean => m?.role === 'admin' || m?.role === 'operator';
export const isAdmin = (m: Me | null): boolean => m?.role === 'admin';
