import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { emptyJob, jobInputKeys, toInput } from './jobs';

// The job form edits every field of the API's job model: the JSON names of
// JobRequest in server/api/dto.go are the keys the form sends.
describe('job model', () => {
  const dto = readFileSync(join(__dirname, '..', '..', '..', '..', 'server', 'api', 'dto.go'), 'utf8');
  const body = /type JobRequest struct \{([\s\S]*?)\n\}/.exec(dto)?.[1] ?? '';
  const apiFields = [...body.matchAll(/json:"([a-z_]+)"/g)].map((m) => m[1]);

  it('covers every field of the API job request', () => {
    expect(apiFields.length).toBeGreaterThan(15);
    expect([...jobInputKeys].sort()).toEqual([...apiFields].sort());
    expect(Object.keys(emptyJob()).sort()).toEqual([...apiFields].sort());
  });

  it('keeps alert_on_kill through an edit and drops read-only fields', () => {
    const input = toInput({ id: 7, revision: 3, name: 'n', alert_on_kill: true } as never);
    expect(input.alert_on_kill).toBe(true);
    expect(input).not.toHaveProperty('id');
    expect(input).not.toHaveProperty('revision');
    expect(toInput({}).alert_on_kill).toBe(false);
  });
});
