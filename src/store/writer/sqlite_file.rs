//! The SQLite-file backend of the run-row writer: one OS thread owns a synchronous connection
//! (rusqlite over the same `libsqlite3-sys` as sqlx) and writes each batch with cached prepared
//! single-row statements, pairing each run's outcome with its result so one update writes both.

use super::journal::{self, Journal};
use super::pairing::Pairing;
use super::*;
use crate::store::log_by_job;
use crate::store::sqlite_text::naive_text;
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
    /// A journalled run's row, outcome and result together (`?15`–`?18`: group, job, nominal
    /// time, chain depth).
    insert_combined: String,
    /// A journalled run's row with its outcome alone.
    insert_outcome: String,
}

static STATEMENTS: std::sync::LazyLock<Statements> = std::sync::LazyLock::new(|| {
    use crate::model::{AlarmStatus, fire_state};
    use crate::store::rules::{self, ResultSql};
    let unchecked = AlarmStatus::Unchecked.code();
    // the result columns (parameters ?11–?13; ?1 is the log id), by the rule of `store::rules`
    let result_set = rules::result_assignments(
        sea_orm::DbBackend::Sqlite,
        &ResultSql {
            row: "",
            code: "?11",
            time: "?12",
            msg: "?13",
        },
    );
    // the trigger-outcome columns (parameters ?2–?10)
    let outcome_set = rules::outcome_assignments(|_, i| format!("?{}", i + 2));
    // a journalled run's row: the columns of the outcome (?2–?10), then of the result
    // (?11–?13) or none, then the run's identity (?15–?18). One row of VALUES: an
    // `INSERT … SELECT` keeps a statement journal (a copy of every page it changes), which
    // cost more than the row itself.
    let insert = |result_cols: &str, result_values: &str| {
        format!(
            "INSERT OR IGNORE INTO xxl_job_log (id, trigger_time, executor_address, \
             executor_handler, executor_param, executor_sharding_param, \
             executor_fail_retry_count, trigger_code, trigger_msg, trigger_type, fire_state, \
             job_group, job_id, fire_time, chain_depth, {result_cols}) \
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, {}, ?15, ?16, ?17, ?18, \
             {result_values})",
            fire_state::DISPATCHED
        )
    };
    let insert_combined = insert(
        "handle_code, handle_time, handle_msg, alarm_status",
        &format!("?11, ?12, ?13, {}", rules::first_alarm_sql("?11")),
    );
    let insert_outcome = insert("handle_code, alarm_status", &format!("0, {unchecked}"));
    Statements {
        insert_combined,
        insert_outcome,
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

/// How long the writer's connection waits for another connection's write transaction.
const BUSY_TIMEOUT: Duration = Duration::from_secs(10);

fn open(path: &str) -> rusqlite::Result<Connection> {
    let conn = Connection::open(path)?;
    conn.busy_timeout(BUSY_TIMEOUT)?;
    conn.pragma_update(None, "journal_mode", "WAL")?;
    conn.pragma_update(None, "synchronous", "NORMAL")?;
    // statement journals (every UPSERT / RETURNING statement keeps one) in memory, not in
    // a temporary file: they were a third of the writer's time as pwrite calls
    conn.pragma_update(None, "temp_store", "MEMORY")?;
    // 2 MiB of page cache (SQLite's default): with a second's rows at neighbouring log ids a
    // batch touches few pages, and 4 MiB bought no CPU at 5,000 fires/s while holding 2 MiB
    // more (BENCHMARKS.md, 2026-11-28, d27a0ab); 16 MiB bought nothing at 10,000 fires/s either.
    conn.pragma_update(None, "cache_size", -2_048)?;
    conn.set_prepared_statement_cache_capacity(16);
    Ok(conn)
}

/// What the writer thread is given.
pub(super) struct Thread {
    pub rx: mpsc::Receiver<Queued>,
    pub sink: FinishedSink,
    pub writer_cpu: Option<usize>,
    pub activity: Activity,
    pub held_count: Arc<AtomicUsize>,
    /// Where the connection goes once it is ready; locked for each batch.
    pub conn: SharedConn,
    /// Audit entries listed for the next batch.
    pub audits: Audits,
}

pub(super) fn run(path: &str, on: Thread, ready: oneshot::Sender<std::result::Result<(), String>>) {
    let Thread {
        mut rx,
        sink,
        writer_cpu,
        activity,
        held_count,
        conn: shared,
        audits,
    } = on;
    if let Some(cpu) = writer_cpu {
        crate::cpu::pin(cpu);
    }
    let mut conn = match open(path) {
        Ok(c) => c,
        Err(e) => {
            let _ = ready.send(Err(e.to_string()));
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
            let _ = ready.send(Err(format!("cannot start its timer: {e}")));
            return;
        }
    };
    match journal::recover(&mut conn) {
        Ok(r) if r == journal::Recovered::default() => {}
        Ok(r) => tracing::info!(
            pending = r.pending,
            in_doubt = r.in_doubt,
            "fires an earlier run left: made pending, or in doubt (asked of their executors)"
        ),
        Err(e) => {
            let _ = ready.send(Err(format!("cannot read its fire journal: {e}")));
            return;
        }
    }
    // every run indexed by job at start: the journal reads a job's latest fire from the index
    let indexed = conn
        .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)
        .and_then(|tx| {
            log_by_job::index(&tx, std::iter::empty())?;
            tx.commit()
        });
    if let Err(e) = indexed {
        let _ = ready.send(Err(format!("cannot index its log rows by job: {e}")));
        return;
    }
    *shared.lock() = Some(conn);
    if ready.send(Ok(())).is_err() {
        shared.lock().take();
        return;
    }
    let mut tail = Tail {
        rows: 0,
        since: Instant::now(),
    };
    let mut st = State::default();
    let out = Outlets {
        activity: &activity,
        sink: &sink,
        held_count: &held_count,
    };
    loop {
        let (ops, closed) = match st.held.deadline() {
            None => match rx.blocking_recv() {
                Some(first) => (fill(first, &mut rx), false),
                None => break,
            },
            Some(at) => {
                let at = tokio::time::Instant::from_std(at);
                let next = timer.block_on(async { tokio::time::timeout_at(at, rx.recv()).await });
                match next {
                    Ok(Some(first)) => (fill(first, &mut rx), false),
                    Ok(None) => (Vec::new(), true),
                    Err(_) => (Vec::new(), false),
                }
            }
        };
        let (ops, closed) = if closed {
            (ops, closed)
        } else {
            linger(ops, &mut rx, &timer)
        };
        let flush = closed || ops.iter().any(|q| matches!(q.op, Op::Flush(_)));
        let mut slot = shared.lock();
        let Some(conn) = slot.as_mut() else {
            tracing::error!("the SQLite writer's connection is gone; the writer stops");
            break;
        };
        // the audit entries listed so far (their message is in `ops`, or still queued: its
        // batch then finds the list empty)
        let listed = std::mem::take(&mut *audits.lock());
        // a bug in one batch must not stop every later write: its transaction rolls back
        // (dropped while unwinding), its waiters hear of the failure (their results are
        // re-sent by executors), and the writer goes on with the next batch
        let run = std::panic::AssertUnwindSafe(|| batch(conn, &mut st, ops, listed, flush, &out));
        match std::panic::catch_unwind(run) {
            Ok(rows) => tail.rows += rows,
            Err(_) => {
                tracing::error!("a run-row batch panicked; its writes are lost, the writer goes on")
            }
        }
        held_count.store(st.held.len(), Ordering::Release);
        tail.index_if_due(conn, &st.journal);
        drop(slot);
        if closed {
            break;
        }
    }
    // closed here, on this thread, and nobody uses it after
    shared.lock().take();
}

/// Begins an `IMMEDIATE` transaction if the database's write lock is free at once, without
/// waiting (the busy timeout is lifted for the `BEGIN` alone); answers whether it began. The
/// caller ends it (the store port's rules commit or roll it back).
pub(super) fn began_at_once(conn: &Connection) -> bool {
    if conn.busy_timeout(Duration::ZERO).is_err() {
        return false;
    }
    let began = conn.execute_batch("BEGIN IMMEDIATE").is_ok();
    // restored before anything else runs on the connection
    if conn.busy_timeout(BUSY_TIMEOUT).is_err() {
        if began {
            let _ = conn.execute_batch("ROLLBACK");
        }
        return false;
    }
    began
}

/// The runs written since the index by job last took them in.
struct Tail {
    rows: usize,
    since: Instant,
}

impl Tail {
    /// Indexes the runs above the mark once [`log_by_job::INDEX_ROWS`] were written or
    /// [`log_by_job::INDEX_EVERY`] passed; a failure leaves them for the next batch.
    fn index_if_due(&mut self, conn: &mut Connection, journal: &Journal) {
        if self.rows < log_by_job::INDEX_ROWS && self.since.elapsed() < log_by_job::INDEX_EVERY {
            return;
        }
        let indexed = conn
            .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)
            .and_then(|tx| {
                log_by_job::index(&tx, journal.unwritten())?;
                tx.commit()
            });
        match indexed {
            Ok(()) => {
                self.rows = 0;
                self.since = Instant::now();
            }
            Err(e) => tracing::warn!(error = %e, "runs not indexed by job yet; retrying"),
        }
    }
}

/// Gathers a small batch of run rows and audit entries for up to [`LINGER`] after its first
/// item, so that a trickle of callbacks, outcomes and console changes is written a few
/// transactions a second rather than one transaction per item (each commit appends every page
/// it touched to the WAL). Anything that a caller waits for besides a result's
/// acknowledgement (work on the connection, a flush) ends the wait at once. Answers the ops and
/// whether the queue closed.
fn linger(
    mut ops: Vec<Queued>,
    rx: &mut mpsc::Receiver<Queued>,
    timer: &tokio::runtime::Runtime,
) -> (Vec<Queued>, bool) {
    let lingers = |q: &Queued| {
        matches!(
            q.op,
            Op::Outcomes(_)
                | Op::Dispatching(_)
                | Op::Results { .. }
                | Op::Audit(_)
                | Op::AuditsListed
        )
    };
    let mut n: usize = ops.iter().map(|q| q.op.len()).sum();
    if ops.is_empty() || n >= LINGER_BELOW || !ops.iter().all(lingers) {
        return (ops, false);
    }
    let until = tokio::time::Instant::now() + LINGER;
    while n < LINGER_BELOW {
        let next = timer.block_on(async { tokio::time::timeout_at(until, rx.recv()).await });
        match next {
            Ok(Some(q)) => {
                let more = fill(q, rx);
                n += more.iter().map(|q| q.op.len()).sum::<usize>();
                let urgent = !more.iter().all(lingers);
                ops.extend(more);
                if urgent {
                    break;
                }
            }
            Ok(None) => return (ops, true),
            Err(_) => break,
        }
    }
    (ops, false)
}

/// What the writer thread keeps from one batch to the next.
#[derive(Default)]
struct State {
    /// Outcomes held for their results (and results for their outcomes).
    held: Pairing,
    /// The fire journal's view of the fires it holds.
    journal: Journal,
    /// The jobs the batches' rows name.
    jobs: JobCache,
}

/// Where a batch's effects go besides the database.
#[derive(Clone, Copy)]
struct Outlets<'a> {
    activity: &'a Activity,
    /// Finished runs, to the completion actor.
    sink: &'a FinishedSink,
    /// How many outcomes are held (read by the metrics).
    held_count: &'a AtomicUsize,
}

/// Writes one batch ([`Pairing::prepare`]), a few tries, then settles it.
fn batch(
    conn: &mut Connection,
    st: &mut State,
    ops: Vec<Queued>,
    listed: Vec<crate::store::audit::Entry>,
    flush: bool,
    out: &Outlets<'_>,
) -> usize {
    let State {
        held,
        journal,
        jobs,
    } = st;
    let Outlets {
        activity,
        sink,
        held_count,
    } = *out;
    let now = Instant::now();
    let mut b = held.prepare(ops, now, flush, activity);
    b.audits.extend(listed);
    let mut attempt = 0;
    let mut rows = 0;
    let outcome = loop {
        attempt += 1;
        if b.is_empty() {
            break Some(Vec::new());
        }
        match write(conn, journal, jobs, &b.outcomes, &b.results, &b.audits) {
            Ok((f, written)) => {
                journal.settle(&written);
                rows = written.len();
                break Some(f);
            }
            Err(e) if attempt < ATTEMPTS => {
                tracing::warn!(attempt, error = %e, "run-row batch failed; retrying");
                std::thread::sleep(Duration::from_millis(100 << attempt));
            }
            Err(e) => {
                tracing::error!(items = b.len(), error = %e, "run-row batch given up");
                break None;
            }
        }
    };
    let ok = outcome.is_some();
    if let Some(f) = outcome.filter(|f| !f.is_empty()) {
        sink(RunsFinished(f));
    }
    held.finish(b, ok, now, held_count, &mut |f| f(conn, journal));
    rows
}

fn bind_outcome(s: &mut rusqlite::CachedStatement<'_>, r: &TriggerRecord) -> rusqlite::Result<()> {
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
    s.raw_bind_parameter(13, item.msg.clone().map(cap_msg))
}

/// The run of an updated row (its job and chain depth), read back by row id: cheaper than a
/// `RETURNING` clause, which builds an ephemeral table per statement.
fn run_of(tx: &rusqlite::Transaction<'_>, id: i64) -> rusqlite::Result<Option<(i32, i16)>> {
    tx.prepare_cached("SELECT job_id, chain_depth FROM xxl_job_log WHERE id = ?1")?
        .query_row(params![id], |r| Ok((r.get(0)?, r.get(1)?)))
        .optional()
}

/// Most jobs [`JobCache`] remembers; beyond it, it starts again.
const MAX_CACHED_JOBS: usize = 1_000_000;

/// What the writer read of its rows' jobs: whether each exists, and its child jobs. Kept from
/// batch to batch for as long as no other connection committed a change to the database
/// (SQLite's `PRAGMA data_version`): jobs are created, edited and deleted through the pool, so
/// any such change empties it, and a run's row is never written for a job deleted before its
/// batch began. The writer's own work (rows, the scan's schedule updates) changes neither.
/// Read once per batch before, each job's row was read again about every second.
#[derive(Default)]
struct JobCache {
    /// `data_version` when the entries were read.
    version: Option<i64>,
    /// Per job: its child jobs (`None` inside: none), or `None` when it does not exist.
    jobs: foldhash::HashMap<i32, Option<Option<String>>>,
}

impl JobCache {
    /// Empties the cache when another connection committed since it was read.
    fn check(&mut self, tx: &rusqlite::Transaction<'_>) -> rusqlite::Result<()> {
        let version: i64 = tx
            .prepare_cached("PRAGMA data_version")?
            .query_row([], |r| r.get(0))?;
        if self.version != Some(version) || self.jobs.len() > MAX_CACHED_JOBS {
            self.jobs.clear();
            self.version = Some(version);
        }
        Ok(())
    }
}

/// Job `job_id`'s child jobs (`None` inside: none), or `None` when the job does not exist;
/// read (`job_row`: `SELECT child_jobid … WHERE id = ?1`) when `jobs` does not hold it.
fn job_children(
    job_row: &mut rusqlite::CachedStatement<'_>,
    jobs: &mut JobCache,
    job_id: i32,
) -> rusqlite::Result<Option<Option<String>>> {
    if let Some(j) = jobs.jobs.get(&job_id) {
        return Ok(j.clone());
    }
    let j = job_row
        .query_row(params![job_id], |r| r.get::<_, Option<String>>(0))
        .optional()?
        .map(|c| c.filter(|c| !c.trim().is_empty()));
    jobs.jobs.insert(job_id, j.clone());
    Ok(j)
}

fn bind_identity(
    s: &mut rusqlite::CachedStatement<'_>,
    e: &journal::Entry,
    r: &TriggerRecord,
) -> rusqlite::Result<()> {
    s.raw_bind_parameter(15, e.job_group)?;
    s.raw_bind_parameter(16, e.job_id)?;
    s.raw_bind_parameter(17, e.fire_time)?;
    s.raw_bind_parameter(18, r.chain_depth)
}

/// Writes one batch in one transaction; answers the successful runs with child jobs and the
/// journalled runs whose rows it inserted (for [`Journal::settle`] once it committed).
fn write(
    conn: &mut Connection,
    journal: &Journal,
    jobs: &mut JobCache,
    outcomes: &[TriggerRecord],
    results: &[(HandleResult, i64)],
    audits: &[crate::store::audit::Entry],
) -> rusqlite::Result<(Vec<FinishedRun>, Vec<i64>)> {
    let mut by_run: foldhash::HashMap<i64, (&HandleResult, i64)> =
        results.iter().map(|(i, at)| (i.log_id, (i, *at))).collect();
    let tx = conn.transaction()?;
    for e in audits {
        crate::store::audit::record_sync(&tx, e)?;
    }
    let mut done: Vec<(i64, i32, i16, i32)> = Vec::new();
    // journalled runs whose rows this batch inserts (each once: later items of the same run
    // update the row)
    let mut written: Vec<i64> = Vec::new();
    let mut taken = foldhash::HashSet::default();
    jobs.check(&tx)?;
    let mut journalled = |id: i64| journal.get(id).filter(|_| taken.insert(id));
    // each statement looked up in the connection's cache once per batch, not once per row
    let sql = &*STATEMENTS;
    let mut job_row = tx.prepare_cached("SELECT child_jobid FROM xxl_job_info WHERE id = ?1")?;
    {
        let mut insert_combined = tx.prepare_cached(&sql.insert_combined)?;
        let mut insert_outcome = tx.prepare_cached(&sql.insert_outcome)?;
        let mut combined = tx.prepare_cached(&sql.combined)?;
        let mut outcome = tx.prepare_cached(&sql.outcome)?;
        let mut result = tx.prepare_cached(&sql.result)?;
        // in id order: a journalled run's row then goes at the end of the table's b-tree (an
        // append) instead of splitting pages in its last few (the order outcomes come in)
        let mut in_order: Vec<&TriggerRecord> = outcomes.iter().collect();
        in_order.sort_by_key(|r| r.log_id);
        for r in in_order {
            if let Some(e) = journalled(r.log_id) {
                written.push(r.log_id);
                if job_children(&mut job_row, jobs, e.job_id)?.is_none() {
                    // the job was deleted (with its runs) since the fire was journalled
                    by_run.remove(&r.log_id);
                    continue;
                }
                if let Some((item, at)) = by_run.remove(&r.log_id) {
                    let s = &mut insert_combined;
                    bind_outcome(s, r)?;
                    bind_result(s, item, at)?;
                    bind_identity(s, e, r)?;
                    if s.raw_execute()? == 1 {
                        done.push((r.log_id, r.job_id, r.chain_depth, item.code));
                    }
                } else {
                    let s = &mut insert_outcome;
                    bind_outcome(s, r)?;
                    bind_identity(s, e, r)?;
                    s.raw_execute()?;
                }
                continue;
            }
            if let Some((item, at)) = by_run.remove(&r.log_id) {
                let s = &mut combined;
                bind_outcome(s, r)?;
                bind_result(s, item, at)?;
                if s.raw_execute()? == 1 {
                    done.push((r.log_id, r.job_id, r.chain_depth, item.code));
                    continue;
                }
                // the run already had a result (a kill): its outcome still counts
            }
            bind_outcome(&mut outcome, r)?;
            outcome.raw_execute()?;
        }
        for (item, _) in results {
            let Some((item, at)) = by_run.remove(&item.log_id) else {
                continue;
            };
            let id = item.log_id;
            if let Some(e) = journalled(id) {
                // a result without its outcome: the run's pending row first (none for a job
                // deleted since: the update below then finds no row)
                written.push(id);
                if job_children(&mut job_row, jobs, e.job_id)?.is_some() {
                    journal::insert_pending(&tx, id, e)?;
                }
            }
            bind_result(&mut result, item, at)?;
            if result.raw_execute()? == 1
                && item.code == SUCCESS_CODE
                && let Some((job, depth)) = run_of(&tx, id)?
            {
                done.push((id, job, depth, item.code));
            }
        }
    }
    let mut finished = Vec::new();
    for (id, job_id, chain_depth, code) in done {
        if code != SUCCESS_CODE {
            continue;
        }
        if let Some(Some(children)) = job_children(&mut job_row, jobs, job_id)? {
            finished.push(FinishedRun {
                id,
                job_id,
                chain_depth,
                children,
            });
        }
    }
    drop(job_row);
    journal.delete_emptied(&tx, &written)?;
    tx.commit()?;
    Ok((finished, written))
}
