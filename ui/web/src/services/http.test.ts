import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { api, ApiError, buildUrl, setCsrfToken, setUnauthorizedHandler } from './http';

function reply(status: number, body?: unknown): Response {
  return new Response(body === undefined ? null : JSON.stringify(body), {
    status,
    headers: { 'Content-Type': 'application/json' },
  });
}

describe('http', () => {
  const fetchMock = vi.fn();
  beforeEach(() => {
    vi.stubGlobal('fetch', fetchMock);
    setCsrfToken(null);
    setUnauthorizedHandler(null);
  });
  afterEach(() => {
    fetchMock.mockReset();
    vi.unstubAllGlobals();
  });

  it('builds URLs without empty query values', () => {
    expect(buildUrl('/jobs', { page: 2, q: '', group: undefined, enabled: false })).toBe(
      '/api/v1/jobs?page=2&enabled=false',
    );
  });

  it('sends the CSRF token on writes only, and the cookie', async () => {
    setCsrfToken('c5rf');
    fetchMock.mockImplementation(() => Promise.resolve(reply(200, { ok: true })));
    await api('/jobs');
    await api('/jobs', { method: 'POST', body: { name: 'x' } });
    const [, getInit] = fetchMock.mock.calls[0] as [string, RequestInit];
    const [, postInit] = fetchMock.mock.calls[1] as [string, RequestInit];
    expect((getInit.headers as Headers).get('X-CSRF-Token')).toBeNull();
    expect((postInit.headers as Headers).get('X-CSRF-Token')).toBe('c5rf');
    expect(postInit.credentials).toBe('same-origin');
    expect(getInit.credentials).toBe('same-origin');
    expect((getInit.headers as Headers).get('Authorization')).toBeNull();
    expect((postInit.headers as Headers).get('Authorization')).toBeNull();
    expect(postInit.body).toBe('{"name":"x"}');
  });

  it('turns an error reply into ApiError with fields', async () => {
    fetchMock.mockResolvedValue(reply(400, { error: 'invalid job', fields: { schedule: 'bad cron' } }));
    const err = await api('/jobs', { method: 'POST', body: {} }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ApiError);
    expect((err as ApiError).status).toBe(400);
    expect((err as ApiError).message).toBe('invalid job');
    expect((err as ApiError).fields).toEqual({ schedule: 'bad cron' });
  });

  it('reports 401 to the unauthorized handler unless quiet', async () => {
    const handler = vi.fn();
    setUnauthorizedHandler(handler);
    fetchMock.mockImplementation(() => Promise.resolve(reply(401, { error: 'unauthorized' })));
    await expect(api('/jobs')).rejects.toThrow('unauthorized');
    expect(handler).toHaveBeenCalledTimes(1);
    await expect(api('/auth/me', { quiet401: true })).rejects.toThrow();
    expect(handler).toHaveBeenCalledTimes(1);
  });

  it('returns undefined for 204', async () => {
    fetchMock.mockResolvedValue(new Response(null, { status: 204 }));
    await expect(api('/jobs/1', { method: 'DELETE' })).resolves.toBeUndefined();
  });
});
