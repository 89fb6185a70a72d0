// Prepares a handler's published params JSON Schema for the form renderer.

export type JSONSchema = Record<string, unknown>;

/** schemaProps lists the top-level properties of a params schema. */
export function schemaProps(schema: JSONSchema | undefined | null): string[] {
  const props = schema?.properties;
  return props && typeof props === 'object' ? Object.keys(props as object) : [];
}

export function hasForm(schema: JSONSchema | undefined | null): boolean {
  return schemaProps(schema).length > 0;
}

/**
 * handlerDescription is a handler's description in lang: the
 * "handler_description" of its params schema's root x-cronix-i18n entry for
 * lang (or its base language), else the description the handler publishes.
 */
export function handlerDescription(h: { description: string; params_schema?: JSONSchema | null }, lang: string): string {
  const i18n = h.params_schema?.['x-cronix-i18n'];
  if (i18n && typeof i18n === 'object') {
    const table = i18n as Record<string, { handler_description?: unknown } | undefined>;
    const d = (table[lang] ?? table[lang.split('-')[0]])?.handler_description;
    if (typeof d === 'string' && d !== '') return d;
  }
  return h.description;
}

/**
 * localizeSchema applies a schema's localized text: every schema node (the
 * root, its properties, nested properties and array items) may carry
 * "x-cronix-i18n": {"zh-CN": {"title": …, "description": …}}; for lang (an
 * exact tag such as zh-CN, else its base language, zh) the node's title and
 * description are replaced. The extension is removed either way. It changes
 * schema in place.
 */
export function localizeSchema(schema: JSONSchema, lang: string): void {
  const i18n = schema['x-cronix-i18n'];
  delete schema['x-cronix-i18n'];
  if (i18n && typeof i18n === 'object') {
    const table = i18n as Record<string, { title?: unknown; description?: unknown } | undefined>;
    const text = table[lang] ?? table[lang.split('-')[0]];
    if (text && typeof text.title === 'string') schema.title = text.title;
    if (text && typeof text.description === 'string') schema.description = text.description;
  }
  const props = schema.properties;
  if (props && typeof props === 'object') {
    for (const p of Object.values(props as Record<string, unknown>)) if (p && typeof p === 'object') localizeSchema(p as JSONSchema, lang);
  }
  for (const key of ['items', 'additionalProperties']) {
    const sub = schema[key];
    if (sub && typeof sub === 'object' && !Array.isArray(sub)) localizeSchema(sub as JSONSchema, lang);
  }
}

/**
 * normalizeSchema removes what the form renderer cannot use: "$schema" (the
 * renderer's validator is draft-07; the server validates against the real
 * draft), and a string's anyOf of an enum and a pattern, which becomes a free
 * string with the enum as suggestions. x-cronix-widget: code becomes the code
 * widget; x-cronix-i18n gives the titles and descriptions of lang
 * (localizeSchema).
 */
export function normalizeSchema(schema: JSONSchema, lang = 'en'): { schema: JSONSchema; uiSchema: Record<string, unknown> } {
  const copy = JSON.parse(JSON.stringify(schema)) as JSONSchema;
  delete copy.$schema;
  localizeSchema(copy, lang);
  const uiSchema: Record<string, Record<string, unknown>> = {};
  const props = (copy.properties ?? {}) as Record<string, JSONSchema>;
  for (const [name, p] of Object.entries(props)) {
    const ui: Record<string, unknown> = {};
    if (p['x-cronix-widget'] === 'code') ui['ui:widget'] = 'code';
    if (Array.isArray(p.anyOf) && p.type === 'string') {
      const options = (p.anyOf as JSONSchema[]).flatMap((b) => (Array.isArray(b.enum) ? (b.enum as unknown[]) : []));
      delete p.anyOf;
      if (options.length > 0) p.examples = options;
    }
    if (Object.keys(ui).length > 0) uiSchema[name] = ui;
  }
  return { schema: copy, uiSchema };
}
