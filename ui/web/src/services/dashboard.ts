// The dashboard's queries, shared by the page and by the session check,
// which starts them on a load of / as soon as it knows the user, while the
// page's first render is still running.
import { queryOptions, type QueryClient } from '@tanstack/react-query';
import { canSeeCluster, canSeeNodes, type Me } from './auth';
import { getCluster, listNodes } from './cluster';
import { listRuns } from './runs';
import { runsPerDay, statsSummary } from './stats';

export const dashboardRefresh = 10_000;

export const dashboardQueries = {
  // One request for the figures (jobs, runs today by status, today's bar of the chart).
  summary: () => queryOptions({ queryKey: ['dash', 'summary'], queryFn: () => statsSummary(), refetchInterval: dashboardRefresh }),
  nodes: (allowed: boolean) => queryOptions({ queryKey: ['nodes'], queryFn: listNodes, refetchInterval: dashboardRefresh, enabled: allowed }),
  perDay: (days: number) => queryOptions({ queryKey: ['dash', 'perDay', days], queryFn: () => runsPerDay(days), refetchInterval: 60_000 }),
  recent: () => queryOptions({ queryKey: ['dash', 'recent'], queryFn: () => listRuns({ page_size: 200 }), refetchInterval: dashboardRefresh }),
  cluster: (allowed: boolean) =>
    queryOptions({ queryKey: ['cluster'], queryFn: getCluster, refetchInterval: dashboardRefresh, enabled: allowed, retry: false }),
};

/** The chart's first range (days). */
export const firstRange = 7;

/**
 * prefetchDashboard starts the dashboard's requests: the nodes' for those
 * who may read nodes (not a viewer), the cluster's for those who may read
 * the cluster (cluster:read: operators and admins).
 */
export function prefetchDashboard(qc: QueryClient, m: Me): void {
  void qc.prefetchQuery(dashboardQueries.summary());
  if (canSeeNodes(m)) void qc.prefetchQuery(dashboardQueries.nodes(true));
  void qc.prefetchQuery(dashboardQueries.perDay(firstRange));
  void qc.prefetchQuery(dashboardQueries.recent());
  if (canSeeCluster(m)) void qc.prefetchQuery(dashboardQueries.cluster(true));
}
