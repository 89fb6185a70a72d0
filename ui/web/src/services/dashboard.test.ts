import { QueryClient } from '@tanstack/react-query';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import type { Me } from './auth';
import { prefetchDashboard } from './dashboard';

describe('prefetchDashboard', () => {
  const fetchMock = vi.fn();
  beforeEach(() => {
    vi.stubGlobal('fetch', fetchMock);
    fetchMock.mockImplementation(() =>
      Promise.resolve(new Response(JSON.stringify({ items: [], total: 0, page: 1, page_size: 1 }), { status: 200, headers: { 'Content-Type': 'application/json' } })));
  });
  afterEach(() => {
    fetchMock.mockReset();
    vi.unstubAllGlobals();
  });
  const paths = () => fetchMock.mock.calls.map(([url]) => new URL(url as string, 'http://x').pathname).sort();
  const user = (role: Me['role']): Me => ({ id: 1, username: 'u', role, groups: [], disabled: false });

  it("starts the admin's five dashboard requests at once", () => {
    prefetchDashboard(new QueryClient(), user('admin'));
    expect(paths()).toEqual(['/api/v1/cluster', '/api/v1/nodes', '/api/v1/reports/daily', '/api/v1/runs', '/api/v1/stats/summary']);
  });

  it('asks nothing a viewer may not read (nodes, cluster)', () => {
    prefetchDashboard(new QueryClient(), user('viewer'));
    expect(paths()).toEqual(['/api/v1/reports/daily', '/api/v1/runs', '/api/v1/stats/summary']);
  });

  it('gives an operator the nodes and the cluster (nodes:read, cluster:read)', () => {
    prefetchDashboard(new QueryClient(), user('operator'));
    expect(paths()).toEqual(['/api/v1/cluster', '/api/v1/nodes', '/api/v1/reports/daily', '/api/v1/runs', '/api/v1/stats/summary']);
  });
});
