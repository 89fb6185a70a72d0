import { fireEvent, render, screen, waitFor, within } from '@testing-library/react';
import userEvent from '@testing-library/user-event';
import { beforeEach, describe, expect, it, vi } from 'vitest';
import type { Me } from '../services/auth';
import { ApiError } from '../services/http';
import { withPage } from '../test-utils';
import Tokens from './Tokens';

const auth = vi.hoisted(() => ({ me: null as Me | null }));
vi.mock('../auth', () => ({ useAuth: () => ({ me: auth.me }) }));
const admin = vi.hoisted(() => ({ listTokens: vi.fn(), createToken: vi.fn(), deleteToken: vi.fn(), listGroups: vi.fn() }));
vi.mock('../services/admin', () => admin);

const tok = (id: number) => ({ id, name: `tok-${id}`, user: 'ops', role: 'operator', groups: [1], created_at: '2026-03-01T12:00:00Z', expires_at: null, last_used_at: null as string | null });
const groups = { items: [{ id: 1, appname: 'default', title: 'Default' }, { id: 2, appname: 'other', title: 'Other' }], total: 2, page: 1, page_size: 500 };

describe('Tokens', () => {
  beforeEach(() => {
    vi.clearAllMocks();
    admin.listGroups.mockResolvedValue(groups);
    admin.listTokens.mockResolvedValue({ items: [tok(1)], total: 1, page: 1, page_size: 20 });
  });

  it('shows when each token was last used, or that it never was', async () => {
    auth.me = { id: 1, username: 'admin', role: 'admin', groups: [], disabled: false };
    admin.listTokens.mockResolvedValue({ items: [{ ...tok(1), last_used_at: '2026-03-02T08:30:00Z' }, tok(2)], total: 2, page: 1, page_size: 20 });
    render(withPage(<Tokens />, '/tokens'));
    const used = (await screen.findByText('tok-1')).closest('tr')!;
    const unused = screen.getByText('tok-2').closest('tr')!;
    expect(screen.getByRole('columnheader', { name: 'Last used' })).toBeInTheDocument();
    expect(within(used).getByText(/2026-03-02/)).toBeInTheDocument();
    expect(within(unused).getByText('never used')).toBeInTheDocument();
  });

  it('creates a token with a role at most the user\'s and the user\'s groups, and shows its secret once', async () => {
    auth.me = { id: 2, username: 'ops', role: 'operator', groups: [1], disabled: false };
    admin.createToken.mockResolvedValue({ ...tok(2), name: 'ci-token', secret: 'cxt_secret123' });
    render(withPage(<Tokens />, '/tokens'));
    await screen.findByText('tok-1');
    // No User column for a non-admin.
    expect(screen.queryByRole('columnheader', { name: 'User' })).toBeNull();
    expect(screen.getByRole('columnheader', { name: 'Role' })).toBeInTheDocument();
    await userEvent.click(screen.getByTestId('create-token'));
    const dialog = await screen.findByRole('dialog');
    fireEvent.change(within(dialog).getByLabelText('Name'), { target: { value: 'ci-token' } });
    // The role offers the user's own role and those below it, the user's own first.
    const role = within(dialog).getByLabelText('Role');
    expect(within(dialog).getByTitle('Operator')).toBeInTheDocument();
    fireEvent.mouseDown(role);
    await waitFor(() => expect(document.querySelectorAll('.ant-select-item-option').length).toBe(2));
    expect([...document.querySelectorAll('.ant-select-item-option')].map((o) => o.textContent)).toEqual(['Operator', 'Viewer']);
    fireEvent.click(document.querySelector('.ant-select-item-option[title=Operator]')!);
    await userEvent.click(screen.getByTestId('token-ok'));
    await waitFor(() => expect(admin.createToken).toHaveBeenCalledWith({ name: 'ci-token', role: 'operator', groups: [1] }));
    expect(await screen.findByTestId('token-secret')).toHaveTextContent('cxt_secret123');
    expect(screen.queryByRole('dialog')).toBeNull();
  });

  it('shows the server\'s field errors under the fields', async () => {
    auth.me = { id: 1, username: 'admin', role: 'admin', groups: [], disabled: false };
    admin.createToken.mockRejectedValue(new ApiError(400, 'invalid token', { role: 'role must be one of admin, operator, viewer', name: 'name is required' }));
    render(withPage(<Tokens />, '/tokens'));
    await screen.findByText('tok-1');
    await userEvent.click(screen.getByTestId('create-token'));
    const dialog = await screen.findByRole('dialog');
    fireEvent.change(within(dialog).getByLabelText('Name'), { target: { value: 'x' } });
    await userEvent.click(screen.getByTestId('token-ok'));
    expect(await within(dialog).findByText('role must be one of admin, operator, viewer')).toBeInTheDocument();
    expect(within(dialog).getByText('name is required')).toBeInTheDocument();
    expect(admin.createToken).toHaveBeenCalledWith({ name: 'x', role: 'admin', groups: [] });
    // Editing the field takes its server message away.
    fireEvent.change(within(dialog).getByLabelText('Name'), { target: { value: 'xy' } });
    await waitFor(() => expect(within(dialog).queryByText('name is required')).toBeNull());
  });

  it('pages through the tokens with the total, and shows an admin whose tokens they are', async () => {
    auth.me = { id: 1, username: 'admin', role: 'admin', groups: [], disabled: false };
    admin.listTokens.mockImplementation((q: { page: number; page_size: number }) =>
      Promise.resolve({ items: [tok(q.page * 100)], total: 45, page: q.page, page_size: q.page_size }));
    render(withPage(<Tokens />, '/tokens'));
    await screen.findByText('tok-100');
    expect(admin.listTokens).toHaveBeenCalledWith({ page: 1, page_size: 20 });
    expect(screen.getByRole('columnheader', { name: 'User' })).toBeInTheDocument();
    expect(screen.getByText('45 in total')).toBeInTheDocument();
    await userEvent.click(screen.getByTitle('3'));
    expect(await screen.findByText('tok-300')).toBeInTheDocument();
    expect(admin.listTokens).toHaveBeenLastCalledWith({ page: 3, page_size: 20 });
  });
});
