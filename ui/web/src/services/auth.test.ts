import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { login, logout, me } from './auth';
import { api, getCsrfToken, setCsrfToken } from './http';

function reply(status: number, body?: unknown): Response {
  return new Response(body === undefined ? null : JSON.stringify(body), {
    status,
    headers: { 'Content-Type': 'application/json' },
  });
}

const user = { id: 1, username: 'admin', role: 'admin', groups: [], disabled: false };

describe('auth (cookie session + CSRF)', () => {
  const fetchMock = vi.fn();
  beforeEach(() => {
    vi.stubGlobal('fetch', fetchMock);
    setCsrfToken(null);
    localStorage.clear();
    sessionStorage.clear();
  });
  afterEach(() => {
    fetchMock.mockReset();
    vi.unstubAllGlobals();
  });

  it('login keeps the CSRF token in memory only and never sends a bearer token', async () => {
    fetchMock.mockImplementation((url: string) =>
      Promise.resolve(
        url === '/api/v1/auth/login'
          ? reply(200, { token: 'sess-secret', expires_at: '2026-01-01T00:00:00Z', csrf_token: 'c1', user })
          : reply(201, { id: 7 }),
      ),
    );
    const m = await login('admin', 'pw');
    expect(m.username).toBe('admin');
    expect(m.role).toBe('admin');
    expect(getCsrfToken()).toBe('c1');

    await api('/jobs', { method: 'POST', body: { name: 'x' } });
    const [, init] = fetchMock.mock.calls[1] as [string, RequestInit];
    const h = init.headers as Headers;
    expect(h.get('X-CSRF-Token')).toBe('c1');
    expect(h.get('Authorization')).toBeNull();
    expect(init.credentials).toBe('same-origin');

    // Nothing of the session is written to web storage.
    expect(localStorage.length).toBe(0);
    expect(sessionStorage.length).toBe(0);
  });

  it('me() after a reload restores the CSRF token from /auth/me', async () => {
    // A reload: the module state is gone, only the HttpOnly cookie remains.
    expect(getCsrfToken()).toBeNull();
    fetchMock.mockImplementation((url: string) =>
      Promise.resolve(url === '/api/v1/auth/me' ? reply(200, { ...user, role: 'operator', csrf_token: 'c2' }) : reply(204)),
    );
    const m = await me();
    expect(m?.role).toBe('operator');
    expect(getCsrfToken()).toBe('c2');

    await api('/jobs/1', { method: 'DELETE' });
    const [, init] = fetchMock.mock.calls[1] as [string, RequestInit];
    expect((init.headers as Headers).get('X-CSRF-Token')).toBe('c2');
  });

  it('me() without a session is null and forgets any CSRF token', async () => {
    setCsrfToken('stale');
    fetchMock.mockResolvedValue(reply(401, { error: 'unauthorized' }));
    await expect(me()).resolves.toBeNull();
    expect(getCsrfToken()).toBeNull();
  });

  it('logout sends the CSRF token and then forgets it', async () => {
    setCsrfToken('c3');
    fetchMock.mockResolvedValue(new Response(null, { status: 204 }));
    await logout();
    const [url, init] = fetchMock.mock.calls[0] as [string, RequestInit];
    expect(url).toBe('/api/v1/auth/logout');
    expect((init.headers as Headers).get('X-CSRF-Token')).toBe('c3');
    expect(getCsrfToken()).toBeNull();
  });
});
