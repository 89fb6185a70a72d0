import { fireEvent, render, screen, waitFor, within } from '@testing-library/react';
import userEvent from '@testing-library/user-event';
import { beforeEach, describe, expect, it, vi } from 'vitest';
import type { Me } from '../services/auth';
import { withPage } from '../test-utils';
import Jobs from './Jobs';

const auth = vi.hoisted(() => ({ me: null as unknown }));
vi.mock('../auth', () => ({ useAuth: () => ({ me: auth.me }) }));
const ops: Me = { id: 1, username: 'ops', role: 'operator', groups: [1], disabled: false };
vi.mock('../services/admin', () => ({ listGroups: () => Promise.resolve({ items: [] }) }));
vi.mock('../services/cluster', () => ({ listHandlers: () => Promise.resolve({ items: [] }) }));
const jobs = vi.hoisted(() => ({ listJobs: vi.fn(), deleteJob: vi.fn(), setEnabled: vi.fn(), triggerJob: vi.fn() }));
vi.mock('../services/jobs', () => jobs);

const job = (id: number) => ({ id, name: `job-${id}`, group: 'default', handler: 'shell', schedule_type: 'cron', schedule: '0 3 * * *', enabled: true, last_run: null, next_fire_at: null });

describe('Jobs', () => {
  beforeEach(() => {
    vi.clearAllMocks();
    auth.me = ops;
    jobs.listJobs.mockImplementation((f: { page: number }) => Promise.resolve({ items: [job(f.page * 10 + 1), job(f.page * 10 + 2)], total: 45, page: f.page, page_size: 20 }));
    jobs.triggerJob.mockResolvedValue({});
  });

  it('selects rows on screen only: another page drops the selection; counts are in words', async () => {
    render(withPage(<Jobs />, '/jobs'));
    await screen.findByText('job-11');
    const row = screen.getByText('job-11').closest('tr')!;
    await userEvent.click(within(row).getByRole('checkbox'));
    const bar = await screen.findByTestId('bulk-bar');
    expect(bar).toHaveTextContent('1 selected');
    await userEvent.click(within(bar).getByRole('button', { name: 'Delete' }));
    expect(await screen.findByText('Delete 1 job and its runs?')).toBeInTheDocument();
    await userEvent.click(within(bar).getByRole('button', { name: 'Run now' }));
    expect(await screen.findByText('Done: 1 job')).toBeInTheDocument();
    expect(jobs.triggerJob).toHaveBeenCalledWith(11);
    // Select again, then go to page 2: the selection is gone with the rows.
    await userEvent.click(within(screen.getByText('job-11').closest('tr')!).getByRole('checkbox'));
    await screen.findByTestId('bulk-bar');
    fireEvent.click(screen.getByTitle('2'));
    await screen.findByText('job-21');
    await waitFor(() => expect(screen.queryByTestId('bulk-bar')).toBeNull());
    expect(jobs.deleteJob).not.toHaveBeenCalled();
  });

  it('labels the sort orders in words', async () => {
    render(withPage(<Jobs />, '/jobs'));
    await screen.findByText('job-11');
    fireEvent.mouseDown(screen.getByLabelText('Sort'));
    await waitFor(() => expect(document.querySelectorAll('.ant-select-item-option').length).toBe(6));
    expect([...document.querySelectorAll('.ant-select-item-option')].map((o) => o.textContent)).toEqual([
      'ID, oldest first', 'ID, newest first', 'Name, A to Z', 'Name, Z to A', 'Least recently updated', 'Most recently updated',
    ]);
  });

  it('tells a user in no group why the list is empty', async () => {
    const first = render(withPage(<Jobs />, '/jobs'));
    await screen.findByText('job-11');
    expect(screen.queryByTestId('no-groups')).toBeNull();
    first.unmount();

    auth.me = { ...ops, role: 'viewer', groups: [] } satisfies Me;
    jobs.listJobs.mockResolvedValue({ items: [], total: 0, page: 1, page_size: 20 });
    render(withPage(<Jobs />, '/jobs'));
    expect(await screen.findByTestId('no-groups')).toHaveTextContent('You are in no group yet');
  });
});
