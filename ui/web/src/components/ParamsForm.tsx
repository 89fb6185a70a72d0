import Form from '@rjsf/antd';
import type { ErrorSchema, RegistryWidgetsType, WidgetProps } from '@rjsf/utils';
import validator from '@rjsf/validator-ajv8';
import { Input } from 'antd';
import { useMemo, useState } from 'react';
import { useTranslation } from 'react-i18next';
import { formStrings } from '../lib/rjsfStrings';
import { hasForm, normalizeSchema, type JSONSchema } from '../lib/schema';

/** CodeWidget edits a script: monospace, no spell check, sized to its content. */
function CodeWidget(props: WidgetProps) {
  const { id, value, onChange, disabled, readonly, required, label } = props;
  return (
    <Input.TextArea
      id={id}
      aria-label={label}
      className="code-input"
      value={(value as string | undefined) ?? ''}
      required={required}
      disabled={disabled || readonly}
      spellCheck={false}
      autoSize={{ minRows: 4, maxRows: 24 }}
      onChange={(e) => onChange(e.target.value === '' ? undefined : e.target.value)}
    />
  );
}

const widgets: RegistryWidgetsType = { code: CodeWidget };

export interface ParamsFormProps {
  /** the handler's params JSON Schema ({} when it publishes none) */
  schema: JSONSchema | null | undefined;
  value: Record<string, unknown>;
  onChange: (v: Record<string, unknown>) => void;
  /** API errors by params property (from mapFieldErrors) */
  errors?: Record<string, string>;
  disabled?: boolean;
  idPrefix?: string;
}

/**
 * ParamsForm renders a handler's params schema as a form, or a JSON editor
 * when the handler publishes no schema. The server is the validator of
 * record; errors it reports for a property are shown on that property.
 */
/** Titles of objects sit on the left, like every other label of the job form. */
const formContext = { labelAlign: 'left' };

export function ParamsForm({ schema, value, onChange, errors, disabled, idPrefix = 'params' }: ParamsFormProps) {
  const { t, i18n } = useTranslation();
  const lang = i18n.language;
  const prepared = useMemo(() => (schema && hasForm(schema) ? normalizeSchema(schema, lang) : null), [schema, lang]);
  const translateString = useMemo(() => formStrings(lang), [lang]);
  const extraErrors = useMemo(() => {
    const es: Record<string, { __errors: string[] }> = {};
    for (const [k, v] of Object.entries(errors ?? {})) es[k] = { __errors: [v] };
    return es as unknown as ErrorSchema;
  }, [errors]);

  if (!prepared) return <JsonParams value={value} onChange={onChange} disabled={disabled} label={t('job.paramsJson')} hint={t('job.noSchema')} id={idPrefix + '_json'} />;
  return (
    <div className="params-form" data-testid="params-form">
      <Form
        schema={prepared.schema}
        uiSchema={{ ...prepared.uiSchema, 'ui:submitButtonOptions': { norender: true } }}
        formData={value}
        validator={validator}
        widgets={widgets}
        translateString={translateString}
        idPrefix={idPrefix}
        formContext={formContext}
        tagName="div"
        disabled={disabled}
        showErrorList={false}
        extraErrors={extraErrors}
        noHtml5Validate
        onChange={(e) => onChange((e.formData ?? {}) as Record<string, unknown>)}
      >
        <></>
      </Form>
    </div>
  );
}

function JsonParams(props: { value: Record<string, unknown>; onChange: (v: Record<string, unknown>) => void; disabled?: boolean; label: string; hint: string; id: string }) {
  const { t } = useTranslation();
  const [text, setText] = useState(() => JSON.stringify(props.value ?? {}, null, 2));
  const [bad, setBad] = useState(false);
  return (
    <div>
      <label htmlFor={props.id} className="sr-only">{props.label}</label>
      <Input.TextArea
        id={props.id}
        className="code-input"
        value={text}
        disabled={props.disabled}
        autoSize={{ minRows: 3, maxRows: 20 }}
        status={bad ? 'error' : undefined}
        onChange={(e) => {
          setText(e.target.value);
          try {
            const v = JSON.parse(e.target.value || '{}') as unknown;
            if (v && typeof v === 'object' && !Array.isArray(v)) {
              setBad(false);
              props.onChange(v as Record<string, unknown>);
              return;
            }
          } catch {
            // fall through
          }
          setBad(true);
        }}
      />
      <div className="field-hint">{bad ? t('job.invalidJson') : props.hint}</div>
    </div>
  );
}
