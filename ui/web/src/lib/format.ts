// Dates from the API are RFC 3339; show them in a zone as "2026-03-01 12:00:00".

const formatters = new Map<string, Intl.DateTimeFormat>();

function formatter(timeZone: string | undefined): Intl.DateTimeFormat {
  const key = timeZone ?? '';
  let f = formatters.get(key);
  if (!f) {
    try {
      f = new Intl.DateTimeFormat('sv-SE', {
        timeZone: timeZone || undefined, year: 'numeric', month: '2-digit', day: '2-digit',
        hour: '2-digit', minute: '2-digit', second: '2-digit', hour12: false,
      });
    } catch {
      f = formatter(undefined); // unknown zone: the browser's
    }
    formatters.set(key, f);
  }
  return f;
}

/** formatTime shows an instant in timeZone (default: the browser's zone). */
export function formatTime(iso: string | null | undefined, timeZone?: string): string {
  if (!iso) return '—';
  const d = new Date(iso);
  if (Number.isNaN(d.getTime())) return iso;
  return formatter(timeZone).format(d);
}

export const browserZone = (): string => Intl.DateTimeFormat().resolvedOptions().timeZone;

/** formatDuration renders milliseconds as "850 ms", "12.3 s", "4 min 5 s", "2 h 3 min". */
export function formatDuration(ms: number | null | undefined): string {
  if (ms === null || ms === undefined || Number.isNaN(ms)) return '—';
  const sign = ms < 0 ? '-' : '';
  const a = Math.abs(ms);
  if (a < 1000) return `${sign}${Math.round(a)} ms`;
  if (a < 60_000) return `${sign}${(a / 1000).toFixed(1)} s`;
  if (a < 3_600_000) return `${sign}${Math.floor(a / 60_000)} min ${Math.round((a % 60_000) / 1000)} s`;
  return `${sign}${Math.floor(a / 3_600_000)} h ${Math.round((a % 3_600_000) / 60_000)} min`;
}

export function formatBytes(n: number | null | undefined): string {
  if (n === null || n === undefined) return '—';
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let v = n;
  let i = 0;
  while (v >= 1024 && i < units.length - 1) {
    v /= 1024;
    i++;
  }
  return `${v.toFixed(i === 0 ? 0 : 1)} ${units[i]}`;
}

export function percentile(values: number[], p: number): number | null {
  if (values.length === 0) return null;
  const s = [...values].sort((a, b) => a - b);
  const idx = Math.min(s.length - 1, Math.max(0, Math.ceil((p / 100) * s.length) - 1));
  return s[idx];
}
