import { render, screen, within } from '@testing-library/react';
import userEvent from '@testing-library/user-event';
import { beforeEach, describe, expect, it, vi } from 'vitest';
import type { Me } from '../services/auth';
import { ApiError } from '../services/http';
import { withPage } from '../test-utils';
import Groups from './Groups';

const auth = vi.hoisted(() => ({ me: null as Me | null }));
vi.mock('../auth', () => ({ useAuth: () => ({ me: auth.me }) }));
const admin = vi.hoisted(() => ({ listGroups: vi.fn(), createGroup: vi.fn(), updateGroup: vi.fn(), deleteGroup: vi.fn() }));
vi.mock('../services/admin', () => admin);
vi.mock('../services/cluster', () => ({ listNodes: () => Promise.resolve({ items: [] }) }));

const group = { id: 1, appname: 'default', title: 'Default', address_type: 'auto', addresses: [], nodes: [] };

describe('Groups', () => {
  beforeEach(() => {
    vi.clearAllMocks();
    admin.listGroups.mockResolvedValue({ items: [group], total: 1, page: 1, page_size: 500 });
  });

  it('offers an operator no writes: group writes are admin-only', async () => {
    auth.me = { id: 2, username: 'ops', role: 'operator', groups: [1], disabled: false };
    render(withPage(<Groups />, '/groups'));
    await screen.findByText('Default');
    expect(screen.queryByRole('button', { name: 'New group' })).toBeNull();
    expect(screen.queryByRole('button', { name: 'Edit' })).toBeNull();
    expect(screen.queryByRole('button', { name: 'Delete' })).toBeNull();
  });

  it('gives an admin the dialog, with a refusal in words', async () => {
    auth.me = { id: 1, username: 'admin', role: 'admin', groups: [], disabled: false };
    admin.updateGroup.mockRejectedValue(new ApiError(403, 'your role does not allow this'));
    render(withPage(<Groups />, '/groups'));
    await screen.findByText('Default');
    await userEvent.click(screen.getByRole('button', { name: 'Edit' }));
    const dialog = await screen.findByRole('dialog');
    await userEvent.click(within(dialog).getByRole('button', { name: 'OK' }));
    expect(await within(dialog).findByRole('alert')).toHaveTextContent('You do not have permission to do this.');
  });
});
