import { fireEvent, render, screen } from '@testing-library/react';
import { describe, expect, it, vi } from 'vitest';
import i18n from '../i18n';
import { ParamsForm } from './ParamsForm';

const shellSchema = {
  $schema: 'https://json-schema.org/draft/2020-12/schema',
  type: 'object',
  properties: {
    script: { type: 'string', title: 'Script', minLength: 1, 'x-cronix-widget': 'code', 'x-cronix-i18n': { 'zh-CN': { title: '脚本', description: '要运行的脚本' } } },
    env: { type: 'object', title: 'Environment', additionalProperties: { type: 'string' }, 'x-cronix-i18n': { 'zh-CN': { title: '环境变量' } } },
    interpreter: { type: 'string', title: 'Interpreter', default: 'sh', anyOf: [{ enum: ['sh', 'bash', 'python3'] }, { pattern: '^/' }] },
  },
  required: ['script'],
  additionalProperties: false,
};

describe('ParamsForm', () => {
  it('renders labelled inputs from the schema and reports edits', () => {
    const onChange = vi.fn();
    render(<ParamsForm schema={shellSchema} value={{ script: 'echo hi' }} onChange={onChange} />);
    const script = screen.getByLabelText(/Script/);
    expect(script.tagName).toBe('TEXTAREA');
    expect(script).toHaveValue('echo hi');
    expect(screen.getByLabelText(/Interpreter/)).toBeInTheDocument();
    fireEvent.change(script, { target: { value: 'echo bye' } });
    expect(onChange).toHaveBeenLastCalledWith(expect.objectContaining({ script: 'echo bye' }));
  });

  it('shows an API error on the property it names', () => {
    render(<ParamsForm schema={shellSchema} value={{ script: '' }} onChange={() => {}} errors={{ script: 'must not be empty' }} />);
    expect(screen.getByText('must not be empty')).toBeInTheDocument();
  });

  it('falls back to a JSON editor without a schema', () => {
    const onChange = vi.fn();
    render(<ParamsForm schema={{}} value={{ a: 1 }} onChange={onChange} />);
    const box = screen.getByLabelText('Parameters (JSON)');
    fireEvent.change(box, { target: { value: '{"a": 2}' } });
    expect(onChange).toHaveBeenLastCalledWith({ a: 2 });
    fireEvent.change(box, { target: { value: '[1' } });
    expect(screen.getByText('Not valid JSON')).toBeInTheDocument();
  });

  it('shows the schema text and its own buttons in the UI language', async () => {
    await i18n.changeLanguage('zh-CN');
    try {
      render(<ParamsForm schema={shellSchema} value={{ script: 'echo hi', env: { A: '1' } }} onChange={() => {}} />);
      expect(screen.getByLabelText(/脚本/).tagName).toBe('TEXTAREA');
      expect(screen.getByText('要运行的脚本')).toBeInTheDocument();
      expect(screen.getByText('环境变量')).toBeInTheDocument();
      expect(screen.queryByText('Script')).toBeNull();
      expect(screen.getByLabelText('A 键')).toBeInTheDocument();
    } finally {
      await i18n.changeLanguage('en');
    }
  });
});
