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

// ---------- language ----------

/** The console's languages; the choice is remembered in localStorage (`xjob.lang`). */
const LANGS = [['en', 'English'], ['zh', '中文']];
let LANG = (() => {
  const saved = localStorage.getItem('xjob.lang');
  if (LANGS.some(([l]) => l === saved)) return saved;
  return (navigator.languages || [navigator.language || 'en']).some((l) => /^zh\b/i.test(l)) ? 'zh' : 'en';
})();

/** Simplified Chinese for every text of the console (English is the key). */
const ZH = {
"API keys": "API 密钥",
"Workflows": "工作流",
"Workflow": "工作流",
"workflow": "工作流",
"A workflow is a DAG of jobs, decisions and nested workflows. Saving checks the whole graph; each save is a new version. A run follows the version it started with.": "工作流是由任务、判断和嵌套工作流组成的有向无环图。保存时检查整个图；每次保存都是一个新版本。每次运行按其开始时的版本执行。",
"All runs": "全部运行",
"Attempt": "尝试",
"Context": "上下文",
"Decision": "判断结果",
"Ended": "结束时间",
"Mark succeeded": "标记为成功",
"Message": "消息",
"Most queued runs": "最多排队运行数",
"Node runs": "节点运行",
"Params (JSON object or text): the run's first context": "参数（JSON 对象或文本）：运行的初始上下文",
"Re-run failed nodes": "重跑失败节点",
"Re-run from node": "从节点重跑",
"Recent runs": "最近运行",
"Run {id} of {name}": "{name} 的运行 {id}",
"Run {name}": "运行 {name}",
"Schedule running": "调度运行中",
"Shards": "分片",
"Duration": "耗时",
"Started": "开始时间",
"State": "状态",
"While a run is running": "已有运行时",
"Workflow runs": "工作流运行",
"ended {when}": "结束于 {when}",
"history": "历史",
"run {id}": "运行 {id}",
"started {when}": "开始于 {when}",
"PARALLEL": "并行",
"SKIP": "跳过",
"QUEUE": "排队",
"QUEUED": "排队中",
"RUNNING": "运行中",
"SUCCEEDED": "成功",
"FAILED": "失败",
"STOPPED": "已停止",
"SKIPPED": "已跳过",
"PENDING": "等待中",
"MANUAL": "手动触发",
"API": "API 触发",
"MISFIRE": "补偿触发",
"WORKFLOW": "工作流触发",
"New workflow": "新建工作流",
"Version": "版本",
"Nodes": "节点数",
"Saved": "保存时间",
"Delete the workflow {name} and its versions?": "删除工作流 {name} 及其所有版本？",
"Definition (JSON: nodes and edges)": "定义（JSON：节点和边）",
"Check": "检查",
"No problems found.": "未发现问题。",
"Node {node}: {msg}": "节点 {node}：{msg}",
"Workflow graph": "工作流图",
"Version {n}": "版本 {n}",
"saved by {who}, {when}": "{who} 保存于 {when}",
"Node": "节点",
"Type": "类型",
"Does": "内容",
"Rule": "触发规则",
"job {id}": "任务 {id}",
"workflow {id}": "工作流 {id}",
"disabled": "已禁用",
"may fail": "允许失败",
"Keys for scripts and CI pipelines, sent as \"Authorization: Bearer <key>\". A key acts for you, within the role and groups you give it, until it expires or is revoked.": "供脚本和 CI 流水线使用的密钥，以 \"Authorization: Bearer <密钥>\" 发送。密钥代表您行事，权限限于您给它的角色和执行器，直到过期或被吊销。",
"New key": "新建密钥",
"Name": "名称",
"Key": "密钥",
"Expires": "过期时间",
"Revoke": "吊销",
"Revoke the key {name}? Whatever uses it is refused at once.": "吊销密钥 {name}？使用它的请求会立即被拒绝。",
"Executor groups (normal keys)": "执行器（普通密钥）",
"Expires in (days)": "有效期（天）",
"Create": "创建",
"Key created": "密钥已创建",
"Copy the key now: it is not shown again.": "请立即复制密钥：它不会再次显示。",
"All": "全部",
"User name": "用户名",
"Delete": "删除",
"Saved.": "已保存。",
"Running": "运行中",
"Executor": "执行器",
"To": "至",
"Status": "状态",
"Search": "搜索",
"Save": "保存",
"Param": "任务参数",
"Kill": "终止",
"Handler": "JobHandler",
"From": "从",
"Edit": "编辑",
"Description": "任务描述",
"Author": "负责人",
"User": "普通用户",
"Trigger": "调度",
"Title": "名称",
"Target": "对象",
"Stopped": "已停止",
"Role": "角色",
"Result": "执行结果",
"Registration": "注册方式",
"New user": "新增用户",
"New job": "新增任务",
"Jobs": "任务",
"Job": "任务",
"ID": "ID",
"Failed": "失败",
"Cancel": "取消",
"App name": "AppName",
"Administrator": "管理员",
"Action": "操作",
"runs only when triggered": "仅手动触发时运行",
"own access token": "独立访问令牌",
"none online": "无在线机器",
"next ": "下次 ",
"Wrong user name or password.": "用户名或密码错误。",
"What to delete": "清理方式",
"What changed (4–100 characters)": "修改说明（4–100 个字符）",
"Users": "用户管理",
"Triggered.": "已触发。",
"Timeout (s, 0 = none)": "任务超时时间（秒，0 = 不限）",
"Time": "时间",
"The run has ended.": "执行已结束。",
"Target id": "对象 ID",
"Table": "表格",
"Successful": "成功",
"Successful runs": "成功次数",
"Success": "成功",
"Stopped.": "已停止。",
"Stop": "停止",
"Started.": "已启动。",
"Start it now": "创建后立即启动",
"Start": "启动",
"Sign in": "登录",
"Sign in to xjob": "登录 xjob",
"Show": "查询",
"Script": "GLUE 源码",
"Script source": "脚本源码",
"Script source (script run modes)": "脚本源码（脚本运行模式）",
"Schedule": "调度",
"Schedule type": "调度类型",
"Save version": "保存版本",
"Runs": "调度次数",
"Runs per day": "每日调度次数",
"Run": "执行",
"Run once": "执行一次",
"Run mode": "运行模式",
"Run logs": "调度日志",
"Run log": "执行日志",
"Routing": "路由策略",
"Retry interval (s)": "重试间隔（秒）",
"Retries on failure": "失败重试次数",
"Remark": "备注",
"Previous": "上一页",
"Please confirm": "请确认",
"Password": "密码",
"Password changed.": "密码已修改。",
"Password changed; {sessions} other session(s) and {keys} API key(s) ended.": "密码已修改；已结束 {sessions} 个其他会话和 {keys} 个 API 密钥。",
"Also revoke my API keys": "同时吊销我的 API 密钥",
"Password (8+ characters)": "密码（至少 8 个字符）",
"Older than three months": "清理三个月之前的日志",
"Older than six months": "清理六个月之前的日志",
"Older than one year": "清理一年之前的日志",
"Older than one month": "清理一个月之前的日志",
"Nothing here yet.": "暂无数据。",
"Not found": "未找到",
"No versions saved yet.": "尚未保存任何版本。",
"No such page.": "没有这个页面。",
"No runs match.": "没有匹配的执行记录。",
"No entries match.": "没有匹配的记录。",
"Next": "下一页",
"Next fire times": "下次触发时间",
"New password (empty = keep)": "新密码（留空 = 不修改）",
"New password (8+ characters)": "新密码（至少 8 个字符）",
"New group": "新增执行器",
"New executor group": "新增执行器",
"Misfire": "调度过期策略",
"Manual": "手动录入",
"Manual list": "手动录入",
"Logs": "日志",
"Load": "载入",
"Live executors": "在线执行器",
"Live addresses": "在线机器地址",
"Killed.": "已终止。",
"Keep the newest 30,000": "只保留最近三万条",
"Keep the newest 100,000": "只保留最近十万条",
"Keep the newest 10,000": "只保留最近一万条",
"Keep the newest 1,000": "只保留最近一千条",
"History (newest 30)": "历史版本（最近 30 个）",
"Generate": "生成",
"Following…": "正在跟踪…",
"Finished": "执行时间",
"Executors": "执行器管理",
"Executor groups": "执行器",
"Executor groups (normal users)": "执行器权限（普通用户）",
"Error": "错误",
"Details": "详情",
"Detail": "详情",
"Delete all": "清理所有日志",
"Day": "日期",
"Dashboard": "运行报表",
"Current password": "当前密码",
"Cron expression / seconds": "Cron 表达式 / 秒数",
"Copy": "复制",
"Close": "关闭",
"Client": "客户端",
"Clear run logs": "清理调度日志",
"Clear logs…": "清理日志…",
"Child job ids (comma-separated)": "子任务 ID（逗号分隔）",
"Change": "修改",
"Change your password": "修改密码",
"Block strategy": "阻塞处理策略",
"Automatic": "自动注册",
"Automatic (heartbeats)": "自动注册（心跳）",
"Audit log": "审计日志",
"All executors you may see.": "你可见的全部执行器。",
"Alarm webhook URL": "告警 Webhook URL",
"Alarm e-mail (comma-separated)": "报警邮件（逗号分隔）",
"Addresses (optional, comma-separated; default: the executor group)": "机器地址（可选，逗号分隔；默认：执行器的地址）",
"Addresses (manual, comma-separated)": "机器地址（手动录入，逗号分隔）",
"Access token of this group (empty = the global token)": "本执行器的访问令牌（留空 = 全局令牌）",
"(none yet)": "（暂无）",
"0 items": "0 条",
"Time zone (IANA; empty = the center's)": "时区（IANA；留空 = 调度中心的时区）",
"ok": "成功",
"all": "全部",
"Triggered": "触发时间",
"Change password": "修改密码",
"Log out": "退出",
"Loading…": "加载中…",
"Language": "语言",
"Sign in · xjob": "登录 · xjob",
"FIRST": "第一个",
"LAST": "最后一个",
"ROUND": "轮询",
"RANDOM": "随机",
"CONSISTENT_HASH": "一致性 HASH",
"LEAST_FREQUENTLY_USED": "最不经常使用",
"LEAST_RECENTLY_USED": "最近最久未使用",
"FAILOVER": "故障转移",
"BUSYOVER": "忙碌转移",
"SHARDING_BROADCAST": "分片广播",
"SERIAL_EXECUTION": "单机串行",
"DISCARD_LATER": "丢弃后续调度",
"COVER_EARLY": "覆盖之前调度",
"DO_NOTHING": "忽略",
"FIRE_ONCE_NOW": "立即执行一次",
"CRON": "CRON",
"FIX_RATE": "固定速度",
"NONE": "无",
"success": "成功",
"failed": "失败",
"running": "运行中",
"{from}–{to} of {total}": "第 {from}–{to} 条，共 {total} 条",
"{title} · xjob": "{title} · xjob",
"Successful {n}": "成功 {n}",
"Failed {n}": "失败 {n}",
"Running {n}": "运行中 {n}",
"Delete executor group {name}?": "确定删除执行器 {name}？",
"Edit {name}": "编辑 {name}",
"Delete job {id} \"{desc}\" with all its run logs?": "确定删除任务 {id}“{desc}”及其全部调度日志？",
"Run \"{desc}\" once": "执行一次“{desc}”",
"Edit job {id}": "编辑任务 {id}",
"Script of job {id} ({type})": "任务 {id} 的脚本（{type}）",
"failed ({code})": "失败（{code}）",
"Run {id}": "执行记录 {id}",
"Kill run {id}?": "确定终止执行记录 {id}？",
"Executor {group}, job {job}.": "执行器 {group}，任务 {job}。",
"Executor {group}, all its jobs.": "执行器 {group}，全部任务。",
"Deleted {n} run(s).": "已删除 {n} 条执行记录。",
"Run log {id} (job {job})": "执行日志 {id}（任务 {job}）",
"Cannot read the log: {msg}": "无法读取日志：{msg}",
"Delete user {name}?": "确定删除用户 {name}？",
"User name: {name}": "用户名：{name}",
"Request failed: {msg}": "请求失败：{msg}",
" (copy)": "（副本）",
"job": "任务",
"group": "执行器",
"user": "用户",
"log": "日志"
};

/** `s` in the console's language, `{name}` placeholders filled from `vars`. */
function t(s, vars) {
  let out = (LANG === 'zh' && ZH[s]) || s;
  if (vars) out = out.replace(/\{(\w+)\}/g, (m, k) => (k in vars ? String(vars[k]) : m));
  return out;
}

/** The console's field names, for server messages naming one. */
const FIELDS_ZH = { appName: 'AppName', title: '名称', addressType: '注册方式', addressList: '机器地址',
  accessToken: '访问令牌', jobGroup: '执行器', jobDesc: '任务描述', author: '负责人', alarmEmail: '报警邮件',
  scheduleType: '调度类型', scheduleConf: '调度配置', misfireStrategy: '调度过期策略', executorRouteStrategy: '路由策略',
  executorHandler: 'JobHandler', executorParam: '任务参数', executorBlockStrategy: '阻塞处理策略',
  executorTimeout: '任务超时时间', executorFailRetryCount: '失败重试次数', glueType: '运行模式', glueSource: '脚本源码',
  glueRemark: '修改说明', childJobId: '子任务 ID', timeZone: '时区', retryInterval: '重试间隔', alarmWebhook: '告警 Webhook',
  username: '用户名', password: '密码', oldPassword: '当前密码', role: '角色', permission: '执行器权限',
  from: '开始时间', to: '结束时间', limit: '每页条数', offset: '起始位置', id: 'ID', logId: '日志 ID', jobId: '任务 ID',
  name: '名称', definition: '定义', version: '版本' };

/** Server reasons (after `invalid <field>: `, `conflict: `, `forbidden: `) in Chinese. */
const REASONS_ZH = [
  [/^is required$/, () => '不能为空'],
  [/^must be (\d+) to (\d+) characters$/, (m) => `长度须为 ${m[1]} 到 ${m[2]} 个字符`],
  [/^must be at most (\d+) characters$/, (m) => `最多 ${m[1]} 个字符`],
  [/^must be between (\d+) and (\d+)$/, (m) => `须在 ${m[1]} 到 ${m[2]} 之间`],
  [/^must be (\d+) or more$/, (m) => `须不小于 ${m[1]}`],
  [/^must be 4 to 20 letters, digits/, () => '须为 4 到 20 个字母、数字或 _ - . @'],
  [/^is not the current password$/, () => '不是当前密码'],
  [/^cannot be changed$/, () => '不能修改'],
  [/^administrators only$/, () => '仅限管理员'],
  [/^you cannot delete yourself$/, () => '不能删除自己'],
  [/^you cannot demote yourself$/, () => '不能取消自己的管理员身份'],
  [/^the last group cannot be deleted$/, () => '不能删除最后一个执行器'],
  [/^the group still has (\d+) job\(s\)$/, (m) => `该执行器下还有 ${m[1]} 个任务`],
  [/^a group with appName `(.*)` exists$/, (m) => `AppName 为 ${m[1]} 的执行器已存在`],
  [/^user `(.*)` exists$/, (m) => `用户 ${m[1]} 已存在`],
  [/^run (\d+) is not running$/, (m) => `执行记录 ${m[1]} 未在运行`],
  [/^no permission for executor group (\d+)$/, (m) => `没有执行器 ${m[1]} 的权限`],
  [/^executor group (\d+) does not exist$/, (m) => `执行器 ${m[1]} 不存在`],
  [/^job (\d+) does not exist$/, (m) => `任务 ${m[1]} 不存在`],
  [/^the schedule has no future fire time$/, () => '该调度没有未来的触发时间'],
  [/^a job cannot be its own child$/, () => '任务不能是自己的子任务'],
  [/^`(.*)` is not an IANA time zone( name)?$/, (m) => `${m[1]} 不是 IANA 时区名`],
  [/^`(.*)` is not an http:\/\/ or https:\/\/ address$/, (m) => `${m[1]} 不是 http:// 或 https:// 地址`],
  [/^must be 16 to 255 visible ASCII/, () => '须为 16 到 255 个可见 ASCII 字符，不含空格（留空则使用全局令牌）'],
  [/^must be 0 or more( seconds)?$/, () => '须不小于 0'],
  [/^must be at most (\d+)$/, (m) => `须不大于 ${m[1]}`],
  [/^is required for BEAN jobs$/, () => 'BEAN 模式的任务必须填写'],
  [/^FIX_RATE must be at least 1 second$/, () => '固定速度至少为 1 秒'],
  [/^FIX_RATE needs a whole number of seconds$/, () => '固定速度须为整数秒'],
  [/^a BEAN job has no script source$/, () => 'BEAN 模式的任务没有脚本源码'],
  [/^a NONE schedule has no fire times$/, () => '调度类型为“无”时没有触发时间'],
  [/^a job with schedule type NONE cannot be started$/, () => '调度类型为“无”的任务不能启动'],
  [/^must be 0 \(user\) or 1 \(administrator\)$/, () => '须为 0（普通用户）或 1（管理员）'],
  [/^must be 0 \(automatic\) or 1 \(manual\)$/, () => '须为 0（自动注册）或 1（手动录入）'],
  [/^must be before `to`$/, () => '须早于结束时间'],
  [/^the range must be at most (\d+) days$/, (m) => `时间范围最多 ${m[1]} 天`],
  [/^must not contain `<`, `>` or surrounding spaces$/, () => '不能包含 < 或 >，首尾不能有空格'],
  [/^a manual group needs a comma-separated list/, () => '手动录入的执行器需要逗号分隔的地址列表，且不能有空项'],
  [/^only a run whose trigger succeeded can be killed$/, () => '只能终止调度成功的执行'],
  [/^the run was never dispatched to an executor$/, () => '该执行从未分发到执行器'],
  [/^executor (\S+) answered: (.*)$/s, (m) => `执行器 ${m[1]} 回答：${m[2]}`],
];

/** A server message in the console's language (the English text when none is known). */
function serverText(msg) {
  if (LANG !== 'zh' || !msg) return msg;
  const reason = (r) => {
    for (const [re, f] of REASONS_ZH) { const m = r.match(re); if (m) return f(m); }
    return r;
  };
  let m;
  if ((m = msg.match(/^invalid (\w+): (.*)$/s))) return `${FIELDS_ZH[m[1]] || m[1]}：${reason(m[2])}`;
  if ((m = msg.match(/^invalid schedule `(.*)`: (.*)$/s))) return `无效的调度配置 ${m[1]}：${m[2]}`;
  if ((m = msg.match(/^conflict: (.*)$/s))) return `冲突：${reason(m[1])}`;
  if ((m = msg.match(/^forbidden: (.*)$/s))) return `无权限：${reason(m[1])}`;
  if ((m = msg.match(/^too many login attempts; retry in (\d+) s$/))) return `登录尝试次数过多，请 ${m[1]} 秒后重试`;
  if ((m = msg.match(/^(\w+) (\d+) not found$/))) return `${m[1]} ${m[2]} 不存在`;
  if (msg === 'authentication required') return '需要登录';
  if (msg === 'internal error; see the server log') return '内部错误，请查看服务器日志';
  return reason(msg);
}

/** The language switch (header and sign-in page). */
function langSwitch() {
  const sel = h('select', { 'aria-label': 'Language / 语言', class: 'lang', onchange: (ev) => setLang(ev.target.value) },
    LANGS.map(([l, name]) => h('option', { value: l, selected: l === LANG }, name)));
  return sel;
}

/** Switches the language, remembers it, and draws the page again. */
function setLang(l) {
  LANG = l;
  localStorage.setItem('xjob.lang', l);
  translateShell();
  route();
}

/** The static page (header, status line) in the current language. */
function translateShell() {
  document.documentElement.lang = LANG === 'zh' ? 'zh-CN' : 'en';
  document.querySelectorAll('[data-i18n]').forEach((el) => { el.textContent = t(el.dataset.i18n); });
  const slot = $('#lang-slot');
  if (slot) slot.replaceChildren(langSwitch());
}

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

function fmtTime(v) {
  if (!v) return '';
  const d = typeof v === 'number' ? new Date(v) : new Date(v);
  if (isNaN(d)) return String(v);
  const p = (n) => String(n).padStart(2, '0');
  return `${d.getFullYear()}-${p(d.getMonth() + 1)}-${p(d.getDate())} ${p(d.getHours())}:${p(d.getMinutes())}:${p(d.getSeconds())}`;
}

function toast(text, kind = 'error') {
  const box = $('#toast');
  box.textContent = text;
  box.className = kind === 'info' ? 'info' : '';
  box.hidden = false;
  clearTimeout(toast.timer);
  toast.timer = setTimeout(() => { box.hidden = true; }, kind === 'info' ? 2500 : 6000);
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
      slot.textContent = serverText(e.message);
      slot.closest('.field').classList.add('invalid');
      const input = form.querySelector(`[name="${e.field}"]`);
      if (input) input.focus();
      return;
    }
  }
  toast(e.status ? serverText(e.message) : t('Request failed: {msg}', { msg: e.message }));
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
    input = kind === 'checkbox'
      ? h('input', { name, id, type: 'checkbox', checked: !!value })
      : h('input', { name, id, type: kind, value: value ?? '', required: options.required,
        min: options.min, autocomplete: options.autocomplete, placeholder: options.placeholder, list: options.list });
  }
  input.setAttribute('aria-describedby', `${id}-error`);
  return h('div', { class: 'field' + (options.wide ? ' wide' : '') },
    h('label', { for: id }, label), input, options.extra || null,
    h('span', { class: 'field-error', id: `${id}-error`, 'data-error-for': name, 'aria-live': 'polite' }));
}

function choices(list) { return list.map((v) => [v, t(v)]); }

const dialog = () => $('#dialog');

function closeDialog() { if (dialog().open) dialog().close(); }

/** Opens a form dialog; `submit(form)` returns a promise; the dialog closes when it resolves. */
function formDialog(title, content, submitLabel, submit) {
  const d = dialog();
  const form = h('form', { novalidate: true },
    h('h2', { id: 'dialog-title' }, title), content,
    h('div', { class: 'buttons' },
      h('button', { type: 'button', onclick: closeDialog }, t('Cancel')),
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
function confirmDialog(text, yes = t('Delete')) {
  return new Promise((resolve) => {
    const d = dialog();
    const done = (v) => { d.close(); resolve(v); };
    d.replaceChildren(h('div', { class: 'body', role: 'alertdialog', 'aria-labelledby': 'dialog-title' },
      h('h2', { id: 'dialog-title' }, t('Please confirm')), h('p', {}, text),
      h('div', { class: 'buttons' },
        h('button', { type: 'button', onclick: () => done(false) }, t('Cancel')),
        h('button', { type: 'button', class: 'primary danger-confirm', onclick: () => done(true) }, yes))));
    d.addEventListener('cancel', () => resolve(false), { once: true });
    d.showModal();
  });
}

function infoDialog(title, content) {
  const d = dialog();
  d.replaceChildren(h('div', { class: 'body' }, h('h2', { id: 'dialog-title' }, title), content,
    h('div', { class: 'buttons' }, h('button', { type: 'button', onclick: closeDialog }, t('Close')))));
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

function table(headers, rows, empty = t('Nothing here yet.')) {
  return h('table', {},
    h('thead', {}, h('tr', {}, headers.map((x) => h('th', { scope: 'col' }, x)))),
    h('tbody', {}, rows.length ? rows : h('tr', {}, h('td', { colspan: headers.length, class: 'muted' }, empty))));
}

function pager(total, offset, go) {
  return h('div', { class: 'pager' },
    h('button', { type: 'button', disabled: offset <= 0, onclick: () => go(Math.max(0, offset - PAGE)) }, t('Previous')),
    h('span', { class: 'muted' }, total === 0 ? t('0 items') : t('{from}–{to} of {total}', { from: offset + 1, to: Math.min(offset + PAGE, total), total })),
    h('button', { type: 'button', disabled: offset + PAGE >= total, onclick: () => go(offset + PAGE) }, t('Next')));
}

function every(ms, f) { state.timers.push(setInterval(f, ms)); }

async function groupsList() {
  return (await api('GET', '/groups?limit=1000')).items;
}

// ---------- pages ----------

function page(title, ...content) {
  const main = $('#main');
  main.replaceChildren(h('h1', {}, title), ...content);
  document.title = t('{title} · xjob', { title });
  main.focus();
}

function loginPage() {
  $('#top').hidden = true;
  const form = h('form', { class: 'login', novalidate: true },
    h('div', { class: 'lang-row' }, langSwitch()),
    h('h1', {}, t('Sign in to xjob')),
    field(t('User name'), 'username', '', 'text', { autocomplete: 'username', required: true }),
    field(t('Password'), 'password', '', 'password', { autocomplete: 'current-password', required: true }),
    h('div', { class: 'buttons' }, h('button', { type: 'submit', class: 'primary' }, t('Sign in'))));
  form.addEventListener('submit', async (ev) => {
    ev.preventDefault();
    clearErrors(form);
    const v = formValues(form);
    try {
      await api('POST', '/auth/login', { username: v.username, password: v.password });
      await loadMe();
      location.hash = '#/';
    } catch (e) {
      if (e.status === 401) showError({ field: 'password', message: t('Wrong user name or password.') }, form);
      else if (e.status === 429) showError({ field: 'password', message: e.message }, form);
      else showError(e, form);
    }
  });
  $('#main').replaceChildren(form);
  document.title = t('Sign in · xjob');
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
  page(t('Dashboard'),
    h('div', { class: 'cards' },
      card(d.jobInfoCount, t('Jobs')), card(d.jobLogCount, t('Runs')),
      card(d.jobLogSuccessCount, t('Successful runs')), card(d.executorCount, t('Live executors'))),
    h('div', { class: 'toolbar' },
      h('label', {}, t('From'), from), h('label', {}, t('To'), to),
      h('button', { type: 'button', onclick: draw }, t('Show'))),
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
  svg.setAttribute('aria-label', t('Runs per day'));
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
      const label = document.createElementNS(NS, 'text');
      label.setAttribute('x', pad + i * bw + bw / 2);
      label.setAttribute('y', H + 15);
      label.setAttribute('text-anchor', 'middle');
      label.setAttribute('font-size', '11');
      label.textContent = day.slice(5);
      svg.append(label);
    }
  });
  const rows = days.map((day, i) => h('tr', {}, h('td', {}, day), h('td', {}, c.triggerDayCountSucList[i]),
    h('td', {}, c.triggerDayCountFailList[i]), h('td', {}, c.triggerDayCountRunningList[i])));
  return h('div', {},
    h('div', { class: 'legend' },
      h('span', {}, h('i', { class: 'sw-suc' }), t('Successful {n}', { n: c.triggerCountSucTotal })),
      h('span', {}, h('i', { class: 'sw-fail' }), t('Failed {n}', { n: c.triggerCountFailTotal })),
      h('span', {}, h('i', { class: 'sw-run' }), t('Running {n}', { n: c.triggerCountRunningTotal }))),
    svg,
    h('details', {}, h('summary', {}, t('Table')), table([t('Day'), t('Successful'), t('Failed'), t('Running')], rows)));
}

async function groupsPage() {
  const admin = state.me.role === 1;
  const data = await api('GET', '/groups?limit=1000');
  const rows = data.items.map((g) => h('tr', { 'data-group': g.appName },
    h('td', {}, g.appName), h('td', {}, g.title),
    h('td', {}, g.addressType === 0 ? t('Automatic') : t('Manual'), g.hasAccessToken ? h('div', { class: 'muted' }, t('own access token')) : null),
    h('td', {}, g.registryList.length ? g.registryList.join('\n') : h('span', { class: 'muted' }, t('none online'))),
    h('td', { class: 'actions' }, admin && [
      h('button', { type: 'button', onclick: () => groupForm(g) }, t('Edit')),
      h('button', { type: 'button', class: 'danger', onclick: async () => {
        if (!(await confirmDialog(t('Delete executor group {name}?', { name: g.appName })))) return;
        try { await api('DELETE', `/groups/${g.id}`); groupsPage(); } catch (e) { showError(e); }
      } }, t('Delete'))])));
  page(t('Executors'),
    h('div', { class: 'toolbar' }, h('span', { class: 'spacer' }),
      admin && h('button', { type: 'button', class: 'primary', onclick: () => groupForm(null) }, t('New group'))),
    table([t('App name'), t('Title'), t('Registration'), t('Live addresses'), ''], rows));
}

/** 32 random bytes as hex: a new group access token. */
function newToken() {
  return Array.from(crypto.getRandomValues(new Uint8Array(32)), (b) => b.toString(16).padStart(2, '0')).join('');
}

function groupForm(g) {
  const generate = h('button', { type: 'button', onclick: (ev) => {
    ev.target.closest('form').querySelector('[name=accessToken]').value = newToken();
  } }, t('Generate'));
  formDialog(g ? t('Edit {name}', { name: g.appName }) : t('New executor group'), h('div', { class: 'grid' },
    field(t('App name'), 'appName', g ? g.appName : ''),
    field(t('Title'), 'title', g ? g.title : ''),
    field(t('Registration'), 'addressType', g ? g.addressType : 0, 'select', { choices: [[0, t('Automatic (heartbeats)')], [1, t('Manual list')]] }),
    field(t('Addresses (manual, comma-separated)'), 'addressList', g ? g.addressList : '', 'text', { placeholder: 'http://10.0.0.1:9999/' }),
    field(t('Access token of this group (empty = the global token)'), 'accessToken', g ? g.accessToken || '' : '', 'text',
      { wide: true, autocomplete: 'off', extra: generate })),
  t('Save'), async (form) => {
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
    h('label', {}, t('Executor'), h('select', { name: 'jobGroup' }, h('option', { value: '' }, t('All')),
      groups.map((g) => h('option', { value: g.id, selected: String(g.id) === f.jobGroup }, g.title)))),
    h('label', {}, t('Status'), h('select', { name: 'triggerStatus' },
      [['-1', t('All')], ['1', t('Running')], ['0', t('Stopped')]].map(([v, label]) => h('option', { value: v, selected: v === f.triggerStatus }, t(label))))),
    h('label', {}, t('Description'), h('input', { name: 'jobDesc', value: f.jobDesc })),
    h('label', {}, t('Handler'), h('input', { name: 'executorHandler', value: f.executorHandler })),
    h('label', {}, t('Author'), h('input', { name: 'author', value: f.author })),
    h('button', { type: 'submit' }, t('Search')), h('span', { class: 'spacer' }),
    h('button', { type: 'button', class: 'primary', onclick: () => jobForm(null, groups) }, t('New job')));
  filters.addEventListener('submit', (ev) => {
    ev.preventDefault();
    const v = formValues(filters);
    location.hash = '#/jobs' + qs(v);
  });
  const rows = data.items.map((j) => h('tr', { 'data-job': j.jobDesc },
    h('td', {}, j.id), h('td', {}, j.jobDesc), h('td', {}, gname(j.jobGroup)),
    h('td', {}, t(j.scheduleType), j.scheduleConf ? `: ${j.scheduleConf}` : ''),
    h('td', {}, j.glueType === 'BEAN' ? j.executorHandler : j.glueType),
    h('td', {}, j.author),
    h('td', {}, h('span', { class: 'badge ' + (j.triggerStatus ? 'running-job' : 'stopped') }, j.triggerStatus ? t('Running') : t('Stopped')),
      j.triggerStatus ? h('div', { class: 'muted' }, t('next '), fmtTime(j.triggerNextTime)) : null),
    h('td', { class: 'actions' },
      j.triggerStatus
        ? h('button', { type: 'button', onclick: () => act(`/jobs/${j.id}/stop`, t('Stopped.')) }, t('Stop'))
        : h('button', { type: 'button', onclick: () => act(`/jobs/${j.id}/start`, t('Started.')) }, t('Start')),
      h('button', { type: 'button', onclick: () => triggerForm(j) }, t('Run once')),
      h('button', { type: 'button', onclick: () => jobForm(j, groups) }, t('Edit')),
      h('button', { type: 'button', onclick: () => jobForm({ ...j, id: null, jobDesc: j.jobDesc + t(' (copy)') }, groups) }, t('Copy')),
      h('button', { type: 'button', onclick: () => { location.hash = `#/logs?jobGroup=${j.jobGroup}&jobId=${j.id}`; } }, t('Logs')),
      j.glueType !== 'BEAN' && h('button', { type: 'button', onclick: () => { location.hash = `#/glue/${j.id}`; } }, t('Script')),
      h('button', { type: 'button', class: 'danger', onclick: async () => {
        if (!(await confirmDialog(t('Delete job {id} "{desc}" with all its run logs?', { id: j.id, desc: j.jobDesc })))) return;
        try { await api('DELETE', `/jobs/${j.id}`); route(); } catch (e) { showError(e); }
      } }, t('Delete')))));
  page(t('Jobs'), filters,
    table([t('ID'), t('Description'), t('Executor'), t('Schedule'), t('Handler'), t('Author'), t('Status'), ''], rows),
    pager(data.total, f.offset, (o) => { location.hash = '#/jobs' + qs({ ...f, offset: o }); }));
}

async function act(path, done) {
  try { await api('POST', path); toast(done, 'info'); route(); } catch (e) { showError(e); }
}

function triggerForm(j) {
  formDialog(t('Run "{desc}" once', { desc: j.jobDesc }), h('div', { class: 'grid' },
    field(t('Param'), 'executorParam', j.executorParam || '', 'textarea', { wide: true }),
    field(t('Addresses (optional, comma-separated; default: the executor group)'), 'addressList', '', 'text', { wide: true })),
  t('Run'), async (form) => {
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
  const preview = h('div', { class: 'wide' }, h('span', { class: 'muted' }, t('Next fire times')), times);
  const content = h('div', { class: 'grid' },
    field(t('Executor'), 'jobGroup', x.jobGroup, 'select', { choices: groups.map((g) => [g.id, `${g.title} (${g.appName})`]) }),
    field(t('Description'), 'jobDesc', x.jobDesc),
    field(t('Author'), 'author', x.author),
    field(t('Alarm e-mail (comma-separated)'), 'alarmEmail', x.alarmEmail),
    field(t('Schedule type'), 'scheduleType', x.scheduleType, 'select', { choices: choices(SCHEDULES) }),
    field(t('Cron expression / seconds'), 'scheduleConf', x.scheduleConf, 'text', { placeholder: '0 0/5 * * * ?' }),
    field(t('Time zone (IANA; empty = the center\'s)'), 'timeZone', x.timeZone, 'text', { placeholder: 'Asia/Shanghai' }),
    field(t('Misfire'), 'misfireStrategy', x.misfireStrategy, 'select', { choices: choices(MISFIRES) }),
    preview,
    field(t('Routing'), 'executorRouteStrategy', x.executorRouteStrategy, 'select', { choices: choices(ROUTES) }),
    field(t('Block strategy'), 'executorBlockStrategy', x.executorBlockStrategy, 'select', { choices: choices(BLOCKS) }),
    field(t('Run mode'), 'glueType', x.glueType, 'select', { choices: choices(glues.includes(x.glueType) ? glues : [...glues, x.glueType]) }),
    field(t('Handler'), 'executorHandler', x.executorHandler, 'text', { list: 'builtin-handlers',
      extra: h('datalist', { id: 'builtin-handlers' }, Object.keys(BUILTIN_HANDLERS).map((n) => h('option', { value: n }))) }),
    field(t('Param'), 'executorParam', x.executorParam, 'textarea', { wide: true }),
    field(t('Timeout (s, 0 = none)'), 'executorTimeout', x.executorTimeout, 'number', { min: 0 }),
    field(t('Retries on failure'), 'executorFailRetryCount', x.executorFailRetryCount, 'number', { min: 0 }),
    field(t('Retry interval (s)'), 'retryInterval', x.retryInterval, 'number', { min: 0 }),
    field(t('Child job ids (comma-separated)'), 'childJobId', x.childJobId),
    field(t('Alarm webhook URL'), 'alarmWebhook', x.alarmWebhook, 'text', { wide: true }),
    !editing && field(t('Script source (script run modes)'), 'glueSource', x.glueSource, 'textarea', { wide: true, rows: 5 }),
    !editing && field(t('Start it now'), 'triggerStatus', false, 'checkbox'));
  const form = formDialog(editing ? t('Edit job {id}', { id: j.id }) : t('New job'), content, t('Save'), async (f) => {
    const v = formValues(f);
    const num = (k) => (v[k] === '' ? 0 : Number(v[k]));
    const body = { ...v, jobGroup: Number(v.jobGroup), executorTimeout: num('executorTimeout'),
      executorFailRetryCount: num('executorFailRetryCount'), retryInterval: num('retryInterval') };
    for (const k of ['alarmEmail', 'timeZone', 'childJobId', 'alarmWebhook', 'scheduleConf', 'glueSource']) if (body[k] === '') body[k] = null;
    if (body.scheduleType === 'NONE') body.scheduleConf = null;
    // a new job is created stopped, or running in the same request
    if (!editing) body.triggerStatus = v.triggerStatus ? 1 : 0;
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
      if (v.scheduleType === 'NONE') { times.append(h('li', { class: 'muted' }, t('runs only when triggered'))); return; }
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
  const src = h('textarea', { name: 'glueSource', rows: 18, 'aria-label': t('Script source') });
  src.value = g.glueSource || '';
  const form = h('form', {},
    src,
    h('div', { class: 'toolbar' }, field(t('What changed (4–100 characters)'), 'glueRemark', ''),
      h('button', { type: 'submit', class: 'primary' }, t('Save version'))));
  form.addEventListener('submit', async (ev) => {
    ev.preventDefault();
    clearErrors(form);
    const v = formValues(form);
    try { await api('PUT', `/jobs/${id}/glue`, { glueSource: v.glueSource, glueRemark: v.glueRemark }); toast('Saved.', 'info'); gluePage(id); } catch (e) { showError(e, form); }
  });
  const history = g.history.map((v) => h('tr', {}, h('td', {}, fmtTime(v.updateTime)), h('td', {}, v.glueRemark),
    h('td', { class: 'actions' }, h('button', { type: 'button', onclick: () => { src.value = v.glueSource || ''; } }, t('Load')))));
  page(t('Script of job {id} ({type})', { id, type: g.glueType }), form,
    h('h2', {}, t('History (newest 30)')), table(['Saved', t('Remark'), ''], history, t('No versions saved yet.')));
}

async function logsPage(params) {
  const groups = await groupsList();
  const f = { jobGroup: params.get('jobGroup') || '', jobId: params.get('jobId') || '', status: params.get('status') || '',
    from: params.get('from') || '', to: params.get('to') || '', offset: Number(params.get('offset') || 0) };
  const jobs = f.jobGroup ? (await api('GET', '/jobs' + qs({ jobGroup: f.jobGroup, limit: 1000 }))).items : [];
  const filters = h('form', { class: 'toolbar', role: 'search' },
    h('label', {}, t('Executor'), h('select', { name: 'jobGroup', onchange: () => { location.hash = '#/logs' + qs({ jobGroup: filters.jobGroup.value }); } },
      h('option', { value: '' }, t('All')), groups.map((g) => h('option', { value: g.id, selected: String(g.id) === f.jobGroup }, g.title)))),
    h('label', {}, t('Job'), h('select', { name: 'jobId' }, h('option', { value: '' }, t('All')),
      jobs.map((j) => h('option', { value: j.id, selected: String(j.id) === f.jobId }, `${j.id} ${j.jobDesc}`)))),
    h('label', {}, t('Status'), h('select', { name: 'status' },
      [['', t('All')], ['success', t('Success')], ['failed', t('Failed')], ['running', t('Running')]].map(([v, label]) => h('option', { value: v, selected: v === f.status }, t(label))))),
    h('label', {}, t('From'), h('input', { type: 'datetime-local', name: 'from', value: f.from })),
    h('label', {}, t('To'), h('input', { type: 'datetime-local', name: 'to', value: f.to })),
    h('button', { type: 'submit' }, t('Search')), h('span', { class: 'spacer' }),
    h('button', { type: 'button', class: 'danger', onclick: () => clearForm(f) }, t('Clear logs…')));
  filters.addEventListener('submit', (ev) => { ev.preventDefault(); location.hash = '#/logs' + qs(formValues(filters)); });
  const tbody = h('tbody');
  const totalBox = h('div');
  const localTime = (s) => (s ? new Date(s).toISOString() : '');
  const load = async () => {
    const data = await api('GET', '/logs' + qs({ jobGroup: f.jobGroup, jobId: f.jobId, status: f.status, from: localTime(f.from), to: localTime(f.to), offset: f.offset, limit: PAGE }));
    tbody.replaceChildren(...(data.items.length ? data.items.map(logRow) : [h('tr', {}, h('td', { colspan: 8, class: 'muted' }, t('No runs match.')))]));
    totalBox.replaceChildren(pager(data.total, f.offset, (o) => { location.hash = '#/logs' + qs({ ...f, offset: o }); }));
  };
  page(t('Run logs'), filters,
    h('table', {}, h('thead', {}, h('tr', {}, [t('ID'), t('Job'), t('Triggered'), t('Trigger'), t('Param'), t('Finished'), t('Result'), ''].map((x) => h('th', { scope: 'col' }, x)))), tbody),
    totalBox);
  await load();
  every(2000, () => load().catch(() => {}));
}

function logRow(l) {
  return h('tr', { 'data-log': l.id, 'data-status': l.status },
    h('td', {}, l.id), h('td', {}, l.jobId, l.jobDesc ? h('div', { class: 'muted' }, l.jobDesc) : null), h('td', {}, fmtTime(l.triggerTime), h('div', { class: 'muted' }, l.triggerType || '')),
    h('td', {}, l.triggerCode === 200 ? t('ok') : t('failed ({code})', { code: l.triggerCode })),
    h('td', { class: 'param' }, l.executorParam || ''),
    h('td', {}, fmtTime(l.handleTime)),
    h('td', {}, h('span', { class: 'badge ' + l.status }, t(l.status)), l.handleMsg ? h('div', { class: 'muted' }, msgText(l.handleMsg).slice(0, 120)) : null),
    h('td', { class: 'actions' },
      h('button', { type: 'button', onclick: () => infoDialog(t('Run {id}', { id: l.id }), h('div', {},
        h('h3', {}, t('Trigger')), h('pre', { class: 'msg' }, msgText(l.triggerMsg)),
        h('h3', {}, t('Result')), h('pre', { class: 'msg' }, msgText(l.handleMsg) || t('(none yet)')))) }, t('Details')),
      l.executorAddress && h('button', { type: 'button', onclick: () => { location.hash = `#/log/${l.id}`; } }, t('Run log')),
      l.status === 'running' && h('button', { type: 'button', class: 'danger', onclick: () => killRun(l.id) }, t('Kill'))));
}

async function killRun(id) {
  if (!(await confirmDialog(t('Kill run {id}?', { id }), t('Kill')))) return;
  try { await api('POST', `/logs/${id}/kill`); toast('Killed.', 'info'); route(); } catch (e) { showError(e); }
}

function clearForm(f) {
  formDialog(t('Clear run logs'), h('div', { class: 'grid' },
    h('p', { class: 'wide' }, f.jobGroup ? (f.jobId ? t('Executor {group}, job {job}.', { group: f.jobGroup, job: f.jobId }) : t('Executor {group}, all its jobs.', { group: f.jobGroup })) : t('All executors you may see.')),
    field(t('What to delete'), 'type', 1, 'select', { choices: CLEAR_MODES.map(([v, label]) => [v, t(label)]), wide: true })),
  t('Delete'), async (form) => {
    const v = formValues(form);
    const r = await api('POST', '/logs/clear', { jobGroup: f.jobGroup ? Number(f.jobGroup) : null, jobId: f.jobId ? Number(f.jobId) : null, type: Number(v.type) });
    toast(t('Deleted {n} run(s).', { n: r.deleted }), 'info');
    route();
  });
}

/** The rolling run log: reads new lines every second until the run ends. */
async function runLogPage(id) {
  const l = await api('GET', `/logs/${id}`);
  const pre = h('pre', { class: 'log', 'aria-live': 'polite', 'data-testid': 'run-log' });
  const status = h('p', { class: 'muted', 'data-testid': 'follow-state' }, t('Following…'));
  const kill = h('button', { type: 'button', class: 'danger', onclick: () => killRun(id) }, t('Kill'));
  page(t('Run log {id} (job {job})', { id, job: l.jobId }), h('div', { class: 'toolbar' }, status, h('span', { class: 'spacer' }), l.status === 'running' && kill), pre);
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
        status.textContent = t('The run has ended.');
        kill.remove();
        token.stopped = true;
      }
    } catch (e) {
      status.textContent = t('Cannot read the log: {msg}', { msg: serverText(e.message) });
      token.stopped = true;
    } finally { busy = false; }
  };
  await poll();
  const timer = setInterval(() => (token.stopped ? clearInterval(timer) : poll()), 1000);
  state.timers.push(timer);
}

async function usersPage() {
  const [data, groups] = await Promise.all([api('GET', '/users?limit=1000'), groupsList()]);
  const gname = (id) => (groups.find((g) => g.id === id) || {}).title || `#${id}`;
  const rows = data.items.map((u) => h('tr', { 'data-user': u.username },
    h('td', {}, u.username), h('td', {}, u.role === 1 ? t('Administrator') : t('User')),
    h('td', {}, u.role === 1 ? t('all') : u.permission.map(gname).join(', ')),
    h('td', { class: 'actions' },
      h('button', { type: 'button', onclick: () => userForm(u, groups) }, t('Edit')),
      u.id !== state.me.id && h('button', { type: 'button', class: 'danger', onclick: async () => {
        if (!(await confirmDialog(t('Delete user {name}?', { name: u.username })))) return;
        try { await api('DELETE', `/users/${u.id}`); usersPage(); } catch (e) { showError(e); }
      } }, t('Delete')))));
  page(t('Users'), h('div', { class: 'toolbar' }, h('span', { class: 'spacer' }),
    h('button', { type: 'button', class: 'primary', onclick: () => userForm(null, groups) }, t('New user'))),
  table([t('User name'), t('Role'), t('Executor groups'), ''], rows));
}

function userForm(u, groups) {
  const perms = h('fieldset', { class: 'wide' }, h('legend', {}, t('Executor groups (normal users)')),
    h('div', { class: 'checks' }, groups.map((g) => h('label', {},
      h('input', { type: 'checkbox', name: 'permission', 'data-multi': '1', value: g.id, checked: !!(u && u.permission.includes(g.id)) }), ` ${g.title}`))),
    h('span', { class: 'field-error', 'data-error-for': 'permission' }));
  const content = h('div', { class: 'grid' },
    u ? h('p', {}, t('User name: {name}', { name: u.username })) : field(t('User name'), 'username', ''),
    field(u ? t('New password (empty = keep)') : t('Password (8+ characters)'), 'password', '', 'password', { autocomplete: 'new-password' }),
    field(t('Role'), 'role', u ? u.role : 0, 'select', { choices: [[0, t('User')], [1, t('Administrator')]] }),
    perms);
  perms.classList.add('field');
  formDialog(u ? t('Edit {name}', { name: u.username }) : t('New user'), content, t('Save'), async (form) => {
    const v = formValues(form);
    const body = { username: u ? u.username : v.username, password: v.password || null, role: Number(v.role), permission: v.permission || [] };
    await api(u ? 'PUT' : 'POST', u ? `/users/${u.id}` : '/users', body);
    toast('Saved.', 'info');
    usersPage();
  });
}

async function apiKeysPage() {
  const [data, groups] = await Promise.all([api('GET', '/api-keys'), groupsList()]);
  const gname = (id) => (groups.find((g) => g.id === id) || {}).title || `#${id}`;
  const rows = data.items.map((k) => h('tr', { 'data-key': k.name },
    h('td', {}, k.name), h('td', {}, h('code', {}, `${k.prefix}…`)),
    h('td', {}, k.role === 1 ? t('Administrator') : k.permission.map(gname).join(', ')),
    h('td', {}, fmtTime(k.expiresAt)),
    h('td', { class: 'actions' },
      h('button', { type: 'button', class: 'danger', onclick: async () => {
        if (!(await confirmDialog(t('Revoke the key {name}? Whatever uses it is refused at once.', { name: k.name }), t('Revoke')))) return;
        try { await api('DELETE', `/api-keys/${k.id}`); apiKeysPage(); } catch (e) { showError(e); }
      } }, t('Revoke')))));
  page(t('API keys'),
    h('p', { class: 'wide' }, t('Keys for scripts and CI pipelines, sent as "Authorization: Bearer <key>". A key acts for you, within the role and groups you give it, until it expires or is revoked.')),
    h('div', { class: 'toolbar' }, h('span', { class: 'spacer' }),
      h('button', { type: 'button', class: 'primary', onclick: () => apiKeyForm(groups) }, t('New key'))),
    table([t('Name'), t('Key'), t('Executor groups'), t('Expires'), ''], rows));
}

function apiKeyForm(groups) {
  const admin = state.me.role === 1;
  const mine = admin ? groups : groups.filter((g) => state.me.permission.includes(g.id));
  const perms = h('fieldset', { class: 'wide field' }, h('legend', {}, t('Executor groups (normal keys)')),
    h('div', { class: 'checks' }, mine.map((g) => h('label', {},
      h('input', { type: 'checkbox', name: 'permission', 'data-multi': '1', value: g.id }), ` ${g.title}`))),
    h('span', { class: 'field-error', 'data-error-for': 'permission' }));
  const content = h('div', { class: 'grid' },
    field(t('Name'), 'name', ''),
    field(t('Expires in (days)'), 'expiresInDays', 90, 'number', { min: 1 }),
    admin ? field(t('Role'), 'role', 0, 'select', { choices: [[0, t('User')], [1, t('Administrator')]] }) : null,
    perms);
  formDialog(t('New key'), content, t('Create'), async (form) => {
    const v = formValues(form);
    const k = await api('POST', '/api-keys', { name: v.name, role: Number(v.role || 0), permission: v.permission || [],
      expiresInDays: Number(v.expiresInDays) });
    apiKeysPage();
    // once the form's dialog has closed (and been emptied)
    dialog().addEventListener('close', () => infoDialog(t('Key created'), h('div', {},
      h('p', {}, t('Copy the key now: it is not shown again.')), h('pre', { class: 'key' }, k.key))), { once: true });
  });
}

// ---------- workflows ----------

const WORKFLOW_EXAMPLE = {
  nodes: [
    { key: 'first', type: 'JOB', jobId: 1 },
    { key: 'second', type: 'JOB', jobId: 1, triggerRule: 'ALL_SUCCESS' },
  ],
  edges: [{ from: 'first', to: 'second', condition: 'ON_SUCCESS' }],
};

async function workflowsPage() {
  const [data, groups] = await Promise.all([api('GET', '/workflows?limit=1000'), groupsList()]);
  const gname = (id) => (groups.find((g) => g.id === id) || {}).title || `#${id}`;
  const rows = data.items.map((w) => h('tr', { 'data-workflow': w.name },
    h('td', {}, w.id), h('td', {}, h('a', { href: `#/workflow/${w.id}` }, w.name)), h('td', {}, gname(w.jobGroup)),
    h('td', {}, w.version), h('td', {}, w.definition.nodes.length),
    h('td', {}, w.scheduleType === 'NONE' ? t('NONE') : `${t(w.scheduleType)} ${w.scheduleConf || ''}`,
      w.enabled ? h('span', { class: 'badge running' }, t('running')) : null),
    h('td', {}, fmtTime(w.updatedAt)),
    h('td', { class: 'actions' },
      h('button', { type: 'button', class: 'primary', onclick: () => triggerWorkflowForm(w) }, t('Run')),
      h('a', { class: 'button', href: `#/workflow-runs?workflowId=${w.id}` }, t('Runs')),
      w.scheduleType !== 'NONE' && h('button', { type: 'button', onclick: async () => {
        try { await api('POST', `/workflows/${w.id}/${w.enabled ? 'stop' : 'start'}`); workflowsPage(); } catch (e) { showError(e); }
      } }, w.enabled ? t('Stop') : t('Start')),
      h('button', { type: 'button', onclick: () => workflowForm(w, groups) }, t('Edit')),
      h('button', { type: 'button', class: 'danger', onclick: async () => {
        if (!(await confirmDialog(t('Delete the workflow {name} and its versions?', { name: w.name })))) return;
        try { await api('DELETE', `/workflows/${w.id}`); workflowsPage(); } catch (e) { showError(e); }
      } }, t('Delete')))));
  page(t('Workflows'),
    h('p', { class: 'wide' }, t('A workflow is a DAG of jobs, decisions and nested workflows. Saving checks the whole graph; each save is a new version. A run follows the version it started with.')),
    h('div', { class: 'toolbar' }, h('span', { class: 'spacer' }),
      h('button', { type: 'button', class: 'primary', onclick: () => workflowForm(null, groups) }, t('New workflow'))),
    table([t('ID'), t('Name'), t('Executor'), t('Version'), t('Nodes'), t('Schedule'), t('Saved'), ''], rows));
}

/** Asks for a run's params (a JSON object, or text) and starts it. */
function triggerWorkflowForm(w) {
  const content = h('div', { class: 'grid' },
    field(t("Params (JSON object or text): the run's first context"), 'params', '{}', 'textarea', { rows: 6, wide: true }));
  formDialog(t('Run {name}', { name: w.name }), content, t('Run'), async (f) => {
    const text = formValues(f).params.trim();
    let params = null;
    if (text) { try { params = JSON.parse(text); } catch { params = text; } }
    const r = await api('POST', '/workflow-runs', { workflowId: w.id, params });
    location.hash = `#/workflow-run/${r.id}`;
  });
}

/** The body of a workflow form, or an error naming the definition field. */
function workflowBody(v, w) {
  let definition;
  try { definition = JSON.parse(v.definition); } catch (e) {
    throw Object.assign(new Error(`invalid definition: ${e.message}`), { status: 400, field: 'definition' });
  }
  return { jobGroup: Number(v.jobGroup), name: v.name, description: v.description || null, definition,
    version: w ? w.version : null, scheduleType: v.scheduleType, scheduleConf: v.scheduleConf || null,
    misfireStrategy: v.misfireStrategy, enabled: !!v.enabled, concurrency: v.concurrency,
    maxQueued: Number(v.maxQueued) || 10 };
}

const CONCURRENCY = ['PARALLEL', 'SKIP', 'QUEUE'];

function workflowForm(w, groups) {
  const problems = h('ul', { class: 'problems wide', 'aria-live': 'polite' });
  const content = h('div', { class: 'grid' },
    field(t('Name'), 'name', w ? w.name : ''),
    field(t('Executor'), 'jobGroup', w ? w.jobGroup : (groups[0] || {}).id, 'select', { choices: groups.map((g) => [g.id, g.title]) }),
    field(t('Description'), 'description', w ? w.description : '', 'text', { wide: true }),
    field(t('Schedule type'), 'scheduleType', w ? w.scheduleType : 'NONE', 'select', { choices: choices(['NONE', 'CRON', 'FIX_RATE']) }),
    field(t('Schedule'), 'scheduleConf', w ? w.scheduleConf : '', 'text', { placeholder: '0 0 2 * * ?' }),
    field(t('Misfire'), 'misfireStrategy', w ? w.misfireStrategy : 'DO_NOTHING', 'select', { choices: choices(MISFIRES) }),
    field(t('Schedule running'), 'enabled', w ? w.enabled : false, 'checkbox'),
    field(t('While a run is running'), 'concurrency', w ? w.concurrency : 'PARALLEL', 'select', { choices: choices(CONCURRENCY) }),
    field(t('Most queued runs'), 'maxQueued', w ? w.maxQueued : 10, 'number', { min: 1 }),
    field(t('Definition (JSON: nodes and edges)'), 'definition', JSON.stringify(w ? w.definition : WORKFLOW_EXAMPLE, null, 2), 'textarea', { rows: 16, wide: true }),
    h('div', { class: 'wide' }, h('button', { type: 'button', onclick: async () => {
      problems.replaceChildren();
      try {
        const r = await api('POST', '/workflows/validate', workflowBody(formValues(form), w));
        problems.append(...(r.valid ? [h('li', { class: 'ok' }, t('No problems found.'))]
          : r.problems.map((p) => h('li', { 'data-node': p.node || '' }, p.node ? t('Node {node}: {msg}', { node: p.node, msg: p.message }) : p.message))));
      } catch (e) { showError(e, form); }
    } }, t('Check')), problems));
  const form = formDialog(w ? t('Edit {name}', { name: w.name }) : t('New workflow'), content, t('Save'), async (f) => {
    const body = workflowBody(formValues(f), w);
    await api(w ? 'PUT' : 'POST', w ? `/workflows/${w.id}` : '/workflows', body);
    toast('Saved.', 'info');
    workflowsPage();
  });
}

/** The DAG drawn left to right, one column per depth; `states` (node key → state) colours
 * each node of a run. */
/** A duration in ms as people read it: 850 ms, 12.3 s, 3 min 5 s, 2 h 4 min. */
function fmtDuration(ms) {
  if (ms == null || Number.isNaN(ms) || ms < 0) return '';
  if (ms < 1000) return `${Math.round(ms)} ms`;
  if (ms < 60000) return `${(ms / 1000).toFixed(1)} s`;
  const s = Math.round(ms / 1000);
  if (s < 3600) return `${Math.floor(s / 60)} min ${s % 60} s`;
  return `${Math.floor(s / 3600)} h ${Math.floor((s % 3600) / 60)} min`;
}

/** The workflow's DAG as SVG: edges with arrowheads from each node to the nodes after it,
 * coloured by condition; with a run's `states`, each node's state, and with `durations`
 * (node key → ms) how long its latest attempt took or has been running. */
function dagView(def, states = null, durations = null) {
  const NS = 'http://www.w3.org/2000/svg';
  const depth = {};
  const ups = {};
  for (const n of def.nodes) ups[n.key] = [];
  for (const e of def.edges) if (ups[e.to]) ups[e.to].push(e.from);
  const d = (k, seen = new Set()) => {
    if (k in depth) return depth[k];
    if (seen.has(k)) return 0;
    seen.add(k);
    depth[k] = ups[k].length ? Math.max(...ups[k].map((u) => d(u, seen))) + 1 : 0;
    return depth[k];
  };
  def.nodes.forEach((n) => d(n.key));
  const cols = {};
  const pos = {};
  for (const n of def.nodes) {
    const c = depth[n.key];
    cols[c] = (cols[c] || 0) + 1;
    pos[n.key] = [c, cols[c] - 1];
  }
  const BW = 150; const BH = 40; const GX = 60; const GY = 20;
  const width = (Math.max(0, ...Object.values(depth)) + 1) * (BW + GX);
  const height = Math.max(1, ...Object.values(cols)) * (BH + GY);
  const svg = document.createElementNS(NS, 'svg');
  svg.setAttribute('viewBox', `0 0 ${width} ${height}`);
  svg.setAttribute('class', 'dag');
  svg.setAttribute('role', 'img');
  svg.setAttribute('aria-label', t('Workflow graph'));
  // one arrowhead per edge colour: the edge's direction is where it points
  const defs = document.createElementNS(NS, 'defs');
  for (const kind of ['always', 'on_success', 'on_failure', 'true', 'false']) {
    const m = document.createElementNS(NS, 'marker');
    m.setAttribute('id', `arrow-${kind}`);
    m.setAttribute('viewBox', '0 0 10 10');
    m.setAttribute('refX', '10'); m.setAttribute('refY', '5');
    m.setAttribute('markerWidth', '8'); m.setAttribute('markerHeight', '8');
    m.setAttribute('orient', 'auto-start-reverse');
    m.setAttribute('class', `arrow ${kind}`);
    const p = document.createElementNS(NS, 'path');
    p.setAttribute('d', 'M 0 0 L 10 5 L 0 10 z');
    m.append(p);
    defs.append(m);
  }
  svg.append(defs);
  const at = (k) => [pos[k][0] * (BW + GX) + 5, pos[k][1] * (BH + GY) + 5];
  for (const e of def.edges) {
    if (!pos[e.from] || !pos[e.to]) continue;
    const [x1, y1] = at(e.from); const [x2, y2] = at(e.to);
    const line = document.createElementNS(NS, 'line');
    line.setAttribute('x1', x1 + BW); line.setAttribute('y1', y1 + BH / 2);
    line.setAttribute('x2', x2); line.setAttribute('y2', y2 + BH / 2);
    line.setAttribute('class', `edge ${(e.condition || 'ALWAYS').toLowerCase()}`);
    line.setAttribute('marker-end', `url(#arrow-${(e.condition || 'ALWAYS').toLowerCase()})`);
    line.setAttribute('data-edge', `${e.from}->${e.to}`);
    const title = document.createElementNS(NS, 'title');
    title.textContent = `${e.from} → ${e.to}: ${e.condition || 'ALWAYS'}`;
    line.append(title);
    svg.append(line);
  }
  for (const n of def.nodes) {
    const [x, y] = at(n.key);
    const g = document.createElementNS(NS, 'g');
    const st = states && states[n.key];
    g.setAttribute('class', `node ${n.type.toLowerCase()}` + (states ? ` state-${(st || 'PENDING').toLowerCase()}` : ''));
    g.setAttribute('data-node', n.key);
    if (states) g.setAttribute('data-state', st || 'PENDING');
    const r = document.createElementNS(NS, 'rect');
    r.setAttribute('x', x); r.setAttribute('y', y); r.setAttribute('width', BW); r.setAttribute('height', BH); r.setAttribute('rx', 6);
    const took = durations && durations[n.key] != null ? fmtDuration(durations[n.key]) : '';
    const label = document.createElementNS(NS, 'text');
    label.setAttribute('x', x + 8); label.setAttribute('y', took ? y + 17 : y + BH / 2 + 4);
    label.textContent = n.name || n.key;
    const tip = document.createElementNS(NS, 'title');
    tip.textContent = states ? `${n.key}: ${t(st || 'PENDING')}${took ? ` · ${took}` : ''}` : n.key;
    g.append(tip, r, label);
    if (took) {
      const dur = document.createElementNS(NS, 'text');
      dur.setAttribute('x', x + 8); dur.setAttribute('y', y + 33);
      dur.setAttribute('class', 'duration');
      dur.textContent = took;
      g.setAttribute('data-duration', took);
      g.append(dur);
    }
    svg.append(g);
  }
  return svg;
}

async function workflowPage(id, params) {
  const version = params.get('version');
  const w = await api('GET', `/workflows/${id}` + qs({ version: version || '' }));
  const versions = [];
  for (let v = w.version; v >= 1 && versions.length < 50; v -= 1) versions.push(v);
  const pick = h('select', { onchange: (ev) => { location.hash = `#/workflow/${id}` + qs({ version: ev.target.value }); } },
    versions.map((v) => h('option', { value: v, selected: String(v) === String(version || w.version) }, t('Version {n}', { n: v }))));
  const runs = await api('GET', '/workflow-runs' + qs({ workflowId: id, limit: 10 }));
  page(w.name,
    h('p', {}, w.description || ''),
    h('div', { class: 'toolbar' }, h('label', {}, t('Version'), pick), h('span', { class: 'muted' }, t('saved by {who}, {when}', { who: w.author, when: fmtTime(w.updatedAt) })),
      h('span', { class: 'spacer' }),
      h('button', { type: 'button', class: 'primary', onclick: () => triggerWorkflowForm(w) }, t('Run'))),
    dagView(w.definition),
    h('h2', {}, t('Recent runs')), runsTable(runs.items),
    h('p', {}, h('a', { href: `#/workflow-runs?workflowId=${id}` }, t('All runs'))),
    table([t('Node'), t('Type'), t('Does'), t('Rule')], w.definition.nodes.map((n) => h('tr', {},
      h('td', {}, n.key), h('td', {}, n.type),
      h('td', {}, n.type === 'JOB' ? t('job {id}', { id: n.jobId }) : n.type === 'DECISION' ? n.expression : t('workflow {id}', { id: n.workflowId })),
      h('td', {}, (n.triggerRule || 'ALL_SUCCESS') + (n.disabled ? ` · ${t('disabled')}` : '') + (n.allowFailure ? ` · ${t('may fail')}` : ''))))));
}

const RUN_STATUSES = ['QUEUED', 'RUNNING', 'SUCCEEDED', 'FAILED', 'STOPPED'];

function runsTable(items) {
  return table([t('Run'), t('Workflow'), t('Version'), t('Status'), t('Trigger'), t('Started'), t('Ended'), t('Message')],
    items.map((r) => h('tr', { 'data-run': r.id },
      h('td', {}, h('a', { href: `#/workflow-run/${r.id}` }, r.id)),
      h('td', {}, h('a', { href: `#/workflow/${r.workflowId}` }, r.workflowName || `#${r.workflowId}`)), h('td', {}, r.version),
      h('td', {}, h('span', { class: `badge run-${r.status.toLowerCase()}` }, t(r.status))), h('td', {}, t(r.triggerType)),
      h('td', {}, fmtTime(r.startTime)), h('td', {}, fmtTime(r.endTime)), h('td', {}, r.message || ''))));
}

async function workflowRunsPage(params) {
  const f = { workflowId: params.get('workflowId') || '', status: params.get('status') || '', offset: Number(params.get('offset') || 0) };
  const data = await api('GET', '/workflow-runs' + qs({ workflowId: f.workflowId, status: f.status, offset: f.offset, limit: PAGE }));
  const go = (o) => { location.hash = '#/workflow-runs' + qs({ ...f, offset: o }); };
  const form = h('form', { class: 'toolbar', onsubmit: (ev) => {
    ev.preventDefault();
    const v = formValues(ev.target);
    location.hash = '#/workflow-runs' + qs({ workflowId: v.workflowId, status: v.status });
  } },
  h('label', {}, t('Workflow'), h('input', { name: 'workflowId', type: 'number', value: f.workflowId, min: 1 })),
  h('label', {}, t('Status'), h('select', { name: 'status' },
    [['', t('All')], ...RUN_STATUSES.map((s2) => [s2, t(s2)])].map(([v, label]) => h('option', { value: v, selected: v === f.status }, label)))),
  h('button', { type: 'submit' }, t('Search')));
  page(t('Workflow runs'), form, runsTable(data.items), pager(data.total, f.offset, go));
  every(3000, async () => {
    if (!location.hash.startsWith('#/workflow-runs')) return;
    if (data.items.some((r) => r.status === 'RUNNING' || r.status === 'QUEUED')) route();
  });
}

/** A run: its DAG with each node's state (followed live while it runs), its node runs with their
 * logs, and stop / re-run / mark. */
async function workflowRunPage(id) {
  const r = await api('GET', `/workflow-runs/${id}`);
  const w = await api('GET', `/workflows/${r.workflowId}` + qs({ version: r.version }));
  const nodes = r.nodes || [];
  const live = nodes.filter((n) => !n.cleared);
  const states = {};
  const durations = {};
  for (const n of live) {
    states[n.nodeKey] = n.state;
    // the latest attempt's time: to its end, or so far while it runs
    if (n.startTime) durations[n.nodeKey] = (n.endTime ? Date.parse(n.endTime) : Date.now()) - Date.parse(n.startTime);
  }
  const act = (label, cls, f) => h('button', { type: 'button', class: cls, onclick: async () => {
    try { await f(); route(); } catch (e) { showError(e); }
  } }, label);
  const ended = !['RUNNING', 'QUEUED'].includes(r.status);
  const from = h('select', { name: 'from', 'aria-label': t('Re-run from node') },
    w.definition.nodes.map((n) => h('option', { value: n.key }, n.key)));
  const toolbar = h('div', { class: 'toolbar' },
    h('span', { class: `badge run-${r.status.toLowerCase()}`, 'data-testid': 'run-status' }, t(r.status)),
    h('span', { class: 'muted' }, t('started {when}', { when: fmtTime(r.startTime) }), r.endTime ? ` · ${t('ended {when}', { when: fmtTime(r.endTime) })}` : ''),
    h('span', { class: 'spacer' }),
    !ended && act(t('Stop'), 'danger', () => api('POST', `/workflow-runs/${id}/stop`)),
    ['FAILED', 'STOPPED'].includes(r.status) && r.parentNodeRun == null && act(t('Re-run failed nodes'), 'primary', () => api('POST', `/workflow-runs/${id}/rerun`)),
    ended && r.parentNodeRun == null && h('span', {}, from, act(t('Re-run from node'), '', () => api('POST', `/workflow-runs/${id}/rerun`, { from: from.value }))));
  const rows = nodes.map((n) => h('tr', { 'data-node': n.nodeKey, class: n.cleared ? 'muted' : '' },
    h('td', {}, n.nodeKey), h('td', {}, n.attempt),
    h('td', {}, h('span', { class: `badge run-${n.state.toLowerCase()}` }, t(n.state)), n.cleared ? ` (${t('history')})` : ''),
    h('td', {}, n.shardsTotal ? `${n.shardsDone}/${n.shardsTotal}` : ''),
    h('td', { 'data-duration': '' }, n.startTime ? fmtDuration((n.endTime ? Date.parse(n.endTime) : Date.now()) - Date.parse(n.startTime)) : ''),
    h('td', {}, n.logIds.map((l) => h('a', { href: `#/log/${l}`, class: 'log-link' }, `#${l} `)),
      n.childRun ? h('a', { href: `#/workflow-run/${n.childRun}` }, t('run {id}', { id: n.childRun })) : null),
    h('td', {}, n.decision === null || n.decision === undefined ? '' : String(n.decision)),
    h('td', {}, msgText(n.message)),
    h('td', { class: 'actions' }, !n.cleared && r.parentNodeRun == null && ['FAILED', 'STOPPED', 'SKIPPED'].includes(n.state)
      && act(t('Mark succeeded'), '', () => api('POST', `/workflow-runs/${id}/mark`, { node: n.nodeKey })))));
  page(t('Run {id} of {name}', { id, name: w.name }), toolbar,
    dagView(w.definition, states, durations),
    h('h2', {}, t('Node runs')),
    table([t('Node'), t('Attempt'), t('State'), t('Shards'), t('Duration'), t('Logs'), t('Decision'), t('Message'), ''], rows),
    h('h2', {}, t('Context')), h('pre', { class: 'log' }, JSON.stringify(r.context, null, 2)));
  if (!ended) {
    // followed live: the page is drawn again while the run goes on
    const token = {};
    state.timers.push(token);
    setTimeout(() => { if (!token.stopped && location.hash === `#/workflow-run/${id}`) route(); }, 1500);
  }
}

const AUDIT_ACTIONS = ['auth.login', 'auth.login_failed', 'auth.logout', 'auth.password',
  'job.create', 'job.update', 'job.delete', 'job.start', 'job.stop', 'job.trigger', 'job.glue',
  'group.create', 'group.update', 'group.delete', 'user.create', 'user.update', 'user.delete',
  'apikey.create', 'apikey.delete', 'log.clear', 'log.kill', 'workflow.create', 'workflow.update',
  'workflow.delete', 'workflow.start', 'workflow.stop', 'workflow.trigger', 'workflow.rerun', 'workflow.mark'];

async function auditPage(params) {
  const f = { username: params.get('username') || '', action: params.get('action') || '',
    targetType: params.get('targetType') || '', targetId: params.get('targetId') || '',
    from: params.get('from') || '', to: params.get('to') || '', offset: Number(params.get('offset') || 0) };
  const filters = h('form', { class: 'toolbar', role: 'search' },
    h('label', {}, t('User name'), h('input', { name: 'username', value: f.username })),
    h('label', {}, t('Action'), h('select', { name: 'action' }, h('option', { value: '' }, t('All')),
      AUDIT_ACTIONS.map((a) => h('option', { value: a, selected: a === f.action }, a)))),
    h('label', {}, t('Target'), h('select', { name: 'targetType' },
      [['', t('All')], ['job', t('job')], ['group', t('group')], ['user', t('user')], ['log', t('log')], ['workflow', t('workflow')]].map(([v, label]) => h('option', { value: v, selected: v === f.targetType }, label)))),
    h('label', {}, t('Target id'), h('input', { name: 'targetId', value: f.targetId, size: 8 })),
    h('label', {}, t('From'), h('input', { type: 'datetime-local', name: 'from', value: f.from })),
    h('label', {}, t('To'), h('input', { type: 'datetime-local', name: 'to', value: f.to })),
    h('button', { type: 'submit' }, t('Search')));
  filters.addEventListener('submit', (ev) => { ev.preventDefault(); location.hash = '#/audit' + qs(formValues(filters)); });
  const localTime = (s) => (s ? new Date(s).toISOString() : '');
  const data = await api('GET', '/audit' + qs({ username: f.username, action: f.action, targetType: f.targetType,
    targetId: f.targetId, from: localTime(f.from), to: localTime(f.to), offset: f.offset, limit: PAGE }));
  const rows = data.items.map((e) => h('tr', { 'data-audit': e.action },
    h('td', {}, fmtTime(e.time)), h('td', {}, e.username), h('td', {}, e.clientIp),
    h('td', {}, e.action), h('td', {}, e.targetId ? `${t(e.targetType)} ${e.targetId}` : t(e.targetType)),
    h('td', { class: 'param' }, e.detail)));
  page(t('Audit log'), filters, table([t('Time'), t('User name'), t('Client'), t('Action'), t('Target'), t('Detail')], rows, t('No entries match.')),
    pager(data.total, f.offset, (o) => { location.hash = '#/audit' + qs({ ...f, offset: o }); }));
}

function passwordForm() {
  formDialog(t('Change your password'), h('div', { class: 'grid' },
    field(t('Current password'), 'oldPassword', '', 'password', { autocomplete: 'current-password' }),
    field(t('New password (8+ characters)'), 'password', '', 'password', { autocomplete: 'new-password' }),
    field(t('Also revoke my API keys'), 'endApiKeys', false, 'checkbox')),
  t('Change'), async (form) => {
    const v = formValues(form);
    const r = await api('POST', '/auth/password', { oldPassword: v.oldPassword, password: v.password, endApiKeys: !!v.endApiKeys });
    toast(t('Password changed; {sessions} other session(s) and {keys} API key(s) ended.',
      { sessions: r.sessionsEnded, keys: r.apiKeysEnded }), 'info');
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
  for (const x of state.timers) { if (typeof x === 'object') x.stopped = true; else clearInterval(x); }
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
    const nav = { log: 'logs', glue: 'jobs', workflow: 'workflows', 'workflow-runs': 'workflows', 'workflow-run': 'workflows' }[section] || section;
    if (a.dataset.nav === nav) a.setAttribute('aria-current', 'page');
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
      case 'keys': await apiKeysPage(); break;
      case 'workflows': await workflowsPage(); break;
      case 'workflow': await workflowPage(Number(parts[1]), params); break;
      case 'workflow-runs': await workflowRunsPage(params); break;
      case 'workflow-run': await workflowRunPage(Number(parts[1])); break;
      case 'audit': await auditPage(params); break;
      default: page(t('Not found'), h('p', {}, t('No such page.')));
    }
  } catch (e) {
    if (e.status !== 401) page(t('Error'), h('p', { role: 'alert' }, serverText(e.message)));
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
  translateShell();
  // a closed dialog keeps no form behind (no stale fields, nothing for a screen reader to find)
  dialog().addEventListener('close', () => dialog().replaceChildren());
  route();
});
