//! The pool backend of the run-row writer (PostgreSQL, MySQL, in-memory SQLite): a task writing
//! each batch through sea-orm, one transaction per batch, with outcomes and results paired as
//! on SQLite ([`super::pairing`]) so that a run's final row is one update, and the statements
//! of [`crate::store::run_rows`] (constant SQL, the rows as one JSON parameter). Successful
//! runs' child jobs come from the run records (the job as dispatched), not from a read of the
//! job table; a result of a run this writer never saw the outcome of reads its job's list.
//! A held entry waits in real time ([`RealTimer`]), as on the SQLite writer's thread.
//!
//! One bad row never costs the others: texts are bounded to their columns when they are queued,
//! and when the database still refuses a batch (an error it reports about the data, not a lost
//! connection) the batch is split in halves until the offending row is alone; that row is then
//! written in a reduced form that says why, and every other row lands. A batch that fails for
//! any other reason (the database is down) is retried whole a few times, then given up.

use std::collections::HashMap;

use futures::FutureExt;
use futures::future::BoxFuture;

use super::*;
use crate::store::audit::Entry;

/// One row a batch writes.
#[derive(Clone, Debug)]
enum Row {
    Outcome(TriggerRecord),
    /// A result, received at (epoch ms).
    Result(HandleResult, i64),
    Audit(Entry),
}

impl Row {
    /// This row cut down to what any database stores (the texts that may carry what a column
    /// refused replaced by the reason), or `None` when it is already reduced.
    fn reduced(&self, why: &str) -> Option<Row> {
        let note = |what: &str| {
            crate::bounded::cut_bytes(
                &format!("[xjob] {what} could not be stored as it was: {why}"),
                1000,
            )
            .into_owned()
        };
        match self {
            Row::Outcome(r) => {
                let reduced = TriggerRecord {
                    executor_address: r
                        .executor_address
                        .clone()
                        .filter(|a| a.is_ascii() && a.len() <= 255),
                    executor_handler: None,
                    executor_param: None,
                    executor_sharding_param: None,
                    trigger_msg: note("the trigger outcome"),
                    ..r.clone()
                };
                (reduced.trigger_msg != r.trigger_msg).then_some(Row::Outcome(reduced))
            }
            Row::Result(h, at) => {
                let msg = Some(note("the result message"));
                (h.msg != msg).then(|| Row::Result(HandleResult { msg, ..h.clone() }, *at))
            }
            Row::Audit(e) => {
                let detail = note("the entry");
                (e.detail != detail).then(|| {
                    Row::Audit(Entry {
                        username: e
                            .username
                            .chars()
                            .filter(char::is_ascii_alphanumeric)
                            .collect(),
                        client_ip: String::new(),
                        target_id: String::new(),
                        detail,
                        ..e.clone()
                    })
                })
            }
        }
    }
}

/// The rows of a batch: its audit entries, outcomes and results (moved out of it).
fn rows_of(b: &mut super::pairing::Batch) -> Vec<Row> {
    let mut rows: Vec<Row> = std::mem::take(&mut b.audits)
        .into_iter()
        .map(Row::Audit)
        .collect();
    rows.extend(
        std::mem::take(&mut b.outcomes)
            .into_iter()
            .map(Row::Outcome),
    );
    rows.extend(
        std::mem::take(&mut b.results)
            .into_iter()
            .map(|(i, at)| Row::Result(i, at)),
    );
    rows
}

/// What writing some rows came to.
#[derive(Default)]
struct Written {
    /// The runs whose result was written (first result wins).
    results: Vec<crate::store::run_rows::Written>,
    /// The outcomes written.
    outcomes: Vec<TriggerRecord>,
    /// Whether any row was given up.
    lost_any: bool,
    /// Whether the connection pool was closed (the engine stopped past its grace): nothing
    /// more can be written.
    closed: bool,
}

impl Written {
    fn lost(rows: &[Row]) -> Self {
        Written {
            lost_any: !rows.is_empty(),
            ..Default::default()
        }
    }

    fn merge(mut self, other: Written) -> Self {
        self.results.extend(other.results);
        self.outcomes.extend(other.outcomes);
        self.lost_any |= other.lost_any;
        self.closed |= other.closed;
        self
    }
}

/// Wakes the writer at real-time deadlines from a thread of its own (the runtime's clock may be
/// paused in tests: a held outcome waits real time, as on the SQLite writer's thread).
struct RealTimer {
    set: std::sync::mpsc::Sender<std::time::Instant>,
    woken: mpsc::UnboundedReceiver<()>,
}

impl RealTimer {
    fn start() -> Self {
        let (set, wanted) = std::sync::mpsc::channel::<std::time::Instant>();
        let (wake, woken) = mpsc::unbounded_channel();
        let spawned = std::thread::Builder::new()
            .name("xjob-writer-timer".into())
            .spawn(move || {
                use std::sync::mpsc::RecvTimeoutError;
                let mut next: Option<std::time::Instant> = None;
                loop {
                    let got = match next {
                        None => wanted.recv().map_err(|_| RecvTimeoutError::Disconnected),
                        Some(at) => wanted
                            .recv_timeout(at.saturating_duration_since(std::time::Instant::now())),
                    };
                    match got {
                        Ok(at) => next = Some(next.map_or(at, |n| n.min(at))),
                        Err(RecvTimeoutError::Timeout) => {
                            next = None;
                            if wake.send(()).is_err() {
                                return;
                            }
                        }
                        Err(RecvTimeoutError::Disconnected) => return,
                    }
                }
            });
        if let Err(e) = spawned {
            tracing::error!(error = %e, "the writer's timer thread did not start; held rows wait for the next batch");
        }
        RealTimer { set, woken }
    }

    /// Wakes the writer at `at` (or earlier, for an earlier deadline set before).
    fn wake_at(&self, at: std::time::Instant) {
        let _ = self.set.send(at);
    }
}

/// The child job lists of jobs whose runs this writer recorded (as dispatched), by job id.
#[derive(Default)]
struct Children(HashMap<i32, Option<std::sync::Arc<str>>>);

impl Children {
    fn note(&mut self, r: &TriggerRecord) {
        if self.0.len() > 100_000 {
            self.0.clear();
        }
        self.0.insert(r.job_id, r.children.clone());
    }
}

pub(super) async fn run(
    db: DatabaseConnection,
    mut rx: mpsc::Receiver<Queued>,
    sink: FinishedSink,
    activity: Activity,
    held_count: Arc<AtomicUsize>,
) {
    let mut held = super::pairing::Pairing::default();
    let mut timer = RealTimer::start();
    let mut children = Children::default();
    let sqlite = db.get_database_backend() == sea_orm::DbBackend::Sqlite;
    let mut indexed = std::time::Instant::now();
    loop {
        let (ops, closed) = if held.deadline().is_some() {
            tokio::select! {
                m = rx.recv() => match m {
                    Some(first) => (fill(first, &mut rx), false),
                    None => (Vec::new(), true),
                },
                _ = timer.woken.recv() => (Vec::new(), false),
            }
        } else {
            match rx.recv().await {
                Some(first) => (fill(first, &mut rx), false),
                None => (Vec::new(), true),
            }
        };
        let flush = closed || ops.iter().any(|q| matches!(q.op, Op::Flush(_)));
        let now = std::time::Instant::now();
        let mut b = held.prepare(ops, now, flush, &activity);
        let rows = rows_of(&mut b);
        let written = if rows.is_empty() {
            Written::default()
        } else {
            write_all(&db, rows, false).await
        };
        for r in &written.outcomes {
            children.note(r);
        }
        let finished = finished_runs(&db, &written, &children).await;
        if !finished.is_empty() {
            sink(RunsFinished(finished));
        }
        held.finish(b, !written.lost_any, now, &held_count, &mut |_| {});
        if sqlite && indexed.elapsed() >= crate::store::log_by_job::INDEX_EVERY {
            // a SQLite database in memory: its runs indexed by job as the file writer's are
            match crate::store::log_by_job::index_pooled(&db).await {
                Ok(()) => indexed = std::time::Instant::now(),
                Err(e) => tracing::warn!(error = %e, "runs not indexed by job yet; retrying"),
            }
        }
        if let Some(at) = held.deadline() {
            timer.wake_at(at);
        }
        if written.closed {
            // the engine stopped past its grace and closed the pool: what is still queued or
            // held cannot be written (its runs' pending rows are recovered at the next start)
            rx.close();
            let mut left = held.len();
            while let Some(q) = rx.recv().await {
                left += q.op.len();
            }
            tracing::error!(rows = left, "database pool closed; run rows not written");
            break;
        }
        if closed {
            break;
        }
    }
}

/// The successful runs written with child jobs: their lists from the run records (or, for a
/// run whose outcome this writer never saw, from a read of the jobs).
async fn finished_runs(
    db: &DatabaseConnection,
    written: &Written,
    known: &Children,
) -> Vec<FinishedRun> {
    let ok: Vec<&crate::store::run_rows::Written> = written
        .results
        .iter()
        .filter(|w| w.code == SUCCESS_CODE)
        .collect();
    if ok.is_empty() {
        return Vec::new();
    }
    let unknown: Vec<i32> = ok
        .iter()
        .map(|w| w.job_id)
        .filter(|j| !known.0.contains_key(j))
        .collect();
    let mut read: HashMap<i32, Option<String>> = HashMap::new();
    if !unknown.is_empty() {
        match log_batches::child_lists(db, &unknown).await {
            Ok(lists) => read.extend(unknown.iter().copied().zip(lists)),
            Err(e) => tracing::error!(error = %e, "cannot read child jobs of finished runs"),
        }
    }
    ok.into_iter()
        .filter_map(|w| {
            let list: Option<String> = match known.0.get(&w.job_id) {
                Some(c) => c.as_deref().map(str::to_string),
                None => read.get(&w.job_id).cloned().flatten(),
            };
            list.filter(|c| !c.trim().is_empty())
                .map(|children| FinishedRun {
                    id: w.id,
                    job_id: w.job_id,
                    chain_depth: w.chain_depth,
                    children,
                })
        })
        .collect()
}

/// Whether `e` is the database refusing the data of a statement (a value too long for its
/// column, a character it cannot store, a constraint), or a bug in a batch: splitting the batch
/// finds the row. Anything else (no connection, a timeout) is the same for every row.
fn refused_data(e: &Error) -> bool {
    use sea_orm::{DbErr, RuntimeErr, sqlx};
    match e {
        Error::Db(
            DbErr::Exec(RuntimeErr::SqlxError(s)) | DbErr::Query(RuntimeErr::SqlxError(s)),
        ) => {
            matches!(**s, sqlx::Error::Database(_) | sqlx::Error::Encode(_))
        }
        Error::Stopped(_) => true,
        _ => false,
    }
}

/// Whether `e` says the connection pool is closed (the engine stopped).
fn pool_closed(e: &Error) -> bool {
    use sea_orm::{DbErr, RuntimeErr, sqlx};
    match e {
        Error::Db(
            DbErr::Conn(RuntimeErr::SqlxError(s))
            | DbErr::Exec(RuntimeErr::SqlxError(s))
            | DbErr::Query(RuntimeErr::SqlxError(s)),
        ) => matches!(**s, sqlx::Error::PoolClosed),
        Error::Db(DbErr::ConnectionAcquire(sea_orm::ConnAcquireErr::ConnectionClosed)) => true,
        _ => false,
    }
}

/// Writes `rows` in one transaction, retrying whole on failures that are not about the data;
/// a batch whose data the database refuses is split ([`split_and_write`]). `reduced`: these
/// rows are already in their reduced form.
fn write_all(db: &DatabaseConnection, rows: Vec<Row>, reduced: bool) -> BoxFuture<'_, Written> {
    async move {
        let mut attempt = 0;
        loop {
            attempt += 1;
            match write_once(db, &rows).await {
                Ok(results) => {
                    return Written {
                        results,
                        outcomes: rows
                            .into_iter()
                            .filter_map(|r| match r {
                                Row::Outcome(o) => Some(o),
                                _ => None,
                            })
                            .collect(),
                        ..Default::default()
                    };
                }
                Err(e) if pool_closed(&e) => {
                    return Written {
                        closed: true,
                        ..Written::lost(&rows)
                    };
                }
                Err(e) if refused_data(&e) && !reduced => {
                    return split_and_write(db, rows, e).await;
                }
                Err(e) if attempt < ATTEMPTS && !refused_data(&e) => {
                    tracing::warn!(attempt, error = %e, "run-row batch failed; retrying");
                    tokio::time::sleep(Duration::from_millis(100 << attempt)).await;
                }
                Err(e) => {
                    tracing::error!(rows = rows.len(), error = %e, "run-row batch given up");
                    return Written::lost(&rows);
                }
            }
        }
    }
    .boxed()
}

/// Writes the halves of a refused batch apart; a row refused alone is written reduced, with
/// the database's reason in place of its texts.
async fn split_and_write(db: &DatabaseConnection, mut rows: Vec<Row>, e: Error) -> Written {
    if rows.len() > 1 {
        let second = rows.split_off(rows.len() / 2);
        let first = write_all(db, rows, false).await;
        return first.merge(write_all(db, second, false).await);
    }
    let why = e.to_string();
    match rows.first().and_then(|r| r.reduced(&why)) {
        Some(reduced) => {
            tracing::error!(row = ?short(&rows[0]), error = %why, "a run row was refused; stored reduced");
            write_all(db, vec![reduced], true).await
        }
        None => {
            tracing::error!(row = ?short(&rows[0]), error = %why, "a run row was refused; given up");
            Written::lost(&rows)
        }
    }
}

/// What a log line says of a row: its kind and run (never its texts).
fn short(row: &Row) -> (&'static str, i64) {
    match row {
        Row::Outcome(r) => ("outcome", r.log_id),
        Row::Result(h, _) => ("result", h.log_id),
        Row::Audit(_) => ("audit entry", 0),
    }
}

/// One transaction writing `rows`; a panic while writing is the batch's failure, not the
/// writer's end. Answers the runs whose result it wrote.
async fn write_once(
    db: &DatabaseConnection,
    rows: &[Row],
) -> Result<Vec<crate::store::run_rows::Written>> {
    let txn = db.begin().await?;
    match std::panic::AssertUnwindSafe(write(&txn, rows))
        .catch_unwind()
        .await
    {
        Ok(Ok(f)) => {
            txn.commit().await?;
            Ok(f)
        }
        Ok(Err(e)) => Err(e),
        Err(_) => Err(Error::Stopped("a run-row batch panicked")),
    }
}

async fn write(
    db: &impl ConnectionTrait,
    rows: &[Row],
) -> Result<Vec<crate::store::run_rows::Written>> {
    let mut entries = Vec::new();
    let mut outcomes = Vec::new();
    let mut results = Vec::new();
    for r in rows {
        match r {
            Row::Audit(e) => entries.push(e.clone()),
            Row::Outcome(o) => outcomes.push(o.clone()),
            Row::Result(h, t) => results.push((h.clone(), *t)),
        }
    }
    crate::store::audit::record_many(db, entries).await?;
    crate::store::run_rows::write(db, &outcomes, &results).await
}
