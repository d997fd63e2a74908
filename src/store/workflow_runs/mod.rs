//! Running workflows, durably: `xjob_workflow_run`, `xjob_workflow_node_run` and
//! `xjob_workflow_node_log`.
//!
//! Every change of a run happens in one transaction that first takes the run's row lock (its
//! `seq` is bumped), so two nodes of a cluster — or two results of one run — never decide the
//! same run at once:
//! - [`Runs::start`] records the run and the node runs its start nodes answer;
//! - [`Runs::apply`] records results of node runs' run rows (each row's result once: its link's
//!   `done` moves 0 → 1 under the lock), completes a node run when every shard has a result (or
//!   starts its next attempt), then moves the run on by [`rules::advance`] and ends it by
//!   [`rules::outcome`] (a nested run's end completes its parent's node, and so on up).
//!
//! A job node's run rows are inserted *pending* (`fire_state` 1, no `fire_time`, trigger type
//! WORKFLOW) in that same transaction, with one link row each; the caller then claims and
//! dispatches them through the trigger pool as any recorded fire. So a crash before the commit
//! leaves nothing, and after it a pending row that [`Runs::stale_pending`] hands to whichever
//! node recovers it (the claim makes it one): no node run twice, none forgotten.

mod pass;
mod tx;

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use entity::xjob_workflow_node_log as links;
use entity::xjob_workflow_node_run as nodes;
use entity::xjob_workflow_run as runs;
use parking_lot::Mutex;
use sea_orm::sea_query::Expr;
use sea_orm::{
    ColumnTrait, ConnectionTrait, DatabaseConnection, EntityTrait, PaginatorTrait, QueryFilter,
    QueryOrder, QuerySelect, Statement,
};
use serde_json::Value;

use self::pass::{Ids, Pass};
use self::tx::{NodeUpdate, PendingRow, RUN_COLUMNS, Tx, workflow_of};
use crate::error::{Error, Result};
use crate::model::wire::SUCCESS_CODE;
use crate::model::{AlarmStatus, RouteStrategy, TriggerType, fire_state};
use crate::store::port::{self, Port};
use crate::store::writer::LogWriter;
use crate::store::{groups, jobs, workflows};
use crate::workflow::rules::{self, NodeRules, State};
use crate::workflow::{Definition, Graph, MAX_RUN_NODES, NodeKind, expr};

/// Largest context a run may hold (its JSON text), bytes.
pub(crate) const MAX_CONTEXT: usize = 64 * 1024;
/// How many times a transaction the database ended for losing a race (a deadlock) is run
/// again before its error is answered.
const RACES: u32 = 3;
/// Transactions a pass of results is applied in at once on a database server (each over its
/// own runs), when it has at least [`LANES_FROM`] results.
const APPLY_LANES: usize = 2;
/// Fewest results a pass splits into [`APPLY_LANES`] transactions. A lane costs a transaction's
/// fixed work (its locks and reads, the pass's statements, a commit that waits for the log's
/// flush): below this a pass is applied in one. One caller starting runs one after another
/// makes passes of tens to hundreds of results, where two lanes cost the server 10–15 % more
/// per node run (BENCHMARKS.md, History, 2026-12-04); many callers make full passes
/// (`BATCH`, 1,000), which two lanes apply on two of the server's cores.
pub(crate) const LANES_FROM: usize = 500;
/// Deepest nesting of workflow nodes a run follows (a deeper one fails its node).
pub(crate) const MAX_DEPTH: i16 = 8;
/// Most attempts of one node (its job's fail retries + 1, capped).
const MAX_ATTEMPTS: i32 = 10;
/// How far ahead (ms) a look for due scheduled workflows reads: the workflow actor looks
/// again at the next fire it saw, or this much later when it saw none ([`Runs::fire_due`]).
pub(crate) const SCHEDULE_AHEAD_MS: i64 = 1_000;
/// Longest message kept on a node run or run.
const MESSAGE_MAX: usize = 1000;

/// A run's status.
pub(crate) mod status {
    /// Nodes are running or due.
    pub(crate) const RUNNING: &str = "RUNNING";
    /// Ended, every failure handled.
    pub(crate) const SUCCEEDED: &str = "SUCCEEDED";
    /// Ended with an unhandled failure.
    pub(crate) const FAILED: &str = "FAILED";
    /// Stopped by a user.
    pub(crate) const STOPPED: &str = "STOPPED";
    /// Waiting for a running run of its workflow to end (concurrency QUEUE).
    pub(crate) const QUEUED: &str = "QUEUED";
    /// Skipped (a node run only: its rule can no longer hold).
    pub(crate) const SKIPPED: &str = "SKIPPED";
}

/// How a run is run again ([`Runs::again`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Again {
    /// Its failed and stopped nodes, and everything downstream of them (a failed or stopped
    /// run).
    Failed,
    /// This node and everything downstream of it (an ended run).
    From(String),
    /// This failed, stopped or skipped node counts as succeeded; what is downstream of it runs
    /// again.
    Mark(String),
}

/// A run's node rows indexed: each node's latest attempt that a re-run has not cleared, and
/// each node's next attempt number (over every row, cleared ones too).
struct Attempts<'a> {
    latest: HashMap<&'a str, &'a nodes::Model>,
    next: HashMap<&'a str, i32>,
}

impl<'a> Attempts<'a> {
    fn of(rows: &'a [nodes::Model]) -> Self {
        let mut out = Attempts {
            latest: HashMap::new(),
            next: HashMap::new(),
        };
        for r in rows {
            let key = r.node_key.as_str();
            let n = out.next.entry(key).or_insert(1);
            *n = Ord::max(*n, r.attempt + 1);
            if r.cleared == 0 && out.latest.get(key).is_none_or(|l| l.attempt < r.attempt) {
                out.latest.insert(key, r);
            }
        }
        out
    }
}

/// What applying one result did to its node run.
enum Applied {
    /// Nothing to move on (more shards to come, or the node run had ended).
    Nothing,
    /// The node run ended.
    Completed,
    /// The node run failed and its next attempt started.
    NewAttempt,
}

/// What a new run does under its workflow's concurrency policy.
enum Admit {
    Run,
    Queue,
    Refuse(String),
}

/// Which attempt of which node of which run, and when.
#[derive(Clone, Copy)]
struct NodeAt<'a> {
    run: &'a runs::Model,
    key: &'a str,
    /// 1 for the first.
    attempt: i32,
    /// Epoch ms.
    now: i64,
}

/// The run a batch of results is applied to.
#[derive(Clone, Copy)]
struct ResultOf<'a> {
    run: &'a runs::Model,
    /// The context it inherits (a nested run's parent's).
    up: Option<&'a serde_json::Map<String, Value>>,
    /// Epoch ms.
    now: i64,
}

/// What a job node's attempt runs.
#[derive(Clone, Copy)]
struct JobStart<'a> {
    job_id: i32,
    /// The node's param (`None`: the job's own), rendered from `ctx`.
    param: Option<&'a str>,
    ctx: &'a Value,
    /// The node's attempts when a later attempt keeps them (`None`: from the job's retries).
    max_attempts: Option<i32>,
}

/// How a run starts: its trigger, its params and first context, its place among runs.
struct RunStart {
    trigger_type: TriggerType,
    params: Option<String>,
    ctx: Value,
    /// The parent workflow's node run (a nested run).
    parent: Option<i64>,
    /// How deep it is nested (0: a top-level run).
    depth: i16,
}

impl RunStart {
    /// A top-level run.
    fn top(trigger_type: TriggerType, params: Option<String>, ctx: Value) -> Self {
        RunStart {
            trigger_type,
            params,
            ctx,
            parent: None,
            depth: 0,
        }
    }
}

/// A new run of `w` with `status`.
fn new_run(w: &entity::xjob_workflow::Model, st: &str, start: RunStart, now: i64) -> runs::Model {
    let RunStart {
        trigger_type,
        params,
        ctx,
        parent,
        depth,
    } = start;
    runs::Model {
        id: 0,
        workflow_id: w.id,
        version: w.version,
        job_group: w.job_group,
        status: st.into(),
        trigger_type: trigger_type.as_str().into(),
        params,
        context: ctx.to_string(),
        parent_node_run: parent,
        depth,
        seq: 0,
        start_time: now,
        end_time: None,
        message: None,
    }
}

/// Records a run of `w` waiting for a running one to end.
async fn queue(
    tx: &impl Tx,
    w: &entity::xjob_workflow::Model,
    trigger_type: TriggerType,
    params: Option<String>,
    ctx: Value,
    now: i64,
) -> Result<i64> {
    let run = new_run(
        w,
        status::QUEUED,
        RunStart::top(trigger_type, params, ctx),
        now,
    );
    tx.insert_run(&run).await
}

/// A run row of a job node to dispatch (pending until claimed).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Dispatch {
    /// Its `xxl_job_log` id.
    pub log_id: i64,
    /// The job.
    pub job_id: i32,
    /// The param it runs with (`None`: the job's own).
    pub param: Option<String>,
    /// `(index, total)` of a sharding broadcast.
    pub shard: Option<(i32, i32)>,
    /// Attempts the node has after this one (the job's retry count, less what it used): what
    /// the trigger message shows as retries (the run row itself is never retried).
    pub retries_left: i32,
}

/// A node run's run row that has a result.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Finished {
    /// Its `xxl_job_log` id.
    pub(crate) log_id: i64,
    /// The node run.
    pub(crate) node_run_id: i64,
    /// The workflow run.
    pub(crate) run_id: i64,
    /// Whether it succeeded.
    pub(crate) ok: bool,
    /// Its handle (or trigger) message.
    pub(crate) msg: Option<String>,
    /// What the run put for the workflow's context (its result message's first line).
    pub(crate) outputs: Option<serde_json::Map<String, Value>>,
}

impl Finished {
    /// A row's result from its `(log id, node run id, run id)`, handle code and messages.
    fn of(
        (log_id, node_run_id, run_id): (i64, i64, i64),
        handle: i32,
        handle_msg: Option<String>,
        trigger_msg: Option<String>,
    ) -> Finished {
        let mut outputs = None;
        let msg: Option<String> = if handle != 0 {
            handle_msg
                .map(|m| {
                    let (o, rest) = crate::executor::split_outputs(&m);
                    outputs = o;
                    rest.to_string()
                })
                .filter(|m| !m.is_empty())
        } else {
            trigger_msg.map(|m| crate::trigger_msg::reason(&m))
        };
        Finished {
            log_id,
            node_run_id,
            run_id,
            ok: handle == SUCCESS_CODE,
            msg: msg.map(|m| cap(&m)),
            outputs,
        }
    }
}

/// The run rows of node runs with a result not yet applied, oldest first (without a limit).
fn finished_sql() -> String {
    format!(
        "SELECT nl.log_id, nl.node_run_id, nl.run_id, l.handle_code, l.handle_msg, \
         l.trigger_msg \
         FROM xjob_workflow_node_log nl JOIN xxl_job_log l ON l.id = nl.log_id \
         WHERE nl.done = 0 AND (l.handle_code <> 0 OR (l.fire_state = {} \
         AND l.trigger_code <> 0 AND l.trigger_code <> {SUCCESS_CODE})) \
         ORDER BY nl.log_id",
        fire_state::DISPATCHED
    )
}

/// A version's DAG, checked and indexed (versions never change, so it is kept).
pub(crate) struct Compiled {
    def: Definition,
    graph: Graph,
    rules: Vec<NodeRules>,
    index: HashMap<String, usize>,
}

impl Compiled {
    fn new(def: Definition) -> Result<Compiled> {
        let graph = Graph::build(&def).map_err(|p| Error::Invalid {
            field: "definition",
            reason: p
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join("; "),
        })?;
        let rules = def
            .nodes
            .iter()
            .map(|n| NodeRules {
                rule: n.trigger_rule,
                disabled: n.disabled,
                allow_failure: n.allow_failure,
            })
            .collect();
        let index = def
            .nodes
            .iter()
            .enumerate()
            .map(|(i, n)| (n.key.clone(), i))
            .collect();
        Ok(Compiled {
            def,
            graph,
            rules,
            index,
        })
    }
}

fn cap(s: &str) -> String {
    match s.char_indices().nth(MESSAGE_MAX) {
        Some((i, _)) => s[..i].to_string(),
        None => s.to_string(),
    }
}

/// A run's first context: a JSON object given as params is the context; any other JSON value,
/// or text, is put under `params`; none is `{}`.
pub(crate) fn initial_context(params: Option<&str>) -> Result<Value> {
    let ctx = match params.map(str::trim).filter(|p| !p.is_empty()) {
        None => Value::Object(Default::default()),
        Some(p) => match serde_json::from_str::<Value>(p) {
            Ok(Value::Object(m)) => Value::Object(m),
            Ok(v) => serde_json::json!({ "params": v }),
            Err(_) => serde_json::json!({ "params": p }),
        },
    };
    let size = ctx.to_string().len();
    if size > MAX_CONTEXT {
        return Err(Error::Invalid {
            field: "params",
            reason: format!("the context would be {size} bytes; at most {MAX_CONTEXT}"),
        });
    }
    Ok(ctx)
}

/// `param` with each `${path}` replaced by the context's value there (text as is, other values
/// as JSON, a null as nothing). Refused, with the reason, when a path names a key the context
/// does not have (a typo or a missing upstream value must not run the job with an empty
/// param), or when the result would be longer than a job's param may be
/// ([`crate::jobs::MAX_PARAM_CHARS`]) — found while rendering, so a short param repeating a
/// large value never builds the large text.
pub(crate) fn render_param(param: &str, ctx: &Value) -> std::result::Result<String, String> {
    // a character is at most 4 bytes: past this many bytes the text is too long whatever it is
    let max_bytes = 4 * crate::jobs::MAX_PARAM_CHARS;
    let too_long = || {
        format!(
            "the node's param, rendered with the run's context, is longer than a job's param may be ({} characters)",
            crate::jobs::MAX_PARAM_CHARS
        )
    };
    let mut out = String::with_capacity(param.len());
    let push = |out: &mut String, s: &str| {
        if out.len() + s.len() > max_bytes {
            return Err(too_long());
        }
        out.push_str(s);
        Ok(())
    };
    let mut rest = param;
    while let Some(start) = rest.find("${") {
        let Some(len) = rest[start + 2..].find('}') else {
            break;
        };
        push(&mut out, &rest[..start])?;
        let path = rest[start + 2..start + 2 + len].trim();
        let mut v = Some(ctx);
        for step in path.split('.').filter(|s| !s.is_empty()) {
            v = v.and_then(|x| match x {
                Value::Object(m) => m.get(step),
                Value::Array(a) => step.parse::<usize>().ok().and_then(|i| a.get(i)),
                _ => None,
            });
        }
        match v {
            Some(Value::String(s)) => push(&mut out, s)?,
            Some(Value::Null) => {}
            Some(other) => push(&mut out, &other.to_string())?,
            None => {
                let shown: String = path.chars().take(64).collect();
                return Err(format!(
                    "the node's param refers to `${{{shown}}}`, which the run's context does not have"
                ));
            }
        }
        rest = &rest[start + 3 + len..];
    }
    push(&mut out, rest)?;
    if crate::jobs::check_param("param", &out).is_err() {
        return Err(too_long());
    }
    Ok(out)
}

/// The context a nested run inherits: its parent run's, as that run's nodes read it (the
/// parent's own values over what it inherits in turn); `None` for a top-level run. A nested
/// run stores only its own values, never a copy of its parent's.
async fn inherited(
    tx: &impl Tx,
    run: &runs::Model,
) -> Result<Option<serde_json::Map<String, Value>>> {
    let Some(mut parent) = run.parent_node_run else {
        return Ok(None);
    };
    let mut layers = Vec::new();
    for _ in 0..=MAX_DEPTH {
        let Some(node) = tx.node(parent).await? else {
            break;
        };
        let Some((ctx, up)) = tx.run_context(node.run_id).await? else {
            break;
        };
        layers.push(ctx);
        match up {
            Some(p) => parent = p,
            None => break,
        }
    }
    let mut out = serde_json::Map::new();
    for text in layers.iter().rev() {
        if let Ok(Value::Object(m)) = serde_json::from_str::<Value>(text) {
            out.extend(m);
        }
    }
    Ok(Some(out))
}

/// A run's context as its nodes read it: its own values over what it inherits.
fn effective(inherited: Option<&serde_json::Map<String, Value>>, own: &Value) -> Value {
    match (inherited, own) {
        (None, own) => own.clone(),
        (Some(up), Value::Object(m)) => {
            let mut out = up.clone();
            out.extend(m.iter().map(|(k, v)| (k.clone(), v.clone())));
            Value::Object(out)
        }
        (Some(up), _) => Value::Object(up.clone()),
    }
}

fn state_of(n: &nodes::Model) -> State {
    match n.state.as_str() {
        status::RUNNING => State::Running,
        status::SUCCEEDED => State::Done {
            succeeded: true,
            decision: n.decision.map(|d| d != 0),
        },
        status::SKIPPED => State::Skipped,
        // FAILED and STOPPED
        _ => State::Done {
            succeeded: false,
            decision: n.decision.map(|d| d != 0),
        },
    }
}

/// Compiled DAGs by (workflow, version), with the bytes they hold in all.
#[derive(Default)]
struct Versions {
    by_version: HashMap<(i32, i32), (Arc<Compiled>, usize)>,
    bytes: usize,
}

/// Most bytes of compiled DAGs kept (a 2,000-node DAG of a few MiB holds about its text's size
/// again once compiled; counted by its text, twice).
const COMPILED_BYTES: usize = 64 << 20;

/// The runs' store: starts runs, applies node results, and keeps every version's DAG it read.
/// On a SQLite file this node holds, the starts and the result passes run on the run-row
/// writer's connection ([`sqlite`]); elsewhere as sea-orm transactions.
#[derive(Clone, Default)]
pub struct Runs {
    compiled: Arc<Mutex<Versions>>,
    /// The writer of a SQLite file this node holds.
    file: Option<LogWriter>,
    /// Ids reserved for the rows passes insert (PostgreSQL).
    ids: Arc<Ids>,
    /// What starts of `PARALLEL` workflows read, by workflow, for starts answered from it
    /// ([`Runs::start_sealed`]; PostgreSQL).
    plans: Arc<Mutex<HashMap<i32, Arc<Plan>>>>,
}

/// What a start of a `PARALLEL` workflow read (its workflow row and the jobs of its first
/// nodes), kept so the next start of it is one statement that checks they did not change.
struct Plan {
    workflow: entity::xjob_workflow::Model,
    jobs: HashMap<i32, Arc<entity::xxl_job_info::Model>>,
}

/// Most workflows whose start is kept ([`Plan`]); past it the kept ones are dropped.
const MAX_PLANS: usize = 4096;

/// One start of [`Runs::start_many`].
#[derive(Clone, Debug)]
pub(crate) struct StartOne {
    /// The workflow.
    pub(crate) workflow_id: i32,
    /// Why it runs.
    pub(crate) trigger_type: TriggerType,
    /// The trigger's params (the run's first context).
    pub(crate) params: Option<String>,
}

/// What a change of runs produced: run rows to dispatch, and runs that ended (id, succeeded).
#[derive(Debug, Default)]
pub struct Changes {
    /// Run rows to dispatch (claimed already when `claimed`).
    pub dispatch: Vec<Dispatch>,
    /// Runs that ended: (run id, workflow id, succeeded).
    pub ended: Vec<(i64, i32, bool)>,
    /// Node-run results applied.
    pub applied: usize,
    /// Top-level runs started.
    pub started: usize,
    /// Jobs read in this transaction (a job node's job is read once per batch).
    pub(crate) jobs: HashMap<i32, Option<Arc<entity::xxl_job_info::Model>>>,
    /// `dispatch` holds only rows this node claimed already (recorded claimed by the
    /// transaction that made them, see [`Runs::transact`]).
    pub(crate) claimed: bool,
    /// Job and workflow nodes started since the last top-level run started in this change
    /// (bounded by [`MAX_RUN_NODES`]).
    pub(crate) expanded: u64,
    /// The `PARALLEL` workflows whose runs these starts started, as they read them.
    pub(crate) parallel: HashMap<i32, entity::xjob_workflow::Model>,
}

impl Changes {
    /// Adds what another transaction changed.
    pub(crate) fn absorb(&mut self, o: Changes) {
        self.claimed = o.claimed && (self.claimed || self.dispatch.is_empty());
        self.dispatch.extend(o.dispatch);
        self.ended.extend(o.ended);
        self.applied += o.applied;
        self.started += o.started;
        self.jobs.extend(o.jobs);
        self.parallel.extend(o.parallel);
    }

    /// Counts one more node started by the current trigger; the reason it may not start when
    /// that passes [`MAX_RUN_NODES`].
    fn expand(&mut self) -> Option<String> {
        self.expanded += 1;
        (self.expanded > MAX_RUN_NODES).then(|| {
            format!(
                "one trigger may start at most {MAX_RUN_NODES} node runs, nested workflows included"
            )
        })
    }
}

/// What a workflow transaction answers: the changes whose run rows it recorded claimed, if any.
trait Answer: Send + 'static {
    /// The changes, if the answer holds some.
    fn changes(&mut self) -> Option<&mut Changes>;
}

impl Answer for Changes {
    fn changes(&mut self) -> Option<&mut Changes> {
        Some(self)
    }
}

impl Answer for (i64, Changes) {
    fn changes(&mut self) -> Option<&mut Changes> {
        Some(&mut self.1)
    }
}

impl Answer for (Vec<Result<i64>>, Changes) {
    fn changes(&mut self) -> Option<&mut Changes> {
        Some(&mut self.1)
    }
}

impl Answer for Option<Vec<i64>> {
    fn changes(&mut self) -> Option<&mut Changes> {
        None
    }
}

type BoxFut<'a, T> = std::pin::Pin<Box<dyn std::future::Future<Output = T> + Send + 'a>>;

impl Runs {
    /// The store of a node whose run rows `writer` writes: on a SQLite file it holds, the
    /// transitions run on the writer's connection.
    pub(crate) fn new(writer: &LogWriter) -> Runs {
        Runs {
            compiled: Arc::default(),
            file: writer.single_node().then(|| writer.clone()),
            ids: Arc::default(),
            plans: Arc::default(),
        }
    }

    /// Runs `f` in one write transaction on the connection transitions use: the run-row
    /// writer's on a SQLite file this node holds, else one through the pool. Where a
    /// transaction runs is decided here and nowhere else. The node runs' rows it records are
    /// claimed by this node in the same transaction (no claim of their own follows): if the
    /// node stops before it sends them, they are in doubt like any claimed fire
    /// ([`crate::store::in_doubt`]) and settled by asking their executors.
    async fn transact<R: Answer>(
        &self,
        db: &DatabaseConnection,
        f: impl AsyncFnOnce(&Port<'_>) -> Result<R> + Send + Sync + 'static,
    ) -> Result<R> {
        let mut out = if let Some(writer) = &self.file {
            writer.exec(move |conn| port::file_tx(conn, f)).await??
        } else {
            let txn = crate::store::begin_writing(db).await?;
            let out = f(&Port::tx(&txn)).await?;
            txn.commit().await?;
            out
        };
        // the run rows it recorded are claimed by this node already (`Tx::insert_pending`)
        if let Some(ch) = out.changes() {
            ch.claimed = true;
        }
        Ok(out)
    }

    /// How many transactions a pass of `results` is applied in at once: one on SQLite (one
    /// writer) and for a pass of fewer than [`LANES_FROM`] results, [`APPLY_LANES`] otherwise.
    pub(crate) fn lanes(&self, db: &DatabaseConnection, results: usize) -> usize {
        if self.file.is_some()
            || db.get_database_backend() == sea_orm::DbBackend::Sqlite
            || results < LANES_FROM
        {
            1
        } else {
            APPLY_LANES
        }
    }

    /// [`Runs::transact`] with the rules' reads and writes kept by a [`Pass`] and written at
    /// its end: on a database server a pass costs a handful of round trips whatever its size.
    async fn pass<R: Answer>(
        &self,
        db: &DatabaseConnection,
        f: impl AsyncFnOnce(&Pass<'_, '_>) -> Result<R> + Send + Sync + 'static,
    ) -> Result<R> {
        let ids = self.ids.clone();
        self.transact(db, async move |port| {
            let pass = Pass::new(port, &ids);
            let mut out = f(&pass).await?;
            pass.flush().await?;
            if let Some(ch) = out.changes() {
                pass.settle(ch);
            }
            Ok(out)
        })
        .await
    }

    async fn compiled(
        &self,
        tx: &impl Tx,
        workflow_id: i32,
        version: i32,
    ) -> Result<Arc<Compiled>> {
        if let Some((x, _)) = self.compiled.lock().by_version.get(&(workflow_id, version)) {
            return Ok(x.clone());
        }
        let text = tx
            .definition(workflow_id, version)
            .await?
            .ok_or(Error::NotFound {
                what: "workflow version",
                id: version.into(),
            })?;
        let def: Definition = serde_json::from_str(&text).map_err(|e| Error::Invalid {
            field: "definition",
            reason: e.to_string(),
        })?;
        let x = Arc::new(Compiled::new(def)?);
        let size = 2 * text.len();
        // bounded by what the versions hold, not by how many they are (a version larger than
        // the bound is compiled for each use and not kept)
        if size <= COMPILED_BYTES {
            let mut cache = self.compiled.lock();
            if cache.bytes + size > COMPILED_BYTES || cache.by_version.len() >= 4096 {
                cache.by_version.clear();
                cache.bytes = 0;
            }
            let key = (workflow_id, version);
            if let Some((_, old)) = cache.by_version.insert(key, (x.clone(), size)) {
                cache.bytes -= old;
            }
            cache.bytes += size;
        }
        Ok(x)
    }

    /// Starts a run of workflow `workflow_id`'s current version with `params`: records it and
    /// the node runs of its start nodes in one transaction.
    pub async fn start(
        &self,
        db: &DatabaseConnection,
        workflow_id: i32,
        trigger_type: TriggerType,
        params: Option<String>,
        now: i64,
    ) -> Result<(i64, Changes)> {
        let one = StartOne {
            workflow_id,
            trigger_type,
            params,
        };
        let (mut ids, ch) = self.start_many(db, vec![one], now).await?;
        let id = ids.pop().ok_or(Error::Stopped("no start answered"))??;
        Ok((id, ch))
    }

    /// Starts `starts` in one transaction (what callers asked at once): answers each one's run
    /// id, or why it did not start (its workflow is missing, its concurrency refuses it, its
    /// params are not a JSON object), and what the starts changed. When the transaction fails
    /// each start runs in one of its own, so one start's failure is its own.
    ///
    /// On a database server, starts of `PARALLEL` workflows this node started before are one
    /// round trip on the pool that commits alone ([`Runs::start_sealed`]: on PostgreSQL one
    /// statement, on MySQL/MariaDB one script); the others, and those whose workflow or jobs
    /// changed since, take the transaction.
    pub(crate) async fn start_many(
        &self,
        db: &DatabaseConnection,
        starts: Vec<StartOne>,
        now: i64,
    ) -> Result<(Vec<Result<i64>>, Changes)> {
        use sea_orm::DatabaseBackend::{MySql, Postgres};
        let sealed = self.file.is_none() && matches!(db.get_database_backend(), Postgres | MySql);
        if sealed && let Some(out) = self.start_sealed(db, &starts, now).await? {
            return Ok(out);
        }
        let out = self.start_each(db, starts.clone(), now).await?;
        if sealed {
            self.keep_plans(&starts, &out.1);
        }
        Ok(out)
    }

    /// Keeps what `starts` read (`ch`, their changes) for the next starts of their workflows:
    /// the `PARALLEL` ones they started; a workflow that started none is forgotten.
    fn keep_plans(&self, starts: &[StartOne], ch: &Changes) {
        let jobs: HashMap<i32, Arc<entity::xxl_job_info::Model>> = ch
            .jobs
            .iter()
            .filter_map(|(id, j)| Some((*id, j.clone()?)))
            .collect();
        let mut plans = self.plans.lock();
        for s in starts {
            match ch.parallel.get(&s.workflow_id) {
                Some(w) => {
                    if plans.len() >= MAX_PLANS && !plans.contains_key(&w.id) {
                        plans.clear();
                    }
                    let plan = Plan {
                        workflow: w.clone(),
                        jobs: jobs.clone(),
                    };
                    plans.insert(w.id, Arc::new(plan));
                }
                None => {
                    plans.remove(&s.workflow_id);
                }
            }
        }
    }

    /// `starts` answered from what earlier starts of their workflows read ([`Plan`]): the
    /// rules run on a sealed [`Pass`] (nothing read; a rule that would read gives up) and its
    /// rows are written in one round trip that commits alone ([`Pass::flush_guarded`]), only
    /// if the workflows and jobs are still as they were read. `None` (nothing written) when a start's workflow is not
    /// kept, a rule would read, or the database holds something else now: the caller takes
    /// the transaction.
    async fn start_sealed(
        &self,
        db: &DatabaseConnection,
        starts: &[StartOne],
        now: i64,
    ) -> Result<Option<(Vec<Result<i64>>, Changes)>> {
        let kept: Option<HashMap<i32, Arc<Plan>>> = {
            let plans = self.plans.lock();
            starts
                .iter()
                .map(|s| Some((s.workflow_id, plans.get(&s.workflow_id)?.clone())))
                .collect()
        };
        let Some(kept) = kept else {
            return Ok(None);
        };
        let port = Port::db(db);
        let pass = Pass::sealed(&port, &self.ids, kept.values().map(|p| p.workflow.clone()));
        let mut ch = Changes::default();
        for p in kept.values() {
            for (id, j) in &p.jobs {
                ch.jobs.insert(*id, Some(j.clone()));
            }
        }
        let mut ids = Vec::with_capacity(starts.len());
        for s in starts {
            let ctx = match initial_context(s.params.as_deref()) {
                Ok(ctx) => ctx,
                Err(e) => {
                    ids.push(Err(e));
                    continue;
                }
            };
            match self.start_one(&pass, s.clone(), ctx, now, &mut ch).await {
                Ok(Ok(id)) => ids.push(Ok(id)),
                // a rule that would read, or a start the rules refuse: the transaction's
                _ => return Ok(None),
            }
        }
        let mut guard = pass::Guard {
            workflows: kept
                .values()
                .map(|p| (p.workflow.id, p.workflow.version, p.workflow.job_group))
                .collect(),
            jobs: Vec::new(),
        };
        let mut used: Vec<i32> = ch.dispatch.iter().map(|d| d.job_id).collect();
        used.sort_unstable();
        used.dedup();
        for id in used {
            let Some(Some(j)) = ch.jobs.get(&id) else {
                return Ok(None);
            };
            guard.jobs.push((id, j.update_time));
        }
        if !pass.flush_guarded(&guard).await? {
            return Ok(None);
        }
        // (MySQL/MariaDB: the run rows' ids the script's insert gave them)
        pass.settle(&mut ch);
        // its run rows were recorded claimed by this node, as a transaction records them
        ch.claimed = true;
        Ok(Some((ids, ch)))
    }

    /// The starts in one transaction (see [`Runs::start_many`]).
    async fn start_each(
        &self,
        db: &DatabaseConnection,
        starts: Vec<StartOne>,
        now: i64,
    ) -> Result<(Vec<Result<i64>>, Changes)> {
        match self.start_all_again(db, starts.clone(), now).await {
            Err(e) if starts.len() > 1 => {
                tracing::debug!(error = %e, starts = starts.len(), "starts taken one at a time");
                let mut ids = Vec::with_capacity(starts.len());
                let mut ch = Changes::default();
                for one in starts {
                    match self.start_all_again(db, vec![one], now).await {
                        Ok((mut id, c)) => {
                            ids.push(id.pop().ok_or(Error::Stopped("no start answered"))?);
                            ch.absorb(c);
                        }
                        Err(e) => ids.push(Err(e)),
                    }
                }
                Ok((ids, ch))
            }
            out => out,
        }
    }

    /// [`Runs::start_all`] in a transaction of its own, run again (a few times) when the
    /// database ended it for losing a race with another (a deadlock).
    async fn start_all_again(
        &self,
        db: &DatabaseConnection,
        starts: Vec<StartOne>,
        now: i64,
    ) -> Result<(Vec<Result<i64>>, Changes)> {
        let mut tries = 0;
        loop {
            let (me, all) = (self.clone(), starts.clone());
            match self
                .pass(db, async move |tx| me.start_all(tx, all, now).await)
                .await
            {
                Err(e) if crate::store::lost_race(&e) && tries < RACES => {
                    tries += 1;
                    tracing::debug!(error = %e, tries, "workflow starts run again");
                }
                out => return out,
            }
        }
    }

    /// [`Runs::start_many`] in `tx`.
    async fn start_all(
        &self,
        tx: &impl Tx,
        starts: Vec<StartOne>,
        now: i64,
    ) -> Result<(Vec<Result<i64>>, Changes)> {
        let mut ch = Changes::default();
        let mut ids = Vec::with_capacity(starts.len());
        for s in starts {
            let id = match initial_context(s.params.as_deref()) {
                Ok(ctx) => self.start_one(tx, s, ctx, now, &mut ch).await?,
                Err(e) => Err(e),
            };
            ids.push(id);
        }
        Ok((ids, ch))
    }

    /// One start in `tx` with its first context `ctx`: answers the run's id, or why it did not
    /// start (the outer error fails the transaction). A start that is refused wrote nothing.
    async fn start_one(
        &self,
        tx: &impl Tx,
        s: StartOne,
        ctx: Value,
        now: i64,
        ch: &mut Changes,
    ) -> Result<Result<i64>> {
        let Some(w) = tx.workflow(s.workflow_id).await? else {
            return Ok(Err(Error::NotFound {
                what: "workflow",
                id: s.workflow_id.into(),
            }));
        };
        // its version compiles (read now, so an unreadable one is refused before a write)
        if let Err(e) = self.compiled(tx, w.id, w.version).await {
            return Ok(Err(e));
        }
        Ok(match self.admit(tx, &w).await? {
            Admit::Run => {
                let start = RunStart::top(s.trigger_type, s.params, ctx);
                let id = self.start_in(tx, &w, start, now, ch).await?.0;
                if w.concurrency == "PARALLEL" {
                    ch.parallel.insert(w.id, w);
                }
                Ok(id)
            }
            Admit::Queue => Ok(queue(tx, &w, s.trigger_type, s.params, ctx, now).await?),
            Admit::Refuse(reason) => Err(Error::Conflict { reason }),
        })
    }

    /// [`Runs::start`] in `tx`, with first context `ctx`.
    #[cfg(test)]
    async fn start_tx(
        &self,
        tx: &impl Tx,
        workflow_id: i32,
        trigger_type: TriggerType,
        params: Option<String>,
        ctx: Value,
        now: i64,
    ) -> Result<(i64, Changes)> {
        let one = StartOne {
            workflow_id,
            trigger_type,
            params,
        };
        let mut ch = Changes::default();
        let id = self.start_one(tx, one, ctx, now, &mut ch).await??;
        Ok((id, ch))
    }

    /// Whether a new top-level run of `w` runs now, waits, or is refused, by its concurrency
    /// policy. Takes `w`'s row lock first, so two starts of one workflow decide one at a time.
    async fn admit(&self, tx: &impl Tx, w: &entity::xjob_workflow::Model) -> Result<Admit> {
        if w.concurrency == "PARALLEL" {
            return Ok(Admit::Run);
        }
        tx.lock_workflow(w.id).await?;
        if tx.count_top_runs(w.id, status::RUNNING).await? == 0 {
            return Ok(Admit::Run);
        }
        if w.concurrency == "SKIP" {
            return Ok(Admit::Refuse(format!(
                "a run of workflow {} is running (concurrency SKIP)",
                w.id
            )));
        }
        let queued = tx.count_top_runs(w.id, status::QUEUED).await?;
        if queued < Ord::max(w.max_queued, 0) as u64 {
            Ok(Admit::Queue)
        } else {
            Ok(Admit::Refuse(format!(
                "workflow {} has {queued} runs queued, at most {} (concurrency QUEUE)",
                w.id, w.max_queued
            )))
        }
    }

    /// Starts the oldest queued run of workflow `workflow_id` (one of its runs ended).
    async fn promote<T: Tx>(
        &self,
        tx: &T,
        workflow_id: i32,
        now: i64,
        ch: &mut Changes,
    ) -> Result<()> {
        let Some(mut next) = tx.oldest_queued(workflow_id).await? else {
            return Ok(());
        };
        if tx.promote_run(next.id, now).await? {
            ch.started += 1;
            ch.expanded = 0;
            next.status = status::RUNNING.into();
            next.start_time = now;
            self.advance(tx, &next, now, ch).await?;
        }
        Ok(())
    }

    /// Fires the workflows whose schedule is due at `now`: each fire's next time moves on in
    /// the transaction that starts (or queues) its run, only if no other node moved it first —
    /// so each fire starts one run in a cluster. A fire later than `misfire_ms` follows the
    /// workflow's misfire strategy. Answers what the fires changed, and when (epoch ms) the next
    /// fire known is due: the same read looks [`SCHEDULE_AHEAD_MS`] ahead, a fire's own next
    /// time counts, and it answers that far ahead when it saw none (`now` when it read as many
    /// due ones as it fires at once).
    pub(crate) async fn fire_due(
        &self,
        db: &DatabaseConnection,
        now: i64,
        misfire_ms: i64,
        tz: chrono_tz::Tz,
    ) -> Result<(Changes, i64)> {
        use crate::model::ScheduleType;
        use crate::schedule::Schedule;
        use entity::xjob_workflow as wf;
        const AT_ONCE: u64 = 100;
        let read = wf::Entity::find()
            .filter(wf::Column::TriggerStatus.eq(1))
            .filter(wf::Column::TriggerNextTime.gt(0))
            .filter(wf::Column::TriggerNextTime.lte(now + SCHEDULE_AHEAD_MS))
            .order_by_asc(wf::Column::TriggerNextTime)
            .limit(AT_ONCE)
            .all(db)
            .await?;
        // when to look again
        let mut again = now + SCHEDULE_AHEAD_MS;
        if read.len() as u64 == AT_ONCE && read.iter().all(|w| w.trigger_next_time <= now) {
            again = now;
        }
        let mut ch = Changes::default();
        for w in read {
            let t = w.trigger_next_time;
            if t > now {
                // ordered by time: the first not due yet is the next one
                again = again.min(t);
                break;
            }
            let schedule = w
                .schedule_type
                .parse::<ScheduleType>()
                .and_then(|k| Schedule::parse(k, w.schedule_conf.as_deref(), tz));
            let (fire, trigger_type, next) = match schedule {
                Err(e) => {
                    tracing::warn!(workflow = w.id, error = %e, "workflow schedule unreadable; stopped");
                    (false, TriggerType::Cron, None)
                }
                Ok(s) if now - t > misfire_ms => (
                    w.misfire_strategy == "FIRE_ONCE_NOW",
                    TriggerType::Misfire,
                    s.next_after(now, t),
                ),
                Ok(s) => (true, TriggerType::Cron, s.next_after(t, t)),
            };
            // (a fire moved on to within the look's reach is looked for then too)
            again = again.min(next.unwrap_or(i64::MAX));
            let me = self.clone();
            let fired = self
                .transact(db, async move |tx| {
                    me.fire_in(tx, w, t, (fire, trigger_type, next), now).await
                })
                .await?;
            ch.absorb(fired);
        }
        Ok((ch, again))
    }

    /// One due fire `t` of workflow `w` in `tx`: moves its next time on to `next` (unless
    /// another node did first) and, if it `fire`s, starts or queues its run.
    async fn fire_in(
        &self,
        tx: &Port<'_>,
        w: entity::xjob_workflow::Model,
        t: i64,
        (fire, trigger_type, next): (bool, TriggerType, Option<i64>),
        now: i64,
    ) -> Result<Changes> {
        use entity::xjob_workflow as wf;
        let mut ch = Changes::default();
        let moved = tx
            .run(
                &wf::Entity::update_many()
                    .col_expr(
                        wf::Column::TriggerStatus,
                        Expr::value(i16::from(next.is_some())),
                    )
                    .col_expr(wf::Column::TriggerNextTime, Expr::value(next.unwrap_or(0)))
                    .filter(wf::Column::Id.eq(w.id))
                    .filter(wf::Column::TriggerStatus.eq(1))
                    .filter(wf::Column::TriggerNextTime.eq(t)),
            )
            .await?;
        if moved == 0 {
            return Ok(ch);
        }
        if !fire {
            tracing::info!(
                workflow = w.id,
                fire = t,
                "workflow fire misfired; skipped (DO_NOTHING)"
            );
            return Ok(ch);
        }
        let ctx = initial_context(None)?;
        match self.admit(tx, &w).await? {
            Admit::Run => {
                let start = RunStart::top(trigger_type, None, ctx);
                self.start_in(tx, &w, start, now, &mut ch).await?;
            }
            Admit::Queue => {
                queue(tx, &w, trigger_type, None, ctx, now).await?;
            }
            Admit::Refuse(reason) => {
                tracing::info!(workflow = w.id, %reason, "scheduled workflow fire skipped");
            }
        }
        Ok(ch)
    }

    /// Records a run of `w` and moves it on; answers its id and, when it ended at once, how.
    fn start_in<'a, T: Tx>(
        &'a self,
        tx: &'a T,
        w: &'a entity::xjob_workflow::Model,
        start: RunStart,
        now: i64,
        ch: &'a mut Changes,
    ) -> BoxFut<'a, Result<(i64, Option<bool>)>> {
        Box::pin(async move {
            let mut run = new_run(w, status::RUNNING, start, now);
            run.id = tx.insert_run(&run).await?;
            if run.parent_node_run.is_none() {
                ch.started += 1;
                ch.expanded = 0;
            }
            // a new run has no node rows yet
            let outcome = self.advance_with(tx, &run, Vec::new(), now, ch).await?;
            Ok((run.id, outcome))
        })
    }

    /// Moves `run` on from its node runs' states: records skipped and disabled nodes, decides
    /// decisions, starts job and workflow nodes; ends the run when every node is final.
    /// Answers the run's outcome when it ended.
    fn advance<'a, T: Tx>(
        &'a self,
        tx: &'a T,
        run: &'a runs::Model,
        now: i64,
        ch: &'a mut Changes,
    ) -> BoxFut<'a, Result<Option<bool>>> {
        Box::pin(async move {
            let rows = tx.node_rows(run.id).await?;
            self.advance_with(tx, run, rows, now, ch).await
        })
    }

    /// [`Runs::advance`] with the run's node rows already read.
    fn advance_with<'a, T: Tx>(
        &'a self,
        tx: &'a T,
        run: &'a runs::Model,
        rows: Vec<nodes::Model>,
        now: i64,
        ch: &'a mut Changes,
    ) -> BoxFut<'a, Result<Option<bool>>> {
        Box::pin(async move {
            let c = self.compiled(tx, run.workflow_id, run.version).await?;
            let Attempts { latest, next } = Attempts::of(&rows);
            let next = |k: &str| next.get(k).copied().unwrap_or(1);
            let mut states: Vec<State> = c
                .def
                .nodes
                .iter()
                .map(|n| {
                    latest
                        .get(n.key.as_str())
                        .map_or(State::Pending, |r| state_of(r))
                })
                .collect();
            let own: Value = serde_json::from_str(&run.context).unwrap_or(Value::Null);
            let ctx = effective(inherited(tx, run).await?.as_ref(), &own);
            loop {
                let before = states.clone();
                let due = rules::advance(&c.graph, &c.rules, &mut states);
                for i in 0..states.len() {
                    if before[i] != State::Pending {
                        continue;
                    }
                    let (st, msg) = match states[i] {
                        State::Skipped => (status::SKIPPED, None),
                        State::Done { .. } => (status::SUCCEEDED, Some("disabled")),
                        _ => continue,
                    };
                    let key = &c.def.nodes[i].key;
                    let a = next(key);
                    tx.insert_node(&node_row(run.id, key, a, a, st, now, msg))
                        .await?;
                }
                let mut moved = false;
                for i in due {
                    let node = &c.def.nodes[i];
                    // a node that ended at once (a decision, or one that could not run)
                    let ended = match &node.kind {
                        NodeKind::Job { job_id } => {
                            let at = NodeAt {
                                run,
                                key: &node.key,
                                attempt: next(&node.key),
                                now,
                            };
                            let job = JobStart {
                                job_id: *job_id,
                                param: node.param.as_deref(),
                                ctx: &ctx,
                                max_attempts: None,
                            };
                            self.start_job(tx, &at, &job, ch)
                                .await?
                                .map(|ok| (ok, None))
                        }
                        NodeKind::Decision { expression } => {
                            let (st, decision, msg) = match expr::decide(expression, &ctx) {
                                Ok(d) => (status::SUCCEEDED, Some(d), format!("{d}")),
                                Err(e) => (status::FAILED, None, cap(&e)),
                            };
                            let a = next(&node.key);
                            tx.insert_node(&nodes::Model {
                                decision: decision.map(i16::from),
                                end_time: Some(now),
                                ..node_row(run.id, &node.key, a, a, st, now, Some(&msg))
                            })
                            .await?;
                            Some((decision.is_some(), decision))
                        }
                        NodeKind::Workflow { workflow_id } => {
                            let at = NodeAt {
                                run,
                                key: &node.key,
                                attempt: next(&node.key),
                                now,
                            };
                            self.start_nested(tx, &at, *workflow_id, ch)
                                .await?
                                .map(|ok| (ok, None))
                        }
                    };
                    if let Some((succeeded, decision)) = ended {
                        states[i] = State::Done {
                            succeeded,
                            decision,
                        };
                        moved = true;
                    }
                }
                if !moved {
                    break;
                }
            }
            let Some(ok) = rules::outcome(&c.graph, &c.rules, &states) else {
                return Ok(None);
            };
            let st = if ok {
                status::SUCCEEDED
            } else {
                status::FAILED
            };
            let failed: Vec<&str> = c
                .def
                .nodes
                .iter()
                .zip(&states)
                .filter(|(n, s)| {
                    !n.allow_failure
                        && matches!(
                            s,
                            State::Done {
                                succeeded: false,
                                ..
                            }
                        )
                })
                .map(|(n, _)| n.key.as_str())
                .collect();
            let msg = (!failed.is_empty()).then(|| cap(&format!("failed: {}", failed.join(", "))));
            tx.end_run(run.id, st, now, msg).await?;
            ch.ended.push((run.id, run.workflow_id, ok));
            if run.parent_node_run.is_none() {
                self.promote(tx, run.workflow_id, now, ch).await?;
            }
            Ok(Some(ok))
        })
    }

    /// Records attempt `attempt` of job node `key` with its pending run rows (one per shard of
    /// a sharding broadcast); answers the node's outcome when it cannot run (its job is gone).
    async fn start_job(
        &self,
        tx: &impl Tx,
        at: &NodeAt<'_>,
        job: &JobStart<'_>,
        ch: &mut Changes,
    ) -> Result<Option<bool>> {
        let NodeAt {
            run,
            key,
            attempt,
            now,
        } = *at;
        let JobStart {
            job_id,
            param,
            ctx,
            max_attempts,
        } = *job;
        let cached = match ch.jobs.get(&job_id) {
            Some(j) => j.clone(),
            None => {
                let j = tx.job(job_id).await?.map(Arc::new);
                ch.jobs.insert(job_id, j.clone());
                j
            }
        };
        let Some(job) = cached else {
            let msg = format!("job {job_id} not found");
            return fail_node(tx, run.id, key, attempt, now, &msg).await;
        };
        if let Some(msg) = ch.expand() {
            return fail_node(tx, run.id, key, attempt, now, &msg).await;
        }
        let param = match param.map(|p| render_param(p, ctx)) {
            None => None,
            Some(Ok(p)) => Some(p),
            Some(Err(msg)) => return fail_node(tx, run.id, key, attempt, now, &msg).await,
        };
        let broadcast = job
            .executor_route_strategy
            .as_deref()
            .and_then(|r| r.parse::<RouteStrategy>().ok())
            == Some(RouteStrategy::ShardingBroadcast);
        let total = if broadcast {
            match tx.group_addresses(job.job_group).await? {
                Some(list) => list
                    .as_deref()
                    .unwrap_or_default()
                    .split(',')
                    .filter(|a| !a.trim().is_empty())
                    .count()
                    .max(1) as i32,
                None => 1,
            }
        } else {
            1
        };
        // the attempts of this round: the job's fail retries after this one (capped)
        let retries = Ord::clamp(job.executor_fail_retry_count, 0, MAX_ATTEMPTS - 1);
        let max_attempts = max_attempts.unwrap_or(attempt + retries);
        let node_id = tx
            .insert_node(&nodes::Model {
                shards_total: total,
                ..node_row(
                    run.id,
                    key,
                    attempt,
                    max_attempts,
                    status::RUNNING,
                    now,
                    None,
                )
            })
            .await?;
        for shard in 0..total {
            let sharding = broadcast.then(|| format!("{shard}/{total}"));
            let log_id = tx
                .insert_pending(&PendingRow {
                    job: &job,
                    param: param.as_deref(),
                    sharding: sharding.as_deref(),
                    now,
                    node_run_id: node_id,
                    run_id: run.id,
                    shard,
                })
                .await?;
            ch.dispatch.push(Dispatch {
                log_id,
                job_id: job.id,
                param: param.clone(),
                shard: broadcast.then_some((shard, total)),
                retries_left: Ord::max(max_attempts - attempt, 0),
            });
        }
        Ok(None)
    }

    /// Records workflow node `key` and starts its nested run; answers the node's outcome when
    /// it ended at once (or cannot run).
    async fn start_nested(
        &self,
        tx: &impl Tx,
        at: &NodeAt<'_>,
        workflow_id: i32,
        ch: &mut Changes,
    ) -> Result<Option<bool>> {
        let NodeAt {
            run,
            key,
            attempt,
            now,
        } = *at;
        let fail =
            |msg: String| async move { fail_node(tx, run.id, key, attempt, now, &msg).await };
        if run.depth + 1 > MAX_DEPTH {
            return fail(format!("workflows nested deeper than {MAX_DEPTH}")).await;
        }
        if let Some(msg) = ch.expand() {
            return fail(msg).await;
        }
        let Some(w) = tx.workflow(workflow_id).await? else {
            return fail(format!("workflow {workflow_id} not found")).await;
        };
        let node_id = tx
            .insert_node(&node_row(
                run.id,
                key,
                attempt,
                attempt,
                status::RUNNING,
                now,
                None,
            ))
            .await?;
        let (child, ended) = self
            .start_in(
                tx,
                &w,
                RunStart {
                    trigger_type: TriggerType::Workflow,
                    params: None,
                    // its own values only: it reads its parent's context through `inherited`
                    ctx: Value::Object(Default::default()),
                    parent: Some(node_id),
                    depth: run.depth + 1,
                },
                now,
                ch,
            )
            .await?;
        let end = ended.map(|ok| {
            (
                if ok {
                    status::SUCCEEDED
                } else {
                    status::FAILED
                },
                now,
            )
        });
        tx.set_child(node_id, child, end).await?;
        Ok(ended)
    }

    /// Run rows of node runs that have a result not yet applied (at most `limit`).
    pub(crate) async fn finished(
        &self,
        c: &impl ConnectionTrait,
        limit: u64,
    ) -> Result<Vec<Finished>> {
        let sql = format!("{} LIMIT {limit}", finished_sql());
        let rows = c
            .query_all_raw(Statement::from_string(c.get_database_backend(), sql))
            .await?;
        let mut out = Vec::with_capacity(rows.len());
        for r in rows {
            out.push(Finished::of(
                (
                    r.try_get("", "log_id")?,
                    r.try_get("", "node_run_id")?,
                    r.try_get("", "run_id")?,
                ),
                r.try_get("", "handle_code")?,
                r.try_get("", "handle_msg")?,
                r.try_get("", "trigger_msg")?,
            ));
        }
        Ok(out)
    }

    /// Run rows of node runs whose row was deleted before it had a result (log cleanup): they
    /// are applied as failed.
    pub(crate) async fn vanished(
        &self,
        c: &impl ConnectionTrait,
        limit: u64,
    ) -> Result<Vec<Finished>> {
        let sql = format!(
            "SELECT nl.log_id, nl.node_run_id, nl.run_id \
             FROM xjob_workflow_node_log nl LEFT JOIN xxl_job_log l ON l.id = nl.log_id \
             WHERE nl.done = 0 AND l.id IS NULL ORDER BY nl.log_id LIMIT {limit}"
        );
        let rows = c
            .query_all_raw(Statement::from_string(c.get_database_backend(), sql))
            .await?;
        let mut out = Vec::with_capacity(rows.len());
        for r in rows {
            out.push(Finished {
                log_id: r.try_get("", "log_id")?,
                node_run_id: r.try_get("", "node_run_id")?,
                run_id: r.try_get("", "run_id")?,
                ok: false,
                msg: Some("the run row was deleted before its result".into()),
                outputs: None,
            });
        }
        Ok(out)
    }

    /// Pending run rows of node runs started before `before` (epoch ms) that no node has
    /// claimed: their dispatch was lost with the node that recorded them.
    pub(crate) async fn stale_pending(
        &self,
        c: &impl ConnectionTrait,
        before: i64,
        limit: u64,
    ) -> Result<Vec<Dispatch>> {
        let sql = format!(
            "SELECT nl.log_id, nl.shard, l.job_id, l.executor_param, l.executor_sharding_param, \
             nr.max_attempts, nr.attempt \
             FROM xjob_workflow_node_log nl \
             JOIN xxl_job_log l ON l.id = nl.log_id \
             JOIN xjob_workflow_node_run nr ON nr.id = nl.node_run_id \
             WHERE nl.done = 0 AND l.fire_state = {} AND nr.start_time < {before} \
             ORDER BY nl.log_id LIMIT {limit}",
            fire_state::PENDING
        );
        let rows = c
            .query_all_raw(Statement::from_string(c.get_database_backend(), sql))
            .await?;
        let mut out = Vec::with_capacity(rows.len());
        for r in rows {
            let sharding: Option<String> = r.try_get("", "executor_sharding_param")?;
            let (max, attempt): (i32, i32) =
                (r.try_get("", "max_attempts")?, r.try_get("", "attempt")?);
            out.push(Dispatch {
                retries_left: Ord::max(max - attempt, 0),
                log_id: r.try_get("", "log_id")?,
                job_id: r.try_get("", "job_id")?,
                param: r.try_get("", "executor_param")?,
                shard: sharding.and_then(|s| {
                    let (i, n) = s.split_once('/')?;
                    Some((i.parse().ok()?, n.parse().ok()?))
                }),
            });
        }
        Ok(out)
    }

    /// Applies `items` (results of node runs' run rows) in one transaction: each row's result
    /// once, each node run completed when all its shards have a result (or its next attempt
    /// started), each run moved on and ended when it is over (and its parent's node with it).
    pub(crate) async fn apply(
        &self,
        db: &DatabaseConnection,
        items: Vec<Finished>,
        now: i64,
    ) -> Result<Changes> {
        let me = self.clone();
        self.pass(db, async move |tx| me.apply_in(tx, items, now).await)
            .await
    }

    /// Claims `ids` (pending run rows) for dispatch by this node; answers those it won.
    pub(crate) async fn claim(&self, db: &DatabaseConnection, ids: Vec<i64>) -> Result<Vec<i64>> {
        if let Some(writer) = &self.file {
            return writer
                .exec(move |conn| {
                    port::file_tx(conn, async |p| crate::store::logs::claim_in(p, &ids).await)
                })
                .await?;
        }
        crate::store::logs::claim(db, &ids).await
    }

    /// [`Runs::apply`] in `tx`.
    async fn apply_in<T: Tx>(&self, tx: &T, items: Vec<Finished>, now: i64) -> Result<Changes> {
        let mut by_run: BTreeMap<i64, Vec<Finished>> = BTreeMap::new();
        for f in items {
            by_run.entry(f.run_id).or_default().push(f);
        }
        let run_ids: Vec<i64> = by_run.keys().copied().collect();
        let log_ids: Vec<i64> = by_run.values().flatten().map(|f| f.log_id).collect();
        tx.prepare(&run_ids, &log_ids).await?;
        let mut ch = Changes::default();
        for (run_id, items) in by_run {
            let ids: Vec<i64> = items.iter().map(|f| f.log_id).collect();
            let Some(mut run) = tx.lock_run(run_id).await? else {
                // ended or stopped: its rows' results change nothing
                tx.close_links(&ids).await?;
                continue;
            };
            // each row's result once: the links still open, closed under the run's lock
            let open = tx.close_links(&ids).await?;
            if open.is_empty() {
                continue;
            }
            let mut rows = tx.node_rows(run.id).await?;
            let mut ctx: Value = serde_json::from_str(&run.context).unwrap_or(Value::Null);
            let up = inherited(tx, &run).await?;
            let before = ctx.clone();
            let (mut changed, mut stale) = (false, false);
            let of = ResultOf {
                run: &run,
                up: up.as_ref(),
                now,
            };
            for f in items.into_iter().filter(|f| open.contains(&f.log_id)) {
                match self
                    .apply_one(tx, &of, &mut rows, &mut ctx, f, &mut ch)
                    .await?
                {
                    Applied::Nothing => {}
                    Applied::Completed => changed = true,
                    // a new attempt's row is not among `rows`: the advance reads them again
                    Applied::NewAttempt => (changed, stale) = (true, true),
                }
            }
            if ctx != before {
                run.context = ctx.to_string();
                tx.set_context(run.id, &run.context).await?;
            }
            if changed {
                let rows = (!stale).then_some(rows);
                self.moved(tx, run, rows, now, &mut ch).await?;
            }
        }
        Ok(ch)
    }

    /// Moves `run` on; when it ends, completes its parent's node and moves the parent on, and so
    /// on up.
    async fn moved<T: Tx>(
        &self,
        tx: &T,
        mut run: runs::Model,
        mut rows: Option<Vec<nodes::Model>>,
        now: i64,
        ch: &mut Changes,
    ) -> Result<()> {
        loop {
            let ended = match rows.take() {
                Some(rows) => self.advance_with(tx, &run, rows, now, ch).await?,
                None => self.advance(tx, &run, now, ch).await?,
            };
            let Some(ok) = ended else {
                return Ok(());
            };
            let Some(parent_node) = run.parent_node_run else {
                return Ok(());
            };
            let Some(node) = tx.node(parent_node).await? else {
                return Ok(());
            };
            let Some(parent) = tx.lock_run(node.run_id).await? else {
                return Ok(());
            };
            let st = if ok {
                status::SUCCEEDED
            } else {
                status::FAILED
            };
            if !tx.end_node_if_running(parent_node, st, now).await? {
                return Ok(());
            }
            run = parent;
        }
    }

    /// Applies one run row's result (its link already marked done) to its node run in `rows`
    /// (the run's rows, kept in step with what is stored).
    async fn apply_one<T: Tx>(
        &self,
        tx: &T,
        of: &ResultOf<'_>,
        rows: &mut [nodes::Model],
        ctx: &mut Value,
        mut f: Finished,
        ch: &mut Changes,
    ) -> Result<Applied> {
        let ResultOf { run, up, now } = *of;
        ch.applied += 1;
        let Some(at) = rows.iter().position(|n| n.id == f.node_run_id) else {
            return Ok(Applied::Nothing);
        };
        let node = rows[at].clone();
        if node.state != status::RUNNING {
            return Ok(Applied::Nothing);
        }
        // a success's values join the run's context, unless it would grow too large
        if let (true, Some(out), Value::Object(map)) = (f.ok, f.outputs.take(), &mut *ctx) {
            let mut merged = map.clone();
            merged.extend(out);
            let size = Value::Object(merged.clone()).to_string().len();
            if size > MAX_CONTEXT {
                f.ok = false;
                f.msg = Some(format!(
                    "the run's context would be {size} bytes with this node's values; at most {MAX_CONTEXT}"
                ));
            } else {
                *map = merged;
            }
        }
        let done = node.shards_done + 1;
        let failed = node.shards_failed + i32::from(!f.ok);
        let message = if f.ok {
            node.message.clone()
        } else {
            f.msg.clone().or(node.message.clone())
        };
        let complete = done >= node.shards_total;
        let mut upd = NodeUpdate {
            shards_done: done,
            shards_failed: failed,
            message: message.clone(),
            end: None,
        };
        {
            // the in-memory row follows the stored one
            let row = &mut rows[at];
            row.shards_done = done;
            row.shards_failed = failed;
            row.message = message;
        }
        if complete {
            let st = if failed == 0 {
                status::SUCCEEDED
            } else {
                status::FAILED
            };
            upd.end = Some((st, now));
            rows[at].state = st.to_string();
            rows[at].end_time = Some(now);
        }
        tx.update_node(node.id, &upd).await?;
        if complete && failed > 0 && node.attempt < node.max_attempts {
            // the next attempt: the node stays running
            let c = self.compiled(tx, run.workflow_id, run.version).await?;
            if let Some(&i) = c.index.get(&node.node_key)
                && let NodeKind::Job { job_id } = &c.def.nodes[i].kind
            {
                let param = c.def.nodes[i].param.clone();
                let ctx = effective(up, ctx);
                let at = NodeAt {
                    run,
                    key: &node.node_key,
                    attempt: node.attempt + 1,
                    now,
                };
                let job = JobStart {
                    job_id: *job_id,
                    param: param.as_deref(),
                    ctx: &ctx,
                    max_attempts: Some(node.max_attempts),
                };
                // (the new attempt's row is read again by the run's advance)
                self.start_job(tx, &at, &job, ch).await?;
                return Ok(Applied::NewAttempt);
            }
        }
        Ok(if complete {
            Applied::Completed
        } else {
            Applied::Nothing
        })
    }

    /// Runs a top-level run again ([`Again`]): the nodes it names and everything downstream of
    /// them are cleared (kept as history) and run again as later attempts; the nodes it keeps
    /// keep their results. The run is RUNNING again; answers what to dispatch.
    pub(crate) async fn again(
        &self,
        db: &DatabaseConnection,
        run_id: i64,
        how: Again,
        who: &str,
        now: i64,
    ) -> Result<Changes> {
        let (me, who) = (self.clone(), who.to_string());
        self.transact(db, async move |tx| {
            me.again_in(tx, run_id, how, &who, now).await
        })
        .await
    }

    /// [`Runs::again`] in `tx`.
    async fn again_in(
        &self,
        tx: &Port<'_>,
        run_id: i64,
        how: Again,
        who: &str,
        now: i64,
    ) -> Result<Changes> {
        // the run's row lock, whatever its status
        let locked = tx
            .execute(
                "UPDATE xjob_workflow_run SET seq = seq + 1 WHERE id = ?",
                &[run_id.into()],
            )
            .await?;
        let not_found = || Error::NotFound {
            what: "workflow run",
            id: run_id,
        };
        if locked == 0 {
            return Err(not_found());
        }
        let sql = format!("SELECT {RUN_COLUMNS} FROM xjob_workflow_run WHERE id = ?");
        let mut run: runs::Model = tx
            .row(&sql, &[run_id.into()])
            .await?
            .ok_or_else(not_found)?;
        let conflict = |reason: String| Err(Error::Conflict { reason });
        if run.parent_node_run.is_some() {
            return conflict(format!(
                "run {run_id} is a nested workflow's run: run its parent's run again"
            ));
        }
        let c = self.compiled(tx, run.workflow_id, run.version).await?;
        let rows = tx.node_rows(run_id).await?;
        let Attempts { latest, next } = Attempts::of(&rows);
        let index = |key: &str| {
            c.index.get(key).copied().ok_or_else(|| Error::Invalid {
                field: "node",
                reason: format!(
                    "version {} of workflow {} has no node `{key}`",
                    run.version, run.workflow_id
                ),
            })
        };
        let state = |key: &str| latest.get(key).map(|r| r.state.as_str());
        let ended = run.status != status::RUNNING;
        let (seeds, with_seeds) = match &how {
            Again::Failed => {
                if run.status != status::FAILED && run.status != status::STOPPED {
                    return conflict(format!(
                        "run {run_id} is {}: only a failed or stopped run is re-run from its failed nodes",
                        run.status
                    ));
                }
                let seeds: Vec<usize> = c
                    .def
                    .nodes
                    .iter()
                    .enumerate()
                    .filter(|(_, n)| {
                        matches!(state(&n.key), Some(status::FAILED | status::STOPPED))
                    })
                    .map(|(i, _)| i)
                    .collect();
                if seeds.is_empty() {
                    return conflict(format!("run {run_id} has no failed or stopped node"));
                }
                (seeds, true)
            }
            Again::From(key) => {
                let i = index(key)?;
                if !ended {
                    return conflict(format!(
                        "run {run_id} is running: stop it before running it again from a node"
                    ));
                }
                (vec![i], true)
            }
            Again::Mark(key) => {
                let i = index(key)?;
                if !matches!(
                    state(key),
                    Some(status::FAILED | status::STOPPED | status::SKIPPED)
                ) {
                    return conflict(format!(
                        "node `{key}` is {}: only a failed, stopped or skipped node can be marked succeeded",
                        state(key).unwrap_or("not started")
                    ));
                }
                (vec![i], false)
            }
        };
        // everything downstream of the seeds
        let mut reset = vec![false; c.def.nodes.len()];
        let mut stack = seeds.clone();
        for &i in &seeds {
            reset[i] = with_seeds;
        }
        while let Some(i) = stack.pop() {
            for &(d, _) in &c.graph.down[i] {
                if !reset[d] {
                    reset[d] = true;
                    stack.push(d);
                }
            }
        }
        let keys: Vec<String> = c
            .def
            .nodes
            .iter()
            .zip(&reset)
            .filter(|(_, r)| **r)
            .map(|(n, _)| n.key.clone())
            .collect();
        if let Some(k) = keys.iter().find(|k| state(k) == Some(status::RUNNING)) {
            return conflict(format!(
                "node `{k}` is running: wait for it or stop the run first"
            ));
        }
        // an ended run running again is a run of its workflow like a new one: its concurrency
        // policy holds (a queue's waiting runs go first, so none jumps it)
        if ended {
            let w = workflow_of(tx, run.workflow_id).await?;
            if w.concurrency != "PARALLEL" {
                // (as a start: one decides at a time)
                tx.lock_workflow(w.id).await?;
            }
            if w.concurrency != "PARALLEL"
                && (tx.count_top_runs(w.id, status::RUNNING).await? > 0
                    || tx.count_top_runs(w.id, status::QUEUED).await? > 0)
            {
                return conflict(format!(
                    "a run of workflow {} is running or queued (concurrency {}): run {run_id} again once it ended",
                    w.id, w.concurrency
                ));
            }
        }
        if let Again::Mark(key) = &how {
            let a = next.get(key.as_str()).copied().unwrap_or(1);
            let msg = format!("marked succeeded by {who}");
            tx.insert_node(&node_row(
                run_id,
                key,
                a,
                a,
                status::SUCCEEDED,
                now,
                Some(&msg),
            ))
            .await?;
        }
        if !keys.is_empty() {
            tx.run(
                &nodes::Entity::update_many()
                    .col_expr(nodes::Column::Cleared, Expr::value(1))
                    .filter(nodes::Column::RunId.eq(run_id))
                    .filter(nodes::Column::NodeKey.is_in(keys))
                    .filter(nodes::Column::Cleared.eq(0)),
            )
            .await?;
        }
        tx.run(
            &runs::Entity::update_many()
                .col_expr(runs::Column::Status, Expr::value(status::RUNNING))
                .col_expr(runs::Column::EndTime, Expr::value(Option::<i64>::None))
                .col_expr(runs::Column::Message, Expr::value(Option::<String>::None))
                .filter(runs::Column::Id.eq(run_id)),
        )
        .await?;
        run.status = status::RUNNING.into();
        let mut ch = Changes::default();
        self.advance(tx, &run, now, &mut ch).await?;
        Ok(ch)
    }

    /// Stops run `run_id` (and its nested runs): running and due node runs are stopped, their
    /// pending run rows recorded as not dispatched. Answers the run rows that were dispatched
    /// and may still be running (to kill), or `None` when the run is not running.
    pub(crate) async fn stop(
        &self,
        db: &DatabaseConnection,
        run_id: i64,
        who: &str,
        now: i64,
    ) -> Result<Option<Vec<i64>>> {
        let msg = format!("stopped by {who}");
        self.transact(db, async move |tx| stop_in(tx, run_id, msg, now).await)
            .await
    }
}

/// [`Runs::stop`] in `tx`, every row it stops given `msg`.
async fn stop_in(tx: &Port<'_>, run_id: i64, msg: String, now: i64) -> Result<Option<Vec<i64>>> {
    if tx.lock_run(run_id).await?.is_none() {
        // a queued run is stopped before it started
        let sql = format!(
            "UPDATE xjob_workflow_run SET status = '{}', end_time = ?, message = ? \
             WHERE id = ? AND status = '{}'",
            status::STOPPED,
            status::QUEUED
        );
        let n = tx
            .execute(&sql, &[now.into(), msg.into(), run_id.into()])
            .await?;
        return Ok((n == 1).then(Vec::new));
    }
    let mut kill = Vec::new();
    let mut todo = vec![run_id];
    while let Some(id) = todo.pop() {
        if id != run_id && tx.lock_run(id).await?.is_none() {
            continue;
        }
        let running: Vec<nodes::Model> = tx
            .select(
                &nodes::Entity::find()
                    .filter(nodes::Column::RunId.eq(id))
                    .filter(nodes::Column::State.eq(status::RUNNING)),
            )
            .await?;
        todo.extend(running.iter().filter_map(|n| n.child_run));
        let node_ids: Vec<i64> = running.iter().map(|n| n.id).collect();
        tx.run(
            &nodes::Entity::update_many()
                .col_expr(nodes::Column::State, Expr::value(status::STOPPED))
                .col_expr(nodes::Column::EndTime, Expr::value(now))
                .col_expr(nodes::Column::Message, Expr::value(msg.clone()))
                .filter(nodes::Column::Id.is_in(node_ids.clone())),
        )
        .await?;
        let open: Vec<i64> = tx
            .select(
                &links::Entity::find()
                    .select_only()
                    .column(links::Column::LogId)
                    .filter(links::Column::NodeRunId.is_in(node_ids))
                    .filter(links::Column::Done.eq(0)),
            )
            .await?;
        tx.close_links(&open).await?;
        use entity::xxl_job_log as l;
        // rows not yet sent are never sent: recorded as not dispatched
        tx.run(
            &l::Entity::update_many()
                .col_expr(l::Column::FireState, Expr::value(fire_state::DISPATCHED))
                .col_expr(
                    l::Column::TriggerCode,
                    Expr::value(crate::model::wire::FAIL_CODE),
                )
                .col_expr(l::Column::TriggerMsg, Expr::value(msg.clone()))
                .col_expr(
                    l::Column::AlarmStatus,
                    Expr::value(AlarmStatus::NotNeeded.code()),
                )
                .filter(l::Column::Id.is_in(open.clone()))
                .filter(l::Column::FireState.eq(fire_state::PENDING)),
        )
        .await?;
        kill.extend(open);
        tx.run(
            &runs::Entity::update_many()
                .col_expr(runs::Column::Status, Expr::value(status::STOPPED))
                .col_expr(runs::Column::EndTime, Expr::value(now))
                .col_expr(runs::Column::Message, Expr::value(msg.clone()))
                .filter(runs::Column::Id.eq(id)),
        )
        .await?;
    }
    Ok(Some(kill))
}

fn node_row(
    run_id: i64,
    key: &str,
    attempt: i32,
    max_attempts: i32,
    state: &str,
    now: i64,
    msg: Option<&str>,
) -> nodes::Model {
    let final_ = state != status::RUNNING;
    nodes::Model {
        id: 0,
        run_id,
        node_key: key.to_string(),
        attempt,
        max_attempts,
        state: state.to_string(),
        decision: None,
        shards_total: 0,
        shards_done: 0,
        shards_failed: 0,
        child_run: None,
        start_time: now,
        end_time: final_.then_some(now),
        message: msg.map(cap),
        cleared: 0,
    }
}

/// Records attempt `attempt` of node `key` as failed before it ran (`msg` says why); answers the
/// node's outcome.
async fn fail_node(
    tx: &impl Tx,
    run_id: i64,
    key: &str,
    attempt: i32,
    now: i64,
    msg: &str,
) -> Result<Option<bool>> {
    let row = node_row(
        run_id,
        key,
        attempt,
        attempt,
        status::FAILED,
        now,
        Some(msg),
    );
    tx.insert_node(&row).await?;
    Ok(Some(false))
}

/// The alarm of a failed top-level run: the workflow, the nodes that failed, and the first
/// failed job node's run row (its job's alarm addresses); `None` for a nested run.
pub(crate) async fn failure_event(
    c: &impl ConnectionTrait,
    run_id: i64,
) -> Result<Option<crate::alarm::AlarmEvent>> {
    let run = get(c, run_id).await?;
    if run.parent_node_run.is_some() {
        return Ok(None);
    }
    let w = workflows::get(c, run.workflow_id).await?;
    let rows = node_runs(c, run_id).await?;
    let failed: Vec<&(nodes::Model, Vec<i64>)> = rows
        .iter()
        .filter(|(n, _)| n.cleared == 0 && n.state == status::FAILED)
        .collect();
    let mut names: Vec<String> = failed.iter().map(|(n, _)| n.node_key.clone()).collect();
    names.dedup();
    let mut event = crate::alarm::AlarmEvent {
        event: "workflow_failed",
        job_id: 0,
        job_desc: String::new(),
        job_group: run.job_group,
        group_title: groups::get(c, run.job_group)
            .await
            .map(|g| g.title)
            .unwrap_or_default(),
        log_id: 0,
        trigger_code: 0,
        trigger_msg: None,
        handle_code: 0,
        handle_msg: None,
        executor_address: None,
        alarm_email: None,
        alarm_webhook: None,
        workflow: Some(crate::alarm::WorkflowAlarm {
            workflow_id: w.id,
            name: w.name,
            run_id,
            failed_nodes: names,
        }),
    };
    if let Some(log_id) = failed.iter().find_map(|(_, l)| l.first().copied())
        && let Ok(log) = crate::store::logs::get(c, log_id).await
    {
        event.log_id = log.id;
        event.trigger_code = log.trigger_code;
        event.handle_code = log.handle_code;
        event.handle_msg = log.handle_msg.clone();
        event.executor_address = log.executor_address.clone();
        if let Ok(j) = jobs::get(c, log.job_id).await {
            event.job_id = j.id;
            event.job_desc = j.job_desc;
            event.alarm_email = j.alarm_email;
            event.alarm_webhook = j.alarm_webhook;
        }
    }
    Ok(Some(event))
}

/// A page of runs of `workflow_id` (None: of the workflows in `groups`, None: all), newest first.
pub(crate) async fn page(
    c: &impl ConnectionTrait,
    workflow_id: Option<i32>,
    groups: Option<&[i32]>,
    status: Option<&str>,
    offset: u64,
    limit: u64,
) -> Result<(u64, Vec<runs::Model>)> {
    let mut q = runs::Entity::find();
    if let Some(w) = workflow_id {
        q = q.filter(runs::Column::WorkflowId.eq(w));
    }
    if let Some(g) = groups {
        q = q.filter(runs::Column::JobGroup.is_in(g.iter().copied()));
    }
    if let Some(s) = status.filter(|s| !s.is_empty()) {
        q = q.filter(runs::Column::Status.eq(s));
    }
    let total = q.clone().count(c).await?;
    let rows = q
        .order_by_desc(runs::Column::Id)
        .offset(offset)
        .limit(limit)
        .all(c)
        .await?;
    Ok((total, rows))
}

/// One run.
pub(crate) async fn get(c: &impl ConnectionTrait, id: i64) -> Result<runs::Model> {
    runs::Entity::find_by_id(id)
        .one(c)
        .await?
        .ok_or(Error::NotFound {
            what: "workflow run",
            id,
        })
}

/// A run's node runs (every attempt) and each one's run rows.
pub(crate) async fn node_runs(
    c: &impl ConnectionTrait,
    run_id: i64,
) -> Result<Vec<(nodes::Model, Vec<i64>)>> {
    let rows = nodes::Entity::find()
        .filter(nodes::Column::RunId.eq(run_id))
        .order_by_asc(nodes::Column::Id)
        .all(c)
        .await?;
    let mut logs: HashMap<i64, Vec<i64>> = HashMap::new();
    for l in links::Entity::find()
        .filter(links::Column::RunId.eq(run_id))
        .order_by_asc(links::Column::Shard)
        .all(c)
        .await?
    {
        logs.entry(l.node_run_id).or_default().push(l.log_id);
    }
    Ok(rows
        .into_iter()
        .map(|n| {
            let l = logs.remove(&n.id).unwrap_or_default();
            (n, l)
        })
        .collect())
}

/// Deletes the workflow runs that ended before `before_ms` (epoch ms), with their node runs and
/// their links (the run rows themselves go with the run logs' retention); answers how many runs.
pub(crate) async fn delete_ended_before(c: &impl ConnectionTrait, before_ms: i64) -> Result<u64> {
    let mut total = 0;
    loop {
        let ids: Vec<i64> = runs::Entity::find()
            .select_only()
            .column(runs::Column::Id)
            .filter(runs::Column::Status.is_not_in([status::RUNNING, status::QUEUED]))
            .filter(runs::Column::EndTime.lt(before_ms))
            .limit(1000)
            .into_tuple()
            .all(c)
            .await?;
        if ids.is_empty() {
            return Ok(total);
        }
        links::Entity::delete_many()
            .filter(links::Column::RunId.is_in(ids.clone()))
            .exec(c)
            .await?;
        nodes::Entity::delete_many()
            .filter(nodes::Column::RunId.is_in(ids.clone()))
            .exec(c)
            .await?;
        total += runs::Entity::delete_many()
            .filter(runs::Column::Id.is_in(ids))
            .exec(c)
            .await?
            .rows_affected;
    }
}

/// Whether any run of workflow `id` is running or queued.
pub(crate) async fn any_running(c: &impl ConnectionTrait, id: i32) -> Result<bool> {
    Ok(runs::Entity::find()
        .filter(runs::Column::WorkflowId.eq(id))
        .filter(runs::Column::Status.is_in([status::RUNNING, status::QUEUED]))
        .count(c)
        .await?
        > 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A pass of results is split into lanes only on a database server, and only when it is
    /// large: a small one pays one transaction's fixed work, not [`APPLY_LANES`].
    #[tokio::test]
    async fn only_a_large_pass_on_a_database_server_is_applied_in_lanes() {
        let runs = Runs {
            compiled: Arc::default(),
            file: None,
            ids: Arc::default(),
            plans: Arc::default(),
        };
        for db in crate::store::tests::every_backend().await {
            let b = db.get_database_backend();
            for small in [0, 1, 200, LANES_FROM - 1] {
                assert_eq!(runs.lanes(&db, small), 1, "{b:?}: {small} results");
            }
            let lanes = if b == sea_orm::DbBackend::Sqlite {
                1
            } else {
                APPLY_LANES
            };
            for large in [LANES_FROM, 1_000] {
                assert_eq!(runs.lanes(&db, large), lanes, "{b:?}: {large} results");
            }
            db.close().await.unwrap();
        }
    }

    /// Params become the context: an object as is, anything else under `params`; too large is
    /// refused.
    #[test]
    fn contexts_from_params() {
        assert_eq!(
            initial_context(Some(r#"{"a":1}"#)).unwrap(),
            serde_json::json!({"a": 1})
        );
        assert_eq!(
            initial_context(Some("x=1")).unwrap(),
            serde_json::json!({"params": "x=1"})
        );
        assert_eq!(
            initial_context(Some("[1]")).unwrap(),
            serde_json::json!({"params": [1]})
        );
        assert_eq!(initial_context(None).unwrap(), serde_json::json!({}));
        let big = format!("\"{}\"", "x".repeat(MAX_CONTEXT));
        assert!(matches!(
            initial_context(Some(&big)),
            Err(Error::Invalid {
                field: "params",
                ..
            })
        ));
    }

    /// `${path}` takes the context's value (a null renders empty); a key the context does not
    /// have is refused, naming it; an unclosed one stays; the result is bounded.
    #[test]
    fn params_render_context_values() {
        let ctx = serde_json::json!({"day": "2026-11-26", "n": 3, "o": {"k": [true]}, "z": null});
        assert_eq!(
            render_param("d=${day} n=${ n } k=${o.k.0} z=${z}", &ctx).unwrap(),
            "d=2026-11-26 n=3 k=true z="
        );
        let e = render_param("m=${missing}", &ctx).unwrap_err();
        assert!(e.contains("`${missing}`"), "{e}");
        assert!(
            render_param("${o.k.1}", &ctx).is_err(),
            "past an array's end"
        );
        assert_eq!(render_param("a ${b", &ctx).unwrap(), "a ${b");
        assert_eq!(render_param("plain", &ctx).unwrap(), "plain");
        // a short param repeating a large value is refused while it renders
        let big = serde_json::json!({ "a": "x".repeat(60_000) });
        assert!(
            render_param(&"${a}".repeat(500), &big)
                .unwrap_err()
                .contains("longer")
        );
        assert!(render_param("${a}", &serde_json::json!({ "a": "é".repeat(16_000) })).is_ok());
        assert!(
            render_param("${a}!", &serde_json::json!({ "a": "é".repeat(16_000) })).is_err(),
            "one character past the limit"
        );
    }
}
