import { describe, expect, it } from 'vitest';
import i18n from '../i18n';
import { describeCron } from './cronText';

const en = i18n.getFixedT('en');
const zh = i18n.getFixedT('zh-CN');
const t = (k: string, o?: Record<string, unknown>) => en(k, o ?? {}) as string;
const tz = (k: string, o?: Record<string, unknown>) => zh(k, o ?? {}) as string;

describe('describeCron', () => {
  it.each([
    ['0 3 * * *', 'At 03:00, every day'],
    ['*/10 * * * * *', 'Every 10 seconds'],
    ['0 */5 * * * ?', 'Every 5 minutes'],
    ['30 9 * * 1-5', 'At 09:30, weekday Monday through Friday'],
    ['0 0 12 L * ? *', 'At 12:00, on the last day of the month'],
    ['@daily', 'Every day at midnight'],
    ['@every 30s', 'Every 30s'],
  ])('%s', (expr, want) => {
    expect(describeCron(expr, t)).toBe(want);
  });

  it('returns null for what it does not understand', () => {
    expect(describeCron('', t)).toBeNull();
    expect(describeCron('* *', t)).toBeNull();
    expect(describeCron('@sometimes', t)).toBeNull();
  });

  it('speaks Chinese', () => {
    expect(describeCron('0 3 * * *', tz)).toBe('在 03:00，每天');
  });
});
