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
 * normalizeSchema removes what the form renderer cannot use: "$schema" (the
 * renderer's validator is draft-07; the server validates against the real
 * draft), and a string's anyOf of an enum and a pattern, which becomes a free
 * string with the enum as suggestions. x-cronix-widget: code becomes the code
 * widget.
 */
export function normalizeSchema(schema: JSONSchema): { schema: JSONSchema; uiSchema: Record<string, unknown> } {
  const copy = JSON.parse(JSON.stringify(schema)) as JSONSchema;
  delete copy.$schema;
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
