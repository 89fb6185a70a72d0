import { diffLines } from 'diff';

/** VersionDiff shows a line diff of two texts: removed lines red, added green. */
export function VersionDiff({ before, after }: { before: string; after: string }) {
  const parts = diffLines(before, after);
  return (
    <pre className="diff-view" data-testid="version-diff">
      {parts.map((p, i) => {
        const cls = p.added ? 'diff-add' : p.removed ? 'diff-del' : undefined;
        const mark = p.added ? '+ ' : p.removed ? '- ' : '  ';
        const lines = p.value.replace(/\n$/, '').split('\n').map((l) => mark + l).join('\n');
        return <span key={i} className={cls}>{lines}{'\n'}</span>;
      })}
    </pre>
  );
}
