// The web admin in real Chromium against a running Cronix (started by
// integration/browser_test.go). Every step asserts what a user sees; any
// console error or uncaught page error fails the run.
//
// Env: CRONIX_URL, CRONIX_USER, CRONIX_PASSWORD, CRONIX_TOKEN (an admin
// bearer token for set-up calls), CHROMIUM (default /usr/bin/chromium),
// SCREENSHOT_DIR (optional), VIEWER_USER/VIEWER_PASSWORD (a viewer account,
// to check what a viewer sees).
import { chromium } from 'playwright-core';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';

const base = process.env.CRONIX_URL;
const user = process.env.CRONIX_USER ?? 'admin';
const password = process.env.CRONIX_PASSWORD;
const token = process.env.CRONIX_TOKEN;
const shots = process.env.SCREENSHOT_DIR;
const viewerUser = process.env.VIEWER_USER;
const viewerPassword = process.env.VIEWER_PASSWORD;
const T = 60_000; // generous: the machine is shared
if (!base || !password || !token) throw new Error('CRONIX_URL, CRONIX_PASSWORD and CRONIX_TOKEN are required');
if (!viewerUser || !viewerPassword) throw new Error('VIEWER_USER and VIEWER_PASSWORD are required');
if (shots) mkdirSync(shots, { recursive: true });

const step = (name) => console.log(`--- ${name}`);
const report = {};

async function apiCall(method, path, body) {
  const res = await fetch(base + path, {
    method,
    headers: { Authorization: `Bearer ${token}`, 'Content-Type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  if (!res.ok) throw new Error(`${method} ${path}: ${res.status} ${text}`);
  return text ? JSON.parse(text) : undefined;
}

async function until(what, fn, timeout = T) {
  const deadline = Date.now() + timeout;
  let last;
  for (;;) {
    try {
      const v = await fn();
      if (v) return v;
    } catch (e) {
      last = e;
    }
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}${last ? ': ' + last.message : ''}`);
    await new Promise((r) => setTimeout(r, 250));
  }
}

const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM ?? '/usr/bin/chromium',
  headless: true,
  args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking',
    '--disable-component-update', '--disable-sync'],
});
const problems = [];
function watch(page, who) {
  page.on('console', (m) => {
    if (m.type() !== 'error') return;
    // Chromium logs every failed request as a console error; the ones the
    // app expects are: no session yet (auth/me 401, or 404 on a server
    // without the cookie session), the preview refusing a bad schedule
    // (400), and a viewer refused an admin route (403).
    const failed = /^Failed to load resource: the server responded with a status of (\d+)/.exec(m.text());
    const path = failed ? new URL(m.location().url, base).pathname : '';
    if (failed && ((path === '/api/v1/auth/me' && ['401', '404'].includes(failed[1])) ||
        (path === '/api/v1/schedules/preview' && failed[1] === '400') ||
        (who === 'viewer' && failed[1] === '403'))) return;
    problems.push(`${who} console error: ${m.text()} ${path}`);
  });
  page.on('pageerror', (e) => problems.push(`${who} page error: ${e.message}`));
}
async function shot(page, name) {
  if (!shots) return;
  // No open select list, passing toast or loading veil over the page in the pictures.
  await until(`${name}: no popup over the page`, async () =>
    (await page.locator('.ant-select-dropdown:visible, .ant-message-notice:visible, .ant-spin-spinning:visible').count()) === 0, 15_000);
  await page.mouse.move(1, 1); // no hover highlight in the pictures
  await page.evaluate(() => document.activeElement?.blur?.()); // nor a focus ring
  // Transitions finished: a theme switch fades colours over 0.2 s, and a
  // picture taken inside it shows half the page in the old theme.
  await page.screenshot({ path: join(shots, name + '.png'), fullPage: false, animations: 'disabled' });
}
// In-app navigation (like following a link), without reloading the app.
async function nav(page, path) {
  await page.evaluate((p) => {
    window.history.pushState({}, '', p);
    window.dispatchEvent(new PopStateEvent('popstate'));
  }, path);
}
// The accessible name of the focused element (its label, aria-label,
// aria-labelledby text, or text for buttons and links) and its test id.
function focused(page) {
  return page.evaluate(() => {
    const a = document.activeElement;
    if (!a || a === document.body) return { name: '', testid: '', tag: '' };
    const byId = (id) => document.getElementById(id)?.textContent ?? '';
    const name = (a.id && document.querySelector(`label[for="${CSS.escape(a.id)}"]`)?.textContent) ||
      a.getAttribute('aria-label') ||
      (a.getAttribute('aria-labelledby') ?? '').split(/\s+/).filter(Boolean).map(byId).join(' ') ||
      (['BUTTON', 'A', 'LI'].includes(a.tagName) ? a.textContent : '') || '';
    return { name: name.trim(), testid: a.closest('[data-testid]')?.getAttribute('data-testid') ?? '', tag: a.tagName };
  });
}
// tabTo presses Tab (only) until the focused element matches: a test id, or
// an accessible name matching the RegExp. Fails if it never gets there.
async function tabTo(page, want, max = 60) {
  const hit = (f) => (want instanceof RegExp ? want.test(f.name) : f.testid === want);
  for (let i = 0; i < max; i++) {
    await page.keyboard.press('Tab');
    if (hit(await focused(page))) return;
  }
  throw new Error(`keyboard: ${max} Tab presses never reached ${want}; focus is on ${JSON.stringify(await focused(page))}`);
}
// unlabelled lists the visible form controls that have no accessible name.
function unlabelled(page) {
  return page.evaluate(() => [...document.querySelectorAll('input, textarea, select, [role=combobox], [role=switch], [role=checkbox], [contenteditable=true]')]
    .filter((e) => e.type !== 'hidden' && !e.closest('[aria-hidden=true]') && e.getClientRects().length > 0)
    .filter((e) => {
      const byId = (id) => document.getElementById(id)?.textContent?.trim();
      return !((e.id && document.querySelector(`label[for="${CSS.escape(e.id)}"]`)?.textContent?.trim()) ||
        e.getAttribute('aria-label')?.trim() || (e.getAttribute('aria-labelledby') ?? '').split(/\s+/).some(byId) ||
        e.closest('label')?.textContent?.trim() || e.getAttribute('title')?.trim());
    })
    .map((e) => e.outerHTML.slice(0, 200)));
}
async function requireLabelled(page, where) {
  const bad = await unlabelled(page);
  if (bad.length) throw new Error(`unlabelled form controls on ${where}:\n${bad.join('\n')}`);
}
async function setLang(page, label) {
  await page.getByLabel(/^(Language|语言)$/).first().click();
  await page.locator('.ant-select-item-option', { hasText: label }).click();
}

try {
  const ctx = await browser.newContext({ viewport: { width: 1280, height: 720 }, locale: 'en-US' });
  const page = await ctx.newPage();
  page.setDefaultTimeout(T);
  watch(page, 'admin');

  step('keyboard-only login');
  const t0 = Date.now();
  await page.goto(base + '/');
  await page.getByLabel('User name').waitFor();
  report.loginPageMs = Date.now() - t0;
  await requireLabelled(page, 'the login page');
  // The user name field has focus on load; from here to the saved job the
  // test uses the keyboard only: Tab, arrows, typing and Enter, no clicks.
  await until('focus on the user name', () => page.evaluate(() => document.activeElement?.id === 'username'));
  await page.keyboard.type(user);
  await page.keyboard.press('Tab');
  await page.keyboard.type(password);
  const t1 = Date.now();
  await page.keyboard.press('Enter');
  await page.getByTestId('dashboard').waitFor();
  await page.locator('.ant-statistic-content-value').first().waitFor();
  await until('dashboard figures', async () => !(await page.locator('.ant-statistic-content-value').first().innerText()).includes('—'));
  report.loginToDashboardMs = Date.now() - t1;
  await until('the runs chart', () => page.locator('[role=img] canvas').count());
  // Its screenshot is taken later, once the test's runs are there.

  step('keyboard: main menu → Jobs → New job');
  await page.keyboard.press('Tab'); // the main menu is the first stop after the login
  await until('focus in the main menu', () => page.evaluate(() => !!document.activeElement?.closest('nav[aria-label=main]')));
  // The menu moves focus between its items with the arrow keys (a little
  // after the key press): step down until Jobs has it.
  for (let i = 0; (await focused(page)).name !== 'Jobs'; i++) {
    if (i > 10) throw new Error('keyboard: the arrow keys never reached Jobs in the main menu');
    const before = JSON.stringify(await focused(page));
    await page.keyboard.press('ArrowDown');
    await until('the menu focus to move', async () => JSON.stringify(await focused(page)) !== before, 5_000);
  }
  await page.keyboard.press('Enter');
  await page.getByRole('heading', { name: 'Jobs' }).waitFor();
  await page.locator('.ant-table').first().waitFor();
  await tabTo(page, 'create-job');
  await page.keyboard.press('Enter');
  await page.getByRole('heading', { name: 'New job' }).waitFor();

  step('a bad cron shows the parser message under the field (keyboard)');
  await tabTo(page, /^Name$/);
  await page.keyboard.type('e2e-hello');
  await tabTo(page, /^Schedule$/);
  await page.keyboard.type('61 * * * *');
  const schedule = page.getByLabel('Schedule', { exact: true });
  const scheduleItem = page.locator('.ant-form-item').filter({ has: schedule });
  await scheduleItem.locator('.ant-form-item-explain-error').filter({ hasText: '61' }).waitFor();

  step('a good cron shows the explanation and the preview (keyboard)');
  await page.keyboard.press('ControlOrMeta+A');
  await page.keyboard.type('*/2 * * * * *');
  await page.getByTestId('cron-words').filter({ hasText: 'Every 2 seconds' }).waitFor();
  await page.getByTestId('cron-preview').waitFor();
  const previewRows = await page.getByTestId('cron-preview').locator('tbody tr').count();
  if (previewRows !== 10) throw new Error(`preview shows ${previewRows} fires, want 10`);

  step('handler select and the schema-rendered params form (keyboard)');
  await tabTo(page, /^Handler$/);
  await page.keyboard.type('shell');
  await page.keyboard.press('Enter');
  await page.getByLabel(/^Script/).waitFor();
  await tabTo(page, /^Script/);
  await page.keyboard.type('echo hello-from-e2e');
  await requireLabelled(page, 'the job form');
  await shot(page, 'job-form-en');
  await tabTo(page, 'save-job');
  await page.keyboard.press('Enter');
  await until('the saved job page', () => /\/jobs\/\d+$/.test(new URL(page.url()).pathname));
  const jobId = Number(new URL(page.url()).pathname.split('/').pop());
  report.keyboardOnlyLoginToCreateJob = true;

  step('the job runs and its output opens');
  const runLink = page.getByTestId('run-link').first();
  await runLink.waitFor();
  await until('a successful run in the table', () => page.locator('[data-status=success]').count());
  await page.locator('tr', { has: page.locator('[data-status=success]') }).first().getByTestId('run-link').click();
  await page.getByTestId('run-output').filter({ hasText: 'hello-from-e2e' }).waitFor();

  step('a reload keeps the session (cookie) and its CSRF token (from /auth/me)');
  await nav(page, `/jobs/${jobId}`);
  await page.getByTestId('trigger-job').waitFor();
  await page.reload();
  await page.getByTestId('trigger-job').waitFor();
  if (await page.getByLabel('User name').count()) throw new Error('a reload asked to log in again');
  if (await page.evaluate(() => localStorage.length + sessionStorage.length > 0 &&
      Object.keys({ ...localStorage, ...sessionStorage }).some((k) => !/^cronix\.(lang|dark)$/.test(k)))) {
    throw new Error('the app keeps something other than language/theme in web storage');
  }

  step('trigger with a params override (a write right after the reload: needs the restored CSRF token)');
  // The params field shows once the override box is ticked. Under CI load a
  // first click once did not take (seen once in many runs, cause not found):
  // up to three tries, each saying what it saw, so a real fault still fails.
  let paramsShown = false;
  for (let i = 0; i < 3 && !paramsShown; i++) {
    if (!(await page.getByTestId('trigger-ok').isVisible())) await page.getByTestId('trigger-job').click();
    await page.getByTestId('override-params').click();
    paramsShown = await page.getByLabel('Parameters (JSON)').waitFor({ timeout: 10_000 }).then(() => true, () => false);
    if (!paramsShown) {
      console.log(`    try ${i + 1}: no params field after ticking the override (dialog open: ${await page.getByTestId('trigger-ok').isVisible()})`);
    }
  }
  if (!paramsShown) throw new Error('ticking "override parameters" never showed the params field');
  await page.getByLabel('Parameters (JSON)').fill(JSON.stringify({ script: 'echo override-42' }));
  await page.getByTestId('trigger-ok').click();
  const manual = await until('the manual run with the override', async () => {
    const runs = await apiCall('GET', `/api/v1/jobs/${jobId}/runs?page_size=100`);
    return runs.items.find((r) => r.trigger === 'manual' && r.status === 'success' && r.output.includes('override-42'));
  });
  await nav(page, `/runs/${manual.id}`);
  await page.getByTestId('run-output').filter({ hasText: 'override-42' }).waitFor();

  step('edit, compare versions, restore');
  await apiCall('PUT', `/api/v1/jobs/${jobId}`, { ...(await jobBody(jobId)), enabled: false });
  await nav(page, `/jobs/${jobId}`);
  await page.getByTestId('edit-job').click();
  const sched2 = page.getByLabel('Schedule', { exact: true });
  await sched2.fill('*/3 * * * * *');
  await page.getByTestId('cron-words').filter({ hasText: 'Every 3 seconds' }).waitFor();
  await page.getByTestId('save-job').click();
  await page.waitForURL(new RegExp(`/jobs/${jobId}$`));
  await page.getByRole('tab', { name: 'Versions' }).click();
  await page.getByTestId('pick-2').check();
  await page.getByTestId('pick-3').check();
  const diff = page.getByTestId('version-diff');
  await diff.locator('.diff-del', { hasText: 'schedule: */2 * * * * *' }).waitFor();
  await diff.locator('.diff-add', { hasText: 'schedule: */3 * * * * *' }).waitFor();
  await page.getByTestId('restore-1').click();
  await page.locator('.ant-popconfirm').getByRole('button', { name: /OK|Yes/ }).click();
  await until('revision 4 restored from revision 1', async () => {
    const j = await apiCall('GET', `/api/v1/jobs/${jobId}`);
    return j.revision === 4 && j.schedule === '*/2 * * * * *';
  });
  await page.getByTestId('pick-4').waitFor();

  step('API tokens: create one with a role and a group, see its secret once, use it');
  {
    await nav(page, '/tokens');
    await page.getByRole('heading', { name: 'API tokens' }).waitFor();
    await page.getByTestId('create-token').click();
    const dlg = page.getByRole('dialog');
    await dlg.getByLabel('Name').fill('ci-token');
    const choose = async (label, option) => {
      await dlg.getByLabel(label).click();
      await page.locator('.ant-select-dropdown:visible .ant-select-item-option', { hasText: option }).first().click();
    };
    await choose('Role', /^Viewer$/);
    await choose('Groups', /default/i);
    await dlg.locator('.ant-modal-title').click(); // closes the groups list, not the dialog
    await page.getByTestId('token-ok').click();
    const secret = /cxt_\S+/.exec(await page.getByTestId('token-secret').innerText())?.[0];
    if (!secret) throw new Error('no token secret shown after creating a token');
    const row = page.locator('.ant-table-row', { hasText: 'ci-token' });
    await row.waitFor();
    const rowText = await row.innerText();
    if (!rowText.includes('Viewer') || !rowText.includes(user)) throw new Error(`the token row lacks its role or user: ${rowText}`);
    if (!rowText.includes('never used')) throw new Error(`a new token's row does not say it was never used: ${rowText}`);
    // The secret works as a viewer of the default group: it reads the jobs, and may not write.
    const asToken = (method, path, body) => fetch(base + path, { method, headers: { Authorization: `Bearer ${secret}`, 'Content-Type': 'application/json' },
      body: body === undefined ? undefined : JSON.stringify(body) });
    const read = await asToken('GET', '/api/v1/jobs?q=e2e-hello');
    const readBody = await read.json();
    if (read.status !== 200 || !readBody.items.some((j) => j.name === 'e2e-hello')) throw new Error(`the token cannot read the jobs: ${read.status} ${JSON.stringify(readBody)}`);
    const write = await asToken('POST', '/api/v1/jobs', { name: 'by-token', schedule_type: 'none', handler: 'shell', params: { script: 'true' } });
    if (write.status !== 403) throw new Error(`a viewer token created a job: ${write.status}`);
    // Shown once: after a reload the token is listed, its secret is not.
    await page.reload();
    await row.waitFor();
    if (await page.getByTestId('token-secret').count()) throw new Error('the token secret is shown again after a reload');
    // ... and its use is recorded: "Last used" shows a time now.
    const usedText = await row.innerText();
    if (usedText.includes('never used') || !/\d{4}-\d\d-\d\d \d\d:\d\d:\d\d[\s\S]*\d{4}-\d\d-\d\d \d\d:\d\d:\d\d/.test(usedText)) {
      throw new Error(`the used token's row shows no last use: ${usedText}`);
    }
    await shot(page, 'tokens-en');
  }

  step('a failing job: its name on the dashboard; deleting it from its page says so');
  {
    const fail = await apiCall('POST', '/api/v1/jobs', { name: 'e2e-fail', schedule_type: 'none', schedule: '', handler: 'shell', params: { script: 'exit 3' } });
    await apiCall('POST', `/api/v1/jobs/${fail.id}/trigger`, {});
    await until('the failed run', async () => (await apiCall('GET', `/api/v1/jobs/${fail.id}/runs?page_size=5`)).items.some((r) => r.status === 'failed'));
    await nav(page, '/');
    await page.getByTestId('dashboard').waitFor();
    const failingLink = page.getByTestId('dashboard').locator(`a[href="/jobs/${fail.id}"]`);
    await until('the failing job by name on the dashboard', async () => (await failingLink.count()) > 0 && (await failingLink.first().innerText()) === 'e2e-fail');
    await failingLink.first().click();
    await page.getByTestId('delete-job').click();
    await page.locator('.ant-popconfirm').getByRole('button', { name: /OK|Yes/ }).click();
    await page.locator('.ant-message-notice', { hasText: 'Deleted job e2e-fail' }).waitFor();
    await until('back on the jobs list', () => new URL(page.url()).pathname === '/jobs');
  }

  step('a long run: live output, then kill');
  const long = await apiCall('POST', '/api/v1/jobs', {
    name: 'e2e-long', schedule_type: 'none', schedule: '', handler: 'shell',
    params: { script: 'i=0; while [ $i -lt 600 ]; do i=$((i+1)); echo tick-$i; sleep 0.2; done' },
  });
  await apiCall('POST', `/api/v1/jobs/${long.id}/trigger`, {});
  const running = await until('the long run to start', async () => {
    const runs = await apiCall('GET', `/api/v1/jobs/${long.id}/runs?page_size=5`);
    return runs.items.find((r) => r.status === 'running');
  });
  await nav(page, `/runs/${running.id}`);
  await page.getByTestId('live-tag').waitFor();
  const out = page.getByTestId('run-output');
  await out.filter({ hasText: 'tick-' }).waitFor();
  const ticks = async () => Math.max(0, ...[...(await out.innerText()).matchAll(/tick-(\d+)/g)].map((m) => Number(m[1])));
  const first = await ticks();
  await until('more output to arrive live', async () => (await ticks()) >= first + 5);
  await shot(page, 'run-live-en');
  await setLang(page, '简体中文');
  await page.getByText('运行 ' + running.id).first().waitFor();
  await shot(page, 'run-live-zh');
  await setLang(page, 'English');
  await page.getByTestId('kill-run').click();
  await page.getByTestId('kill-ok').click();
  await page.getByTestId('run-status').locator('[data-status=killed]').waitFor();

  step('nodes, jobs, dashboard and the job form in both languages');
  // The dashboard with the runs made so far (the screenshot after the
  // login would show an empty chart and "last 0 runs"): it counts them
  // once its queries are refetched.
  await nav(page, '/');
  await page.getByTestId('dashboard').waitFor();
  await until('the dashboard counts the scheduled runs and today\'s successes', async () => {
    const n = /Schedule lateness \(last (\d+) runs\)/.exec(await page.getByTestId('dashboard').innerText());
    const ok = await page.getByTestId('runs-today').locator('a[href="/runs?status=success"]').innerText();
    return n && Number(n[1]) >= 3 && Number(ok.trim().split(/\s+/).pop()) > 0 && (await page.locator('[role=img] canvas').count()) > 0;
  });
  await shot(page, 'dashboard-en');
  await nav(page, '/nodes');
  await page.getByRole('heading', { name: 'Nodes' }).waitFor();
  await page.locator('.ant-table-row').first().waitFor();
  await shot(page, 'nodes-en');
  // The jobs table is one request per page: each row's next fire and last
  // run come with the list (no per-row run or preview request).
  const jobsPageRequests = [];
  const countJobsRequests = (req) => {
    const u = new URL(req.url());
    if (u.pathname.startsWith('/api/v1/')) jobsPageRequests.push(u.pathname + u.search);
  };
  page.on('request', countJobsRequests);
  await nav(page, '/jobs');
  await page.getByRole('heading', { name: 'Jobs' }).waitFor();
  await page.locator('.ant-table-row', { hasText: 'e2e-hello' }).waitFor();
  const helloRow = page.locator('.ant-table-row', { hasText: 'e2e-hello' });
  await until('the row shows the next fire and the last run', async () =>
    /\d{4}-\d\d-\d\d \d\d:\d\d:\d\d/.test(await helloRow.innerText()) && (await helloRow.locator('a[href^="/runs/"]').count()) === 1);
  page.off('request', countJobsRequests);
  const perRow = jobsPageRequests.filter((p) => /^\/api\/v1\/(jobs\/\d+\/runs|runs\?|schedules\/preview)/.test(p));
  const listCalls = jobsPageRequests.filter((p) => p.startsWith('/api/v1/jobs?'));
  if (perRow.length > 0 || listCalls.length > 1) throw new Error(`the jobs page made per-row requests: ${JSON.stringify(jobsPageRequests)}`);
  report.jobsPageApiRequests = jobsPageRequests;
  await shot(page, 'jobs-en');

  step('jobs table: schedule type and last status filters (server-side)');
  // Picks label in a filter select and waits until the select shows it: a
  // click on an option while its dropdown is still opening can be lost
  // (seen once in CI: Killed highlighted, nothing selected), so the pick is
  // repeated until it holds.
  async function pick(testid, label) {
    const select = page.getByTestId(testid);
    await until(`${label} picked in ${testid}`, async () => {
      if ((await select.innerText()).includes(label)) return true;
      if ((await page.locator('.ant-select-dropdown:visible').count()) === 0) await select.click();
      await page.locator('.ant-select-dropdown:visible .ant-select-item-option', { hasText: label }).first().click({ timeout: 2_000 });
      return (await select.innerText()).includes(label);
    });
  }
  const rowNames = async () => (await page.locator('.ant-table-row').allInnerTexts()).join('\n');
  await pick('filter-schedule-type', 'None (API / manual)');
  await until('the schedule_type filter in the URL and the table', async () =>
    new URL(page.url()).searchParams.get('schedule_type') === 'none' && (await rowNames()).includes('e2e-long') && !(await rowNames()).includes('e2e-hello'));
  await pick('filter-last-status', 'Killed');
  await until('the last_status filter in the URL and the table', async () =>
    new URL(page.url()).searchParams.get('last_status') === 'killed' && (await rowNames()).includes('e2e-long'));
  const filtered = await apiCall('GET', '/api/v1/jobs?schedule_type=none&last_status=killed');
  if (filtered.total !== 1 || filtered.items[0].name !== 'e2e-long') throw new Error(`the API filter gives ${JSON.stringify(filtered.items.map((j) => j.name))}`);
  await pick('filter-last-status', 'Success');
  await until('no killed job among the successes', async () =>
    new URL(page.url()).searchParams.get('last_status') === 'success' && !(await rowNames()).includes('e2e-long'));
  await nav(page, '/jobs');
  await page.locator('.ant-table-row').first().waitFor();
  await setLang(page, '简体中文');
  await page.getByRole('heading', { name: '任务' }).waitFor();
  await page.getByRole('menuitem', { name: '节点' }).waitFor();
  await page.locator('.ant-table-row', { hasText: 'e2e-hello' }).waitFor();
  await shot(page, 'jobs-zh');
  await page.getByRole('menuitem', { name: '节点' }).click();
  await page.getByRole('heading', { name: '节点' }).waitFor();
  await page.locator('.ant-table-row').first().waitFor();
  await shot(page, 'nodes-zh');
  await page.getByRole('menuitem', { name: '仪表盘' }).click();
  await page.getByRole('heading', { name: '仪表盘' }).waitFor();
  await until('the runs chart', () => page.locator('[role=img] canvas').count());
  await shot(page, 'dashboard-zh');
  await nav(page, `/jobs/${jobId}/edit`);
  await page.getByTestId('cron-preview').waitFor();
  await page.getByText('接下来 10 次触发').waitFor();
  await shot(page, 'job-form-zh');
  await setLang(page, 'English');
  await page.getByRole('heading', { name: /Edit job/ }).waitFor();

  step('a viewer sees no create button and no admin pages');
  {
    const vctx = await browser.newContext({ viewport: { width: 390, height: 844 } });
    const vp = await vctx.newPage();
    vp.setDefaultTimeout(T);
    watch(vp, 'viewer');
    // A link to a job without a session: the login, then that job (?next=).
    await vp.goto(base + `/jobs/${jobId}?tab=config`);
    await vp.getByLabel('User name').fill(viewerUser);
    const loginUrl = new URL(vp.url());
    if (loginUrl.pathname !== '/login' || loginUrl.searchParams.get('next') !== `/jobs/${jobId}?tab=config`) throw new Error(`no ?next= on the login: ${vp.url()}`);
    await vp.getByLabel('Password').fill(viewerPassword);
    await vp.getByRole('button', { name: 'Sign in' }).click();
    await vp.getByRole('heading', { name: /e2e-hello/ }).waitFor();
    if (new URL(vp.url()).pathname !== `/jobs/${jobId}`) throw new Error(`after the login the viewer is on ${vp.url()}, not the job`);
    await nav(vp, '/');
    await vp.getByTestId('dashboard').waitFor();
    await nav(vp, '/jobs');
    await vp.getByRole('heading', { name: 'Jobs' }).waitFor();
    // The viewer has the default group: it sees the jobs, but no create button.
    await vp.locator('.ant-table-row', { hasText: 'e2e-hello' }).first().waitFor();
    if (await vp.getByTestId('create-job').count()) throw new Error('a viewer sees the create button');
    // The menu (collapsed on a phone, but there) offers no page a viewer is refused.
    const menu = await vp.evaluate(() => [...document.querySelectorAll('nav[aria-label=main] .ant-menu-item')].map((e) => e.textContent.trim()));
    if (!menu.includes('Jobs')) throw new Error(`no menu found: ${JSON.stringify(menu)}`);
    for (const hidden of ['Nodes', 'Alerts', 'Users & roles', 'Audit log', 'Cluster']) {
      if (menu.includes(hidden)) throw new Error(`a viewer sees the ${hidden} page in the menu`);
    }
    for (const path of ['/users', '/audit', '/cluster', '/nodes', '/alerts', '/alerts/settings', '/jobs/new', `/jobs/${jobId}/edit`, `/jobs/${jobId}/copy`]) {
      await nav(vp, '/jobs');
      await vp.getByRole('heading', { name: 'Jobs' }).waitFor();
      await nav(vp, path);
      await vp.getByTestId('forbidden').waitFor();
    }
    // Nor write buttons on a job it can read.
    await nav(vp, `/jobs/${jobId}`);
    await vp.getByRole('heading', { name: /e2e-hello/ }).waitFor();
    for (const id of ['trigger-job', 'edit-job', 'delete-job']) {
      if (await vp.getByTestId(id).count()) throw new Error(`a viewer sees ${id}`);
    }
    // Logging out leads to a plain login page: the next user does not land on this job.
    await vp.getByTestId('logout').click();
    await vp.getByLabel('User name').waitFor();
    if (new URL(vp.url()).pathname !== '/login' || new URL(vp.url()).search !== '') throw new Error(`after the logout: ${vp.url()}`);
    await vctx.close();
  }

  step('alerts page');
  await page.getByRole('menuitem', { name: 'Alerts' }).click();
  await page.getByRole('heading', { name: 'Alerts' }).waitFor();
  await page.locator('.ant-table').first().waitFor();

  step('dark mode');
  await page.getByLabel('Dark mode').click();
  await until('the dark theme', () => page.evaluate(() => document.documentElement.dataset.theme === 'dark'));
  if ((await page.getByLabel('Dark mode').getAttribute('aria-checked')) !== 'true') throw new Error('the dark mode switch shows off in dark mode');
  // The page, the table header and the filter selects all turn dark (after
  // the theme's colour transition), and the header text stays readable.
  const brightness = (sel, prop = 'backgroundColor') => page.evaluate(([s, p]) => {
    const [r, g, b] = getComputedStyle(document.querySelector(s))[p].match(/\d+/g).map(Number);
    return r + g + b;
  }, [sel, prop]);
  for (const sel of ['.ant-layout', 'main .ant-table-thead th', 'main .ant-select']) {
    await until(`a dark ${sel}`, async () => (await brightness(sel)) <= 150, 5_000);
  }
  if ((await brightness('main .ant-table-thead th', 'color')) < 600) throw new Error('dark mode table header text is dark');
  await shot(page, 'alerts-dark-en');
  await page.getByLabel('Dark mode').click();
  await until('the light theme', () => page.evaluate(() => document.documentElement.dataset.theme === 'light'));

  step('alert settings: an SMTP host saved, there after a reload');
  {
    // What was stored before, to put back after (the reply's extra fields are not part of a PUT).
    const { password_set: _p, webhook_secrets_set: _w, from_flags: _f, ...before } = await apiCall('GET', '/api/v1/settings/alerting');
    await nav(page, '/alerts');
    await page.getByTestId('alert-settings-link').click();
    await page.getByRole('heading', { name: 'Alert settings' }).waitFor();
    await page.getByLabel('SMTP host').fill('smtp.example.com');
    await page.getByLabel('Port').fill('587');
    await page.getByLabel('Sender (From)').fill('cronix@example.com');
    await page.getByTestId('alert-settings-save').click();
    await page.locator('.ant-message-notice', { hasText: 'Saved' }).waitFor();
    await page.reload();
    await page.getByRole('heading', { name: 'Alert settings' }).waitFor();
    await until('the saved SMTP host after the reload', async () => (await page.getByLabel('SMTP host').inputValue()) === 'smtp.example.com');
    if ((await page.getByLabel('Sender (From)').inputValue()) !== 'cronix@example.com') throw new Error('the sender was not kept');
    const stored = await apiCall('GET', '/api/v1/settings/alerting');
    if (stored.smtp.host !== 'smtp.example.com' || stored.smtp.port !== 587) throw new Error(`stored SMTP settings: ${JSON.stringify(stored.smtp)}`);
    await shot(page, 'alert-settings-en');
    await apiCall('PUT', '/api/v1/settings/alerting', before);
  }

  step('dashboard and run detail on a 390-wide phone');
  await page.setViewportSize({ width: 390, height: 844 });
  const fitsWidth = () => page.evaluate(() => document.documentElement.scrollWidth <= window.innerWidth + 1);
  await nav(page, '/');
  await page.getByTestId('dashboard').waitFor();
  await until('the runs chart', () => page.locator('[role=img] canvas').count());
  if (!(await fitsWidth())) throw new Error('the dashboard scrolls sideways at 390 px');
  await shot(page, 'dashboard-phone-en');
  await nav(page, `/runs/${running.id}`);
  await page.getByTestId('run-output').waitFor();
  if (!(await fitsWidth())) throw new Error('the run detail scrolls sideways at 390 px');
  await shot(page, 'run-phone-en');
  const mustFit = async (where) => {
    const w = await page.evaluate(() => document.documentElement.scrollWidth);
    if (w > 391) throw new Error(`${where} scrolls sideways at 390 px (page ${w} px wide)`);
  };
  await nav(page, `/jobs/${jobId}?tab=versions`);
  await page.getByTestId('pick-1').waitFor();
  await mustFit('the job versions');
  await nav(page, '/jobs/new');
  await page.getByTestId('schedule-type-select').waitFor();
  await mustFit('the job form');
  await nav(page, '/cluster');
  await page.getByRole('heading', { name: 'Cluster' }).waitFor();
  await page.locator('.ant-table-row').first().waitFor();
  await mustFit('the cluster page');
  await page.setViewportSize({ width: 1280, height: 720 });

  step('warm load time of the dashboard');
  // The server and the browser's HTTP cache are warm now: load the app again
  // (a new tab of the logged-in context) and time it from the navigation
  // start to the dashboard's data rendered: the job and node figures, the
  // runs-today counts and the runs-per-day chart. Three loads; the median
  // is the figure (acceptance 4: at most 1 s).
  {
    const loads = [];
    for (let i = 0; i < 3; i++) {
      const wp = await ctx.newPage();
      wp.setDefaultTimeout(T);
      watch(wp, 'warm');
      // Main-thread busy time (CPU) is reported too: on a shared, loaded
      // machine the wall time partly measures waiting for a core.
      const cdp = await ctx.newCDPSession(wp);
      await cdp.send('Performance.enable');
      await wp.goto(base + '/');
      const done = await wp.waitForFunction(() => {
        const d = document.querySelector('[data-testid=dashboard]');
        if (!d) return false;
        const figures = [...d.querySelectorAll('.ant-statistic-content-value')].slice(0, 3).map((e) => e.textContent);
        const today = [...d.querySelectorAll('[data-testid=runs-today] strong')].map((e) => e.textContent);
        if (figures.length < 3 || today.length === 0 || [...figures, ...today].some((v) => !v || v.includes('—'))) return false;
        window.__figuresAt ??= performance.now();
        if (!d.querySelector('[role=img] canvas')) return false;
        // milliseconds since the navigation started
        return { figures: Math.round(window.__figuresAt), all: Math.round(performance.now()) };
      }, null, { polling: 'raf', timeout: T });
      const { figures, all: ms } = await done.jsonValue();
      const { metrics } = await cdp.send('Performance.getMetrics');
      const m = Object.fromEntries(metrics.map((x) => [x.name, x.value]));
      const requests = await wp.evaluate(() => performance.getEntriesByType('resource').filter((e) => e.name.includes('/api/v1/')).length);
      loads.push({ ms, figuresMs: figures, mainThreadMs: Math.round(m.TaskDuration * 1000), scriptMs: Math.round(m.ScriptDuration * 1000), apiRequests: requests });
      await wp.close();
    }
    const median = (k) => loads.map((l) => l[k]).sort((a, b) => a - b)[1];
    report.dashboardWarmLoads = loads;
    report.dashboardWarmLoadMedianMs = median('ms');
    report.dashboardWarmFiguresMedianMs = median('figuresMs');
    console.log(`dashboard warm load (navigation start → figures and chart rendered): median ${median('ms')} ms;` +
      ` figures alone: median ${median('figuresMs')} ms; main-thread busy median ${median('mainThreadMs')} ms; loads ${JSON.stringify(loads)}`);
  }

  await ctx.close();
  if (problems.length) throw new Error('browser problems:\n' + problems.join('\n'));
  console.log('REPORT ' + JSON.stringify(report));
  console.log('PASS');
} catch (e) {
  for (const c of browser.contexts()) for (const p of c.pages()) await p.screenshot({ path: `/tmp/cronix-e2e-failure-${Date.now()}.png` }).catch(() => {});
  console.log('problems so far:\n' + problems.join('\n'));
  throw e;
} finally {
  await browser.close();
}

async function jobBody(id) {
  const j = await apiCall('GET', `/api/v1/jobs/${id}`);
  for (const k of ['id', 'revision', 'created_at', 'updated_at']) delete j[k];
  return j;
}
