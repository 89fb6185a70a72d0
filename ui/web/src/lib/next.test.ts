import { describe, expect, it } from 'vitest';
import { safeNext } from './next';

describe('safeNext', () => {
  it('follows a path of this site', () => {
    expect(safeNext('/jobs/3?tab=runs')).toBe('/jobs/3?tab=runs');
    expect(safeNext('/runs')).toBe('/runs');
  });
  it('goes to the dashboard for anything else', () => {
    for (const bad of [null, '', 'jobs', 'https://evil.example/', '//evil.example/x', '/\\evil.example', '/\t/evil.example', 'javascript:alert(1)', '/login', '/login?next=/x']) {
      expect(safeNext(bad)).toBe('/');
    }
  });
});
