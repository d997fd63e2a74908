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
//!   cached prepared single-row statements, O(rows), with no thread hop per statement. At
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
pub const MAX_BATCH: usize = 4096;
/// Items that may wait for the writer; beyond that, callers wait.
pub const QUEUE: usize = 16_384;
/// Attempts at one batch before its items are given up (logged as errors).
const ATTEMPTS: u32 = 5;
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
pub type FinishedSink = Box<dyn Fn(RunsFinished) + Send + 'static>;

/// Work run on the SQLite writer's own connection (the single-node scan pass).
type Exec = Box<dyn FnOnce(&mut rusqlite::Connection) + Send + Sync>;

enum Op {
    Outcomes(Vec<TriggerRecord>),
    Exec(Exec),
    Results {
        items: Vec<HandleResult>,
        at_ms: i64,
        ack: Option<oneshot::Sender<bool>>,
    },
}

impl Op {
    fn len(&self) -> usize {
        match self {
            Op::Exec(_) => 1,
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
}

impl LogWriter {
    /// Starts the writer for `target`; finished runs with child jobs go to `finished`.
    pub fn start(target: Target, activity: Activity, finished: FinishedSink) -> Self {
        let (tx, rx) = mpsc::channel(QUEUE);
        let single_node = target.single_node();
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
                std::thread::Builder::new()
                    .name("xjob-sqlite-writer".into())
                    .spawn(move || sqlite::run(&path, rx, finished, writer_cpu))
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
            Op::Outcomes(_) | Op::Exec(_) => Vec::new(),
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
            ack: Some(ack),
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

    /// Answers once everything queued before this call is written.
    pub async fn flush(&self) -> Result<()> {
        self.results_written(Vec::new(), 0).await.map(|_| ())
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
            Op::Exec(_) => {}
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

/// Acknowledges every waiting caller of a written (or given-up) batch.
fn acknowledge(ops: Vec<Queued>, ok: bool) {
    for q in ops {
        if let Op::Results { ack: Some(a), .. } = q.op {
            let _ = a.send(ok);
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

    /// The result columns, shared by the result-only and the combined update (parameters
    /// ?11–?14; ?1 is the log id). A message is appended to one the row already has (after
    /// `<br>`), capped at [`HANDLE_MSG_MAX`] characters; a success sets `alarm_status` 0 → 1 (no
    /// alarm needed) and never moves an alarm state the fail monitor already set.
    const RESULT_SET: &str = "handle_code = ?11, handle_time = ?12, \
        handle_msg = CASE WHEN ?13 IS NULL THEN handle_msg \
                          WHEN handle_msg IS NULL OR handle_msg = '' THEN ?13 \
                          ELSE substr(handle_msg || '<br>' || ?13, 1, ?14) END, \
        alarm_status = CASE WHEN alarm_status = 0 AND ?11 = 200 THEN 1 ELSE alarm_status END";
    /// The trigger-outcome columns (parameters ?2–?10).
    const OUTCOME_SET: &str = "trigger_time = ?2, executor_address = ?3, executor_handler = ?4, \
        executor_param = ?5, executor_sharding_param = ?6, executor_fail_retry_count = ?7, \
        trigger_code = ?8, trigger_msg = ?9, trigger_type = ?10, fire_state = 0";

    fn open(path: &str) -> rusqlite::Result<Connection> {
        let conn = Connection::open(path)?;
        conn.busy_timeout(Duration::from_secs(10))?;
        conn.pragma_update(None, "journal_mode", "WAL")?;
        conn.pragma_update(None, "synchronous", "NORMAL")?;
        // statement journals (every UPSERT / RETURNING statement keeps one) in memory, not in
        // a temporary file: they were a third of the writer's time as pwrite calls
        conn.pragma_update(None, "temp_store", "MEMORY")?;
        // the log table's indexes are walked by every write: 16 MiB of page cache (default 2)
        conn.pragma_update(None, "cache_size", -16_384)?;
        conn.set_prepared_statement_cache_capacity(16);
        Ok(conn)
    }

    pub(super) fn run(
        path: &str,
        mut rx: mpsc::Receiver<Queued>,
        sink: FinishedSink,
        writer_cpu: Option<usize>,
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
        while let Some(first) = rx.blocking_recv() {
            let ops = fill(first, &mut rx);
            let mut attempt = 0;
            let outcome = loop {
                attempt += 1;
                match write(&mut conn, &ops) {
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
            };
            let ok = outcome.is_some();
            if let Some(f) = outcome.filter(|f| !f.is_empty()) {
                sink(RunsFinished(f));
            }
            let mut rest = Vec::with_capacity(ops.len());
            for q in ops {
                match q.op {
                    Op::Exec(f) => f(&mut conn),
                    _ => rest.push(q),
                }
            }
            acknowledge(rest, ok);
        }
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
    fn write(conn: &mut Connection, ops: &[Queued]) -> rusqlite::Result<Vec<FinishedRun>> {
        let (outcomes, result_order, mut results) = split(ops);
        let tx = conn.transaction()?;
        let mut done: Vec<(i64, i32, i16, i32)> = Vec::new();
        {
            let combined_sql = format!(
                "UPDATE OR IGNORE xxl_job_log SET {OUTCOME_SET}, {RESULT_SET} \
                 WHERE id = ?1 AND handle_code = 0"
            );
            let result_sql = format!(
                "UPDATE OR IGNORE xxl_job_log SET {RESULT_SET} WHERE id = ?1 AND handle_code = 0"
            );
            let outcome_sql =
                format!("UPDATE OR IGNORE xxl_job_log SET {OUTCOME_SET} WHERE id = ?1");
            for r in outcomes {
                if let Some((item, at)) = results.remove(&r.log_id) {
                    let mut s = tx.prepare_cached(&combined_sql)?;
                    bind_outcome(&mut s, r)?;
                    bind_result(&mut s, item, at)?;
                    if s.raw_execute()? == 1 {
                        done.push((r.log_id, r.job_id, r.chain_depth, item.code));
                        continue;
                    }
                    // the run already had a result (a kill): its outcome still counts
                }
                let mut s = tx.prepare_cached(&outcome_sql)?;
                bind_outcome(&mut s, r)?;
                s.raw_execute()?;
            }
            for id in result_order {
                let Some((item, at)) = results.remove(&id) else {
                    continue;
                };
                let mut s = tx.prepare_cached(&result_sql)?;
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
                    Ok(txn) => match write(&txn, &ops).await {
                        Ok(f) => txn.commit().await.map(|_| f).map_err(Error::from),
                        Err(e) => Err(e),
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

    /// The SQLite writer: an outcome and its result queued together land in one row; first
    /// result wins; a result never moves an alarm state back; successes with child jobs come
    /// back; a second writer target on the same file is refused.
    #[tokio::test]
    async fn the_sqlite_writer_keeps_the_result_rules() {
        let dir = tempfile::tempdir().unwrap();
        let url = format!("sqlite://{}?mode=rwc", dir.path().join("w.db").display());
        let db = crate::store::connect(&crate::config::DatabaseConfig {
            url,
            max_connections: 2,
            ..Default::default()
        })
        .await
        .unwrap();
        crate::store::migrate(&db).await.unwrap();
        let target = Target::of(&db).await.unwrap();
        assert!(target.single_node());
        assert!(matches!(
            Target::of(&db).await,
            Err(Error::DatabaseInUse { .. })
        ));
        let now = crate::clock::ms_to_naive(1_000);
        let g = crate::store::groups::insert(&db, "app", "App", 1, None, now)
            .await
            .unwrap();
        let mut spec = crate::JobSpec::cron(g, "parent", "* * * * * ?", "h");
        spec.child_job_id = Some("2".into());
        let parent = crate::store::jobs::insert(&db, spec.validate(chrono_tz::UTC, now).unwrap())
            .await
            .unwrap();
        let mut ids = vec![];
        for _ in 0..4 {
            ids.push(
                logs::insert_run(&db, g, parent, 1_000, TriggerType::Manual, 0)
                    .await
                    .unwrap(),
            );
        }
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
}
