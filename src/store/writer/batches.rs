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
//! written in a reduced form that says why, and every other row lands. A batch whose connection
//! was lost (a server restart, a failover) is retried whole until the database answers again,
//! holding the rows meanwhile (what waits behind them waits too); one that fails for any other
//! reason is retried whole a few times, then given up. A panic while writing is the batch's
//! failure, not the writer's end.

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
        rows: &Rows,
        children: &mut Children,
    ) -> impl Future<Output = Result<Vec<FinishedRun>>>;
    /// Whether `e` is the database refusing a row's data (splitting the batch finds it).
    fn refused(&self, e: &Error) -> bool;
    /// Whether `e` says the connection was lost (the batch waits for the database): the
    /// store's one rule ([`crate::store::connection_lost`]; a SQLite file's own connection
    /// answers no such error).
    fn lost(&self, e: &Error) -> bool {
        matches!(e, Error::Db(d) if crate::store::connection_lost(d))
    }
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
    rows: &Rows,
    children: &mut Children,
    journal: Option<(&Journal, &mut JobCache)>,
) -> Result<(Vec<FinishedRun>, Vec<i64>)> {
    let mut outcomes = Vec::with_capacity(rows.outcomes.len());
    for o in &rows.outcomes {
        children.note(o.job_id, o.children.clone());
        outcomes.push(o);
    }
    let mut results: Vec<(&HandleResult, i64)> =
        rows.results.iter().map(|(h, at)| (h, *at)).collect();
    crate::store::audit::record_in(p, &rows.audits).await?;
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
        let mut rows = Rows::of(&mut b);
        let written = write_all(&mut conn, &mut rows, &mut children).await;
        held.recycle(rows);
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

/// A batch whose connection is lost says so at its first try and then every this many.
const LOST_LOG_EVERY: u32 = 30;

/// How long a batch waits before try `n` (from 1) after its connection was lost: 50 ms,
/// doubling up to 2 s.
fn lost_backoff(n: u32) -> Duration {
    Duration::from_millis((50u64 << n.saturating_sub(1).min(6)).min(2_000))
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
/// is written reduced, with the database's reason in place of its texts. Leaves `rows` empty
/// (with its buffers when the batch went whole, for the next one).
async fn write_all(conn: &mut impl Conn, rows: &mut Rows, children: &mut Children) -> Wrote {
    let mut out = Wrote::default();
    // (rows, whether they are already reduced), the next to write last
    let mut todo = vec![(std::mem::take(rows), false)];
    while let Some((mut piece, reduced)) = todo.pop() {
        if piece.is_empty() {
            continue;
        }
        let (mut attempt, mut lost) = (0, 0u32);
        loop {
            attempt += 1;
            let tried = std::panic::AssertUnwindSafe(conn.write(&piece, children))
                .catch_unwind()
                .await
                .unwrap_or(Err(Error::Stopped("a run-row batch panicked")));
            let e = match tried {
                Ok(f) => {
                    out.finished.extend(f);
                    piece.clear();
                    if rows.outcomes.capacity() < piece.outcomes.capacity() {
                        *rows = std::mem::take(&mut piece);
                    }
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
            if conn.lost(&e) {
                // the database restarted or is unreachable: every row waits for it, none is
                // given up or stored reduced for it (the engine's stop closes the pool)
                lost += 1;
                attempt -= 1;
                if lost == 1 || lost.is_multiple_of(LOST_LOG_EVERY) {
                    tracing::warn!(tries = lost, rows = piece.len(), error = %e, "run-row batch waits for the database");
                }
                tokio::time::sleep(lost_backoff(lost)).await;
                continue;
            }
            if refused && !reduced && piece.len() > 1 {
                let second = piece.split_off(piece.len() / 2);
                todo.push((second, false));
                todo.push((piece, false));
                break;
            }
            if refused && !reduced {
                let why = e.to_string();
                match piece.reduced(&why) {
                    Some(r) => {
                        tracing::error!(row = ?piece.short(), error = %why, "a run row was refused; stored reduced");
                        todo.push((r, true));
                    }
                    None => {
                        tracing::error!(row = ?piece.short(), error = %why, "a run row was refused; given up");
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
            tracing::error!(rows = piece.len(), error = %e, "run-row batch given up");
            out.lost_any = true;
            break;
        }
    }
    out
}

/// The rows a batch writes, owned: audit entries, outcomes, results (received at, epoch ms),
/// in that order when it is split.
#[derive(Default, Debug)]
pub(super) struct Rows {
    pub audits: Vec<Entry>,
    pub outcomes: Vec<TriggerRecord>,
    pub results: Vec<(HandleResult, i64)>,
}

impl Rows {
    /// The rows of `b` (moved out of it, nothing copied).
    fn of(b: &mut Batch) -> Rows {
        Rows {
            audits: std::mem::take(&mut b.audits),
            outcomes: std::mem::take(&mut b.outcomes),
            results: std::mem::take(&mut b.results),
        }
    }

    fn len(&self) -> usize {
        self.audits.len() + self.outcomes.len() + self.results.len()
    }

    fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub(super) fn clear(&mut self) {
        self.audits.clear();
        self.outcomes.clear();
        self.results.clear();
    }

    /// The rows from `at` on (in the order above), taken out of these.
    fn split_off(&mut self, at: usize) -> Rows {
        let a = at.min(self.audits.len());
        let o = (at - a).min(self.outcomes.len());
        let r = (at - a - o).min(self.results.len());
        Rows {
            audits: self.audits.split_off(a),
            outcomes: self.outcomes.split_off(o),
            results: self.results.split_off(r),
        }
    }

    /// What a log line says of the first row: its kind and run (never its texts).
    fn short(&self) -> (&'static str, i64) {
        if let Some(r) = self.outcomes.first().filter(|_| self.audits.is_empty()) {
            ("outcome", r.log_id)
        } else if let Some((h, _)) = self.results.first().filter(|_| self.audits.is_empty()) {
            ("result", h.log_id)
        } else {
            ("audit entry", 0)
        }
    }

    /// The first row cut down to what any database stores (the texts that may carry what a
    /// column refused replaced by the reason), or `None` when it is already reduced.
    fn reduced(&self, why: &str) -> Option<Rows> {
        let note = |what: &str| {
            crate::bounded::cut_bytes(
                &format!("[xjob] {what} could not be stored as it was: {why}"),
                1000,
            )
            .into_owned()
        };
        let mut out = Rows::default();
        if let Some(e) = self.audits.first() {
            let detail = note("the entry");
            if e.detail == detail {
                return None;
            }
            out.audits.push(Entry {
                username: e
                    .username
                    .chars()
                    .filter(char::is_ascii_alphanumeric)
                    .collect(),
                client_ip: String::new(),
                target_id: String::new(),
                detail,
                ..e.clone()
            });
        } else if let Some(r) = self.outcomes.first() {
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
            if reduced.trigger_msg == r.trigger_msg {
                return None;
            }
            out.outcomes.push(reduced);
        } else {
            let (h, at) = self.results.first()?;
            let msg = Some(note("the result message"));
            if h.msg == msg {
                return None;
            }
            out.results.push((HandleResult { msg, ..h.clone() }, *at));
        }
        Some(out)
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

#[cfg(test)]
mod tests {
    use super::*;

    fn rows(audits: usize, outcomes: usize, results: usize) -> Rows {
        let entry = |i: usize| Entry {
            detail: format!("a{i}"),
            ..Entry::default()
        };
        Rows {
            audits: (0..audits).map(entry).collect(),
            outcomes: (0..outcomes as i64)
                .map(|log_id| TriggerRecord {
                    log_id,
                    ..Default::default()
                })
                .collect(),
            results: (0..results as i64)
                .map(|log_id| {
                    (
                        HandleResult {
                            log_id,
                            code: 200,
                            msg: None,
                        },
                        log_id,
                    )
                })
                .collect(),
        }
    }

    /// The rows as one list: what a split must keep in order.
    fn listed(r: &Rows) -> Vec<String> {
        let a = r.audits.iter().map(|e| e.detail.clone());
        let o = r.outcomes.iter().map(|o| format!("o{}", o.log_id));
        let h = r.results.iter().map(|(h, _)| format!("r{}", h.log_id));
        a.chain(o).chain(h).collect()
    }

    proptest::proptest! {
        /// Splitting a batch anywhere keeps every row once and in order: the first part holds
        /// the first `at` rows of the list audit entries, outcomes, results, the second the rest.
        #[test]
        fn a_split_keeps_every_row_in_order(
            a in 0usize..4, o in 0usize..6, r in 0usize..6, at in 0usize..20,
        ) {
            let mut first = rows(a, o, r);
            let whole = listed(&first);
            let at = at.min(whole.len());
            let second = first.split_off(at);
            proptest::prop_assert_eq!(first.len(), at);
            let mut joined = listed(&first);
            joined.extend(listed(&second));
            proptest::prop_assert_eq!(joined, whole);
        }
    }

    /// A connection whose every try fails as `fail` says, `failures` times, then writes.
    struct Failing {
        failures: u32,
        tries: u32,
        fail: fn() -> Error,
    }

    impl Conn for Failing {
        async fn write(&mut self, _: &Rows, _: &mut Children) -> Result<Vec<FinishedRun>> {
            self.tries += 1;
            match self.tries <= self.failures {
                true => Err((self.fail)()),
                false => Ok(Vec::new()),
            }
        }
        fn refused(&self, e: &Error) -> bool {
            matches!(e, Error::Config(_))
        }
        fn lost(&self, e: &Error) -> bool {
            matches!(e, Error::Io(_))
        }
        fn closed(&self, _: &Error) -> bool {
            false
        }
        fn exec(&mut self, _: Exec) {}
        fn listed(&mut self) -> Vec<Entry> {
            Vec::new()
        }
        async fn after_batch(&mut self) {}
        fn lingers(&self) -> bool {
            false
        }
    }

    /// A batch whose connection is lost waits for the database however many tries that takes
    /// (a server down for a minute here), losing no row; one failing for another reason that is
    /// not its data's is given up after its tries.
    #[tokio::test(start_paused = true)]
    async fn a_lost_connection_costs_no_row() {
        let gone = || Error::Io(std::io::Error::new(std::io::ErrorKind::BrokenPipe, "gone"));
        let mut down = Failing {
            failures: 60,
            tries: 0,
            fail: gone,
        };
        let started = tokio::time::Instant::now();
        let mut batch = rows(1, 2, 2);
        let wrote = write_all(&mut down, &mut batch, &mut Children::default()).await;
        assert!(!wrote.lost_any && !wrote.closed);
        assert_eq!(down.tries, 61);
        assert!(
            started.elapsed() >= Duration::from_secs(60),
            "{:?}",
            started.elapsed()
        );
        // neither the data's fault nor a lost connection: a few tries, then given up
        let mut failing = Failing {
            failures: 60,
            tries: 0,
            fail: || Error::LeaseLost,
        };
        let wrote = write_all(&mut failing, &mut rows(1, 2, 2), &mut Children::default()).await;
        assert!(wrote.lost_any);
        assert_eq!(failing.tries, ATTEMPTS);
    }

    /// A row refused alone is written reduced once; reduced again it is given up.
    #[test]
    fn a_refused_row_is_reduced_once() {
        for one in [rows(1, 0, 0), rows(0, 1, 0), rows(0, 0, 1)] {
            let reduced = one.reduced("too long").expect("reduced once");
            assert_eq!(reduced.len(), 1);
            assert_eq!(reduced.short(), one.short());
            assert!(reduced.reduced("too long").is_none());
        }
    }
}
