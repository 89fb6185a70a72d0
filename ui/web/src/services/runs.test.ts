import { describe, expect, it } from 'vitest';
import { jobLabel } from './runs';

describe('jobLabel', () => {
  it('names a run\'s job by its name, and by its id once the job is gone', () => {
    expect(jobLabel({ job_id: 7, job_name: 'backup' })).toBe('backup');
    expect(jobLabel({ job_id: 7, job_name: '' })).toBe('#7');
    expect(jobLabel({ job_id: 7 })).toBe('#7');
  });
});
