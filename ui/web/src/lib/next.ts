/**
 * safeNext is where to go after signing in: the ?next= path when it is a
 * path of this site ("/jobs/3?tab=runs"), else "/". A scheme ("https:…"),
 * a protocol-relative "//host" or "/\host" (which browsers read as
 * "//host"), or the login page itself are not followed.
 */
export function safeNext(next: string | null | undefined): string {
  if (!next || !next.startsWith('/') || next.startsWith('//') || next.startsWith('/\\')) return '/';
  // Control characters (a tab or newline inside "/\t/host") are dropped by URL parsers.
  if (/[\u0000-\u001f\u007f]/.test(next)) return '/';
  try {
    const u = new URL(next, 'http://cronix.invalid');
    if (u.origin !== 'http://cronix.invalid' || u.pathname === '/login') return '/';
    return u.pathname + u.search + u.hash;
  } catch {
    return '/';
  }
}
