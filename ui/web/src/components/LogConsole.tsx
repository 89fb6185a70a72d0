import { DownloadOutlined } from '@ant-design/icons';
import { Alert, Button, Input, Space, Tag } from 'antd';
import { useEffect, useMemo, useRef, useState } from 'react';
import { useTranslation } from 'react-i18next';

export interface LogConsoleProps {
  text: string;
  truncated?: boolean;
  live?: boolean;
  fileName?: string;
}

/** LogConsole shows run output: search with highlighted matches, download, follows the end while live. */
export function LogConsole({ text, truncated, live, fileName = 'output.txt' }: LogConsoleProps) {
  const { t } = useTranslation();
  const [q, setQ] = useState('');
  const pre = useRef<HTMLPreElement>(null);
  const stick = useRef(true);

  const parts = useMemo(() => {
    if (!q) return null;
    const out: { s: string; hit: boolean }[] = [];
    const lower = text.toLowerCase();
    const needle = q.toLowerCase();
    let i = 0;
    for (;;) {
      const j = lower.indexOf(needle, i);
      if (j < 0) break;
      out.push({ s: text.slice(i, j), hit: false }, { s: text.slice(j, j + q.length), hit: true });
      i = j + q.length;
    }
    out.push({ s: text.slice(i), hit: false });
    return out;
  }, [text, q]);
  const matches = parts ? parts.filter((p) => p.hit).length : 0;

  useEffect(() => {
    const el = pre.current;
    if (el && live && stick.current) el.scrollTop = el.scrollHeight;
  }, [text, live]);

  const download = () => {
    const url = URL.createObjectURL(new Blob([text], { type: 'text/plain;charset=utf-8' }));
    const a = document.createElement('a');
    a.href = url;
    a.download = fileName;
    a.click();
    setTimeout(() => URL.revokeObjectURL(url), 1000);
  };

  return (
    <div className="log-console">
      <Space wrap style={{ marginBottom: 8 }}>
        <Input.Search
          allowClear
          aria-label={t('run.searchOutput')}
          placeholder={t('run.searchOutput')}
          value={q}
          onChange={(e) => setQ(e.target.value)}
          style={{ width: 260 }}
        />
        {q && <span>{t('run.matches', { count: matches })}</span>}
        {live && <Tag color="processing" data-testid="live-tag">{t('run.live')}</Tag>}
        <Button icon={<DownloadOutlined />} onClick={download}>{t('common.download')}</Button>
      </Space>
      {truncated && <Alert type="warning" showIcon title={t('run.truncated')} style={{ marginBottom: 8 }} />}
      <pre
        ref={pre}
        className="log-output"
        data-testid="run-output"
        tabIndex={0}
        aria-label={t('run.output')}
        onScroll={(e) => {
          const el = e.currentTarget;
          stick.current = el.scrollHeight - el.scrollTop - el.clientHeight < 24;
        }}
      >
        {text === '' ? t('run.emptyOutput') : parts ? parts.map((p, i) => (p.hit ? <mark key={i}>{p.s}</mark> : <span key={i}>{p.s}</span>)) : text}
      </pre>
    </div>
  );
}
