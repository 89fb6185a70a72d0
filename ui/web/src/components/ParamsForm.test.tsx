import { fireEvent, render, screen } from '@testing-library/react';
import { describe, expect, it, vi } from 'vitest';
import '../i18n';
import { ParamsForm } from './ParamsForm';

const shellSchema = {
  $schema: 'https://json-schema.org/draft/2020-12/schema',
  type: 'object',
  properties: {
    script: { type: 'string', title: 'Script', minLength: 1, 'x-cronix-widget': 'code' },
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
});
