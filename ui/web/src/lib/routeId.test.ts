import { describe, expect, it } from 'vitest';
import { routeId } from './routeId';

describe('routeId', () => {
  it('reads a positive integer id and nothing else', () => {
    expect(routeId('48')).toBe(48);
    for (const bad of [undefined, '', 'abc', '0', '-1', '1.5', '1e3', ' 7', '007', '99999999999999999999']) expect(routeId(bad)).toBeNull();
  });
});
