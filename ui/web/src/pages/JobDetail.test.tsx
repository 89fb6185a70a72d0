import { render, screen, waitFor, within } from '@testing-library/react';
import userEvent from '@testing-library/user-event';
import { beforeEach, describe, expect, it, vi } from 'vitest';
import type { Me } from '../services/auth';
import { ApiError } from '../services/http';
import { withPage } from '../test-utils';
import i18n from '../i18n';
import JobDetail, { RunsTable } from './JobDetail';

vi.mock('../auth', () => ({ useAuth: () => ({ me: { id: 1, username: 'ops', role: 'operator', groups: [1], disabled: false } satisfies Me }) }));
vi.mock('../services/cluster', () => ({
  listNodes: () => Promise.resolve({ items: [] }),
  listHandlers: () => Promise.resolve({ items: [{ name: 'shell', version: '1', description: '', nodes: 1,
    params_schema: { type: 'object', properties: { script: { type: 'string', title: 'Script', minLength: 1 } } } }] }),
}));
vi.mock('../services/runs', () => ({ runStatuses: ['success'], listJobRuns: () => Promise.resolve({ items: [], total: 0 }) }));
const jobs = vi.hoisted(() => ({ getJob: vi.fn(), deleteJob: vi.fn(), triggerJob: vi.fn(), setEnabled: vi.fn(), listVersions: vi.fn(), restoreVersion: vi.fn(), versionText: vi.fn() }));
vi.mock('../services/jobs', () => jobs);

const job = { id: 7, name: 'backup', revision: 2, group: 'default', schedule_type: 'cron', schedule: '0 3 * * *', handler: 'shell', params: { script: 'echo' }, enabled: true };

describe('JobDetail', () => {
  beforeEach(() => {
    vi.clearAllMocks();
    jobs.getJob.mockResolvedValue(job);
  });

  it('deleting the job says so and goes back to the list', async () => {
    jobs.deleteJob.mockResolvedValue(undefined);
    render(withPage(<JobDetail />, '/jobs/7', '/jobs/:id'));
    await userEvent.click(await screen.findByTestId('delete-job'));
    await userEvent.click(await screen.findByRole('button', { name: 'OK' }));
    expect(await screen.findByText('Deleted job backup')).toBeInTheDocument();
    await waitFor(() => expect(screen.getByTestId('location')).toHaveTextContent(/^\/jobs$/));
    expect(jobs.deleteJob).toHaveBeenCalledWith(7);
  });

  it('"Run now" names the parameter a schema error is about', async () => {
    jobs.triggerJob.mockRejectedValue(new ApiError(400, 'invalid trigger',
      { params: "params do not match the shell handler's schema (version 1): /script: minLength: got 0, want 1" }));
    render(withPage(<JobDetail />, '/jobs/7', '/jobs/:id'));
    await userEvent.click(await screen.findByTestId('trigger-job'));
    const dialog = await screen.findByRole('dialog');
    await userEvent.click(within(dialog).getByTestId('trigger-ok'));
    await waitFor(() => expect(within(dialog).getByTestId('trigger-error')).toHaveTextContent(/^Script: minLength: got 0, want 1$/));
  });

  it('/jobs/abc is not found, without asking the API for job NaN', async () => {
    render(withPage(<JobDetail />, '/jobs/abc', '/jobs/:id'));
    expect(await screen.findByText('Not found (or outside your groups).')).toBeInTheDocument();
    expect(jobs.getJob).not.toHaveBeenCalled();
  });

  it('names the run triggers in the language of the page', async () => {
    await i18n.changeLanguage('zh-CN');
    const run = { id: 1, job_id: 7, trigger: 'manual', status: 'success', scheduled_at: null, started_at: null, finished_at: null, node: '', exit_code: 0 };
    render(withPage(<RunsTable runs={[run as never, { ...run, id: 2, trigger: 'schedule' } as never]} loading={false} total={2} page={1} pageSize={20} onPage={() => {}} />));
    expect(await screen.findByText('手动')).toBeInTheDocument();
    expect(screen.getByText('定时调度')).toBeInTheDocument();
    await i18n.changeLanguage('en');
  });
});
