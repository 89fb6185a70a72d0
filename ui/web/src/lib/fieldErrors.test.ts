import { describe, expect, it } from 'vitest';
import { fieldErrorLines, fieldPath, mapFieldErrors, mapNestedFieldErrors } from './fieldErrors';

const form = ['name', 'schedule', 'handler', 'params', 'child_job_ids', 'alarm_emails'];

describe('mapFieldErrors', () => {
  it('puts each named field error on its field', () => {
    const m = mapFieldErrors({ schedule: 'invalid cron expression "61 * * * *"', handler: 'no live node' }, form);
    expect(m.form).toEqual([
      { name: 'schedule', errors: ['invalid cron expression "61 * * * *"'] },
      { name: 'handler', errors: ['no live node'] },
    ]);
    expect(m.other).toEqual([]);
  });

  it('maps a params message naming a schema property onto that property too', () => {
    const m = mapFieldErrors(
      { params: 'params do not match the shell handler\'s schema (version 1.0.0): /script: minLength: got 0, want 1' },
      form,
      ['script', 'interpreter'],
    );
    expect(m.form[0].name).toBe('params');
    expect(m.params).toEqual({ script: 'minLength: got 0, want 1' });
    const m2 = mapFieldErrors({ params: 'script: must not be empty' }, form, ['script']);
    expect(m2.params).toEqual({ script: 'must not be empty' });
    expect(m2.form).toEqual([{ name: 'params', errors: ['script: must not be empty'] }]);
  });

  it('maps params.<prop> keys to the property', () => {
    const m = mapFieldErrors({ 'params.url': 'must be absolute' }, form, ['url']);
    expect(m.params).toEqual({ url: 'must be absolute' });
  });

  it('folds indexed list errors onto the list field', () => {
    const m = mapFieldErrors({ 'alarm_emails[1]': 'not an address', 'alarm_emails[3]': 'not an address either' }, form);
    expect(m.form).toEqual([{ name: 'alarm_emails', errors: ['not an address', 'not an address either'] }]);
  });

  it('keeps fields the form does not have as other messages', () => {
    const m = mapFieldErrors({ node: 'not live' }, form);
    expect(m.form).toEqual([]);
    expect(m.other).toEqual(['node: not live']);
  });
});

describe('fieldErrorLines', () => {
  const schema = { type: 'object', properties: { script: { type: 'string', title: 'Script' }, env: { type: 'object' } } };
  it('names the params property, not the raw schema message', () => {
    expect(fieldErrorLines({ params: "params do not match the shell handler's schema (version 1): /script: minLength: got 0, want 1" }, schema))
      .toEqual(['Script: minLength: got 0, want 1']);
    expect(fieldErrorLines({ 'params.env': 'must be an object' }, schema)).toEqual(['env: must be an object']);
  });
  it('keeps a message it cannot place', () => {
    expect(fieldErrorLines({ params: 'params must be an object' }, schema)).toEqual(['params must be an object']);
    expect(fieldErrorLines({ node: 'node n9 is not in the group' }, schema)).toEqual(['node: node n9 is not in the group']);
  });
});

describe('fieldPath and mapNestedFieldErrors', () => {
  it('splits dotted and indexed paths', () => {
    expect(fieldPath('smtp.host')).toEqual(['smtp', 'host']);
    expect(fieldPath('webhooks[1].url')).toEqual(['webhooks', 1, 'url']);
    expect(fieldPath('admin_emails')).toEqual(['admin_emails']);
    expect(fieldPath('group_emails.ops')).toEqual(['group_emails', 'ops']);
  });
  it('places known paths and returns the rest as lines', () => {
    const m = mapNestedFieldErrors({ 'smtp.host': 'bad host', 'webhooks[0].url': 'bad url', weird: 'x' }, (p) => (p[0] === 'weird' ? null : p));
    expect(m.form).toEqual([{ name: ['smtp', 'host'], errors: ['bad host'] }, { name: ['webhooks', 0, 'url'], errors: ['bad url'] }]);
    expect(m.other).toEqual(['weird: x']);
  });
});
