import { fireEvent, render, screen, waitFor, within } from '@testing-library/react';
import userEvent from '@testing-library/user-event';
import { beforeEach, describe, expect, it, vi } from 'vitest';
import type { AlertSettingsReply } from '../services/alerts';
import { ApiError } from '../services/http';
import { withPage } from '../test-utils';
import AlertSettings, { shortDuration } from './AlertSettings';

const svc = vi.hoisted(() => ({ getAlertSettings: vi.fn(), putAlertSettings: vi.fn(), testAlert: vi.fn() }));
vi.mock('../services/alerts', async (orig) => ({ ...(await orig<typeof import('../services/alerts')>()), ...svc }));

const stored = (): AlertSettingsReply => ({
  smtp: { host: 'smtp.example.com', port: 587, security: 'starttls', username: 'mailer', from: 'cronix@example.com' },
  webhooks: [{ name: 'ops', url: 'https://hooks.example.com/ops', group: '', format: 'slack', kinds: [] }],
  group_emails: { ops: ['ops@example.com'] },
  admin_emails: ['root@example.com'],
  throttle_window: '10m0s',
  missed_threshold: '30s',
  no_leader_after: '1h0m0s',
  language: 'en',
  public_url: '',
  password_set: true,
  webhook_secrets_set: ['ops'],
  from_flags: [],
});

// The form item (label, control and its messages) of the control labelled name.
const item = (label: string, n = 0) => screen.getAllByLabelText(label)[n].closest('.ant-form-item') as HTMLElement;

describe('AlertSettings', () => {
  beforeEach(() => {
    vi.clearAllMocks();
    svc.getAlertSettings.mockResolvedValue(stored());
    svc.putAlertSettings.mockImplementation((b: unknown) => Promise.resolve({ ...stored(), ...(b as object), password_set: true, webhook_secrets_set: ['ops'], from_flags: [] }));
  });

  it('loads the settings and shows stored secrets as placeholders', async () => {
    render(withPage(<AlertSettings />, '/alerts/settings'));
    await waitFor(() => expect(screen.getByLabelText('SMTP host')).toHaveValue('smtp.example.com'));
    expect(screen.getByLabelText('Sender (From)')).toHaveValue('cronix@example.com');
    expect(screen.getByLabelText('Password')).toHaveValue('');
    expect(screen.getByLabelText('Password')).toHaveAttribute('placeholder', 'stored — leave empty to keep');
    expect(screen.getByLabelText('URL')).toHaveValue('https://hooks.example.com/ops');
    expect(screen.getByLabelText('Signing secret')).toHaveAttribute('placeholder', 'stored — leave empty to keep');
    expect(screen.getByLabelText('Throttle window')).toHaveValue('10m');
    expect(screen.getByLabelText('No-leader alert after')).toHaveValue('1h');
    expect(screen.getByText('root@example.com')).toBeInTheDocument();
    expect(screen.getByLabelText('Group (app name)')).toHaveValue('ops');
    expect(screen.queryByTestId('from-flags')).toBeNull();
  });

  it('saves exactly the accepted fields, keeping the stored secrets when left empty', async () => {
    render(withPage(<AlertSettings />, '/alerts/settings'));
    await waitFor(() => expect(screen.getByLabelText('SMTP host')).toHaveValue('smtp.example.com'));
    fireEvent.change(screen.getByLabelText('SMTP host'), { target: { value: 'mail.example.org' } });
    await userEvent.click(screen.getByTestId('alert-settings-save'));
    await waitFor(() => expect(svc.putAlertSettings).toHaveBeenCalledTimes(1));
    expect(svc.putAlertSettings.mock.calls[0][0]).toEqual({
      smtp: { host: 'mail.example.org', port: 587, security: 'starttls', username: 'mailer', password: '', from: 'cronix@example.com' },
      webhooks: [{ name: 'ops', url: 'https://hooks.example.com/ops', secret: '', group: '', format: 'slack', kinds: [] }],
      group_emails: { ops: ['ops@example.com'] },
      admin_emails: ['root@example.com'],
      throttle_window: '10m',
      missed_threshold: '30s',
      no_leader_after: '1h',
      language: 'en',
      public_url: '',
    });
    expect(await screen.findByText('Saved')).toBeInTheDocument();
  });

  it('sends a new password and adds a webhook', async () => {
    render(withPage(<AlertSettings />, '/alerts/settings'));
    await waitFor(() => expect(screen.getByLabelText('SMTP host')).toHaveValue('smtp.example.com'));
    fireEvent.change(screen.getByLabelText('Password'), { target: { value: 's3cret' } });
    await userEvent.click(screen.getByTestId('add-webhook'));
    fireEvent.change(screen.getAllByLabelText('Name')[1], { target: { value: 'team' } });
    fireEvent.change(screen.getAllByLabelText('URL')[1], { target: { value: 'https://example.net/hook' } });
    // A new webhook has no stored secret.
    expect(screen.getAllByLabelText('Signing secret')[1]).toHaveAttribute('placeholder', '');
    await userEvent.click(screen.getByTestId('alert-settings-save'));
    await waitFor(() => expect(svc.putAlertSettings).toHaveBeenCalledTimes(1));
    const body = svc.putAlertSettings.mock.calls[0][0];
    expect(body.smtp.password).toBe('s3cret');
    expect(body.webhooks[1]).toEqual({ name: 'team', url: 'https://example.net/hook', secret: '', group: '', format: 'json', kinds: [] });
  });

  it('puts the server field errors under the matching fields', async () => {
    svc.putAlertSettings.mockRejectedValue(new ApiError(400, 'invalid alerting settings', {
      'smtp.host': 'want a host name or an IP address',
      'webhooks[0].url': 'want an absolute http or https URL',
      'group_emails.ops': '"x" is not an e-mail address',
      throttle_window: 'must not be negative',
      mystery: 'something else',
    }));
    render(withPage(<AlertSettings />, '/alerts/settings'));
    await waitFor(() => expect(screen.getByLabelText('SMTP host')).toHaveValue('smtp.example.com'));
    await userEvent.click(screen.getByTestId('alert-settings-save'));
    expect(await within(item('SMTP host')).findByText('want a host name or an IP address')).toBeInTheDocument();
    expect(within(item('URL')).getByText('want an absolute http or https URL')).toBeInTheDocument();
    expect(within(item('Recipients')).getByText('"x" is not an e-mail address')).toBeInTheDocument();
    expect(within(item('Throttle window')).getByText('must not be negative')).toBeInTheDocument();
    const alert = screen.getByTestId('save-error');
    expect(alert).toHaveTextContent('invalid alerting settings');
    expect(alert).toHaveTextContent('mystery: something else');
  });

  it('shows flag-set fields read-only with a note', async () => {
    svc.getAlertSettings.mockResolvedValue({ ...stored(), from_flags: ['smtp', 'throttle_window'] });
    render(withPage(<AlertSettings />, '/alerts/settings'));
    await waitFor(() => expect(screen.getByLabelText('SMTP host')).toHaveValue('smtp.example.com'));
    expect(screen.getByTestId('from-flags')).toHaveTextContent('SMTP server, throttle window');
    expect(screen.getByLabelText('SMTP host')).toBeDisabled();
    expect(screen.getByLabelText('Password')).toBeDisabled();
    expect(screen.getByLabelText('Throttle window')).toBeDisabled();
    expect(screen.getByLabelText('Missed-fire threshold')).not.toBeDisabled();
  });

  it('sends a test and shows the result of each channel', async () => {
    svc.testAlert.mockResolvedValue({ results: [
      { channel: 'email', target: 'email', ok: true },
      { channel: 'webhook', target: 'ops', ok: false, error: 'HTTP 500' },
    ] });
    render(withPage(<AlertSettings />, '/alerts/settings'));
    await waitFor(() => expect(screen.getByLabelText('SMTP host')).toHaveValue('smtp.example.com'));
    await userEvent.click(screen.getByTestId('alert-settings-test'));
    const list = await screen.findByTestId('test-results');
    const rows = within(list).getAllByTestId('test-result');
    expect(rows).toHaveLength(2);
    expect(rows[0]).toHaveTextContent('E-mail');
    expect(rows[0]).toHaveTextContent('Delivered');
    expect(rows[1]).toHaveTextContent('ops');
    expect(rows[1]).toHaveTextContent('Failed');
    expect(rows[1]).toHaveTextContent('HTTP 500');
  });

  it('says when there is nothing to send to', async () => {
    svc.testAlert.mockRejectedValue(new ApiError(400, 'nothing to send to: configure SMTP with recipients or a webhook first'));
    render(withPage(<AlertSettings />, '/alerts/settings'));
    await waitFor(() => expect(screen.getByLabelText('SMTP host')).toHaveValue('smtp.example.com'));
    await userEvent.click(screen.getByTestId('alert-settings-test'));
    expect(await screen.findByTestId('test-error')).toHaveTextContent('nothing to send to');
  });

  it('shortens Go durations', () => {
    expect(shortDuration('10m0s')).toBe('10m');
    expect(shortDuration('1h0m0s')).toBe('1h');
    expect(shortDuration('1h30m0s')).toBe('1h30m');
    expect(shortDuration('30s')).toBe('30s');
    expect(shortDuration('0s')).toBe('0s');
    expect(shortDuration('1m30s')).toBe('1m30s');
  });
});
