// The one place the app talks HTTP to /api/v1. Pages never call fetch.
//
// Authentication is the session cookie (cronix_session, HttpOnly) the server
// sets at login; state-changing requests carry the session's CSRF token in
// X-CSRF-Token. The CSRF token lives in memory only (never in localStorage or
// sessionStorage); after a reload GET /api/v1/auth/me gives it back to the
// cookie session. The app never sends an Authorization header.

export class ApiError extends Error {
  readonly status: number;
  readonly fields: Record<string, string>;

  constructor(status: number, message: string, fields: Record<string, string> = {}) {
    super(message);
    this.name = 'ApiError';
    this.status = status;
    this.fields = fields;
  }
}

export function isApiError(e: unknown, status?: number): e is ApiError {
  return e instanceof ApiError && (status === undefined || e.status === status);
}

let csrfToken: string | null = null;
let onUnauthorized: (() => void) | null = null;

export function setCsrfToken(token: string | null): void {
  csrfToken = token;
}

/** The in-memory CSRF token of the session (null when logged out). */
export function getCsrfToken(): string | null {
  return csrfToken;
}

/** Called on every 401 so the app can go to the login page. */
export function setUnauthorizedHandler(fn: (() => void) | null): void {
  onUnauthorized = fn;
}

const unsafeMethods = new Set(['POST', 'PUT', 'PATCH', 'DELETE']);

export interface RequestOptions {
  method?: string;
  body?: unknown;
  query?: Record<string, string | number | boolean | undefined | null>;
  signal?: AbortSignal;
  /** Do not report a 401 to the unauthorized handler (login, me). */
  quiet401?: boolean;
}

export function buildUrl(path: string, query?: RequestOptions['query']): string {
  const params = new URLSearchParams();
  for (const [k, v] of Object.entries(query ?? {})) {
    if (v !== undefined && v !== null && v !== '') params.set(k, String(v));
  }
  const qs = params.toString();
  return '/api/v1' + path + (qs ? '?' + qs : '');
}

function headers(method: string, hasBody: boolean): Headers {
  const h = new Headers({ Accept: 'application/json' });
  if (hasBody) h.set('Content-Type', 'application/json');
  if (unsafeMethods.has(method) && csrfToken) h.set('X-CSRF-Token', csrfToken);
  return h;
}

async function errorFrom(res: Response): Promise<ApiError> {
  let message = res.statusText || 'HTTP ' + res.status;
  let fields: Record<string, string> = {};
  try {
    const body = (await res.json()) as { error?: unknown; fields?: unknown };
    if (typeof body.error === 'string') message = body.error;
    if (body.fields && typeof body.fields === 'object') fields = body.fields as Record<string, string>;
  } catch {
    // not JSON: keep the status text
  }
  return new ApiError(res.status, message, fields);
}

/** raw sends a request and returns the response when it is 2xx; else throws ApiError. */
export async function raw(path: string, opts: RequestOptions = {}): Promise<Response> {
  const method = (opts.method ?? 'GET').toUpperCase();
  const hasBody = opts.body !== undefined;
  const res = await fetch(buildUrl(path, opts.query), {
    method,
    headers: headers(method, hasBody),
    body: hasBody ? JSON.stringify(opts.body) : undefined,
    credentials: 'same-origin',
    signal: opts.signal,
  });
  if (!res.ok) {
    const err = await errorFrom(res);
    if (res.status === 401 && !opts.quiet401) onUnauthorized?.();
    throw err;
  }
  return res;
}

/** api sends a request and decodes the JSON reply (undefined for 204). */
export async function api<T>(path: string, opts: RequestOptions = {}): Promise<T> {
  const res = await raw(path, opts);
  if (res.status === 204) return undefined as T;
  const text = await res.text();
  return (text ? JSON.parse(text) : undefined) as T;
}

export interface Page<T> {
  items: T[];
  total: number;
  page: number;
  page_size: number;
}
