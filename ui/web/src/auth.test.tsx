import { QueryClient, QueryClientProvider } from '@tanstack/react-query';
import { act, render, screen, waitFor } from '@testing-library/react';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { AuthProvider, useAuth } from './auth';
import { api } from './services/http';

function reply(status: number, body?: unknown): Response {
  return new Response(body === undefined ? null : JSON.stringify(body), { status, headers: { 'Content-Type': 'application/json' } });
}

let state: ReturnType<typeof useAuth>;
function Probe() {
  state = useAuth();
  return <div data-testid="state">{`${state.me?.username ?? 'none'} ${state.ended ?? '-'}`}</div>;
}
function renderAuth() {
  render(<QueryClientProvider client={new QueryClient()}><AuthProvider><Probe /></AuthProvider></QueryClientProvider>);
}

describe('AuthProvider', () => {
  const fetchMock = vi.fn();
  beforeEach(() => vi.stubGlobal('fetch', fetchMock));
  afterEach(() => {
    fetchMock.mockReset();
    vi.unstubAllGlobals();
  });

  it('ends the session as expired on a 401 inside it, and as a logout on a logout', async () => {
    fetchMock.mockImplementation((url: string) => Promise.resolve(
      url === '/api/v1/auth/me' ? reply(200, { id: 1, username: 'ann', role: 'operator', groups: [], csrf_token: 'c' })
        : url === '/api/v1/auth/logout' ? reply(204)
          : url.startsWith('/api/v1/jobs') ? reply(401, { error: 'session expired' }) : reply(200, { items: [] })));
    renderAuth();
    await waitFor(() => expect(screen.getByTestId('state')).toHaveTextContent('ann -'));
    await act(() => api('/jobs').catch(() => undefined));
    expect(screen.getByTestId('state')).toHaveTextContent('none expired');
    await act(() => state.refresh());
    await act(() => state.logout());
    expect(screen.getByTestId('state')).toHaveTextContent('none logout');
  });

  it('refresh reads the user again', async () => {
    let role = 'admin';
    fetchMock.mockImplementation(() => Promise.resolve(reply(200, { id: 1, username: 'ann', role, groups: [], csrf_token: 'c' })));
    renderAuth();
    await waitFor(() => expect(state.me?.role).toBe('admin'));
    role = 'viewer';
    await act(() => state.refresh());
    expect(state.me?.role).toBe('viewer');
  });
});
