import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { handlerDescription, localizeSchema, normalizeSchema, schemaProps, type JSONSchema } from './schema';

/** The params schema a built-in plugin publishes (its paramsSchema constant). */
function builtinSchema(plugin: string): JSONSchema {
  const src = readFileSync(join(__dirname, '..', '..', '..', '..', 'plugins', plugin, 'params.go'), 'utf8');
  const text = /const paramsSchema = `([\s\S]*?)`/.exec(src)?.[1];
  if (!text) throw new Error(`no paramsSchema in plugins/${plugin}/params.go`);
  return JSON.parse(text) as JSONSchema;
}

const sample: JSONSchema = {
  title: 'Root',
  'x-cronix-i18n': { 'zh-CN': { title: '根' } },
  type: 'object',
  properties: {
    script: { type: 'string', title: 'Script', description: 'Runs.', 'x-cronix-i18n': { 'zh-CN': { title: '脚本', description: '运行。' } } },
    only: { type: 'string', title: 'Only title', description: 'Kept.', 'x-cronix-i18n': { zh: { title: '只有标题' } } },
    plain: { type: 'string', title: 'Plain' },
    nested: {
      type: 'object', title: 'Nested',
      properties: { inner: { type: 'integer', title: 'Inner', 'x-cronix-i18n': { 'zh-CN': { title: '内部' } } } },
    },
    list: { type: 'array', title: 'List', items: { type: 'integer', title: 'Code', 'x-cronix-i18n': { 'zh-CN': { title: '代码' } } } },
  },
};

describe('x-cronix-i18n', () => {
  it('maps titles and descriptions of the UI language, at every depth', () => {
    const { schema } = normalizeSchema(sample, 'zh-CN');
    const p = schema.properties as Record<string, JSONSchema>;
    expect(schema.title).toBe('根');
    expect(p.script).toMatchObject({ title: '脚本', description: '运行。' });
    // A base-language entry (zh) serves zh-CN; what it does not give stays.
    expect(p.only).toMatchObject({ title: '只有标题', description: 'Kept.' });
    expect(p.plain.title).toBe('Plain');
    expect((p.nested.properties as Record<string, JSONSchema>).inner.title).toBe('内部');
    expect((p.list.items as JSONSchema).title).toBe('代码');
    // The extension itself does not reach the renderer, and the input is not changed.
    expect(JSON.stringify(schema)).not.toContain('x-cronix-i18n');
    expect((sample.properties as Record<string, JSONSchema>).script.title).toBe('Script');
  });

  it('keeps the schema text in a language without an entry', () => {
    const { schema } = normalizeSchema(sample, 'en');
    const p = schema.properties as Record<string, JSONSchema>;
    expect(schema.title).toBe('Root');
    expect(p.script).toMatchObject({ title: 'Script', description: 'Runs.' });
    expect(p.only.title).toBe('Only title');
  });

  it('localizes the handler description from the root entry', () => {
    const h = { description: 'Runs.', params_schema: { 'x-cronix-i18n': { zh: { handler_description: '运行。' } } } };
    expect(handlerDescription(h, 'zh-CN')).toBe('运行。');
    expect(handlerDescription(h, 'en')).toBe('Runs.');
    expect(handlerDescription({ description: 'Runs.', params_schema: null }, 'zh-CN')).toBe('Runs.');
  });

  it('ignores malformed entries', () => {
    const s: JSONSchema = { title: 'T', 'x-cronix-i18n': { 'zh-CN': { title: 5, description: null } } };
    localizeSchema(s, 'zh-CN');
    expect(s).toEqual({ title: 'T' });
  });

  // The built-in handlers' forms are all Chinese in zh-CN: every property
  // (and the schema) has a zh-CN title, and a zh-CN description where it has
  // an English one.
  for (const plugin of ['shell', 'http']) {
    it(`gives every property of the ${plugin} handler's schema zh-CN text`, () => {
      const raw = builtinSchema(plugin);
      const { schema } = normalizeSchema(raw, 'zh-CN');
      const en = raw.properties as Record<string, JSONSchema>;
      const zh = schema.properties as Record<string, JSONSchema>;
      expect(schemaProps(raw).length).toBeGreaterThan(2);
      expect(schema.title).not.toBe(raw.title);
      const zhHandler = handlerDescription({ description: 'English', params_schema: raw }, 'zh-CN');
      expect(zhHandler).not.toBe('English');
      expect(zhHandler).toMatch(/[\u4e00-\u9fff]/);
      expect(handlerDescription({ description: 'English', params_schema: raw }, 'en')).toBe('English');
      for (const name of schemaProps(raw)) {
        const i18n = (en[name]['x-cronix-i18n'] as Record<string, { title?: string }> | undefined)?.['zh-CN'];
        expect(i18n?.title, `${plugin}.${name} has a zh-CN title`).toBeTruthy();
        expect(zh[name].title).toBe(i18n?.title);
        if (en[name].description) expect(zh[name].description, `${plugin}.${name} description`).not.toBe(en[name].description);
      }
    });
  }
});
