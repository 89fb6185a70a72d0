// Prints the gzipped size of what the browser loads before the first route:
// the entry script and every module index.html preloads, plus CSS. Exits 1
// when it exceeds the budget (KB, default 350).
import { readFileSync } from 'node:fs';
import { join, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { gzipSync } from 'node:zlib';

const dist = join(dirname(fileURLToPath(import.meta.url)), '..', '..', 'dist');
const budget = Number(process.argv[2] ?? 350) * 1024;
const html = readFileSync(join(dist, 'index.html'), 'utf8');
const files = [...html.matchAll(/(?:src|href)="\/(assets\/[^"]+\.(?:js|css))"/g)].map((m) => m[1]);
let total = 0;
for (const f of files) {
  const gz = gzipSync(readFileSync(join(dist, f)), { level: 9 }).length;
  total += gz;
  console.log(`${(gz / 1024).toFixed(1).padStart(8)} KB  ${f}`);
}
console.log(`${(total / 1024).toFixed(1).padStart(8)} KB  initial JavaScript+CSS, gzipped (budget ${budget / 1024} KB)`);
if (total > budget) process.exit(1);
