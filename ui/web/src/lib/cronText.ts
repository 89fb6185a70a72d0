// Explains a cron expression in words. The server's parser is the judge of
// validity (the preview API); this only describes well-formed expressions and
// returns null for what it does not understand.

export type Translate = (key: string, opts?: Record<string, unknown>) => string;

type Unit = 'second' | 'minute' | 'hour' | 'dom' | 'month' | 'dow' | 'year';

const monthNames = ['JAN', 'FEB', 'MAR', 'APR', 'MAY', 'JUN', 'JUL', 'AUG', 'SEP', 'OCT', 'NOV', 'DEC'];
const dowNames = ['SUN', 'MON', 'TUE', 'WED', 'THU', 'FRI', 'SAT'];

const isWild = (f: string) => f === '*' || f === '?';
const isNum = (f: string) => /^\d+$/.test(f);

function name(unit: Unit, v: string, t: Translate): string {
  if (unit === 'month') {
    const i = isNum(v) ? Number(v) - 1 : monthNames.indexOf(v.toUpperCase());
    return i >= 0 && i < 12 ? t(`cron.month.${i}`) : v;
  }
  if (unit === 'dow') {
    let i = isNum(v) ? Number(v) % 7 : dowNames.indexOf(v.toUpperCase());
    if (i < 0) i = -1;
    return i >= 0 ? t(`cron.dow.${i}`) : v;
  }
  return v;
}

function part(unit: Unit, f: string, t: Translate, quartzDow: boolean): string | null {
  if (isWild(f)) return null;
  const u = t(`cron.unit.${unit}`);
  const items = f.split(',');
  const out: string[] = [];
  for (const item of items) {
    let m: RegExpExecArray | null;
    if ((m = /^(\*|\d+)\/(\d+)$/.exec(item))) {
      out.push(m[1] === '*' || m[1] === '0'
        ? t('cron.everyN', { n: m[2], unit: u })
        : t('cron.everyNFrom', { n: m[2], unit: u, from: name(unit, m[1], t) }));
    } else if ((m = /^(\w+)-(\w+)(?:\/(\d+))?$/.exec(item))) {
      const range = t('cron.range', { unit: u, from: name(unit, m[1], t), to: name(unit, m[2], t) });
      out.push(m[3] ? t('cron.everyNIn', { n: m[3], unit: u, range }) : range);
    } else if (unit === 'dom' && item === 'L') {
      out.push(t('cron.lastDom'));
    } else if (unit === 'dom' && (m = /^(\d+)W$/.exec(item))) {
      out.push(t('cron.nearestWeekday', { day: m[1] }));
    } else if (unit === 'dow' && (m = /^(\w+)#(\d)$/.exec(item))) {
      out.push(t('cron.nthDow', { n: m[2], day: name(unit, quartzDow ? String(Number(m[1]) - 1) : m[1], t) }));
    } else if (unit === 'dow' && (m = /^(\w+)L$/.exec(item))) {
      out.push(t('cron.lastDow', { day: name(unit, quartzDow ? String(Number(m[1]) - 1) : m[1], t) }));
    } else if (/^\w+$/.test(item)) {
      const v = unit === 'dow' && quartzDow && isNum(item) ? String(Number(item) - 1) : item;
      out.push(t('cron.at', { unit: u, value: name(unit, v, t) }));
    } else {
      return '?';
    }
  }
  return out.join(t('cron.and'));
}

const pad = (s: string) => s.padStart(2, '0');

/** describeCron returns a sentence for expr, or null when it is not a plain cron expression. */
export function describeCron(expr: string, t: Translate): string | null {
  const e = expr.trim();
  if (!e) return null;
  if (e.startsWith('@')) {
    const every = /^@every\s+(\S+)$/.exec(e);
    if (every) return t('cron.macroEvery', { d: every[1] });
    const macro = e.slice(1).toLowerCase();
    const known = ['yearly', 'annually', 'monthly', 'weekly', 'daily', 'midnight', 'hourly'];
    return known.includes(macro) ? t(`cron.macro.${macro}`) : null;
  }
  const f = e.split(/\s+/);
  if (f.length < 5 || f.length > 7) return null;
  const quartz = f.length === 7 || f.includes('?') || f.some((x) => /[LW#]/.test(x));
  const [sec, min, hour, dom, month, dow, year] = f.length === 5 ? ['0', ...f, '*'] : f.length === 6 ? [...f, '*'] : f;
  const phrases: string[] = [];
  if ([sec, min, hour].every(isNum)) {
    phrases.push(t('cron.atTime', { time: `${pad(hour)}:${pad(min)}${sec === '0' ? '' : ':' + pad(sec)}` }));
  } else if ([sec, min].every(isNum) && !isNum(hour)) {
    phrases.push(t('cron.atMinute', { time: `${pad(min)}${sec === '0' ? '' : ':' + pad(sec)}` }));
    const h = part('hour', hour, t, quartz);
    phrases.push(h ?? t('cron.everyUnit', { unit: t('cron.unit.hour') }));
  } else {
    const parts: [Unit, string][] = [['second', sec], ['minute', min], ['hour', hour]];
    let wildcardLead = true;
    for (const [unit, v] of parts) {
      if (unit === 'second' && v === '0') continue; // on the whole minute: nothing to say
      const p = part(unit, v, t, quartz);
      if (p) {
        phrases.push(p);
        wildcardLead = false;
      } else if (wildcardLead && f.length > 5 && unit === 'second') {
        phrases.push(t('cron.everyUnit', { unit: t('cron.unit.second') }));
        wildcardLead = false;
      } else if (wildcardLead && unit === 'minute') {
        phrases.push(t('cron.everyUnit', { unit: t('cron.unit.minute') }));
        wildcardLead = false;
      }
    }
  }
  const rest: [Unit, string][] = [['dom', dom], ['month', month], ['dow', dow], ['year', year ?? '*']];
  let daily = true;
  for (const [unit, v] of rest) {
    const p = part(unit, v, t, quartz);
    if (p) {
      phrases.push(p);
      daily = false;
    }
  }
  if (phrases.some((p) => p.includes('?'))) return null;
  if (daily && [sec, min, hour].every(isNum)) phrases.push(t('cron.everyDay'));
  const s = phrases.join(t('cron.sep'));
  return s.charAt(0).toUpperCase() + s.slice(1);
}
