//! The run-row writer's loop, written once for both connections ([`Conn`]: the SQLite file's
//! own connection, [`super::sqlite_file`], or the sea-orm pool, [`super::pool`]): take what is
//! queued, pair outcomes with results ([`Pairing`]), write the batch's rows in one transaction
//! on the store port ([`write_rows`]: audit entries, the fire journal's rows on a file,
//! [`run_rows::write`], the finished runs' child jobs), hand finished runs on, run the work
//! queued for the connection, and wait for the next item or the oldest held entry's deadline
//! (in real time, [`RealTimer`]: a test's runtime clock may be paused).
//!
//! One bad row never costs the others: texts are bounded to their columns when they are queued,
//! and when the database still refuses a batch (an error it reports about the data, not a lost
//! connection) the batch is split in halves until the offending row is alone; that row is then
//! written in a reduced form that says why, and every other row lands. A batch that fails for
//! any other reason (the database is down) is retried whole a few times, then given up. A panic
//! while writing is the batch's failure, not the writer's end.

use futures::FutureExt;

use super::journal::{self, JobCache};
use super::pairing::{Batch, Pairing};
use super::*;
use crate::store::audit::Entry;
use crate::store::port::Port;
use crate::store::run_rows::{self, Children};

/// The connection a writer writes on: how one transaction of rows is written, and what else
/// happens between batches.
pub(super) trait Conn {
    /// Writes `rows` in one transaction ([`write_rows`]); answers the finished runs with
    /// child jobs once it committed.
    fn write(
        &mut self,
        rows: &[Row],
        children: &mut Children,
    ) -> impl Future<Output = Result<Vec<FinishedRun>>>;
    /// Whether `e` is the database refusing a row's data (splitting the batch finds it).
    fn refused(&self, e: &Error) -> bool;
    /// Whether `e` says nothing more can be written (the pool was closed).
    fn closed(&self, e: &Error) -> bool;
    /// Runs work queued for this connection (a SQLite file's scan pages).
    fn exec(&mut self, f: Exec);
    /// Audit entries listed for the next batch (a SQLite file's).
    fn listed(&mut self) -> Vec<Entry>;
    /// After each batch: upkeep (the index of runs by job).
    fn after_batch(&mut self) -> impl Future<Output = ()>;
    /// Whether a trickle of items is gathered for [`LINGER`] before it is written.
    fn lingers(&self) -> bool;
}

/// Writes `rows` in the port's transaction: audit entries, then on a SQLite file the rows of
/// journalled runs (`journal`; answered, to be settled once committed), then the outcomes and
/// results ([`run_rows::write`]); answers the finished runs with child jobs.
pub(super) async fn write_rows(
    p: &Port<'_>,
    rows: &[Row],
    children: &mut Children,
    journal: Option<(&Journal, &mut JobCache)>,
) -> Result<(Vec<FinishedRun>, Vec<i64>)> {
    let (mut audits, mut outcomes, mut results) = (Vec::new(), Vec::new(), Vec::new());
    for r in rows {
        match r {
            Row::Audit(e) => audits.push(e.clone()),
            Row::Outcome(o) => {
                children.note(o.job_id, o.children.clone());
                outcomes.push(o);
            }
            Row::Result(h, t) => results.push((h, *t)),
        }
    }
    crate::store::audit::record_in(p, &audits).await?;
    let (mut written, inserted, journal) = match journal {
        Some((j, jobs)) => {
            let (w, i) = journal::insert_rows(p, j, jobs, &mut outcomes, &mut results).await?;
            (w, i, Some(j))
        }
        None => Default::default(),
    };
    written.extend(run_rows::write(p, &outcomes, &results).await?);
    let finished = run_rows::finished(p, &written, children).await?;
    if let Some(j) = journal {
        p.on_file(|c| j.delete_emptied(c, &inserted)).transpose()?;
    }
    Ok((finished, inserted))
}

/// The writer's loop on `conn` until its queue closes.
pub(super) async fn run(
    mut conn: impl Conn,
    mut rx: mpsc::Receiver<Queued>,
    sink: FinishedSink,
    activity: Activity,
    held_count: Arc<AtomicUsize>,
) {
    let mut held = Pairing::default();
    let mut timer = RealTimer::start();
    let mut children = Children::default();
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
        let (ops, closed) = if conn.lingers() && !closed {
            linger(ops, &mut rx).await
        } else {
            (ops, closed)
        };
        let flush = closed || ops.iter().any(|q| matches!(q.op, Op::Flush(_)));
        let now = std::time::Instant::now();
        let mut b = held.prepare(ops, now, flush, &activity);
        b.audits.extend(conn.listed());
        let rows = rows_of(&mut b);
        let written = write_all(&mut conn, rows, &mut children).await;
        if !written.finished.is_empty() {
            sink(RunsFinished(written.finished));
        }
        held.finish(b, !written.lost_any, now, &held_count, &mut |f| {
            conn.exec(f)
        });
        conn.after_batch().await;
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
            tracing::error!(rows = left, "database closed; run rows not written");
            break;
        }
        if closed {
            break;
        }
    }
}

/// What writing a batch's rows came to.
#[derive(Default)]
struct Wrote {
    finished: Vec<FinishedRun>,
    /// Whether any row was given up.
    lost_any: bool,
    /// Whether nothing more can be written (the engine stopped past its grace).
    closed: bool,
}

/// Writes `rows`, one transaction each try: retried whole on failures that are not about the
/// data; a batch whose data the database refuses is split in halves, and a row refused alone
/// is written reduced, with the database's reason in place of its texts.
async fn write_all(conn: &mut impl Conn, rows: Vec<Row>, children: &mut Children) -> Wrote {
    let mut out = Wrote::default();
    // (rows, whether they are already reduced), the next to write last
    let mut todo = vec![(rows, false)];
    while let Some((mut rows, reduced)) = todo.pop() {
        if rows.is_empty() {
            continue;
        }
        let mut attempt = 0;
        loop {
            attempt += 1;
            let tried = std::panic::AssertUnwindSafe(conn.write(&rows, children))
                .catch_unwind()
                .await
                .unwrap_or(Err(Error::Stopped("a run-row batch panicked")));
            let e = match tried {
                Ok(f) => {
                    out.finished.extend(f);
                    break;
                }
                Err(e) => e,
            };
            let refused = matches!(e, Error::Stopped(_)) || conn.refused(&e);
            if conn.closed(&e) {
                out.lost_any = true;
                out.closed = true;
                return out;
            }
            if refused && !reduced && rows.len() > 1 {
                let second = rows.split_off(rows.len() / 2);
                todo.push((second, false));
                todo.push((rows, false));
                break;
            }
            if refused && !reduced {
                let why = e.to_string();
                match rows[0].reduced(&why) {
                    Some(r) => {
                        tracing::error!(row = ?short(&rows[0]), error = %why, "a run row was refused; stored reduced");
                        todo.push((vec![r], true));
                    }
                    None => {
                        tracing::error!(row = ?short(&rows[0]), error = %why, "a run row was refused; given up");
                        out.lost_any = true;
                    }
                }
                break;
            }
            if attempt < ATTEMPTS && !refused {
                tracing::warn!(attempt, error = %e, "run-row batch failed; retrying");
                tokio::time::sleep(Duration::from_millis(100 << attempt)).await;
                continue;
            }
            tracing::error!(rows = rows.len(), error = %e, "run-row batch given up");
            out.lost_any = true;
            break;
        }
    }
    out
}

/// What a log line says of a row: its kind and run (never its texts).
fn short(row: &Row) -> (&'static str, i64) {
    match row {
        Row::Outcome(r) => ("outcome", r.log_id),
        Row::Result(h, _) => ("result", h.log_id),
        Row::Audit(_) => ("audit entry", 0),
    }
}

/// One row a batch writes.
#[derive(Clone, Debug)]
pub(super) enum Row {
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
fn rows_of(b: &mut Batch) -> Vec<Row> {
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

/// Gathers a small batch of run rows and audit entries for up to [`LINGER`] after its first
/// item, so that a trickle of callbacks, outcomes and console changes is written a few
/// transactions a second rather than one transaction per item (each commit appends every page
/// it touched to the WAL). Anything that a caller waits for besides a result's
/// acknowledgement (work on the connection, a flush) ends the wait at once. Answers the ops and
/// whether the queue closed.
async fn linger(mut ops: Vec<Queued>, rx: &mut mpsc::Receiver<Queued>) -> (Vec<Queued>, bool) {
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
        let next = tokio::time::timeout_at(until, rx.recv()).await;
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
