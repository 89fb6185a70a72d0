import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { createJob, emptyJob, jobInputKeys, restoreVersion, toInput, updateJob, type Job } from './jobs';

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

// The API refuses a schedule on a none job: the form's disabled schedule
// input, a job or a version stored with one, send none.
describe('none jobs', () => {
  const fetchMock = vi.fn();
  afterEach(() => {
    fetchMock.mockReset();
    vi.unstubAllGlobals();
  });
  const sent = (i: number) => JSON.parse((fetchMock.mock.calls[i] as [string, RequestInit])[1].body as string);

  it('are saved without a schedule', async () => {
    vi.stubGlobal('fetch', fetchMock);
    fetchMock.mockImplementation(() => Promise.resolve(new Response('{}', { status: 200 })));
    await createJob({ ...emptyJob(), name: 'n', schedule_type: 'none', schedule: '*/5 * * * *' });
    await updateJob(7, { ...emptyJob(), name: 'n', schedule_type: 'none', schedule: 'foo' });
    await createJob({ ...emptyJob(), name: 'c', schedule_type: 'cron', schedule: '*/5 * * * *' });
    const job = { ...emptyJob(), id: 7, revision: 2, created_at: '', updated_at: '', schedule: '0 3 * * *' } as Job;
    await restoreVersion(job, { revision: 1, name: 'n', schedule_type: 'none', schedule: 'foo', timezone: '',
      handler: 'shell', params: {}, saved_at: '', saved_by: '' });
    expect(sent(0)).toMatchObject({ schedule_type: 'none', schedule: '' });
    expect(sent(1)).toMatchObject({ schedule_type: 'none', schedule: '' });
    expect(sent(2)).toMatchObject({ schedule_type: 'cron', schedule: '*/5 * * * *' });
    expect(sent(3)).toMatchObject({ schedule_type: 'none', schedule: '' });
  });
});
