import { render, screen, waitFor } from '@testing-library/react';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { App } from './App';
import type { SessionEnd } from './auth';
import type { Me } from './services/auth';
import { withQuery, LocationProbe } from './test-utils';
import { MemoryRouter } from 'react-router';

const auth = vi.hoisted(() => ({ me: null as Me | null, ended: null as SessionEnd, logout: vi.fn() }));
vi.mock('./auth', () => ({ useAuth: () => ({ ...auth, ready: true, login: vi.fn(), refresh: vi.fn() }) }));

const user = (role: Me['role']): Me => ({ id: 1, username: 'u', role, groups: [1], disabled: false });

function renderAt(url: string) {
  return render(withQuery(<MemoryRouter initialEntries={[url]}><App /><LocationProbe /></MemoryRouter>));
}
const location = () => screen.getByTestId('location').textContent;

describe('App routing around the login', () => {
  beforeEach(() => {
    // Pages that load behind the routes get a 404 from this "server".
    vi.stubGlobal('fetch', vi.fn(() => Promise.resolve(new Response('{"error":"not found"}', { status: 404 }))));
  });
  afterEach(() => {
    vi.unstubAllGlobals();
    auth.me = null;
    auth.ended = null;
  });

  it('goes on to ?next= once signed in', async () => {
    auth.me = user('admin');
    renderAt('/login?next=' + encodeURIComponent('/runs?status=failed'));
    await waitFor(() => expect(location()).toBe('/runs?status=failed'), { timeout: 10_000 });
  });

  it('does not follow a ?next= off the site', async () => {
    auth.me = user('admin');
    renderAt('/login?next=' + encodeURIComponent('//evil.example/x'));
    await waitFor(() => expect(location()).toBe('/'), { timeout: 10_000 });
  });

  it('sends a request without a session to the login with ?next=, saying when the session expired', async () => {
    auth.ended = 'expired';
    renderAt('/jobs/3?tab=versions');
    await waitFor(() => expect(location()).toBe('/login?next=' + encodeURIComponent('/jobs/3?tab=versions')));
    expect(await screen.findByTestId('session-expired')).toHaveTextContent('Your session expired. Sign in again.');
  });

  it('after a logout goes to a plain login page', async () => {
    auth.ended = 'logout';
    renderAt('/jobs/3');
    await waitFor(() => expect(location()).toBe('/login'));
    expect(screen.queryByTestId('session-expired')).toBeNull();
  });
});

describe('what each role is offered', () => {
  beforeEach(() => {
    vi.stubGlobal('fetch', vi.fn(() => Promise.resolve(new Response('{"items":[],"total":0}', { status: 200 }))));
  });
  afterEach(() => {
    vi.unstubAllGlobals();
    auth.me = null;
  });
  const menu = () => [...document.querySelectorAll('nav[aria-label=main] .ant-menu-item')].map((e) => e.textContent);

  it('a viewer: no Nodes, Alerts or Cluster in the menu, and those pages and the job form forbidden', async () => {
    auth.me = user('viewer');
    for (const path of ['/nodes', '/nodes/abc', '/alerts', '/cluster', '/jobs/new', '/jobs/3/edit', '/jobs/3/copy', '/users', '/alerts/settings']) {
      const r = renderAt(path);
      expect(await screen.findByTestId('forbidden')).toBeInTheDocument();
      expect(menu()).toEqual(['Dashboard', 'Jobs', 'Runs', 'Groups', 'API tokens']);
      r.unmount();
    }
  });

  it('an operator: nodes, alerts and the cluster, but no users or audit log', async () => {
    auth.me = user('operator');
    renderAt('/cluster');
    await waitFor(() => expect(menu()).toEqual(['Dashboard', 'Jobs', 'Runs', 'Nodes', 'Groups', 'Alerts', 'API tokens', 'Cluster']));
    expect(screen.queryByTestId('forbidden')).toBeNull();
    // One <main> landmark (antd's Layout.Content), not one inside another.
    expect(document.querySelectorAll('main')).toHaveLength(1);
  });

  it('an operator: the alerts but not the alert settings', async () => {
    auth.me = user('operator');
    renderAt('/alerts/settings');
    expect(await screen.findByTestId('forbidden')).toBeInTheDocument();
    await waitFor(() => expect(menu()).toContain('Alerts'));
  });
});
