// The web admin in real Chromium against a running Cronix (started by
// integration/browser_test.go). Every step asserts what a user sees; any
// console error or uncaught page error fails the run.
//
// Env: CRONIX_URL, CRONIX_USER, CRONIX_PASSWORD, CRONIX_TOKEN (an admin
// bearer token for set-up calls), CHROMIUM (default /usr/bin/chromium),
// SCREENSHOT_DIR (optional), VIEWER_USER/VIEWER_PASSWORD (optional: a viewer
// account to check what a viewer sees).
import { chromium } from 'playwright-core';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';

const base = process.env.CRONIX_URL;
const user = process.env.CRONIX_USER ?? 'admin';
const password = process.env.CRONIX_PASSWORD;
const token = process.env.CRONIX_TOKEN;
const shots = process.env.SCREENSHOT_DIR;
const T = 60_000; // generous: the machine is shared
if (!base || !password || !token) throw new Error('CRONIX_URL, CRONIX_PASSWORD and CRONIX_TOKEN are required');
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
  if (shots) await page.screenshot({ path: join(shots, name + '.png'), fullPage: false });
}
// In-app navigation (like following a link): the app keeps its session
// across a reload only with the cookie session, so the test navigates the
// router instead of reloading.
async function nav(page, path) {
  await page.evaluate((p) => {
    window.history.pushState({}, '', p);
    window.dispatchEvent(new PopStateEvent('popstate'));
  }, path);
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
  // The user name field has focus on load; the rest is Tab and Enter.
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
  await shot(page, 'dashboard-en');

  step('a bad cron shows the parser message under the field');
  await page.getByRole('menuitem', { name: 'Jobs' }).click();
  await page.getByTestId('create-job').click();
  await page.getByRole('heading', { name: 'New job' }).waitFor();
  await page.getByLabel('Name', { exact: true }).fill('e2e-hello');
  const schedule = page.getByLabel('Schedule', { exact: true });
  await schedule.fill('61 * * * *');
  const scheduleItem = page.locator('.ant-form-item').filter({ has: schedule });
  await scheduleItem.locator('.ant-form-item-explain-error').filter({ hasText: '61' }).waitFor();

  step('a good cron shows the explanation and the preview');
  await schedule.fill('*/2 * * * * *');
  await page.getByTestId('cron-words').filter({ hasText: 'Every 2 seconds' }).waitFor();
  await page.getByTestId('cron-preview').waitFor();
  const previewRows = await page.getByTestId('cron-preview').locator('tbody tr').count();
  if (previewRows !== 10) throw new Error(`preview shows ${previewRows} fires, want 10`);

  step('handler select and the schema-rendered params form (keyboard)');
  await page.getByLabel('Handler').focus();
  await page.keyboard.type('shell');
  await page.keyboard.press('Enter');
  const script = page.getByLabel(/^Script/);
  await script.waitFor();
  await script.focus();
  await page.keyboard.type('echo hello-from-e2e');
  await shot(page, 'job-form-en');
  await page.getByTestId('save-job').focus();
  await page.keyboard.press('Enter');
  await page.waitForURL(/\/jobs\/\d+$/);
  const jobId = Number(new URL(page.url()).pathname.split('/').pop());

  step('the job runs and its output opens');
  const runLink = page.getByTestId('run-link').first();
  await runLink.waitFor();
  await until('a successful run in the table', () => page.locator('[data-status=success]').count());
  await page.locator('tr', { has: page.locator('[data-status=success]') }).first().getByTestId('run-link').click();
  await page.getByTestId('run-output').filter({ hasText: 'hello-from-e2e' }).waitFor();

  step('trigger with a params override');
  // The trigger API takes a params override only once the server supports it
  // (a 400 naming params as an unknown field otherwise): check first.
  const probe = await fetch(base + `/api/v1/jobs/${jobId}/trigger`, {
    method: 'POST', headers: { Authorization: `Bearer ${token}`, 'Content-Type': 'application/json' },
    body: JSON.stringify({ node: 'no-such-node', params: {} }),
  });
  const probeBody = await probe.json();
  if (probe.status === 400 && probeBody.fields?.params === 'unknown field') {
    console.log('SKIP trigger with params override: the trigger API has no params field');
    report.overrideSkipped = true;
  } else {
    await nav(page, `/jobs/${jobId}`);
    await page.getByTestId('trigger-job').click();
    await page.getByTestId('override-params').click();
    await page.getByLabel('Parameters (JSON)').fill(JSON.stringify({ script: 'echo override-42' }));
    await page.getByTestId('trigger-ok').click();
    const manual = await until('the manual run with the override', async () => {
      const runs = await apiCall('GET', `/api/v1/jobs/${jobId}/runs?page_size=100`);
      return runs.items.find((r) => r.trigger === 'manual' && r.status === 'success' && r.output.includes('override-42'));
    });
    await nav(page, `/runs/${manual.id}`);
    await page.getByTestId('run-output').filter({ hasText: 'override-42' }).waitFor();
  }

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
  await nav(page, '/nodes');
  await page.locator('.ant-table-row').first().waitFor();
  await shot(page, 'nodes-en');
  await nav(page, '/jobs');
  await page.locator('.ant-table-row').first().waitFor();
  await shot(page, 'jobs-en');
  await setLang(page, '简体中文');
  await page.getByRole('heading', { name: '任务' }).waitFor();
  await page.getByRole('menuitem', { name: '节点' }).waitFor();
  await shot(page, 'jobs-zh');
  await page.getByRole('menuitem', { name: '节点' }).click();
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
  if (process.env.VIEWER_USER) {
    const vctx = await browser.newContext({ viewport: { width: 390, height: 844 } });
    const vp = await vctx.newPage();
    vp.setDefaultTimeout(T);
    watch(vp, 'viewer');
    await vp.goto(base + '/login');
    await vp.getByLabel('User name').fill(process.env.VIEWER_USER);
    await vp.getByLabel('Password').fill(process.env.VIEWER_PASSWORD);
    await vp.getByRole('button', { name: 'Sign in' }).click();
    await vp.getByTestId('dashboard').waitFor();
    await nav(vp, '/jobs');
    await vp.getByRole('heading', { name: 'Jobs' }).waitFor();
    await vp.locator('.ant-table').first().waitFor(); // a viewer outside every group may see no rows
    if (await vp.getByTestId('create-job').count()) throw new Error('a viewer sees the create button');
    if (await vp.getByRole('menuitem', { name: 'Users & roles' }).count()) throw new Error('a viewer sees the users page in the menu');
    await nav(vp, '/users');
    await vp.getByTestId('forbidden').waitFor();
    await vctx.close();
  } else {
    console.log('SKIP viewer check: no VIEWER_USER (the server has no users API)');
    report.viewerSkipped = true;
  }

  step('alerts page');
  await page.getByRole('menuitem', { name: 'Alerts' }).click();
  await page.getByRole('heading', { name: 'Alerts' }).waitFor();
  await page.locator('.ant-table').first().waitFor();

  step('dark mode');
  await page.getByLabel('Dark mode').click();
  await until('the dark theme', () => page.evaluate(() => document.documentElement.dataset.theme === 'dark'));
  const bg = await page.evaluate(() => getComputedStyle(document.querySelector('.ant-layout')).backgroundColor);
  const [r, g, b] = bg.match(/\d+/g).map(Number);
  if (r + g + b > 150) throw new Error(`dark mode background is ${bg}`);
  await shot(page, 'alerts-dark-en');
  await page.getByLabel('Dark mode').click();
  await until('the light theme', () => page.evaluate(() => document.documentElement.dataset.theme === 'light'));

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
  await page.setViewportSize({ width: 1280, height: 720 });

  step('warm load time');
  // The server and the browser's HTTP cache are warm now: load the app
  // again in this context and time it until the first screen is usable
  // (the dashboard with a cookie session, else the login form).
  {
    const wp = await ctx.newPage();
    watch(wp, 'warm');
    // Main-thread busy time (CPU) is reported too: on a shared, loaded
    // machine the wall time mostly measures waiting for a core.
    const cdp = await ctx.newCDPSession(wp);
    await cdp.send('Performance.enable');
    const w0 = Date.now();
    await wp.goto(base + '/');
    await Promise.race([wp.getByTestId('dashboard').waitFor(), wp.getByLabel('User name').waitFor()]);
    report.warmLoadMs = Date.now() - w0;
    const { metrics } = await cdp.send('Performance.getMetrics');
    const m = Object.fromEntries(metrics.map((x) => [x.name, x.value]));
    report.warmLoadMainThreadMs = Math.round(m.TaskDuration * 1000);
    report.warmLoadScriptMs = Math.round(m.ScriptDuration * 1000);
    report.warmLoadScreen = (await wp.getByTestId('dashboard').count()) ? 'dashboard' : 'login';
    await wp.close();
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
