import { fireEvent, render, screen, waitFor } from '@testing-library/react';
import userEvent from '@testing-library/user-event';
import { beforeEach, describe, expect, it, vi } from 'vitest';
import { ApiError } from '../services/http';
import { withPage } from '../test-utils';
import JobForm from './JobForm';

const cluster = vi.hoisted(() => ({
  listHandlers: vi.fn(() => Promise.resolve({ items: [{ name: 'shell', version: '1', description: '', params_schema: null }] })),
  listNodes: vi.fn(() => Promise.resolve({ items: [{ uuid: 'n1', address: '10.0.0.1', group: 'default', status: 'online', plugins: [{ name: 'shell' }] }] })),
  previewSchedule: vi.fn(() => Promise.resolve({ next: [] })),
}));
vi.mock('../services/cluster', () => cluster);
vi.mock('../services/admin', () => ({ listGroups: () => Promise.resolve({ items: [] }) }));
const jobs = vi.hoisted(() => ({ createJob: vi.fn(), listJobs: vi.fn(() => Promise.resolve({ items: [], total: 0 })) }));
vi.mock('../services/jobs', async (orig) => ({ ...(await orig<typeof import('../services/jobs')>()), ...jobs }));

async function pickOption(label: string, option: string) {
  fireEvent.mouseDown(screen.getByLabelText(label));
  await waitFor(() => expect(document.querySelector(`.ant-select-dropdown:not(.ant-select-dropdown-hidden) .ant-select-item-option[title="${option}"]`)).not.toBeNull());
  fireEvent.click(document.querySelector(`.ant-select-dropdown:not(.ant-select-dropdown-hidden) .ant-select-item-option[title="${option}"]`)!);
}
const fieldError = (label: string) => screen.getByLabelText(label).closest('.ant-form-item')!.querySelector('.ant-form-item-explain-error')?.textContent ?? null;

describe('JobForm', () => {
  beforeEach(() => vi.clearAllMocks());

  it('drops a server field error once the field changes, and before the next save', async () => {
    render(withPage(<JobForm mode="new" />, '/jobs/new'));
    fireEvent.change(await screen.findByLabelText('Name'), { target: { value: 'backup' } });
    fireEvent.change(screen.getByLabelText('Author'), { target: { value: 'ann' } });
    await waitFor(() => expect(screen.getByLabelText('Handler')).toBeEnabled());
    await pickOption('Handler', 'shell');
    jobs.createJob.mockRejectedValueOnce(new ApiError(400, 'invalid job', { author: 'author is too odd', description: 'description is too odd' }));
    await userEvent.click(screen.getByTestId('save-job'));
    await waitFor(() => expect(fieldError('Author')).toBe('author is too odd'));
    expect(fieldError('Description')).toBe('description is too odd');
    // Changing the author takes its error away, not the other one.
    fireEvent.change(screen.getByLabelText('Author'), { target: { value: 'bob' } });
    await waitFor(() => expect(fieldError('Author')).toBeNull());
    expect(fieldError('Description')).toBe('description is too odd');
    // The next reply names only the name: the description's error is gone too.
    jobs.createJob.mockRejectedValueOnce(new ApiError(409, 'conflict', { name: 'a job named "backup" already exists' }));
    await userEvent.click(screen.getByTestId('save-job'));
    await waitFor(() => expect(fieldError('Name')).toBe('a job named "backup" already exists'));
    await waitFor(() => expect(fieldError('Description')).toBeNull());
    expect(jobs.createJob).toHaveBeenCalledTimes(2);
  });

  it('does not carry a schedule over to another schedule type, and restores it on the way back', async () => {
    render(withPage(<JobForm mode="new" />, '/jobs/new'));
    const schedule = await screen.findByLabelText('Schedule');
    fireEvent.change(schedule, { target: { value: '0 3 * * *' } });
    // Narrow screen (jsdom matches no media query): the types are a select.
    await pickOption('Schedule type', 'Fixed rate');
    await waitFor(() => expect(screen.getByLabelText('Schedule')).toHaveValue(''));
    expect(screen.getByLabelText('Schedule')).toHaveAttribute('placeholder', '30s');
    fireEvent.change(screen.getByLabelText('Schedule'), { target: { value: '45s' } });
    await pickOption('Schedule type', 'Cron');
    await waitFor(() => expect(screen.getByLabelText('Schedule')).toHaveValue('0 3 * * *'));
    await pickOption('Schedule type', 'Fixed rate');
    await waitFor(() => expect(screen.getByLabelText('Schedule')).toHaveValue('45s'));
  });
});
