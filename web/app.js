// xjob console: a small single-page app over the /v1 REST API. No build step, no framework.
// The login token lives in an HttpOnly cookie the server sets; this script never sees it.
// Server data is only ever inserted as text (never as HTML).
'use strict';

const ROUTES = ['FIRST', 'LAST', 'ROUND', 'RANDOM', 'CONSISTENT_HASH', 'LEAST_FREQUENTLY_USED',
  'LEAST_RECENTLY_USED', 'FAILOVER', 'BUSYOVER', 'SHARDING_BROADCAST'];
const BLOCKS = ['SERIAL_EXECUTION', 'DISCARD_LATER', 'COVER_EARLY'];
const MISFIRES = ['DO_NOTHING', 'FIRE_ONCE_NOW'];
const SCHEDULES = ['CRON', 'FIX_RATE', 'NONE'];
const GLUES = ['BEAN', 'GLUE_GROOVY', 'GLUE_SHELL', 'GLUE_PYTHON', 'GLUE_PHP', 'GLUE_NODEJS',
  'GLUE_POWERSHELL'];
const CLEAR_MODES = [[1, 'Older than one month'], [2, 'Older than three months'],
  [3, 'Older than six months'], [4, 'Older than one year'], [5, 'Keep the newest 1,000'],
  [6, 'Keep the newest 10,000'], [7, 'Keep the newest 30,000'], [8, 'Keep the newest 100,000'],
  [9, 'Delete all']];
const PAGE = 20;

const state = { me: null, timers: [] };
const $ = (sel, root = document) => root.querySelector(sel);

// ---------- DOM helpers ----------

/** Creates an element: h('button', {class: 'x', onclick: f}, 'text', child, ...). */
function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith('on')) el.addEventListener(k.slice(2), v);
    else if (k === 'value') el.value = v;
    else if (v === true) el.setAttribute(k, '');
    else el.setAttribute(k, String(v));
  }
  for (const c of children.flat()) {
    if (c === null || c === undefined || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
}

/** XXL-JOB messages carry `<br>`; show them as line breaks, as plain text. */
function msgText(s) {
  return (s || '').replace(/<br\s*\/?>/gi, '\n').replace(/<[^>]*>/g, '');
}

function fmtTime(t) {
  if (!t) return '';
  const d = typeof t === 'number' ? new Date(t) : new Date(t);
  if (isNaN(d)) return String(t);
  const p = (n) => String(n).padStart(2, '0');
  return `${d.getFullYear()}-${p(d.getMonth() + 1)}-${p(d.getDate())} ${p(d.getHours())}:${p(d.getMinutes())}:${p(d.getSeconds())}`;
}

function toast(text, kind = 'error') {
  const t = $('#toast');
  t.textContent = text;
  t.className = kind === 'info' ? 'info' : '';
  t.hidden = false;
  clearTimeout(toast.timer);
  toast.timer = setTimeout(() => { t.hidden = true; }, kind === 'info' ? 2500 : 6000);
}

// ---------- API ----------

class ApiError extends Error {
  constructor(status, body) {
    super(body && body.error ? body.error : `HTTP ${status}`);
    this.status = status;
    this.field = body && body.field;
    this.retryAfter = body && body.retryAfter;
  }
}

let inFlight = 0;
function loading(delta) {
  inFlight += delta;
  $('#loading').hidden = inFlight <= 0;
}

async function api(method, path, body) {
  loading(1);
  try {
    const res = await fetch('/v1' + path, {
      method,
      credentials: 'same-origin',
      headers: body === undefined ? {} : { 'content-type': 'application/json' },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await res.text();
    const data = text ? JSON.parse(text) : null;
    if (!res.ok) {
      if (res.status === 401 && path !== '/auth/login') {
        state.me = null;
        location.hash = '#/login';
      }
      throw new ApiError(res.status, data);
    }
    return data;
  } finally {
    loading(-1);
  }
}

function qs(params) {
  const p = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) if (v !== '' && v !== undefined && v !== null) p.set(k, v);
  const s = p.toString();
  return s ? '?' + s : '';
}

/** Shows a failed request: next to its field when the server names one, else as a toast. */
function showError(e, form) {
  if (form && e.field) {
    const slot = form.querySelector(`[data-error-for="${e.field}"]`);
    if (slot) {
      slot.textContent = e.message;
      slot.closest('.field').classList.add('invalid');
      const input = form.querySelector(`[name="${e.field}"]`);
      if (input) input.focus();
      return;
    }
  }
  toast(e.status ? `${e.message}` : `Request failed: ${e.message}`);
}

function clearErrors(form) {
  form.querySelectorAll('.field-error').forEach((s) => { s.textContent = ''; });
  form.querySelectorAll('.field.invalid').forEach((f) => f.classList.remove('invalid'));
}

// ---------- forms and dialogs ----------

/** A labelled input with an error slot. `kind`: text, number, password, select, textarea, checkbox. */
function field(label, name, value, kind = 'text', options = {}) {
  let input;
  const id = `f-${name}-${Math.random().toString(36).slice(2, 8)}`;
  if (kind === 'select') {
    input = h('select', { name, id }, (options.choices || []).map(([v, t]) =>
      h('option', { value: v, selected: String(v) === String(value) }, t)));
  } else if (kind === 'textarea') {
    input = h('textarea', { name, id, rows: options.rows || 3 });
    input.value = value ?? '';
  } else {
    input = h('input', { name, id, type: kind, value: value ?? '', required: options.required,
      min: options.min, autocomplete: options.autocomplete, placeholder: options.placeholder, list: options.list });
  }
  input.setAttribute('aria-describedby', `${id}-error`);
  return h('div', { class: 'field' + (options.wide ? ' wide' : '') },
    h('label', { for: id }, label), input, options.extra || null,
    h('span', { class: 'field-error', id: `${id}-error`, 'data-error-for': name, 'aria-live': 'polite' }));
}

function choices(list) { return list.map((v) => [v, v]); }

const dialog = () => $('#dialog');

function closeDialog() { if (dialog().open) dialog().close(); }

/** Opens a form dialog; `submit(form)` returns a promise; the dialog closes when it resolves. */
function formDialog(title, content, submitLabel, submit) {
  const d = dialog();
  const form = h('form', { novalidate: true },
    h('h2', { id: 'dialog-title' }, title), content,
    h('div', { class: 'buttons' },
      h('button', { type: 'button', onclick: closeDialog }, 'Cancel'),
      h('button', { type: 'submit', class: 'primary' }, submitLabel)));
  form.addEventListener('submit', async (ev) => {
    ev.preventDefault();
    clearErrors(form);
    const btn = form.querySelector('button[type=submit]');
    btn.disabled = true;
    try {
      await submit(form);
      closeDialog();
    } catch (e) {
      showError(e, form);
    } finally {
      btn.disabled = false;
    }
  });
  d.replaceChildren(form);
  d.showModal();
  const first = form.querySelector('input, select, textarea');
  if (first) first.focus();
  return form;
}

/** Asks before a destructive action; resolves true when confirmed. */
function confirmDialog(text, yes = 'Delete') {
  return new Promise((resolve) => {
    const d = dialog();
    const done = (v) => { d.close(); resolve(v); };
    d.replaceChildren(h('div', { class: 'body', role: 'alertdialog', 'aria-labelledby': 'dialog-title' },
      h('h2', { id: 'dialog-title' }, 'Please confirm'), h('p', {}, text),
      h('div', { class: 'buttons' },
        h('button', { type: 'button', onclick: () => done(false) }, 'Cancel'),
        h('button', { type: 'button', class: 'primary danger-confirm', onclick: () => done(true) }, yes))));
    d.addEventListener('cancel', () => resolve(false), { once: true });
    d.showModal();
  });
}

function infoDialog(title, content) {
  const d = dialog();
  d.replaceChildren(h('div', { class: 'body' }, h('h2', { id: 'dialog-title' }, title), content,
    h('div', { class: 'buttons' }, h('button', { type: 'button', onclick: closeDialog }, 'Close'))));
  d.showModal();
}

function formValues(form) {
  const out = {};
  for (const el of form.elements) {
    if (!el.name) continue;
    if (el.type === 'checkbox') {
      if (el.dataset.multi) { (out[el.name] ||= []); if (el.checked) out[el.name].push(Number(el.value)); }
      else out[el.name] = el.checked;
    } else out[el.name] = el.value;
  }
  return out;
}

function table(headers, rows, empty = 'Nothing here yet.') {
  return h('table', {},
    h('thead', {}, h('tr', {}, headers.map((x) => h('th', { scope: 'col' }, x)))),
    h('tbody', {}, rows.length ? rows : h('tr', {}, h('td', { colspan: headers.length, class: 'muted' }, empty))));
}

function pager(total, offset, go) {
  return h('div', { class: 'pager' },
    h('button', { type: 'button', disabled: offset <= 0, onclick: () => go(Math.max(0, offset - PAGE)) }, 'Previous'),
    h('span', { class: 'muted' }, total === 0 ? '0 items' : `${offset + 1}–${Math.min(offset + PAGE, total)} of ${total}`),
    h('button', { type: 'button', disabled: offset + PAGE >= total, onclick: () => go(offset + PAGE) }, 'Next'));
}

function every(ms, f) { state.timers.push(setInterval(f, ms)); }

async function groupsList() {
  return (await api('GET', '/groups?limit=1000')).items;
}

// ---------- pages ----------

function page(title, ...content) {
  const main = $('#main');
  main.replaceChildren(h('h1', {}, title), ...content);
  document.title = `${title} · xjob`;
  main.focus();
}

function loginPage() {
  $('#top').hidden = true;
  const form = h('form', { class: 'login', novalidate: true },
    h('h1', {}, 'Sign in to xjob'),
    field('User name', 'username', '', 'text', { autocomplete: 'username', required: true }),
    field('Password', 'password', '', 'password', { autocomplete: 'current-password', required: true }),
    h('div', { class: 'buttons' }, h('button', { type: 'submit', class: 'primary' }, 'Sign in')));
  form.addEventListener('submit', async (ev) => {
    ev.preventDefault();
    clearErrors(form);
    const v = formValues(form);
    try {
      await api('POST', '/auth/login', { username: v.username, password: v.password });
      await loadMe();
      location.hash = '#/';
    } catch (e) {
      if (e.status === 401) showError({ field: 'password', message: 'Wrong user name or password.' }, form);
      else if (e.status === 429) showError({ field: 'password', message: e.message }, form);
      else showError(e, form);
    }
  });
  $('#main').replaceChildren(form);
  document.title = 'Sign in · xjob';
  form.querySelector('input').focus();
}

async function dashboardPage() {
  const d = await api('GET', '/dashboard');
  const today = new Date();
  const iso = (x) => x.toISOString().slice(0, 10);
  const from = h('input', { type: 'date', name: 'from', value: iso(new Date(today - 6 * 864e5)) });
  const to = h('input', { type: 'date', name: 'to', value: iso(today) });
  const chartBox = h('div', { class: 'chart' });
  const draw = async () => {
    try {
      const end = new Date(to.value);
      end.setDate(end.getDate() + 1);
      const c = await api('GET', '/dashboard/chart' + qs({ from: from.value, to: iso(end) }));
      chartBox.replaceChildren(chart(c));
    } catch (e) { showError(e); }
  };
  page('Dashboard',
    h('div', { class: 'cards' },
      card(d.jobInfoCount, 'Jobs'), card(d.jobLogCount, 'Runs'),
      card(d.jobLogSuccessCount, 'Successful runs'), card(d.executorCount, 'Live executors')),
    h('div', { class: 'toolbar' },
      h('label', {}, 'From', from), h('label', {}, 'To', to),
      h('button', { type: 'button', onclick: draw }, 'Show')),
    chartBox);
  await draw();
}

function card(n, label) {
  return h('div', { class: 'card' }, h('div', { class: 'n' }, String(n)), h('div', { class: 'l' }, label));
}

/** Stacked bars per day (successes, failures, running) with an accessible table. */
function chart(c) {
  const NS = 'http://www.w3.org/2000/svg';
  const svg = document.createElementNS(NS, 'svg');
  const days = c.triggerDayList;
  const W = 1000, H = 220, pad = 30;
  svg.setAttribute('viewBox', `0 0 ${W} ${H + 20}`);
  svg.setAttribute('role', 'img');
  svg.setAttribute('aria-label', 'Runs per day');
  const max = Math.max(1, ...days.map((_, i) => c.triggerDayCountSucList[i] + c.triggerDayCountFailList[i] + c.triggerDayCountRunningList[i]));
  const bw = (W - pad) / Math.max(days.length, 1);
  days.forEach((day, i) => {
    let y = H;
    for (const [v, color] of [[c.triggerDayCountSucList[i], '#2e9d57'], [c.triggerDayCountFailList[i], '#d0493e'], [c.triggerDayCountRunningList[i], '#e0a526']]) {
      const hgt = (v / max) * (H - 10);
      const r = document.createElementNS(NS, 'rect');
      r.setAttribute('x', pad + i * bw + bw * 0.15);
      r.setAttribute('width', bw * 0.7);
      r.setAttribute('y', y - hgt);
      r.setAttribute('height', hgt);
      r.setAttribute('fill', color);
      svg.append(r);
      y -= hgt;
    }
    if (days.length <= 31 || i % Math.ceil(days.length / 31) === 0) {
      const t = document.createElementNS(NS, 'text');
      t.setAttribute('x', pad + i * bw + bw / 2);
      t.setAttribute('y', H + 15);
      t.setAttribute('text-anchor', 'middle');
      t.setAttribute('font-size', '11');
      t.textContent = day.slice(5);
      svg.append(t);
    }
  });
  const rows = days.map((day, i) => h('tr', {}, h('td', {}, day), h('td', {}, c.triggerDayCountSucList[i]),
    h('td', {}, c.triggerDayCountFailList[i]), h('td', {}, c.triggerDayCountRunningList[i])));
  return h('div', {},
    h('div', { class: 'legend' },
      h('span', {}, h('i', { class: 'sw-suc' }), `Successful ${c.triggerCountSucTotal}`),
      h('span', {}, h('i', { class: 'sw-fail' }), `Failed ${c.triggerCountFailTotal}`),
      h('span', {}, h('i', { class: 'sw-run' }), `Running ${c.triggerCountRunningTotal}`)),
    svg,
    h('details', {}, h('summary', {}, 'Table'), table(['Day', 'Successful', 'Failed', 'Running'], rows)));
}

async function groupsPage() {
  const admin = state.me.role === 1;
  const data = await api('GET', '/groups?limit=1000');
  const rows = data.items.map((g) => h('tr', { 'data-group': g.appName },
    h('td', {}, g.appName), h('td', {}, g.title),
    h('td', {}, g.addressType === 0 ? 'Automatic' : 'Manual', g.hasAccessToken ? h('div', { class: 'muted' }, 'own access token') : null),
    h('td', {}, g.registryList.length ? g.registryList.join('\n') : h('span', { class: 'muted' }, 'none online')),
    h('td', { class: 'actions' }, admin && [
      h('button', { type: 'button', onclick: () => groupForm(g) }, 'Edit'),
      h('button', { type: 'button', class: 'danger', onclick: async () => {
        if (!(await confirmDialog(`Delete executor group ${g.appName}?`))) return;
        try { await api('DELETE', `/groups/${g.id}`); groupsPage(); } catch (e) { showError(e); }
      } }, 'Delete')])));
  page('Executors',
    h('div', { class: 'toolbar' }, h('span', { class: 'spacer' }),
      admin && h('button', { type: 'button', class: 'primary', onclick: () => groupForm(null) }, 'New group')),
    table(['App name', 'Title', 'Registration', 'Live addresses', ''], rows));
}

/** 32 random bytes as hex: a new group access token. */
function newToken() {
  return Array.from(crypto.getRandomValues(new Uint8Array(32)), (b) => b.toString(16).padStart(2, '0')).join('');
}

function groupForm(g) {
  const generate = h('button', { type: 'button', onclick: (ev) => {
    ev.target.closest('form').querySelector('[name=accessToken]').value = newToken();
  } }, 'Generate');
  formDialog(g ? `Edit ${g.appName}` : 'New executor group', h('div', { class: 'grid' },
    field('App name', 'appName', g ? g.appName : ''),
    field('Title', 'title', g ? g.title : ''),
    field('Registration', 'addressType', g ? g.addressType : 0, 'select', { choices: [[0, 'Automatic (heartbeats)'], [1, 'Manual list']] }),
    field('Addresses (manual, comma-separated)', 'addressList', g ? g.addressList : '', 'text', { placeholder: 'http://10.0.0.1:9999/' }),
    field('Access token of this group (empty = the global token)', 'accessToken', g ? g.accessToken || '' : '', 'text',
      { wide: true, autocomplete: 'off', extra: generate })),
  'Save', async (form) => {
    const v = formValues(form);
    const body = { appName: v.appName, title: v.title, addressType: Number(v.addressType), addressList: v.addressList || null,
      accessToken: v.accessToken.trim() };
    await api(g ? 'PUT' : 'POST', g ? `/groups/${g.id}` : '/groups', body);
    toast('Saved.', 'info');
    groupsPage();
  });
}

async function jobsPage(params) {
  const groups = await groupsList();
  const f = { jobGroup: params.get('jobGroup') || '', triggerStatus: params.get('triggerStatus') || '-1',
    jobDesc: params.get('jobDesc') || '', executorHandler: params.get('executorHandler') || '',
    author: params.get('author') || '', offset: Number(params.get('offset') || 0) };
  const data = await api('GET', '/jobs' + qs({ ...f, limit: PAGE }));
  const gname = (id) => (groups.find((g) => g.id === id) || {}).title || `#${id}`;
  const filters = h('form', { class: 'toolbar', role: 'search' },
    h('label', {}, 'Executor', h('select', { name: 'jobGroup' }, h('option', { value: '' }, 'All'),
      groups.map((g) => h('option', { value: g.id, selected: String(g.id) === f.jobGroup }, g.title)))),
    h('label', {}, 'Status', h('select', { name: 'triggerStatus' },
      [['-1', 'All'], ['1', 'Running'], ['0', 'Stopped']].map(([v, t]) => h('option', { value: v, selected: v === f.triggerStatus }, t)))),
    h('label', {}, 'Description', h('input', { name: 'jobDesc', value: f.jobDesc })),
    h('label', {}, 'Handler', h('input', { name: 'executorHandler', value: f.executorHandler })),
    h('label', {}, 'Author', h('input', { name: 'author', value: f.author })),
    h('button', { type: 'submit' }, 'Search'), h('span', { class: 'spacer' }),
    h('button', { type: 'button', class: 'primary', onclick: () => jobForm(null, groups) }, 'New job'));
  filters.addEventListener('submit', (ev) => {
    ev.preventDefault();
    const v = formValues(filters);
    location.hash = '#/jobs' + qs(v);
  });
  const rows = data.items.map((j) => h('tr', { 'data-job': j.jobDesc },
    h('td', {}, j.id), h('td', {}, j.jobDesc), h('td', {}, gname(j.jobGroup)),
    h('td', {}, j.scheduleType, j.scheduleConf ? `: ${j.scheduleConf}` : ''),
    h('td', {}, j.glueType === 'BEAN' ? j.executorHandler : j.glueType),
    h('td', {}, j.author),
    h('td', {}, h('span', { class: 'badge ' + (j.triggerStatus ? 'running-job' : 'stopped') }, j.triggerStatus ? 'Running' : 'Stopped'),
      j.triggerStatus ? h('div', { class: 'muted' }, 'next ', fmtTime(j.triggerNextTime)) : null),
    h('td', { class: 'actions' },
      j.triggerStatus
        ? h('button', { type: 'button', onclick: () => act(`/jobs/${j.id}/stop`, 'Stopped.') }, 'Stop')
        : h('button', { type: 'button', onclick: () => act(`/jobs/${j.id}/start`, 'Started.') }, 'Start'),
      h('button', { type: 'button', onclick: () => triggerForm(j) }, 'Run once'),
      h('button', { type: 'button', onclick: () => jobForm(j, groups) }, 'Edit'),
      h('button', { type: 'button', onclick: () => jobForm({ ...j, id: null, jobDesc: j.jobDesc + ' (copy)' }, groups) }, 'Copy'),
      h('button', { type: 'button', onclick: () => { location.hash = `#/logs?jobGroup=${j.jobGroup}&jobId=${j.id}`; } }, 'Logs'),
      j.glueType !== 'BEAN' && h('button', { type: 'button', onclick: () => { location.hash = `#/glue/${j.id}`; } }, 'Script'),
      h('button', { type: 'button', class: 'danger', onclick: async () => {
        if (!(await confirmDialog(`Delete job ${j.id} "${j.jobDesc}" with all its run logs?`))) return;
        try { await api('DELETE', `/jobs/${j.id}`); route(); } catch (e) { showError(e); }
      } }, 'Delete'))));
  page('Jobs', filters,
    table(['ID', 'Description', 'Executor', 'Schedule', 'Handler', 'Author', 'Status', ''], rows),
    pager(data.total, f.offset, (o) => { location.hash = '#/jobs' + qs({ ...f, offset: o }); }));
}

async function act(path, done) {
  try { await api('POST', path); toast(done, 'info'); route(); } catch (e) { showError(e); }
}

function triggerForm(j) {
  formDialog(`Run "${j.jobDesc}" once`, h('div', { class: 'grid' },
    field('Param', 'executorParam', j.executorParam || '', 'textarea', { wide: true }),
    field('Addresses (optional, comma-separated; default: the executor group)', 'addressList', '', 'text', { wide: true })),
  'Run', async (form) => {
    const v = formValues(form);
    await api('POST', `/jobs/${j.id}/trigger`, { executorParam: v.executorParam, addressList: v.addressList || null });
    toast('Triggered.', 'info');
  });
}

/** The executors' built-in handlers, each with the param a new job starts from. */
const BUILTIN_HANDLERS = {
  httpJobHandler: JSON.stringify({ url: 'https://api.example.com/hook', method: 'POST',
    contentType: 'application/json', headers: {}, timeout: 10000, data: '{}' }, null, 2),
  commandJobHandler: 'echo hello',
};

function jobForm(j, groups) {
  const editing = j && j.id;
  const x = j || { jobGroup: groups.length ? groups[0].id : 0, scheduleType: 'CRON', misfireStrategy: 'DO_NOTHING',
    executorRouteStrategy: 'FIRST', executorBlockStrategy: 'SERIAL_EXECUTION', executorTimeout: 0,
    executorFailRetryCount: 0, retryInterval: 0, glueType: 'BEAN' };
  const glues = state.me.scriptsEnabled ? GLUES : ['BEAN'];
  const times = h('ul', { class: 'times', 'aria-live': 'polite', 'data-testid': 'next-times' });
  const preview = h('div', { class: 'wide' }, h('span', { class: 'muted' }, 'Next fire times'), times);
  const content = h('div', { class: 'grid' },
    field('Executor', 'jobGroup', x.jobGroup, 'select', { choices: groups.map((g) => [g.id, `${g.title} (${g.appName})`]) }),
    field('Description', 'jobDesc', x.jobDesc),
    field('Author', 'author', x.author),
    field('Alarm e-mail (comma-separated)', 'alarmEmail', x.alarmEmail),
    field('Schedule type', 'scheduleType', x.scheduleType, 'select', { choices: choices(SCHEDULES) }),
    field('Cron expression / seconds', 'scheduleConf', x.scheduleConf, 'text', { placeholder: '0 0/5 * * * ?' }),
    field('Time zone (IANA; empty = the center\'s)', 'timeZone', x.timeZone, 'text', { placeholder: 'Asia/Shanghai' }),
    field('Misfire', 'misfireStrategy', x.misfireStrategy, 'select', { choices: choices(MISFIRES) }),
    preview,
    field('Routing', 'executorRouteStrategy', x.executorRouteStrategy, 'select', { choices: choices(ROUTES) }),
    field('Block strategy', 'executorBlockStrategy', x.executorBlockStrategy, 'select', { choices: choices(BLOCKS) }),
    field('Run mode', 'glueType', x.glueType, 'select', { choices: choices(glues.includes(x.glueType) ? glues : [...glues, x.glueType]) }),
    field('Handler', 'executorHandler', x.executorHandler, 'text', { list: 'builtin-handlers',
      extra: h('datalist', { id: 'builtin-handlers' }, Object.keys(BUILTIN_HANDLERS).map((n) => h('option', { value: n }))) }),
    field('Param', 'executorParam', x.executorParam, 'textarea', { wide: true }),
    field('Timeout (s, 0 = none)', 'executorTimeout', x.executorTimeout, 'number', { min: 0 }),
    field('Retries on failure', 'executorFailRetryCount', x.executorFailRetryCount, 'number', { min: 0 }),
    field('Retry interval (s)', 'retryInterval', x.retryInterval, 'number', { min: 0 }),
    field('Child job ids (comma-separated)', 'childJobId', x.childJobId),
    field('Alarm webhook URL', 'alarmWebhook', x.alarmWebhook, 'text', { wide: true }),
    !editing && field('Script source (script run modes)', 'glueSource', x.glueSource, 'textarea', { wide: true, rows: 5 }));
  const form = formDialog(editing ? `Edit job ${j.id}` : 'New job', content, 'Save', async (f) => {
    const v = formValues(f);
    const num = (k) => (v[k] === '' ? 0 : Number(v[k]));
    const body = { ...v, jobGroup: Number(v.jobGroup), executorTimeout: num('executorTimeout'),
      executorFailRetryCount: num('executorFailRetryCount'), retryInterval: num('retryInterval') };
    for (const k of ['alarmEmail', 'timeZone', 'childJobId', 'alarmWebhook', 'scheduleConf', 'glueSource']) if (body[k] === '') body[k] = null;
    if (body.scheduleType === 'NONE') body.scheduleConf = null;
    await api(editing ? 'PUT' : 'POST', editing ? `/jobs/${j.id}` : '/jobs', body);
    toast('Saved.', 'info');
    route();
  });
  // a built-in handler fills an empty param with its template
  const param = form.querySelector('[name=executorParam]');
  form.querySelector('[name=executorHandler]').addEventListener('input', (ev) => {
    const template = BUILTIN_HANDLERS[ev.target.value.trim()];
    if (template && !param.value.trim()) param.value = template;
  });
  let timer;
  const refresh = () => {
    clearTimeout(timer);
    timer = setTimeout(async () => {
      const v = formValues(form);
      times.replaceChildren();
      if (v.scheduleType === 'NONE') { times.append(h('li', { class: 'muted' }, 'runs only when triggered')); return; }
      if (!v.scheduleConf) return;
      try {
        const r = await api('GET', '/jobs/next-fire-times' + qs({ scheduleType: v.scheduleType, scheduleConf: v.scheduleConf, timeZone: v.timeZone, count: 5 }));
        times.replaceChildren(...r.items.map((t) => h('li', {}, t)));
      } catch (e) {
        times.replaceChildren(h('li', { class: 'field-error' }, e.message));
      }
    }, 250);
  };
  for (const n of ['scheduleType', 'scheduleConf', 'timeZone']) form.querySelector(`[name=${n}]`).addEventListener('input', refresh);
  refresh();
}

async function gluePage(id) {
  const g = await api('GET', `/jobs/${id}/glue`);
  const src = h('textarea', { name: 'glueSource', rows: 18, 'aria-label': 'Script source' });
  src.value = g.glueSource || '';
  const form = h('form', {},
    src,
    h('div', { class: 'toolbar' }, field('What changed (4–100 characters)', 'glueRemark', ''),
      h('button', { type: 'submit', class: 'primary' }, 'Save version')));
  form.addEventListener('submit', async (ev) => {
    ev.preventDefault();
    clearErrors(form);
    const v = formValues(form);
    try { await api('PUT', `/jobs/${id}/glue`, { glueSource: v.glueSource, glueRemark: v.glueRemark }); toast('Saved.', 'info'); gluePage(id); } catch (e) { showError(e, form); }
  });
  const history = g.history.map((v) => h('tr', {}, h('td', {}, fmtTime(v.updateTime)), h('td', {}, v.glueRemark),
    h('td', { class: 'actions' }, h('button', { type: 'button', onclick: () => { src.value = v.glueSource || ''; } }, 'Load'))));
  page(`Script of job ${id} (${g.glueType})`, form,
    h('h2', {}, 'History (newest 30)'), table(['Saved', 'Remark', ''], history, 'No versions saved yet.'));
}

async function logsPage(params) {
  const groups = await groupsList();
  const f = { jobGroup: params.get('jobGroup') || '', jobId: params.get('jobId') || '', status: params.get('status') || '',
    from: params.get('from') || '', to: params.get('to') || '', offset: Number(params.get('offset') || 0) };
  const jobs = f.jobGroup ? (await api('GET', '/jobs' + qs({ jobGroup: f.jobGroup, limit: 1000 }))).items : [];
  const filters = h('form', { class: 'toolbar', role: 'search' },
    h('label', {}, 'Executor', h('select', { name: 'jobGroup', onchange: () => { location.hash = '#/logs' + qs({ jobGroup: filters.jobGroup.value }); } },
      h('option', { value: '' }, 'All'), groups.map((g) => h('option', { value: g.id, selected: String(g.id) === f.jobGroup }, g.title)))),
    h('label', {}, 'Job', h('select', { name: 'jobId' }, h('option', { value: '' }, 'All'),
      jobs.map((j) => h('option', { value: j.id, selected: String(j.id) === f.jobId }, `${j.id} ${j.jobDesc}`)))),
    h('label', {}, 'Status', h('select', { name: 'status' },
      [['', 'All'], ['success', 'Success'], ['failed', 'Failed'], ['running', 'Running']].map(([v, t]) => h('option', { value: v, selected: v === f.status }, t)))),
    h('label', {}, 'From', h('input', { type: 'datetime-local', name: 'from', value: f.from })),
    h('label', {}, 'To', h('input', { type: 'datetime-local', name: 'to', value: f.to })),
    h('button', { type: 'submit' }, 'Search'), h('span', { class: 'spacer' }),
    h('button', { type: 'button', class: 'danger', onclick: () => clearForm(f) }, 'Clear logs…'));
  filters.addEventListener('submit', (ev) => { ev.preventDefault(); location.hash = '#/logs' + qs(formValues(filters)); });
  const tbody = h('tbody');
  const totalBox = h('div');
  const localTime = (s) => (s ? new Date(s).toISOString() : '');
  const load = async () => {
    const data = await api('GET', '/logs' + qs({ jobGroup: f.jobGroup, jobId: f.jobId, status: f.status, from: localTime(f.from), to: localTime(f.to), offset: f.offset, limit: PAGE }));
    tbody.replaceChildren(...(data.items.length ? data.items.map(logRow) : [h('tr', {}, h('td', { colspan: 8, class: 'muted' }, 'No runs match.'))]));
    totalBox.replaceChildren(pager(data.total, f.offset, (o) => { location.hash = '#/logs' + qs({ ...f, offset: o }); }));
  };
  page('Run logs', filters,
    h('table', {}, h('thead', {}, h('tr', {}, ['ID', 'Job', 'Triggered', 'Trigger', 'Param', 'Finished', 'Result', ''].map((x) => h('th', { scope: 'col' }, x)))), tbody),
    totalBox);
  await load();
  every(2000, () => load().catch(() => {}));
}

function logRow(l) {
  return h('tr', { 'data-log': l.id, 'data-status': l.status },
    h('td', {}, l.id), h('td', {}, l.jobId), h('td', {}, fmtTime(l.triggerTime), h('div', { class: 'muted' }, l.triggerType || '')),
    h('td', {}, l.triggerCode === 200 ? 'ok' : `failed (${l.triggerCode})`),
    h('td', { class: 'param' }, l.executorParam || ''),
    h('td', {}, fmtTime(l.handleTime)),
    h('td', {}, h('span', { class: 'badge ' + l.status }, l.status), l.handleMsg ? h('div', { class: 'muted' }, msgText(l.handleMsg).slice(0, 120)) : null),
    h('td', { class: 'actions' },
      h('button', { type: 'button', onclick: () => infoDialog(`Run ${l.id}`, h('div', {},
        h('h3', {}, 'Trigger'), h('pre', { class: 'msg' }, msgText(l.triggerMsg)),
        h('h3', {}, 'Result'), h('pre', { class: 'msg' }, msgText(l.handleMsg) || '(none yet)'))) }, 'Details'),
      l.executorAddress && h('button', { type: 'button', onclick: () => { location.hash = `#/log/${l.id}`; } }, 'Run log'),
      l.status === 'running' && h('button', { type: 'button', class: 'danger', onclick: () => killRun(l.id) }, 'Kill')));
}

async function killRun(id) {
  if (!(await confirmDialog(`Kill run ${id}?`, 'Kill'))) return;
  try { await api('POST', `/logs/${id}/kill`); toast('Killed.', 'info'); route(); } catch (e) { showError(e); }
}

function clearForm(f) {
  formDialog('Clear run logs', h('div', { class: 'grid' },
    h('p', { class: 'wide' }, f.jobGroup ? `Executor ${f.jobGroup}${f.jobId ? `, job ${f.jobId}` : ', all its jobs'}.` : 'All executors you may see.'),
    field('What to delete', 'type', 1, 'select', { choices: CLEAR_MODES, wide: true })),
  'Delete', async (form) => {
    const v = formValues(form);
    const r = await api('POST', '/logs/clear', { jobGroup: f.jobGroup ? Number(f.jobGroup) : null, jobId: f.jobId ? Number(f.jobId) : null, type: Number(v.type) });
    toast(`Deleted ${r.deleted} run(s).`, 'info');
    route();
  });
}

/** The rolling run log: reads new lines every second until the run ends. */
async function runLogPage(id) {
  const l = await api('GET', `/logs/${id}`);
  const pre = h('pre', { class: 'log', 'aria-live': 'polite', 'data-testid': 'run-log' });
  const status = h('p', { class: 'muted', 'data-testid': 'follow-state' }, 'Following…');
  const kill = h('button', { type: 'button', class: 'danger', onclick: () => killRun(id) }, 'Kill');
  page(`Run log ${id} (job ${l.jobId})`, h('div', { class: 'toolbar' }, status, h('span', { class: 'spacer' }), l.status === 'running' && kill), pre);
  let from = 1;
  let busy = false;
  const token = {};
  state.timers.push(token);
  const poll = async () => {
    if (busy || token.stopped) return;
    busy = true;
    try {
      const c = await api('GET', `/logs/${id}/content?fromLine=${from}`);
      if (c.content) pre.append(document.createTextNode(c.content));
      if (c.toLine >= from) from = c.toLine + 1;
      if (c.end) {
        status.textContent = 'The run has ended.';
        kill.remove();
        token.stopped = true;
      }
    } catch (e) {
      status.textContent = `Cannot read the log: ${e.message}`;
      token.stopped = true;
    } finally { busy = false; }
  };
  await poll();
  const t = setInterval(() => (token.stopped ? clearInterval(t) : poll()), 1000);
  state.timers.push(t);
}

async function usersPage() {
  const [data, groups] = await Promise.all([api('GET', '/users?limit=1000'), groupsList()]);
  const gname = (id) => (groups.find((g) => g.id === id) || {}).title || `#${id}`;
  const rows = data.items.map((u) => h('tr', { 'data-user': u.username },
    h('td', {}, u.username), h('td', {}, u.role === 1 ? 'Administrator' : 'User'),
    h('td', {}, u.role === 1 ? 'all' : u.permission.map(gname).join(', ')),
    h('td', { class: 'actions' },
      h('button', { type: 'button', onclick: () => userForm(u, groups) }, 'Edit'),
      u.id !== state.me.id && h('button', { type: 'button', class: 'danger', onclick: async () => {
        if (!(await confirmDialog(`Delete user ${u.username}?`))) return;
        try { await api('DELETE', `/users/${u.id}`); usersPage(); } catch (e) { showError(e); }
      } }, 'Delete'))));
  page('Users', h('div', { class: 'toolbar' }, h('span', { class: 'spacer' }),
    h('button', { type: 'button', class: 'primary', onclick: () => userForm(null, groups) }, 'New user')),
  table(['User name', 'Role', 'Executor groups', ''], rows));
}

function userForm(u, groups) {
  const perms = h('fieldset', { class: 'wide' }, h('legend', {}, 'Executor groups (normal users)'),
    h('div', { class: 'checks' }, groups.map((g) => h('label', {},
      h('input', { type: 'checkbox', name: 'permission', 'data-multi': '1', value: g.id, checked: !!(u && u.permission.includes(g.id)) }), ` ${g.title}`))),
    h('span', { class: 'field-error', 'data-error-for': 'permission' }));
  const content = h('div', { class: 'grid' },
    u ? h('p', {}, `User name: ${u.username}`) : field('User name', 'username', ''),
    field(u ? 'New password (empty = keep)' : 'Password (8+ characters)', 'password', '', 'password', { autocomplete: 'new-password' }),
    field('Role', 'role', u ? u.role : 0, 'select', { choices: [[0, 'User'], [1, 'Administrator']] }),
    perms);
  perms.classList.add('field');
  formDialog(u ? `Edit ${u.username}` : 'New user', content, 'Save', async (form) => {
    const v = formValues(form);
    const body = { username: u ? u.username : v.username, password: v.password || null, role: Number(v.role), permission: v.permission || [] };
    await api(u ? 'PUT' : 'POST', u ? `/users/${u.id}` : '/users', body);
    toast('Saved.', 'info');
    usersPage();
  });
}

const AUDIT_ACTIONS = ['auth.login', 'auth.login_failed', 'auth.logout', 'auth.password',
  'job.create', 'job.update', 'job.delete', 'job.start', 'job.stop', 'job.trigger', 'job.glue',
  'group.create', 'group.update', 'group.delete', 'user.create', 'user.update', 'user.delete',
  'log.clear', 'log.kill'];

async function auditPage(params) {
  const f = { username: params.get('username') || '', action: params.get('action') || '',
    targetType: params.get('targetType') || '', targetId: params.get('targetId') || '',
    from: params.get('from') || '', to: params.get('to') || '', offset: Number(params.get('offset') || 0) };
  const filters = h('form', { class: 'toolbar', role: 'search' },
    h('label', {}, 'User name', h('input', { name: 'username', value: f.username })),
    h('label', {}, 'Action', h('select', { name: 'action' }, h('option', { value: '' }, 'All'),
      AUDIT_ACTIONS.map((a) => h('option', { value: a, selected: a === f.action }, a)))),
    h('label', {}, 'Target', h('select', { name: 'targetType' },
      [['', 'All'], ['job', 'job'], ['group', 'group'], ['user', 'user'], ['log', 'log']].map(([v, t]) => h('option', { value: v, selected: v === f.targetType }, t)))),
    h('label', {}, 'Target id', h('input', { name: 'targetId', value: f.targetId, size: 8 })),
    h('label', {}, 'From', h('input', { type: 'datetime-local', name: 'from', value: f.from })),
    h('label', {}, 'To', h('input', { type: 'datetime-local', name: 'to', value: f.to })),
    h('button', { type: 'submit' }, 'Search'));
  filters.addEventListener('submit', (ev) => { ev.preventDefault(); location.hash = '#/audit' + qs(formValues(filters)); });
  const localTime = (s) => (s ? new Date(s).toISOString() : '');
  const data = await api('GET', '/audit' + qs({ username: f.username, action: f.action, targetType: f.targetType,
    targetId: f.targetId, from: localTime(f.from), to: localTime(f.to), offset: f.offset, limit: PAGE }));
  const rows = data.items.map((e) => h('tr', { 'data-audit': e.action },
    h('td', {}, fmtTime(e.time)), h('td', {}, e.username), h('td', {}, e.clientIp),
    h('td', {}, e.action), h('td', {}, e.targetId ? `${e.targetType} ${e.targetId}` : e.targetType),
    h('td', { class: 'param' }, e.detail)));
  page('Audit log', filters, table(['Time', 'User name', 'Client', 'Action', 'Target', 'Detail'], rows, 'No entries match.'),
    pager(data.total, f.offset, (o) => { location.hash = '#/audit' + qs({ ...f, offset: o }); }));
}

function passwordForm() {
  formDialog('Change your password', h('div', { class: 'grid' },
    field('Current password', 'oldPassword', '', 'password', { autocomplete: 'current-password' }),
    field('New password (8+ characters)', 'password', '', 'password', { autocomplete: 'new-password' })),
  'Change', async (form) => {
    const v = formValues(form);
    await api('POST', '/auth/password', { oldPassword: v.oldPassword, password: v.password });
    toast('Password changed.', 'info');
  });
}

// ---------- shell ----------

async function loadMe() {
  state.me = await api('GET', '/auth/me');
  $('#who').textContent = state.me.username;
  $('#nav-users').hidden = state.me.role !== 1;
  $('#nav-audit').hidden = state.me.role !== 1;
}

async function route() {
  for (const t of state.timers) { if (typeof t === 'object') t.stopped = true; else clearInterval(t); }
  state.timers = [];
  closeDialog();
  const [path, query] = (location.hash.slice(1) || '/').split('?');
  const params = new URLSearchParams(query || '');
  if (path === '/login') { loginPage(); return; }
  if (!state.me) {
    try { await loadMe(); } catch { return; }
  }
  $('#top').hidden = false;
  const parts = path.split('/').filter(Boolean);
  const section = parts[0] || 'dashboard';
  document.querySelectorAll('[data-nav]').forEach((a) => {
    if (a.dataset.nav === (section === 'log' ? 'logs' : section === 'glue' ? 'jobs' : section)) a.setAttribute('aria-current', 'page');
    else a.removeAttribute('aria-current');
  });
  try {
    switch (section) {
      case 'dashboard': await dashboardPage(); break;
      case 'groups': await groupsPage(); break;
      case 'jobs': await jobsPage(params); break;
      case 'glue': await gluePage(Number(parts[1])); break;
      case 'logs': await logsPage(params); break;
      case 'log': await runLogPage(Number(parts[1])); break;
      case 'users': await usersPage(); break;
      case 'audit': await auditPage(params); break;
      default: page('Not found', h('p', {}, 'No such page.'));
    }
  } catch (e) {
    if (e.status !== 401) page('Error', h('p', { role: 'alert' }, e.message));
  }
}

window.addEventListener('hashchange', route);
window.addEventListener('DOMContentLoaded', () => {
  $('#btn-logout').addEventListener('click', async () => {
    try { await api('POST', '/auth/logout'); } catch { /* already signed out */ }
    state.me = null;
    location.hash = '#/login';
  });
  $('#btn-password').addEventListener('click', passwordForm);
  // a closed dialog keeps no form behind (no stale fields, nothing for a screen reader to find)
  dialog().addEventListener('close', () => dialog().replaceChildren());
  route();
});
