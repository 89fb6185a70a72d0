import { fireEvent, render, screen, waitFor, within } from '@testing-library/react';
import userEvent from '@testing-library/user-event';
import { beforeEach, describe, expect, it, vi } from 'vitest';
import type { Me } from '../services/auth';
import { ApiError } from '../services/http';
import { withPage } from '../test-utils';
import Users from './Users';

const auth = vi.hoisted(() => ({ refresh: vi.fn(() => Promise.resolve()) }));
vi.mock('../auth', () => ({ useAuth: () => ({ me: { id: 1, username: 'root', role: 'admin', groups: [], disabled: false } satisfies Me, refresh: auth.refresh }) }));
const admin = vi.hoisted(() => ({
  listUsers: vi.fn(), listGroups: vi.fn(), patchUser: vi.fn(), createUser: vi.fn(), deleteUser: vi.fn(), setUserGroups: vi.fn(), setUserPassword: vi.fn(),
}));
vi.mock('../services/admin', () => admin);

const users = [
  { id: 1, username: 'root', role: 'admin', groups: [], disabled: false },
  { id: 2, username: 'ann', role: 'viewer', groups: [], disabled: false },
];
const row = (name: string) => screen.getByText(name).closest('tr')!;

describe('Users', () => {
  beforeEach(() => {
    vi.clearAllMocks();
    admin.listUsers.mockResolvedValue({ items: users, total: 2 });
    admin.listGroups.mockResolvedValue({ items: [] });
    admin.patchUser.mockResolvedValue({});
  });

  it('asks before disabling yourself, then refreshes who you are', async () => {
    render(withPage(<Users />, '/users'));
    await screen.findByText('root');
    await userEvent.click(within(row('root')).getByRole('button', { name: 'Disable' }));
    expect(await screen.findByRole('dialog')).toHaveTextContent('Disable your own account?');
    expect(admin.patchUser).not.toHaveBeenCalled();
    await userEvent.click(screen.getByTestId('confirm-self'));
    await waitFor(() => expect(admin.patchUser).toHaveBeenCalledWith(1, { disabled: true }));
    expect(await screen.findByText('Saved root')).toBeInTheDocument();
    expect(auth.refresh).toHaveBeenCalled();
  });

  it('changes another user at once, says so, and leaves you as you are', async () => {
    render(withPage(<Users />, '/users'));
    await screen.findByText('ann');
    await userEvent.click(within(row('ann')).getByRole('button', { name: 'Disable' }));
    await waitFor(() => expect(admin.patchUser).toHaveBeenCalledWith(2, { disabled: true }));
    expect(await screen.findByText('Saved ann')).toBeInTheDocument();
    expect(screen.queryByText('Disable your own account?')).toBeNull();
    expect(auth.refresh).not.toHaveBeenCalled();
  });

  it('puts a taken user name under the field', async () => {
    admin.createUser.mockRejectedValue(new ApiError(409, 'user "ann" already exists'));
    render(withPage(<Users />, '/users'));
    await screen.findByText('ann');
    await userEvent.click(screen.getByRole('button', { name: 'New user' }));
    const dialog = await screen.findByRole('dialog');
    fireEvent.change(within(dialog).getByLabelText('User name'), { target: { value: 'ann' } });
    fireEvent.change(within(dialog).getByLabelText('Password'), { target: { value: 'long-enough-pw' } });
    await userEvent.click(screen.getByTestId('user-ok'));
    const field = within(dialog).getByLabelText('User name').closest('.ant-form-item')!;
    expect(await within(field as HTMLElement).findByText('This user name is taken.')).toBeInTheDocument();
  });
});
