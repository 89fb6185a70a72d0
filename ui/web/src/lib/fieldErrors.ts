// Mapping of the API's {"error", "fields"} onto form fields.

export interface FieldErrorMap {
  /** errors for named form fields, e.g. [{name: 'schedule', errors: ['...']}] (antd Form.setFields shape) */
  form: { name: string; errors: string[] }[];
  /** errors for properties of the params object, by property name */
  params: Record<string, string>;
  /** messages naming no field of the form; shown in an alert */
  other: string[];
}

const paramsPrefix = /^params[./](.+)$/;
// Schema check: "params do not match the shell handler's schema (version 1): /script: minLength: got 0, want 1"
const pointerInMessage = /(?:^|: )\/([A-Za-z_][\w-]*)(?:\/[^:\s]*)?: (.+)$/;
// The plugin's own Validate: "script: must not be empty"
const propAtStart = /^([A-Za-z_][\w-]*): (.+)$/;

/**
 * mapFieldErrors sorts the API's field errors onto the fields of a form.
 * knownFields are the form's field names; paramProps the properties of the
 * handler's params schema (a params message naming one is also put on it).
 */
export function mapFieldErrors(
  fields: Record<string, string> | undefined,
  knownFields: readonly string[],
  paramProps: readonly string[] = [],
): FieldErrorMap {
  const out: FieldErrorMap = { form: [], params: {}, other: [] };
  const known = new Set(knownFields);
  const props = new Set(paramProps);
  for (const [key, msg] of Object.entries(fields ?? {})) {
    const sub = paramsPrefix.exec(key);
    if (sub && known.has('params')) {
      const prop = sub[1].split(/[./]/)[0];
      out.params[prop] = msg;
      out.form.push({ name: 'params', errors: [`${prop}: ${msg}`] });
      continue;
    }
    if (key === 'params' && known.has('params')) {
      out.form.push({ name: 'params', errors: [msg] });
      const m = pointerInMessage.exec(msg) ?? propAtStart.exec(msg);
      if (m && props.has(m[1])) out.params[m[1]] = m[2];
      continue;
    }
    // "child_job_ids[2]" or "alarm_emails.1" belong to their list field.
    const base = key.replace(/(\[\d+\]|\.\d+)$/, '');
    if (known.has(base)) {
      const existing = out.form.find((f) => f.name === base);
      if (existing) existing.errors.push(msg);
      else out.form.push({ name: base, errors: [msg] });
      continue;
    }
    out.other.push(`${key}: ${msg}`);
  }
  return out;
}

/**
 * fieldErrorLines turns the API's field errors into lines for a dialog that
 * has no form field for them: a params schema error names the property (by
 * its schema title when it has one), not the JSON pointer inside the raw
 * message ("params do not match the shell handler's schema (version 1):
 * /script: minLength: got 0, want 1" → "Script: minLength: got 0, want 1").
 */
export function fieldErrorLines(fields: Record<string, string> | undefined, schema?: Record<string, unknown> | null): string[] {
  const props = (schema?.properties ?? {}) as Record<string, { title?: unknown }>;
  const m = mapFieldErrors(fields, ['params'], Object.keys(props));
  const title = (p: string) => (typeof props[p]?.title === 'string' ? (props[p].title as string) : p);
  const params = Object.entries(m.params).map(([p, msg]) => `${title(p)}: ${msg}`);
  const rest = params.length ? [] : m.form.flatMap((f) => f.errors);
  return [...params, ...rest, ...m.other];
}

export type NamePath = (string | number)[];

/**
 * fieldPath splits an API field path into an antd NamePath:
 * "smtp.host" → ['smtp', 'host'], "webhooks[1].url" → ['webhooks', 1, 'url'].
 */
export function fieldPath(key: string): NamePath {
  const out: NamePath = [];
  for (const part of key.split('.')) {
    const m = /^([^[\]]*)((?:\[\d+\])*)$/.exec(part);
    if (!m) {
      out.push(part);
      continue;
    }
    if (m[1]) out.push(m[1]);
    for (const i of m[2].matchAll(/\[(\d+)\]/g)) out.push(Number(i[1]));
  }
  return out;
}

/**
 * mapNestedFieldErrors sorts the API's field errors onto a form with nested
 * fields: place turns an API path into the form's NamePath, or null when
 * the form has no field for it (those come back as lines in other).
 */
export function mapNestedFieldErrors(
  fields: Record<string, string> | undefined,
  place: (path: NamePath, key: string) => NamePath | null,
): { form: { name: NamePath; errors: string[] }[]; other: string[] } {
  const out: { form: { name: NamePath; errors: string[] }[]; other: string[] } = { form: [], other: [] };
  for (const [key, msg] of Object.entries(fields ?? {})) {
    const name = place(fieldPath(key), key);
    if (!name) {
      out.other.push(`${key}: ${msg}`);
      continue;
    }
    const existing = out.form.find((f) => f.name.join('\u0000') === name.join('\u0000'));
    if (existing) existing.errors.push(msg);
    else out.form.push({ name, errors: [msg] });
  }
  return out;
}
