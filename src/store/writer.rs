//! The hot path's writer of run rows: trigger outcomes and run results, in batches, by one
//! writer, and nobody waits for a write unless it needs the answer.
//!
//! Callers queue [`TriggerRecord`]s (the lanes, once the executor was called) and result batches
//! (the completion actor) on one bounded channel; when it is full they wait (back-pressure), so
//! memory stays bounded whatever the rate. The writer takes everything queued (up to
//! [`MAX_BATCH`] items) and writes it as one transaction. A run whose outcome and result are
//! both in the batch gets one row update carrying both. Successful runs whose job has child
//! jobs come back as one [`RunsFinished`] message per batch.
//!
//! Two backends behind the same queue:
//! - **SQLite file** (one node by construction): a dedicated OS thread owns a synchronous
//!   connection (rusqlite over the same `libsqlite3-sys` as sqlx) and writes each batch with
//!   cached prepared single-row statements, O(rows), with no thread hop per statement. It
//!   pairs each run's outcome with its result in memory so that one update writes both: a
//!   dispatched outcome waits up to [`OUTCOME_HOLD`] for its result, and a result of a run
//!   announced by [`LogWriter::dispatching`] waits up to [`RESULT_HOLD`] for its outcome
//!   (measured at 5,000 remote fires/s: the writer's CPU per fire 18.5 → 15 µs). At
//!   start it takes an exclusive lock on the database file, so a second node on the same file
//!   refuses to start ([`crate::Error::DatabaseInUse`]).
//! - **Pool** (PostgreSQL, MySQL, in-memory SQLite): a task writing each batch through sea-orm
//!   with the batched statements of [`super::log_batches`] (outcome and result as two updates),
//!   one transaction per batch.
//!
//! Either backend retries a failed batch a few times before giving up on it (logged as an
//! error; a waiting `/api/callback` then answers a failure, so the executor sends it again).
//!
//! Every queued item holds one unit of the engine's [`Activity`] until it is written, so a
//! graceful stop (and a test on paused time) waits for the writes it has handed over.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use actix::prelude::*;
use parking_lot::Mutex;
use sea_orm::{ConnectionTrait, DatabaseConnection, DbBackend, Statement, TransactionTrait};
use tokio::sync::{mpsc, oneshot};

use super::log_batches::{self, HandleResult};
use super::logs::{HANDLE_MSG_MAX, TriggerRecord, cap_msg};
use crate::activity::{Activity, ActivityGuard};
use crate::error::{Error, Result};
use crate::model::wire::SUCCESS_CODE;

/// Most items (outcomes + results) one batch writes.
pub(crate) const MAX_BATCH: usize = 4096;
/// Items that may wait for the writer; beyond that, callers wait.
pub(crate) const QUEUE: usize = 16_384;
/// Attempts at one batch before its items are given up (logged as errors).
const ATTEMPTS: u32 = 5;
/// How long the SQLite writer keeps a dispatched run's outcome waiting for the run's result, so
/// that one row update writes both (a remote executor's callback comes within milliseconds). A
/// run still without a result then has its outcome written alone. Short: a run still running
/// that was dispatched less than this before a crash is dispatched again after the restart.
pub(crate) const OUTCOME_HOLD: Duration = Duration::from_secs(1);
/// How long the SQLite writer keeps a result waiting for the outcome of its run while the run's
/// executor calls are still being made (a batch's outcomes come when its last call answered).
/// A result is not acknowledged (`/api/callback` does not answer) before it is written.
pub(crate) const RESULT_HOLD: Duration = Duration::from_secs(1);
/// Most outcomes the SQLite writer holds at once; beyond that they are written at once.
const MAX_HELD: usize = 16_384;
/// How long an exclusive lock on the SQLite file is waited for at start (a node of this
/// process that is stopping may still hold it for a moment).
const LOCK_WAIT: Duration = Duration::from_secs(3);

/// A successful run whose job has child jobs: what the completion actor needs to trigger them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FinishedRun {
    /// Log id.
    pub id: i64,
    /// The job.
    pub job_id: i32,
    /// Parents above this run.
    pub chain_depth: i16,
    /// The job's `child_jobid` list (not empty).
    pub children: String,
}

/// Successful runs with child jobs, one message per written batch.
#[derive(Message, Debug)]
#[rtype(result = "()")]
pub struct RunsFinished(pub Vec<FinishedRun>);

/// Where [`RunsFinished`] goes (the completion actor's address, in the engine).
pub(crate) type FinishedSink = Box<dyn Fn(RunsFinished) + Send + 'static>;

/// Work run on the SQLite writer's own connection (the single-node scan pass).
type Exec = Box<dyn FnOnce(&mut rusqlite::Connection) + Send + Sync>;

enum Op {
    Outcomes(Vec<TriggerRecord>),
    /// Runs whose executor calls are being made: their outcomes follow.
    Dispatching(Vec<i64>),
    Exec(Exec),
    /// A console change's audit entry: written with the batch, nobody waits for it.
    Audit(Box<crate::store::audit::Entry>),
    /// Write everything queued and held, then answer.
    Flush(oneshot::Sender<bool>),
    Results {
        items: Vec<HandleResult>,
        at_ms: i64,
        ack: Option<Arc<Ack>>,
    },
}

/// Answers a caller waiting for its results once the last of them is written (`false` if any
/// write was given up): the SQLite writer may hold some of a request's results for a moment.
struct Ack {
    tx: Mutex<Option<oneshot::Sender<bool>>>,
    ok: std::sync::atomic::AtomicBool,
}

impl Ack {
    fn new(tx: oneshot::Sender<bool>) -> Arc<Ack> {
        Arc::new(Ack {
            tx: Mutex::new(Some(tx)),
            ok: std::sync::atomic::AtomicBool::new(true),
        })
    }

    fn failed(&self) {
        self.ok.store(false, Ordering::Release);
    }
}

impl Drop for Ack {
    fn drop(&mut self) {
        if let Some(tx) = self.tx.get_mut().take() {
            // dropped while a batch panics: those results were not written
            let ok = self.ok.load(Ordering::Acquire) && !std::thread::panicking();
            let _ = tx.send(ok);
        }
    }
}

impl Op {
    fn len(&self) -> usize {
        match self {
            Op::Exec(_) | Op::Flush(_) | Op::Audit(_) => 1,
            Op::Dispatching(ids) => ids.len().max(1),
            Op::Outcomes(records) => records.len().max(1),
            Op::Results { items, .. } => items.len().max(1),
        }
    }
}

struct Queued {
    op: Op,
    _activity: ActivityGuard,
}

/// Where the writer writes: decided once at start.
pub enum Target {
    /// A SQLite file, locked for this node.
    SqliteFile {
        /// The database file.
        path: String,
        /// The open, exclusively locked file (the lock lives as long as this handle).
        lock: std::fs::File,
        /// Give the writer thread and the starting (dispatch) thread separate CPUs.
        separate_cpus: bool,
    },
    /// Through the sea-orm pool.
    Pool(DatabaseConnection),
}

impl Target {
    /// Inspects `db`: a SQLite file gets the dedicated writer (and is locked for this node:
    /// [`Error::DatabaseInUse`] when another node holds it); anything else uses the pool.
    pub async fn of(db: &DatabaseConnection) -> Result<Target> {
        if db.get_database_backend() != DbBackend::Sqlite {
            return Ok(Target::Pool(db.clone()));
        }
        let row = db
            .query_one_raw(Statement::from_string(
                DbBackend::Sqlite,
                "SELECT file FROM pragma_database_list WHERE name = 'main'",
            ))
            .await?;
        let path: String = match row {
            Some(r) => r.try_get("", "file").unwrap_or_default(),
            None => String::new(),
        };
        if path.is_empty() {
            return Ok(Target::Pool(db.clone()));
        }
        let lock = lock_file(&path).await?;
        Ok(Target::SqliteFile {
            path,
            lock,
            separate_cpus: false,
        })
    }

    /// Gives the SQLite writer thread one CPU and the starting thread the others (see
    /// `database.separate_writer_cpu`); no effect on other targets.
    pub fn separate_cpus(mut self, on: bool) -> Self {
        if let Target::SqliteFile { separate_cpus, .. } = &mut self {
            *separate_cpus = on;
        }
        self
    }

    /// Whether this database serves exactly one node (no claims needed at dispatch).
    pub fn single_node(&self) -> bool {
        matches!(self, Target::SqliteFile { .. })
    }
}

async fn lock_file(path: &str) -> Result<std::fs::File> {
    let file = std::fs::OpenOptions::new().read(true).open(path)?;
    let deadline = std::time::Instant::now() + LOCK_WAIT;
    loop {
        match file.try_lock() {
            Ok(()) => return Ok(file),
            Err(std::fs::TryLockError::WouldBlock) if std::time::Instant::now() < deadline => {
                tokio::task::spawn_blocking(|| std::thread::sleep(Duration::from_millis(50)))
                    .await
                    .map_err(|_| Error::Stopped("lock wait"))?;
            }
            Err(std::fs::TryLockError::WouldBlock) => {
                return Err(Error::DatabaseInUse {
                    path: path.to_string(),
                });
            }
            Err(std::fs::TryLockError::Error(e)) => return Err(e.into()),
        }
    }
}

/// A handle to the writer (cheap to clone).
#[derive(Clone)]
pub struct LogWriter {
    tx: mpsc::Sender<Queued>,
    activity: Activity,
    single_node: bool,
    lock: Arc<Mutex<Option<std::fs::File>>>,
    /// Outcomes the SQLite writer holds for their results.
    held: Arc<AtomicUsize>,
}

impl LogWriter {
    /// Starts the writer for `target`; finished runs with child jobs go to `finished`.
    pub fn start(target: Target, activity: Activity, finished: FinishedSink) -> Self {
        let (tx, rx) = mpsc::channel(QUEUE);
        let single_node = target.single_node();
        let held = Arc::new(AtomicUsize::new(0));
        let lock = match target {
            Target::SqliteFile {
                path,
                lock,
                separate_cpus,
            } => {
                // the starting thread is the one that dispatches
                let writer_cpu = if separate_cpus {
                    sqlite::separate_cpus()
                } else {
                    None
                };
                let (activity, held) = (activity.clone(), held.clone());
                std::thread::Builder::new()
                    .name("xjob-sqlite-writer".into())
                    .spawn(move || sqlite::run(&path, rx, finished, writer_cpu, activity, held))
                    .map_err(|e| tracing::error!(error = %e, "cannot start the SQLite writer"))
                    .ok();
                Some(lock)
            }
            Target::Pool(db) => {
                tokio::spawn(pool::run(db, rx, finished));
                None
            }
        };
        LogWriter {
            tx,
            activity,
            single_node,
            lock: Arc::new(Mutex::new(lock)),
            held,
        }
    }

    /// Whether the database serves only this node (a locked SQLite file).
    pub fn single_node(&self) -> bool {
        self.single_node
    }

    async fn queue(&self, op: Op) -> Result<()> {
        let q = Queued {
            op,
            _activity: self.activity.enter(),
        };
        self.tx
            .send(q)
            .await
            .map_err(|_| Error::Stopped("run-row writer"))
    }

    /// Queues a trigger outcome (waits only while the queue is full).
    pub async fn outcome(&self, record: TriggerRecord) -> Result<()> {
        self.queue(Op::Outcomes(vec![record])).await
    }

    /// Tells the writer that these runs' executor calls are being made, before the calls: a
    /// result that comes before its run's outcome is then held for it, so one row update
    /// writes both. Never waits (a full queue skips the notice; nothing depends on it).
    pub fn dispatching(&self, log_ids: Vec<i64>) {
        if !self.single_node || log_ids.is_empty() {
            return;
        }
        let _ = self.tx.try_send(Queued {
            op: Op::Dispatching(log_ids),
            _activity: self.activity.enter(),
        });
    }

    /// Queues several trigger outcomes as one item of the queue (waits only while it is full).
    pub async fn outcomes(&self, records: Vec<TriggerRecord>) -> Result<()> {
        if records.is_empty() {
            return Ok(());
        }
        self.queue(Op::Outcomes(records)).await
    }

    /// Queues results received at `at_ms` without waiting for their write; `Err(items)` when
    /// the queue is full (the caller waits with [`LogWriter::results`]).
    pub fn try_results(
        &self,
        items: Vec<HandleResult>,
        at_ms: i64,
    ) -> std::result::Result<(), Vec<HandleResult>> {
        let q = Queued {
            op: Op::Results {
                items,
                at_ms,
                ack: None,
            },
            _activity: self.activity.enter(),
        };
        self.tx.try_send(q).map_err(|e| match e.into_inner().op {
            Op::Results { items, .. } => items,
            _ => Vec::new(),
        })
    }

    /// Queues results received at `at_ms` (waiting while the queue is full), without waiting
    /// for their write.
    pub async fn results(&self, items: Vec<HandleResult>, at_ms: i64) -> Result<()> {
        self.queue(Op::Results {
            items,
            at_ms,
            ack: None,
        })
        .await
    }

    /// Queues results and answers once they are written (`false`: the write failed).
    pub async fn results_written(&self, items: Vec<HandleResult>, at_ms: i64) -> Result<bool> {
        let (ack, done) = oneshot::channel();
        self.queue(Op::Results {
            items,
            at_ms,
            ack: Some(Ack::new(ack)),
        })
        .await?;
        done.await.map_err(|_| Error::Stopped("run-row writer"))
    }

    /// Runs `f` on the SQLite writer's connection, between batches (single-node SQLite only;
    /// elsewhere it fails with [`Error::Stopped`]).
    pub async fn exec<R: Send + 'static>(
        &self,
        f: impl FnOnce(&mut rusqlite::Connection) -> R + Send + Sync + 'static,
    ) -> Result<R> {
        let (tx, rx) = oneshot::channel();
        self.queue(Op::Exec(Box::new(move |c| {
            let _ = tx.send(f(c));
        })))
        .await?;
        rx.await.map_err(|_| Error::Stopped("run-row writer"))
    }

    /// Queues an audit entry, written with the next batch in its transaction (one commit for
    /// many console changes: an insert of its own per change cost a third of the job-creation
    /// rate, BENCHMARKS.md session 10). [`LogWriter::flush`] makes it visible.
    pub(crate) async fn audit(&self, entry: crate::store::audit::Entry) -> Result<()> {
        self.queue(Op::Audit(Box::new(entry))).await
    }

    /// Answers once everything queued before this call is written, outcomes the writer held
    /// for their results included.
    pub async fn flush(&self) -> Result<()> {
        let (ack, done) = oneshot::channel();
        self.queue(Op::Flush(ack)).await?;
        done.await
            .map(|_| ())
            .map_err(|_| Error::Stopped("run-row writer"))
    }

    /// Makes the outcomes the writer holds for their results visible to a read that needs a
    /// run's trigger outcome (a kill, a run's log, the console's run pages): a flush when any
    /// is held, nothing otherwise.
    pub async fn visible(&self) -> Result<()> {
        if self.held.load(Ordering::Acquire) == 0 {
            return Ok(());
        }
        self.flush().await
    }

    /// Gives up this node's lock on its SQLite file (engine stop), so another node may start.
    pub fn release_lock(&self) {
        if let Some(f) = self.lock.lock().take() {
            let _ = f.unlock();
        }
    }
}

/// The first result per log id in a batch, with when it was received.
type FirstResults<'a> = HashMap<i64, (&'a HandleResult, i64)>;

/// Splits a batch: outcomes in order, and the first result per log id.
fn split(ops: &[Queued]) -> (Vec<&TriggerRecord>, Vec<i64>, FirstResults<'_>) {
    let mut outcomes = Vec::new();
    let mut result_order = Vec::new();
    let mut results: FirstResults<'_> = HashMap::new();
    for q in ops {
        match &q.op {
            Op::Outcomes(records) => outcomes.extend(records),
            Op::Exec(_) | Op::Flush(_) | Op::Dispatching(_) | Op::Audit(_) => {}
            Op::Results { items, at_ms, .. } => {
                for i in items {
                    if let std::collections::hash_map::Entry::Vacant(v) = results.entry(i.log_id) {
                        v.insert((i, *at_ms));
                        result_order.push(i.log_id);
                    }
                }
            }
        }
    }
    (outcomes, result_order, results)
}

/// The audit entries of a batch.
fn audits(ops: &[Queued]) -> Vec<&crate::store::audit::Entry> {
    ops.iter()
        .filter_map(|q| match &q.op {
            Op::Audit(e) => Some(&**e),
            _ => None,
        })
        .collect()
}

/// Acknowledges every waiting caller of a written (or given-up) batch.
fn acknowledge(ops: Vec<Queued>, ok: bool) {
    for q in ops {
        match q.op {
            Op::Results { ack: Some(a), .. } if !ok => a.failed(),
            Op::Flush(a) => {
                let _ = a.send(ok);
            }
            _ => {}
        }
    }
}

/// Takes what is queued behind `first`, up to [`MAX_BATCH`] items.
fn fill(first: Queued, rx: &mut mpsc::Receiver<Queued>) -> Vec<Queued> {
    let mut n = first.op.len();
    let mut ops = vec![first];
    while n < MAX_BATCH {
        match rx.try_recv() {
            Ok(q) => {
                n += q.op.len();
                ops.push(q);
            }
            Err(_) => break,
        }
    }
    ops
}

/// The SQLite-file backend: one thread, one synchronous connection.
mod sqlite {
    use super::*;
    use crate::store::sqlite_sync::naive_text;
    use rusqlite::{Connection, OptionalExtension, params};
    use std::time::Instant;

    /// The writer's three updates, built once from the named stored values.
    struct Statements {
        /// Outcome and result in one update (a run without a result yet).
        combined: String,
        /// The result alone (a run without a result yet).
        result: String,
        /// The outcome alone.
        outcome: String,
    }

    static STATEMENTS: std::sync::LazyLock<Statements> = std::sync::LazyLock::new(|| {
        use crate::model::{AlarmStatus, fire_state};
        let (unchecked, not_needed) =
            (AlarmStatus::Unchecked.code(), AlarmStatus::NotNeeded.code());
        // The result columns (parameters ?11–?14; ?1 is the log id). A message is appended to
        // one the row already has (after `<br>`), capped at `HANDLE_MSG_MAX` characters; a
        // success moves `alarm_status` from unchecked to not needed and never moves an alarm
        // state the fail monitor already set.
        let result_set = format!(
            "handle_code = ?11, handle_time = ?12, \
             handle_msg = CASE WHEN ?13 IS NULL THEN handle_msg \
                               WHEN handle_msg IS NULL OR handle_msg = '' THEN ?13 \
                               ELSE substr(handle_msg || '<br>' || ?13, 1, ?14) END, \
             alarm_status = CASE WHEN alarm_status = {unchecked} AND ?11 = {SUCCESS_CODE} \
                                 THEN {not_needed} ELSE alarm_status END"
        );
        // The trigger-outcome columns (parameters ?2–?10).
        let outcome_set = format!(
            "trigger_time = ?2, executor_address = ?3, executor_handler = ?4, \
             executor_param = ?5, executor_sharding_param = ?6, executor_fail_retry_count = ?7, \
             trigger_code = ?8, trigger_msg = ?9, trigger_type = ?10, \
             fire_state = {}",
            fire_state::DISPATCHED
        );
        Statements {
            combined: format!(
                "UPDATE OR IGNORE xxl_job_log SET {outcome_set}, {result_set} \
                 WHERE id = ?1 AND handle_code = 0"
            ),
            result: format!(
                "UPDATE OR IGNORE xxl_job_log SET {result_set} WHERE id = ?1 AND handle_code = 0"
            ),
            outcome: format!("UPDATE OR IGNORE xxl_job_log SET {outcome_set} WHERE id = ?1"),
        }
    });

    fn open(path: &str) -> rusqlite::Result<Connection> {
        let conn = Connection::open(path)?;
        conn.busy_timeout(Duration::from_secs(10))?;
        conn.pragma_update(None, "journal_mode", "WAL")?;
        conn.pragma_update(None, "synchronous", "NORMAL")?;
        // statement journals (every UPSERT / RETURNING statement keeps one) in memory, not in
        // a temporary file: they were a third of the writer's time as pwrite calls
        conn.pragma_update(None, "temp_store", "MEMORY")?;
        // the log table's indexes are walked by every write: 4 MiB of page cache (default 2).
        // With outcomes and results paired (one update per run) 16 MiB bought nothing at
        // 10,000 fires/s (13.1 vs 12.9 µs, p99 24 ms both) and cost 10–15 MB of RSS.
        conn.pragma_update(None, "cache_size", -4_096)?;
        conn.set_prepared_statement_cache_capacity(16);
        Ok(conn)
    }

    /// Entries waiting for a partner (an outcome for its result or the reverse), by log id,
    /// each until it is due (see [`OUTCOME_HOLD`], [`RESULT_HOLD`]).
    struct Waiting<T> {
        by_id: HashMap<i64, T>,
        /// Log ids by when they stop waiting, oldest first (ids taken since are skipped).
        due: std::collections::VecDeque<(Instant, i64)>,
    }

    impl<T> Default for Waiting<T> {
        fn default() -> Self {
            Waiting {
                by_id: HashMap::new(),
                due: std::collections::VecDeque::new(),
            }
        }
    }

    impl<T> Waiting<T> {
        fn len(&self) -> usize {
            self.by_id.len()
        }

        fn contains(&self, id: &i64) -> bool {
            self.by_id.contains_key(id)
        }

        fn insert(&mut self, id: i64, value: T, due: Instant) {
            if self.by_id.insert(id, value).is_none() {
                self.due.push_back((due, id));
            }
        }

        fn remove(&mut self, id: &i64) -> Option<T> {
            self.by_id.remove(id)
        }

        /// When the oldest entry is due (`None`: nothing waits).
        fn deadline(&mut self) -> Option<Instant> {
            while let Some(&(at, id)) = self.due.front() {
                if self.by_id.contains_key(&id) {
                    return Some(at);
                }
                self.due.pop_front();
            }
            None
        }

        /// Takes the entries due by `now`, or every one (`all`), into `out`.
        fn take_due(&mut self, now: Instant, all: bool, out: &mut Vec<T>) {
            if all {
                self.due.clear();
                out.extend(self.by_id.drain().map(|(_, v)| v));
                return;
            }
            while let Some(&(at, id)) = self.due.front() {
                if at > now {
                    break;
                }
                self.due.pop_front();
                out.extend(self.by_id.remove(&id));
            }
        }
    }

    /// A result held for its run's outcome.
    struct HeldResult {
        item: HandleResult,
        at_ms: i64,
        _ack: Option<Arc<Ack>>,
        _activity: ActivityGuard,
    }

    /// What the writer holds between batches.
    #[derive(Default)]
    struct Held {
        /// Dispatched runs' outcomes waiting for their results.
        outcomes: Waiting<(TriggerRecord, ActivityGuard)>,
        /// Results waiting for the outcome of a run being dispatched.
        results: Waiting<HeldResult>,
        /// Runs being dispatched whose outcome has not come yet.
        dispatching: Waiting<()>,
        /// Runs whose result was written before their outcome came: their outcome is written
        /// at once when it comes.
        answered: Waiting<()>,
    }

    impl Held {
        fn len(&self) -> usize {
            self.outcomes.len() + self.results.len()
        }

        fn deadline(&mut self) -> Option<Instant> {
            [
                self.outcomes.deadline(),
                self.results.deadline(),
                self.dispatching.deadline(),
                self.answered.deadline(),
            ]
            .into_iter()
            .flatten()
            .min()
        }
    }

    pub(super) fn run(
        path: &str,
        mut rx: mpsc::Receiver<Queued>,
        sink: FinishedSink,
        writer_cpu: Option<usize>,
        activity: Activity,
        held_count: Arc<AtomicUsize>,
    ) {
        if let Some(cpu) = writer_cpu {
            pin(cpu);
        }
        let mut conn = match open(path) {
            Ok(c) => c,
            Err(e) => {
                tracing::error!(path, error = %e, "SQLite writer cannot open the database");
                return;
            }
        };
        // a timer for waiting on the queue until the oldest held outcome is due
        let timer = match tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
        {
            Ok(rt) => rt,
            Err(e) => {
                tracing::error!(error = %e, "SQLite writer cannot start its timer");
                return;
            }
        };
        let mut held = Held::default();
        loop {
            let (ops, closed) = match held.deadline() {
                None => match rx.blocking_recv() {
                    Some(first) => (fill(first, &mut rx), false),
                    None => break,
                },
                Some(at) => {
                    let at = tokio::time::Instant::from_std(at);
                    let next =
                        timer.block_on(async { tokio::time::timeout_at(at, rx.recv()).await });
                    match next {
                        Ok(Some(first)) => (fill(first, &mut rx), false),
                        Ok(None) => (Vec::new(), true),
                        Err(_) => (Vec::new(), false),
                    }
                }
            };
            let flush = closed || ops.iter().any(|q| matches!(q.op, Op::Flush(_)));
            // a bug in one batch must not stop every later write: its transaction rolls back
            // (dropped while unwinding), its waiters hear of the failure (their results are
            // re-sent by executors), and the writer goes on with the next batch
            let run = std::panic::AssertUnwindSafe(|| {
                batch(&mut conn, ops, &mut held, flush, &activity, &sink)
            });
            if std::panic::catch_unwind(run).is_err() {
                tracing::error!(
                    "a run-row batch panicked; its writes are lost, the writer goes on"
                );
            }
            held_count.store(held.len(), Ordering::Release);
            if closed {
                break;
            }
        }
    }

    /// Writes one batch, with the held entries it completes or that are due, and holds what
    /// waits for a partner (unless `flush`): a dispatched outcome without its result, a result
    /// of a run being dispatched without its outcome.
    fn batch(
        conn: &mut Connection,
        ops: Vec<Queued>,
        held: &mut Held,
        flush: bool,
        activity: &Activity,
        sink: &FinishedSink,
    ) {
        let now = Instant::now();
        let due = now + OUTCOME_HOLD;
        let results_due = now + RESULT_HOLD;
        for q in &ops {
            if let Op::Dispatching(ids) = &q.op {
                for &id in ids {
                    held.dispatching.insert(id, (), results_due);
                }
            }
        }
        let mut expired = Vec::new();
        held.dispatching.take_due(now, flush, &mut expired);
        held.answered.take_due(now, flush, &mut expired);
        let mut answered_alone = Vec::new();
        let mut hold_outcomes = std::collections::HashSet::new();
        let mut hold_results = std::collections::HashSet::new();
        let mut taken_outcomes = Vec::new();
        let mut taken_results = Vec::new();
        let outcome = {
            let (batch_outcomes, batch_order, batch_results) = split(&ops);
            // the results to write: held ones first (they came earlier), then the batch's
            for r in &batch_outcomes {
                held.dispatching.remove(&r.log_id);
                taken_results.extend(held.results.remove(&r.log_id));
            }
            held.results.take_due(now, flush, &mut taken_results);
            let mut results: FirstResults<'_> = HashMap::new();
            let mut result_order = Vec::new();
            for h in &taken_results {
                if results.insert(h.item.log_id, (&h.item, h.at_ms)).is_none() {
                    result_order.push(h.item.log_id);
                }
            }
            for id in batch_order {
                if results.contains_key(&id) || held.results.contains(&id) {
                    // the run's first result is already here or held: it wins
                    continue;
                }
                let may_wait = !flush && held.len() + hold_results.len() < MAX_HELD;
                if may_wait && held.dispatching.contains(&id) {
                    hold_results.insert(id);
                    continue;
                }
                results.insert(id, batch_results[&id]);
                result_order.push(id);
            }
            // the outcomes to write: held ones whose result came or that are due, then the
            // batch's that do not wait for their result
            for id in &result_order {
                taken_outcomes.extend(held.outcomes.remove(id));
            }
            held.outcomes.take_due(now, flush, &mut taken_outcomes);
            let mut outcomes: Vec<&TriggerRecord> = taken_outcomes.iter().map(|(r, _)| r).collect();
            for r in batch_outcomes {
                let wait = !flush
                    && r.trigger_code == SUCCESS_CODE
                    && !results.contains_key(&r.log_id)
                    && held.answered.remove(&r.log_id).is_none()
                    && held.len() + hold_outcomes.len() + hold_results.len() < MAX_HELD;
                if wait {
                    hold_outcomes.insert(r.log_id);
                } else {
                    outcomes.push(r);
                }
            }
            let with_outcome: std::collections::HashSet<i64> =
                outcomes.iter().map(|r| r.log_id).collect();
            answered_alone.extend(
                result_order
                    .iter()
                    .filter(|id| !with_outcome.contains(id))
                    .copied(),
            );
            let audits = audits(&ops);
            let mut attempt = 0;
            loop {
                attempt += 1;
                if outcomes.is_empty() && result_order.is_empty() && audits.is_empty() {
                    break Some(Vec::new());
                }
                match write(conn, &outcomes, &result_order, &results, &audits) {
                    Ok(f) => break Some(f),
                    Err(e) if attempt < ATTEMPTS => {
                        tracing::warn!(attempt, error = %e, "run-row batch failed; retrying");
                        std::thread::sleep(Duration::from_millis(100 << attempt));
                    }
                    Err(e) => {
                        tracing::error!(items = ops.len(), error = %e, "run-row batch given up");
                        break None;
                    }
                }
            }
        };
        let ok = outcome.is_some();
        if let Some(f) = outcome.filter(|f| !f.is_empty()) {
            sink(RunsFinished(f));
        }
        if !ok {
            for h in &taken_results {
                if let Some(a) = &h._ack {
                    a.failed();
                }
            }
        }
        drop(taken_results);
        drop(taken_outcomes);
        for id in answered_alone {
            held.answered.insert(id, (), results_due);
        }
        let mut rest = Vec::with_capacity(ops.len());
        for q in ops {
            match q.op {
                Op::Exec(f) => f(conn),
                Op::Outcomes(records) if !hold_outcomes.is_empty() => {
                    for r in records {
                        if hold_outcomes.contains(&r.log_id) {
                            held.outcomes.insert(r.log_id, (r, activity.enter()), due);
                        }
                    }
                }
                Op::Results { items, at_ms, ack } if !hold_results.is_empty() => {
                    for item in items {
                        // the first result per run waits; a later one would lose anyway
                        if hold_results.remove(&item.log_id) {
                            let h = HeldResult {
                                item,
                                at_ms,
                                _ack: ack.clone(),
                                _activity: activity.enter(),
                            };
                            held.results.insert(h.item.log_id, h, results_due);
                        }
                    }
                    if !ok && let Some(a) = &ack {
                        a.failed();
                    }
                }
                op => rest.push(Queued {
                    op,
                    _activity: q._activity,
                }),
            }
        }
        acknowledge(rest, ok);
    }

    fn bind_outcome(
        s: &mut rusqlite::CachedStatement<'_>,
        r: &TriggerRecord,
    ) -> rusqlite::Result<()> {
        s.raw_bind_parameter(1, r.log_id)?;
        s.raw_bind_parameter(2, naive_text(r.trigger_ms))?;
        s.raw_bind_parameter(3, r.executor_address.as_deref())?;
        s.raw_bind_parameter(4, r.executor_handler.as_deref())?;
        s.raw_bind_parameter(5, r.executor_param.as_deref())?;
        s.raw_bind_parameter(6, r.executor_sharding_param.as_deref())?;
        s.raw_bind_parameter(7, r.executor_fail_retry_count)?;
        s.raw_bind_parameter(8, r.trigger_code)?;
        s.raw_bind_parameter(9, r.trigger_msg.as_str())?;
        s.raw_bind_parameter(10, r.trigger_type.as_str())
    }

    fn bind_result(
        s: &mut rusqlite::CachedStatement<'_>,
        item: &HandleResult,
        at_ms: i64,
    ) -> rusqlite::Result<()> {
        s.raw_bind_parameter(1, item.log_id)?;
        s.raw_bind_parameter(11, item.code)?;
        s.raw_bind_parameter(12, naive_text(at_ms))?;
        s.raw_bind_parameter(13, item.msg.clone().map(cap_msg))?;
        s.raw_bind_parameter(14, HANDLE_MSG_MAX as i64)
    }

    /// The run of an updated row (its job and chain depth), read back by row id: cheaper than a
    /// `RETURNING` clause, which builds an ephemeral table per statement.
    fn run_of(tx: &rusqlite::Transaction<'_>, id: i64) -> rusqlite::Result<Option<(i32, i16)>> {
        tx.prepare_cached("SELECT job_id, chain_depth FROM xxl_job_log WHERE id = ?1")?
            .query_row(params![id], |r| Ok((r.get(0)?, r.get(1)?)))
            .optional()
    }

    /// On a machine with several CPUs: keeps the calling (dispatch) thread off one CPU and
    /// answers that CPU, for the writer thread alone. The writer is woken by every batch the
    /// dispatch queues and wakes the dispatch in turn; left free, Linux moves the two onto one
    /// CPU (wake-affine) while another idles, and the dispatch is preempted for a scheduler
    /// tick (4 ms) in the middle of a second's burst of fires. Measured on 2 CPUs: 1,000
    /// fires/s p99 8 → 5 ms, 10,000 fires/s p99 38 → 26 ms (BENCHMARKS.md, session 6).
    pub(super) fn separate_cpus() -> Option<usize> {
        #[cfg(target_os = "linux")]
        {
            use rustix::thread::{CpuSet, sched_getaffinity, sched_setaffinity};
            let allowed = sched_getaffinity(None).ok()?;
            if allowed.count() < 2 {
                return None;
            }
            let writer = (0..CpuSet::MAX_CPU).rev().find(|&c| allowed.is_set(c))?;
            let mut rest = allowed;
            rest.unset(writer);
            if let Err(e) = sched_setaffinity(None, &rest) {
                tracing::debug!(error = %e, "cannot keep the dispatch thread off the writer's CPU");
                return None;
            }
            Some(writer)
        }
        #[cfg(not(target_os = "linux"))]
        None
    }

    /// Keeps the calling thread on `cpu`.
    fn pin(cpu: usize) {
        #[cfg(target_os = "linux")]
        {
            let mut one = rustix::thread::CpuSet::new();
            one.set(cpu);
            if let Err(e) = rustix::thread::sched_setaffinity(None, &one) {
                tracing::debug!(error = %e, "cannot keep the SQLite writer on one CPU");
            }
        }
        #[cfg(not(target_os = "linux"))]
        let _ = cpu;
    }

    /// Writes one batch in one transaction; answers the successful runs with child jobs.
    fn write(
        conn: &mut Connection,
        outcomes: &[&TriggerRecord],
        result_order: &[i64],
        results: &FirstResults<'_>,
        audits: &[&crate::store::audit::Entry],
    ) -> rusqlite::Result<Vec<FinishedRun>> {
        let mut results = results.clone();
        let tx = conn.transaction()?;
        for e in audits {
            crate::store::audit::record_sync(&tx, e)?;
        }
        let mut done: Vec<(i64, i32, i16, i32)> = Vec::new();
        {
            let sql = &*STATEMENTS;
            for &r in outcomes {
                if let Some((item, at)) = results.remove(&r.log_id) {
                    let mut s = tx.prepare_cached(&sql.combined)?;
                    bind_outcome(&mut s, r)?;
                    bind_result(&mut s, item, at)?;
                    if s.raw_execute()? == 1 {
                        done.push((r.log_id, r.job_id, r.chain_depth, item.code));
                        continue;
                    }
                    // the run already had a result (a kill): its outcome still counts
                }
                let mut s = tx.prepare_cached(&sql.outcome)?;
                bind_outcome(&mut s, r)?;
                s.raw_execute()?;
            }
            for &id in result_order {
                let Some((item, at)) = results.remove(&id) else {
                    continue;
                };
                let mut s = tx.prepare_cached(&sql.result)?;
                bind_result(&mut s, item, at)?;
                if s.raw_execute()? == 1
                    && item.code == SUCCESS_CODE
                    && let Some((job, depth)) = run_of(&tx, id)?
                {
                    done.push((id, job, depth, item.code));
                }
            }
        }
        let mut finished = Vec::new();
        {
            let mut children: HashMap<i32, Option<String>> = HashMap::new();
            let mut s = tx.prepare_cached("SELECT child_jobid FROM xxl_job_info WHERE id = ?1")?;
            for (id, job_id, chain_depth, code) in done {
                if code != SUCCESS_CODE {
                    continue;
                }
                let list = match children.get(&job_id) {
                    Some(l) => l.clone(),
                    None => {
                        let l: Option<String> = s
                            .query_row(params![job_id], |r| r.get::<_, Option<String>>(0))
                            .optional()?
                            .flatten()
                            .filter(|c| !c.trim().is_empty());
                        children.insert(job_id, l.clone());
                        l
                    }
                };
                if let Some(children) = list {
                    finished.push(FinishedRun {
                        id,
                        job_id,
                        chain_depth,
                        children,
                    });
                }
            }
        }
        tx.commit()?;
        Ok(finished)
    }
}

/// The pool backend: batches through sea-orm.
mod pool {
    use super::*;
    use futures::FutureExt;

    pub(super) async fn run(
        db: DatabaseConnection,
        mut rx: mpsc::Receiver<Queued>,
        sink: FinishedSink,
    ) {
        while let Some(first) = rx.recv().await {
            let ops = fill(first, &mut rx);
            let mut attempt = 0;
            let ok = loop {
                attempt += 1;
                // one transaction per batch, so a failed batch can be written again whole
                let res = match db.begin().await {
                    // a panic in a batch is that batch's failure, not the writer's end
                    Ok(txn) => match std::panic::AssertUnwindSafe(write(&txn, &ops))
                        .catch_unwind()
                        .await
                    {
                        Ok(Ok(f)) => txn.commit().await.map(|_| f).map_err(Error::from),
                        Ok(Err(e)) => Err(e),
                        Err(_) => Err(Error::Stopped("a run-row batch panicked")),
                    },
                    Err(e) => Err(e.into()),
                };
                match res {
                    Ok(f) => {
                        if !f.is_empty() {
                            sink(RunsFinished(f));
                        }
                        break true;
                    }
                    Err(e) if attempt < ATTEMPTS => {
                        tracing::warn!(attempt, error = %e, "run-row batch failed; retrying");
                        tokio::time::sleep(Duration::from_millis(100 << attempt)).await;
                    }
                    Err(e) => {
                        tracing::error!(items = ops.len(), error = %e, "run-row batch given up");
                        break false;
                    }
                }
            };
            acknowledge(ops, ok);
        }
    }

    async fn write(db: &impl ConnectionTrait, ops: &[Queued]) -> Result<Vec<FinishedRun>> {
        let entries = audits(ops).into_iter().cloned().collect();
        crate::store::audit::record_many(db, entries).await?;
        let (outcomes, order, results) = split(ops);
        let outcomes: Vec<TriggerRecord> = outcomes.into_iter().cloned().collect();
        log_batches::record_triggers(db, &outcomes).await?;
        let items: Vec<HandleResult> = order.iter().map(|id| results[id].0.clone()).collect();
        let at = order.iter().map(|id| results[id].1).max().unwrap_or(0);
        let written = log_batches::record_handles(db, &items, at).await?;
        let ok: Vec<log_batches::Finished> = written
            .into_iter()
            .zip(&items)
            .filter(|(_, i)| i.code == SUCCESS_CODE)
            .filter_map(|(f, _)| f)
            .collect();
        if ok.is_empty() {
            return Ok(Vec::new());
        }
        let lists =
            log_batches::child_lists(db, &ok.iter().map(|f| f.job_id).collect::<Vec<_>>()).await?;
        Ok(ok
            .into_iter()
            .zip(lists)
            .filter_map(|(f, l)| {
                l.filter(|c| !c.trim().is_empty())
                    .map(|children| FinishedRun {
                        id: f.id,
                        job_id: f.job_id,
                        chain_depth: f.chain_depth,
                        children,
                    })
            })
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::TriggerType;
    use crate::store::logs;

    /// A migrated SQLite file in `dir`, its writer target, and one job (with `children`) with
    /// four recorded runs: (database, target, job id, run ids).
    async fn fixture(
        dir: &std::path::Path,
        children: Option<&str>,
    ) -> (DatabaseConnection, Target, i32, Vec<i64>) {
        let url = format!("sqlite://{}?mode=rwc", dir.join("w.db").display());
        let db = crate::store::connect(&crate::config::DatabaseConfig {
            url,
            max_connections: 2,
            ..Default::default()
        })
        .await
        .unwrap();
        crate::store::migrate(&db).await.unwrap();
        let target = Target::of(&db).await.unwrap();
        let now = crate::clock::ms_to_naive(1_000);
        let g = crate::store::groups::insert(&db, "app", "App", 1, None, now)
            .await
            .unwrap();
        let mut spec = crate::JobSpec::cron(g, "job", "* * * * * ?", "h");
        spec.child_job_id = children.map(Into::into);
        let job = crate::store::jobs::insert(&db, spec.validate(chrono_tz::UTC, now).unwrap())
            .await
            .unwrap();
        let mut ids = vec![];
        for _ in 0..4 {
            ids.push(
                logs::insert_run(&db, g, job, 1_000, TriggerType::Manual, 0)
                    .await
                    .unwrap(),
            );
        }
        (db, target, job, ids)
    }

    /// Audit entries queued on the writer are written with its batches, texts cut to their
    /// columns, and are all readable after a flush: on a SQLite file (the dedicated writer),
    /// and through the pool on every backend.
    #[tokio::test]
    async fn audit_entries_are_written_with_the_batches() {
        let dir = tempfile::tempdir().unwrap();
        let (file_db, target, _, _) = fixture(dir.path(), None).await;
        assert!(target.single_node());
        let mut cases = vec![(file_db, target)];
        for db in crate::store::tests::every_backend().await {
            cases.push((db.clone(), Target::Pool(db)));
        }
        for (db, target) in cases {
            let writer = LogWriter::start(target, Activity::default(), Box::new(|_| {}));
            for i in 0..5 {
                writer
                    .audit(crate::store::audit::Entry {
                        time: crate::clock::ms_to_naive(1_000 * (1 + i)),
                        username: "admin".into(),
                        client_ip: "10.0.0.1".into(),
                        action: "job.create",
                        target_type: "job",
                        target_id: i.to_string(),
                        detail: "x".repeat(if i == 4 { 1_500 } else { 3 }),
                    })
                    .await
                    .unwrap();
            }
            writer.flush().await.unwrap();
            let (total, rows) =
                crate::store::audit::page(&db, &crate::store::audit::Filter::default(), 0, 10)
                    .await
                    .unwrap();
            assert_eq!(total, 5, "{:?}", db.get_database_backend());
            // newest first
            assert_eq!(rows[0].target_id, "4");
            assert_eq!(rows[0].detail.chars().count(), 1_000);
            assert_eq!(rows[0].time, crate::clock::ms_to_naive(5_000));
            assert_eq!(rows[4].detail, "xxx");
            writer.release_lock();
        }
    }

    /// The SQLite writer: an outcome and its result queued together land in one row; first
    /// result wins; a result never moves an alarm state back; successes with child jobs come
    /// back; a second writer target on the same file is refused.
    #[tokio::test]
    async fn the_sqlite_writer_keeps_the_result_rules() {
        let dir = tempfile::tempdir().unwrap();
        let (db, target, parent, ids) = fixture(dir.path(), Some("2")).await;
        assert!(target.single_node());
        assert!(matches!(
            Target::of(&db).await,
            Err(Error::DatabaseInUse { .. })
        ));
        logs::set_alarm_status(&db, ids[2], 2).await.unwrap();
        let (tx, mut finished) = tokio::sync::mpsc::unbounded_channel();
        let writer = LogWriter::start(
            target,
            Activity::default(),
            Box::new(move |f| {
                let _ = tx.send(f);
            }),
        );
        let result = |log_id: i64, code: i32, msg: &str| HandleResult {
            log_id,
            code,
            msg: Some(msg.into()),
        };
        writer
            .outcome(TriggerRecord {
                log_id: ids[0],
                job_id: parent,
                trigger_ms: 1_500,
                trigger_code: 200,
                trigger_msg: "triggered".into(),
                trigger_type: TriggerType::Manual,
                ..Default::default()
            })
            .await
            .unwrap();
        writer
            .results(
                vec![
                    result(ids[0], 200, "ok"),
                    result(ids[0], 500, "second"),
                    result(ids[1], 500, "failed"),
                    result(ids[2], 500, "late failure"),
                    result(ids[3], 200, "a result without its outcome in the batch"),
                ],
                2_000,
            )
            .await
            .unwrap();
        writer.flush().await.unwrap();
        let rows = logs::all(&db).await.unwrap();
        assert_eq!(
            (
                rows[0].trigger_code,
                rows[0].handle_code,
                rows[0].fire_state
            ),
            (200, 200, 0)
        );
        assert_eq!(
            rows[0].handle_msg.as_deref(),
            Some("ok"),
            "first result wins"
        );
        assert_eq!(rows[0].alarm_status, 1, "a success needs no alarm");
        assert_eq!((rows[1].handle_code, rows[1].alarm_status), (500, 0));
        assert_eq!(rows[2].alarm_status, 2, "an alarm state never moves back");
        assert_eq!(rows[0].handle_time, Some(crate::clock::ms_to_naive(2_000)));
        let mut done = Vec::new();
        while let Ok(f) = finished.try_recv() {
            done.extend(f.0.into_iter().map(|r| (r.id, r.job_id, r.children)));
        }
        done.sort();
        assert_eq!(
            done,
            vec![(ids[0], parent, "2".into()), (ids[3], parent, "2".into())],
            "successes with children come back, with or without their outcome in the batch"
        );
        writer.release_lock();
        assert!(Target::of(&db).await.is_ok(), "released");
        db.close().await.unwrap();
    }

    /// A batch that panics (here an `exec` closure with a bug) fails only its own callers:
    /// the writer thread goes on and later writes land.
    #[tokio::test]
    async fn a_panicking_batch_does_not_stop_the_writer() {
        let dir = tempfile::tempdir().unwrap();
        let (db, target, _job, ids) = fixture(dir.path(), None).await;
        let writer = LogWriter::start(target, Activity::default(), Box::new(|_| {}));
        let r = writer
            .exec(|_| -> i32 { panic!("a bug in a batch (expected by this test)") })
            .await;
        assert!(matches!(r, Err(Error::Stopped(_))), "{r:?}");
        let done = HandleResult {
            log_id: ids[0],
            code: 200,
            msg: Some("after the panic".into()),
        };
        assert!(writer.results_written(vec![done], 2_000).await.unwrap());
        let row = logs::get(&db, ids[0]).await.unwrap();
        assert_eq!(
            (row.handle_code, row.handle_msg.as_deref()),
            (200, Some("after the panic"))
        );
        writer.flush().await.unwrap();
        writer.release_lock();
        db.close().await.unwrap();
    }

    /// The SQLite writer pairs a run's outcome and result in memory: a dispatched outcome waits
    /// for its result (not visible meanwhile, written by `visible`), a result that comes before
    /// its dispatched run's outcome waits for it and is acknowledged only once written, and a
    /// failed trigger is written at once.
    #[tokio::test]
    async fn the_sqlite_writer_pairs_outcomes_and_results() {
        let dir = tempfile::tempdir().unwrap();
        let (db, target, job, ids) = fixture(dir.path(), None).await;
        let writer = LogWriter::start(target, Activity::default(), Box::new(|_| {}));
        let outcome = |log_id: i64, code: i32| TriggerRecord {
            log_id,
            job_id: job,
            trigger_ms: 1_500,
            trigger_code: code,
            trigger_msg: "triggered".into(),
            trigger_type: TriggerType::Manual,
            ..Default::default()
        };
        let ok = |log_id: i64| HandleResult {
            log_id,
            code: 200,
            msg: Some("done".into()),
        };
        // a round trip through the writer: everything queued before it has been handled
        let handled = || writer.exec(|_| ());
        let row = |id: i64| {
            let db = db.clone();
            async move {
                let r = logs::get(&db, id).await.unwrap();
                (r.trigger_code, r.handle_code)
            }
        };

        writer.outcome(outcome(ids[0], 200)).await.unwrap();
        handled().await.unwrap();
        assert_eq!(
            row(ids[0]).await,
            (0, 0),
            "the outcome waits for its result"
        );
        writer.results(vec![ok(ids[0])], 2_000).await.unwrap();
        handled().await.unwrap();
        assert_eq!(row(ids[0]).await, (200, 200), "both in one update");

        writer.outcome(outcome(ids[1], 200)).await.unwrap();
        handled().await.unwrap();
        assert_eq!(row(ids[1]).await, (0, 0));
        writer.visible().await.unwrap();
        assert_eq!(row(ids[1]).await, (200, 0), "visible writes what is held");

        writer.dispatching(vec![ids[2]]);
        let acked = tokio::spawn({
            let (writer, early) = (writer.clone(), vec![ok(ids[2])]);
            async move { writer.results_written(early, 2_000).await }
        });
        handled().await.unwrap();
        tokio::task::yield_now().await;
        assert!(
            !acked.is_finished(),
            "the result waits for its run's outcome"
        );
        assert_eq!(row(ids[2]).await, (0, 0));
        writer.outcome(outcome(ids[2], 200)).await.unwrap();
        assert!(acked.await.unwrap().unwrap(), "acknowledged once written");
        assert_eq!(row(ids[2]).await, (200, 200));

        writer.outcome(outcome(ids[3], 500)).await.unwrap();
        handled().await.unwrap();
        assert_eq!(
            row(ids[3]).await,
            (500, 0),
            "a failed trigger is written at once"
        );
        writer.release_lock();
        db.close().await.unwrap();
    }
}
