// End-to-end tests of the web console in headless Chromium (Debian's `chromium`, driven by
// playwright-core). tests/browser.rs starts `xjob serve` and runs this file with:
//   XJOB_BASE_URL        the console, e.g. http://127.0.0.1:18080
//   XJOB_ADMIN_PASSWORD  the admin password the server was started with
//   XJOB_SCREENSHOT_DIR  where a failing test leaves a full-page screenshot
// The tests run in order and build on each other (one scenario of a new user's first hour).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync } from 'node:fs';
import { chromium } from 'playwright-core';

const BASE = process.env.XJOB_BASE_URL;
const ADMIN_PW = process.env.XJOB_ADMIN_PASSWORD;
const SHOTS = process.env.XJOB_SCREENSHOT_DIR || 'screenshots';
let browser;

before(async () => {
  assert.ok(BASE && ADMIN_PW, 'XJOB_BASE_URL and XJOB_ADMIN_PASSWORD must be set');
  mkdirSync(SHOTS, { recursive: true });
  browser = await chromium.launch({
    executablePath: process.env.XJOB_CHROMIUM || '/usr/bin/chromium',
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
      '--disable-background-networking', '--disable-component-update', '--disable-sync'],
  });
});

after(async () => { if (browser) await browser.close(); });

/** A test with its own browser context; a failure leaves a screenshot. */
function e2e(name, body, contextOptions = {}) {
  test(name, async () => {
    const context = await browser.newContext(contextOptions);
    const page = await context.newPage();
    page.setDefaultTimeout(20000);
    const errors = [];
    page.on('pageerror', (e) => errors.push(e.message));
    try {
      await body(page);
      assert.deepEqual(errors, [], 'no script errors on the page');
    } catch (e) {
      const file = `${SHOTS}/${name.replace(/\W+/g, '-')}.png`;
      await page.screenshot({ path: file, fullPage: true }).catch(() => {});
      console.error(`screenshot of the failure: ${file}`);
      throw e;
    } finally {
      await context.close();
    }
  });
}

async function login(page, user, password) {
  await page.goto(`${BASE}/#/login`);
  await page.getByLabel('User name').fill(user);
  await page.getByLabel('Password').fill(password);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.getByRole('heading', { name: 'Dashboard' }).waitFor();
}

const dialog = (page) => page.locator('dialog[open]');

async function nav(page, name, heading) {
  await page.getByRole('navigation', { name: 'Main' }).getByRole('link', { name }).click();
  await page.getByRole('heading', { name: heading || name, exact: true }).waitFor();
}

/** Opens the Jobs page's new-job dialog with the demo executor, a description and an author. */
async function newJob(page, description) {
  await nav(page, 'Jobs');
  await page.getByRole('button', { name: 'New job' }).click();
  const d = dialog(page);
  await d.getByLabel('Executor').selectOption({ label: 'xjob demo (xjob-demo)' });
  await d.getByLabel('Description').fill(description);
  await d.getByLabel('Author').fill('e2e');
  return d;
}

e2e('log in, create an executor group and a cron job, see the next fire times, start it, watch runs and the rolling log', async (page) => {
  // a wrong password is refused with a readable message
  await page.goto(`${BASE}/#/login`);
  await page.getByLabel('User name').fill('admin');
  await page.getByLabel('Password').fill('not-the-password');
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.getByText('Wrong user name or password.').waitFor();

  await login(page, 'admin', ADMIN_PW);
  assert.match(await page.locator('.cards').innerText(), /Live executors/);

  await nav(page, 'Executors');
  await page.getByRole('button', { name: 'New group' }).click();
  await dialog(page).getByLabel('App name').fill('abc');
  await dialog(page).getByLabel('Title').fill('E2E');
  await dialog(page).getByRole('button', { name: 'Save' }).click();
  // the server's validation message appears next to the field it concerns
  await dialog(page).locator('[data-error-for="appName"]').getByText('must be 4 to 64 characters').waitFor();
  await dialog(page).getByLabel('App name').fill('e2e-exec');
  await dialog(page).getByRole('button', { name: 'Save' }).click();
  await page.locator('tr[data-group="e2e-exec"]').waitFor();
  assert.match(await page.locator('tr[data-group="xjob-demo"]').innerText(), /http:\/\/127\.0\.0\.1:/);
  // give the group its own access token
  await page.locator('tr[data-group="e2e-exec"]').getByRole('button', { name: 'Edit' }).click();
  await dialog(page).getByRole('button', { name: 'Generate' }).click();
  assert.match(await dialog(page).getByLabel(/Access token of this group/).inputValue(), /^[0-9a-f]{64}$/);
  await dialog(page).getByRole('button', { name: 'Save' }).click();
  await page.locator('tr[data-group="e2e-exec"]').getByText('own access token').waitFor();

  const d = await newJob(page, 'hello-e2e');
  await d.getByLabel('Cron expression / seconds').fill('* * * * * ?');
  // a built-in handler offers its param template
  await d.getByLabel('Handler').fill('httpJobHandler');
  assert.match(await d.getByLabel('Param', { exact: true }).inputValue(), /"url": "https:\/\/api\.example\.com\/hook"/);
  await d.getByLabel('Param', { exact: true }).fill('');
  await d.getByLabel('Handler').fill('demoJobHandler');
  await d.getByLabel('Param', { exact: true }).fill('from-cron');
  await d.locator('[data-testid="next-times"] li').nth(4).waitFor();
  assert.equal(await d.locator('[data-testid="next-times"] li').count(), 5);
  await d.getByRole('button', { name: 'Save' }).click();
  const row = page.locator('tr[data-job="hello-e2e"]');
  await row.getByText('Stopped').waitFor();
  await row.getByRole('button', { name: 'Start' }).click();
  await page.locator('tr[data-job="hello-e2e"]').getByText('Running').waitFor();

  await page.locator('tr[data-job="hello-e2e"]').getByRole('button', { name: 'Logs' }).click();
  await page.getByRole('heading', { name: 'Run logs' }).waitFor();
  const done = page.locator('tr[data-status="success"]').first();
  await done.waitFor(); // the list refreshes itself while runs appear
  await done.getByRole('button', { name: 'Run log' }).click();
  await page.getByTestId('run-log').getByText('Hello World. param: from-cron').waitFor();
  await page.getByTestId('follow-state').getByText('The run has ended.').waitFor();

  // a job created running in one step
  const d2 = await newJob(page, 'running-e2e');
  await d2.getByLabel('Cron expression / seconds').fill('0 0 0 * * ?');
  await d2.getByLabel('Handler').fill('demoJobHandler');
  await d2.getByLabel('Start it now').check();
  await d2.getByRole('button', { name: 'Save' }).click();
  await page.locator('tr[data-job="running-e2e"]').getByText('Running', { exact: true }).waitFor();
});

e2e('trigger a job once with a param and kill a long run', async (page) => {
  await login(page, 'admin', ADMIN_PW);
  await nav(page, 'Jobs');
  await page.locator('tr[data-job="hello-e2e"]').getByRole('button', { name: 'Stop' }).click();
  await page.locator('tr[data-job="hello-e2e"]').getByText('Stopped').waitFor();
  await page.locator('tr[data-job="hello-e2e"]').getByRole('button', { name: 'Run once' }).click();
  await dialog(page).getByLabel('Param').fill('by-hand');
  await dialog(page).getByRole('button', { name: 'Run' }).click();
  await page.getByText('Triggered.').waitFor();
  await page.locator('tr[data-job="hello-e2e"]').getByRole('button', { name: 'Logs' }).click();
  await page.locator('td.param', { hasText: 'by-hand' }).first().waitFor();

  const d = await newJob(page, 'long-e2e');
  await d.getByLabel('Schedule type').selectOption('NONE');
  await d.locator('[data-testid="next-times"]').getByText('runs only when triggered').waitFor();
  await d.getByLabel('Handler').fill('sleepJobHandler');
  await d.getByRole('button', { name: 'Save' }).click();
  const row = page.locator('tr[data-job="long-e2e"]');
  await row.waitFor();
  await row.getByRole('button', { name: 'Run once' }).click();
  await dialog(page).getByLabel('Param').fill('300');
  await dialog(page).getByRole('button', { name: 'Run' }).click();
  await page.getByText('Triggered.').waitFor();
  await row.getByRole('button', { name: 'Logs' }).click();
  const running = page.locator('tr[data-status="running"]').first();
  await running.waitFor();
  await running.getByRole('button', { name: 'Kill' }).click();
  await dialog(page).getByText(/Kill run \d+\?/).waitFor();
  await dialog(page).getByRole('button', { name: 'Kill' }).click();
  await page.locator('tr[data-status="failed"]').first().waitFor();
  assert.match(await page.locator('tr[data-status="failed"]').first().innerText(), /kill job/i);
});

e2e('create a normal user who only sees their groups', async (page) => {
  await login(page, 'admin', ADMIN_PW);
  await nav(page, 'Users');
  await page.getByRole('button', { name: 'New user' }).click();
  const d = dialog(page);
  await d.getByLabel('User name').fill('e2e-user');
  await d.getByLabel('Password (8+ characters)').fill('short');
  await d.getByRole('checkbox', { name: 'E2E' }).check();
  await d.getByRole('button', { name: 'Save' }).click();
  await d.locator('[data-error-for="password"]').getByText('8 to 128 characters').waitFor();
  await d.getByLabel('Password (8+ characters)').fill('e2e-user-pw');
  await d.getByRole('button', { name: 'Save' }).click();
  await page.locator('tr[data-user="e2e-user"]').getByRole('cell', { name: 'E2E', exact: true }).waitFor();

  await page.getByRole('button', { name: 'Log out' }).click();
  await page.getByRole('button', { name: 'Sign in' }).waitFor();
  await login(page, 'e2e-user', 'e2e-user-pw');
  assert.equal(await page.getByRole('link', { name: 'Users' }).isVisible(), false);
  await nav(page, 'Executors');
  await page.locator('tr[data-group="e2e-exec"]').waitFor();
  assert.equal(await page.locator('tr[data-group="xjob-demo"]').count(), 0);
  await nav(page, 'Jobs');
  await page.getByText('Nothing here yet.').waitFor();
  assert.equal(await page.locator('tr[data-job="hello-e2e"]').count(), 0);
});

e2e('an administrator reads the audit log and filters it', async (page) => {
  await login(page, 'admin', ADMIN_PW);
  await nav(page, 'Audit log');
  await page.getByRole('heading', { name: 'Audit log' }).waitFor();
  // the earlier tests' changes are there, newest first
  await page.locator('tr[data-audit="user.create"]').first().waitFor();
  assert.match(await page.locator('tr[data-audit="user.create"]').first().innerText(), /e2e-user/);
  await page.getByLabel('Action').selectOption('job.trigger');
  await page.getByRole('button', { name: 'Search' }).click();
  // the filtered page replaces the list: no other action is left
  await page.locator('tr[data-audit="user.create"]').first().waitFor({ state: 'detached' });
  await page.locator('tr[data-audit="job.trigger"]', { hasText: 'param "by-hand"' }).waitFor();
  assert.equal(await page.locator('tbody tr:not([data-audit="job.trigger"])').count(), 0);
});

e2e('an API key is shown once, works from a script and is refused once revoked', async (page) => {
  await login(page, 'admin', ADMIN_PW);
  await nav(page, 'API keys');
  await page.getByRole('button', { name: 'New key' }).click();
  const d = dialog(page);
  await d.getByLabel('Name').fill('e2e-ci');
  await d.getByRole('checkbox', { name: 'E2E' }).check();
  await d.getByRole('button', { name: 'Create' }).click();
  await page.getByRole('heading', { name: 'Key created' }).waitFor();
  const key = (await page.locator('dialog[open] pre.key').innerText()).trim();
  assert.match(key, /^xjk_[0-9a-f]{48}$/);
  await page.locator('dialog[open]').getByRole('button', { name: 'Close' }).click();
  await page.locator('dialog[open]').waitFor({ state: 'detached' });
  const row = page.locator('tr[data-key="e2e-ci"]');
  await row.getByRole('cell', { name: 'E2E', exact: true }).waitFor();
  assert.equal(await page.locator('#main').getByText(key).count(), 0, 'the key is not listed');
  const jobs = () => fetch(`${BASE}/v1/jobs`, { headers: { Authorization: `Bearer ${key}` } });
  assert.equal((await jobs()).status, 200);
  await row.getByRole('button', { name: 'Revoke' }).click();
  await dialog(page).getByRole('button', { name: 'Revoke' }).click();
  await row.waitFor({ state: 'detached' });
  assert.equal((await jobs()).status, 401);
});

e2e('a workflow is checked node by node, saved as a version and drawn as a graph', async (page) => {
  await login(page, 'admin', ADMIN_PW);
  // the first test's job, in its group
  const jobs = await page.evaluate(async () => (await (await fetch('/v1/jobs?limit=100')).json()).items);
  const job = jobs.find((j) => j.jobDesc === 'hello-e2e');
  assert.ok(job, 'the job hello-e2e');
  await nav(page, 'Workflows');
  await page.getByRole('button', { name: 'New workflow' }).click();
  const d = dialog(page);
  await d.getByLabel('Name').fill('e2e-flow');
  await d.getByLabel('Executor').selectOption(String(job.jobGroup));
  const def = (expression) => JSON.stringify({
    nodes: [{ key: 'extract', type: 'JOB', jobId: job.id }, { key: 'decide', type: 'DECISION', expression },
      { key: 'load', type: 'JOB', jobId: job.id }],
    edges: [{ from: 'extract', to: 'decide' }, { from: 'decide', to: 'load', condition: 'TRUE' }],
  });
  await d.getByLabel('Definition (JSON: nodes and edges)').fill(def('rows >'));
  await d.getByRole('button', { name: 'Check' }).click();
  await d.locator('ul.problems li[data-node="decide"]', { hasText: 'does not parse' }).waitFor();
  await d.getByLabel('Definition (JSON: nodes and edges)').fill(def('rows > 1000'));
  await d.getByRole('button', { name: 'Check' }).click();
  await d.getByText('No problems found.').waitFor();
  await d.getByRole('button', { name: 'Save' }).click();
  const row = page.locator('tr[data-workflow="e2e-flow"]');
  await row.getByRole('cell', { name: '1', exact: true }).first().waitFor();
  await row.getByRole('link', { name: 'e2e-flow' }).click();
  await page.getByRole('heading', { name: 'e2e-flow' }).waitFor();
  for (const key of ['extract', 'decide', 'load']) {
    await page.locator(`svg.dag g[data-node="${key}"]`).waitFor();
  }
  assert.equal(await page.locator('svg.dag line').count(), 2);
});

e2e('a workflow run: a failed branch leaves its sibling to complete, the graph shows each state, a re-run from the failed node', async (page) => {
  await login(page, 'admin', ADMIN_PW);
  const call = (method, path, body) => page.evaluate(async ([m, p, b]) => {
    const r = await fetch(p, { method: m, headers: { 'Content-Type': 'application/json' }, body: b ? JSON.stringify(b) : undefined });
    return { status: r.status, body: await r.json().catch(() => null) };
  }, [method, path, body]);
  const groups = (await call('GET', '/v1/groups?limit=100')).body.items;
  const demo = groups.find((g) => g.appName === 'xjob-demo');
  assert.ok(demo, 'the demo executor group');
  const job = (desc, handler) => ({ jobGroup: demo.id, jobDesc: desc, author: 'e2e', scheduleType: 'CRON',
    scheduleConf: '0 0 3 * * ?', misfireStrategy: 'DO_NOTHING', executorRouteStrategy: 'FIRST',
    executorHandler: handler, executorBlockStrategy: 'SERIAL_EXECUTION', executorTimeout: 0,
    executorFailRetryCount: 0, glueType: 'BEAN' });
  const ok = (await call('POST', '/v1/jobs', job('wf-ok', 'demoJobHandler'))).body;
  const bad = (await call('POST', '/v1/jobs', job('wf-bad', 'failJobHandler'))).body;
  assert.ok(ok.id && bad.id);

  await nav(page, 'Workflows');
  await page.getByRole('button', { name: 'New workflow' }).click();
  const d = dialog(page);
  await d.getByLabel('Name').fill('e2e-run');
  await d.getByLabel('Executor').selectOption(String(demo.id));
  await d.getByLabel('Definition (JSON: nodes and edges)').fill(JSON.stringify({
    nodes: [{ key: 'start', type: 'JOB', jobId: ok.id }, { key: 'bad', type: 'JOB', jobId: bad.id },
      { key: 'after', type: 'JOB', jobId: ok.id }, { key: 'side', type: 'JOB', jobId: ok.id, param: 'day=${day}' }],
    edges: [{ from: 'start', to: 'bad' }, { from: 'bad', to: 'after' }, { from: 'start', to: 'side' }],
  }));
  await d.getByRole('button', { name: 'Save' }).click();
  const row = page.locator('tr[data-workflow="e2e-run"]');
  await row.getByRole('button', { name: 'Run' }).click();
  await dialog(page).getByLabel("Params (JSON object or text): the run's first context").fill('{"day": "2026-11-26"}');
  await dialog(page).getByRole('button', { name: 'Run' }).click();
  await page.getByRole('heading', { name: /^Run \d+ of e2e-run$/ }).waitFor();
  // followed live until it ends
  await page.locator('[data-testid="run-status"]', { hasText: 'FAILED' }).waitFor({ timeout: 30000 });
  const stateOf = (key) => page.locator(`svg.dag g[data-node="${key}"]`).getAttribute('data-state');
  assert.equal(await stateOf('start'), 'SUCCEEDED');
  assert.equal(await stateOf('bad'), 'FAILED');
  assert.equal(await stateOf('after'), 'SKIPPED');
  assert.equal(await stateOf('side'), 'SUCCEEDED', 'the sibling branch completes');
  // edges point from a node to the next (an arrowhead each); ended nodes show how long they took
  assert.equal(await page.locator('svg.dag line[data-edge="start->bad"]').getAttribute('marker-end'), 'url(#arrow-always)');
  assert.match(await page.locator('svg.dag g[data-node="start"]').getAttribute('data-duration'), /^\d+(\.\d)? (ms|s)$/);

  // the failed node's job is fixed; the run goes again from its failed node only
  const fixed = await call('PUT', `/v1/jobs/${bad.id}`, job('wf-bad', 'demoJobHandler'));
  assert.equal(fixed.status, 200, JSON.stringify(fixed.body));
  await page.getByRole('button', { name: 'Re-run failed nodes' }).click();
  await page.locator('[data-testid="run-status"]', { hasText: 'SUCCEEDED' }).waitFor({ timeout: 30000 });
  assert.equal(await stateOf('bad'), 'SUCCEEDED');
  assert.equal(await stateOf('after'), 'SUCCEEDED');
  // the failed attempt stays as history; `start` and `side` ran once
  assert.equal(await page.locator('tr[data-node="bad"]').count(), 2);
  assert.equal(await page.locator('tr[data-node="start"]').count(), 1);
  assert.equal(await page.locator('tr[data-node="side"]').count(), 1);
  // a node's run opens in the run-log viewer
  await page.locator('tr[data-node="side"] a.log-link').first().click();
  await page.getByRole('heading', { name: /^Run log \d+/ }).waitFor();
  await page.getByTestId('run-log').getByText('day=2026-11-26').first().waitFor();
  // the runs list names the workflow
  await page.goto(`${BASE}/#/workflow-runs`);
  await page.locator('tr[data-run]').first().getByRole('link', { name: 'e2e-run' }).waitFor();
});

e2e('the console in Chinese: chosen from the browser, a job created with a translated error, switched to English', async (page) => {
  await page.goto(`${BASE}/#/login`);
  assert.equal(await page.locator('html').getAttribute('lang'), 'zh-CN');
  await page.getByLabel('用户名').fill('admin');
  await page.getByLabel('密码').fill('not-the-password');
  await page.getByRole('button', { name: '登录' }).click();
  await page.getByText('用户名或密码错误。').waitFor();
  await page.getByLabel('密码').fill(ADMIN_PW);
  await page.getByRole('button', { name: '登录' }).click();
  await page.getByRole('heading', { name: '运行报表' }).waitFor();
  await page.getByRole('link', { name: '任务', exact: true }).click();
  await page.getByRole('heading', { name: '任务', exact: true }).waitFor();
  await page.getByRole('button', { name: '新增任务' }).click();
  const d = dialog(page);
  await d.getByLabel('Cron 表达式 / 秒数').fill('0 0 0 * * ?');
  await d.getByLabel('JobHandler').fill('demoJobHandler');
  await d.getByRole('button', { name: '保存' }).click();
  // the server's "invalid jobDesc: is required", in Chinese next to its field
  await d.locator('[data-error-for="jobDesc"]').getByText('任务描述：不能为空').waitFor();
  await d.getByLabel('任务描述').fill('中文任务');
  await d.getByLabel('负责人').fill('e2e');
  await d.getByRole('button', { name: '保存' }).click();
  const row = page.locator('tr[data-job="中文任务"]');
  await row.getByText('已停止').waitFor();
  await row.getByRole('button', { name: '启动' }).waitFor();
  // switched in the header, remembered for the next visit
  await page.getByLabel('Language / 语言').first().selectOption('en');
  await page.getByRole('heading', { name: 'Jobs' }).waitFor();
  await page.getByRole('link', { name: 'Dashboard' }).waitFor();
  assert.equal(await page.locator('html').getAttribute('lang'), 'en');
  await page.reload();
  await page.getByRole('heading', { name: 'Jobs' }).waitFor();
}, { locale: 'zh-CN' });
