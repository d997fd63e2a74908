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
//! The writer pairs each run's outcome with its result in memory ([`pairing`]) so that one
//! update writes both: a dispatched outcome waits up to [`OUTCOME_HOLD`] for its result, and a
//! result of a run announced by [`LogWriter::dispatching`] waits up to [`RESULT_HOLD`] for its
//! outcome (measured at 5,000 remote fires/s on SQLite: the writer's CPU per fire 18.5 → 15 µs).
//!
//! Its loop and each batch's writes are written once ([`batches`]: the rows through the store
//! port, [`crate::store::run_rows`]); what differs is the connection ([`batches::Conn`]):
//! - **SQLite file** (one node by construction, [`sqlite_file`]): a dedicated OS thread owns a
//!   synchronous connection (rusqlite over the same `libsqlite3-sys` as sqlx), with the fire
//!   journal ([`journal`]); each batch's statements are cached and prepared, with no thread hop
//!   per statement. At start it takes an exclusive lock on the database file, so a second node
//!   on the same file refuses to start ([`crate::Error::DatabaseInUse`]).
//! - **Pool** (PostgreSQL, MySQL, in-memory SQLite, [`pool`]): a task writing each batch in one
//!   sea-orm transaction (on PostgreSQL and MySQL one statement per kind of row, the rows as
//!   one JSON parameter).
//!
//! On the file and on a database server, a small batch waits up to [`LINGER`] for more before
//! it is written, so a trickle of results is a few transactions a second rather than one per
//! item (on PostgreSQL 10,000 fires/s: 36–38 µs of the server's CPU per fire against 42
//! without it).
//!
//! A batch whose connection was lost is written again until the database answers; one that
//! fails otherwise is retried a few times before it is given up (logged as an error; a waiting
//! `/api/callback` then answers a failure, so the executor sends it again); a batch the
//! database refuses for its data is split until the bad row is found and stored reduced.
//!
//! Every queued item holds one unit of the engine's [`Activity`] until it is written, so a
//! graceful stop (and a test on paused time) waits for the writes it has handed over.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use actix::prelude::*;
use parking_lot::Mutex;
use sea_orm::{ConnectionTrait, DatabaseConnection, DbBackend, Statement, TransactionTrait};
use tokio::sync::{mpsc, oneshot};

use crate::activity::{Activity, ActivityGuard};
use crate::error::{Error, Result};
use crate::fire::HandleResult;
use crate::fire::TriggerRecord;
use crate::model::wire::SUCCESS_CODE;
pub(crate) use journal::Journal;

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
/// How long the writer waits after the first of a small batch of run rows for more (on the file
/// and the pool: on a database server each commit waits for the log's flush).
pub(crate) const LINGER: Duration = Duration::from_millis(5);
/// A batch of at least this many items is written without waiting for more.
pub(crate) const LINGER_BELOW: usize = 256;
/// Most outcomes the SQLite writer holds at once; beyond that they are written at once.
const MAX_HELD: usize = 16_384;
/// How long an exclusive lock on the SQLite file is waited for at start (a node of this
/// process that is stopping may still hold it for a moment).
const LOCK_WAIT: Duration = Duration::from_secs(3);

/// How far ahead of the fires being sent the SQLite file's dispatch mark is written: the next
/// second's fires find it written.
pub(crate) const MARK_AHEAD: Duration = Duration::from_secs(1);
/// How long before the fires it covers go out the mark ahead is written.
const MARK_LEAD: Duration = Duration::from_millis(150);

/// The SQLite file's dispatch mark: the nominal time up to which it is written (committed),
/// up to which it was asked for, and up to which fires were sent (epoch ms).
#[derive(Debug, Default)]
struct Marks {
    written: std::sync::atomic::AtomicI64,
    asked: std::sync::atomic::AtomicI64,
    sent: std::sync::atomic::AtomicI64,
}

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

/// Work run on the SQLite writer's own connection (the single-node scan pass), with the
/// writer's journal of pending fires.
type Exec = Box<dyn FnOnce(&mut rusqlite::Connection, &mut Journal) + Send + Sync>;

enum Op {
    Outcomes(Vec<TriggerRecord>),
    /// Runs whose executor calls are being made: their outcomes follow.
    Dispatching(Vec<i64>),
    Exec(Exec),
    /// A console change's audit entry: written with the batch, nobody waits for it.
    Audit(Box<crate::store::audit::Entry>),
    /// Audit entries wait in [`LogWriter`]'s list for the SQLite writer's next batch (sent by
    /// the first entry of the list only).
    AuditsListed,
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
            Op::Exec(_) | Op::Flush(_) | Op::Audit(_) | Op::AuditsListed => 1,
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
    /// The CPU the SQLite writer has to itself, kept off the dispatching thread (see
    /// [`Target::separate_cpus`]).
    writer_cpu: Option<usize>,
    /// The SQLite writer's connection, held by the writer thread while it writes a batch
    /// (`None` on the pool, and once the writer stopped): see [`LogWriter::transact_now`].
    conn: Option<SharedConn>,
    /// The SQLite file's dispatch mark (see [`LogWriter::dispatch_mark`]).
    marks: Arc<Marks>,
    /// Audit entries for the SQLite writer's next batch (`None` on the pool): see
    /// [`LogWriter::audit`].
    audits: Option<Audits>,
}

/// Audit entries the SQLite writer takes into its next batch.
pub(super) type Audits = Arc<Mutex<Vec<crate::store::audit::Entry>>>;

/// The SQLite writer's connection: the writer thread locks it for each batch, and a console
/// change may use it on its own thread in between ([`LogWriter::transact_now`]). `None` before the
/// writer is ready and after it stopped.
pub(super) type SharedConn = Arc<Mutex<Option<rusqlite::Connection>>>;

impl LogWriter {
    /// Starts the writer for `target`; finished runs with child jobs go to `finished`. Fails
    /// when the writer cannot run: its thread cannot start, or it cannot open the SQLite file.
    pub async fn start(target: Target, activity: Activity, finished: FinishedSink) -> Result<Self> {
        let (tx, rx) = mpsc::channel(QUEUE);
        let single_node = target.single_node();
        let held = Arc::new(AtomicUsize::new(0));
        let mut cpu = None;
        let mut shared = None;
        let mut listed = None;
        let lock = match target {
            Target::SqliteFile {
                path,
                lock,
                separate_cpus,
            } => {
                // the starting thread is the one that dispatches
                let writer_cpu = if separate_cpus {
                    crate::cpu::separate_cpus()
                } else {
                    None
                };
                cpu = writer_cpu;
                let (activity, held) = (activity.clone(), held.clone());
                let (ready, started) = oneshot::channel();
                let shown = path.clone();
                let conn = SharedConn::default();
                shared = Some(conn.clone());
                let audits = Audits::default();
                listed = Some(audits.clone());
                std::thread::Builder::new()
                    .name("xjob-sqlite-writer".into())
                    .spawn(move || {
                        let on = sqlite_file::Thread {
                            rx,
                            sink: finished,
                            writer_cpu,
                            activity,
                            held_count: held,
                            conn,
                            audits,
                        };
                        sqlite_file::run(&path, on, ready)
                    })
                    .map_err(|e| {
                        Error::Config(format!("cannot start the SQLite writer thread: {e}"))
                    })?;
                match started.await {
                    Ok(Ok(())) => {}
                    Ok(Err(e)) => {
                        return Err(Error::Config(format!(
                            "the SQLite writer cannot open {shown}: {e}"
                        )));
                    }
                    Err(_) => return Err(Error::Stopped("the SQLite writer thread")),
                }
                Some(lock)
            }
            Target::Pool(db) => {
                let pool = pool::PoolConn::new(db);
                tokio::spawn(batches::run(
                    pool,
                    rx,
                    finished,
                    activity.clone(),
                    held.clone(),
                ));
                None
            }
        };
        Ok(LogWriter {
            tx,
            activity,
            single_node,
            lock: Arc::new(Mutex::new(lock)),
            held,
            writer_cpu: cpu,
            conn: shared,
            audits: listed,
            marks: Arc::default(),
        })
    }

    /// Whether the database serves only this node (a locked SQLite file).
    pub fn single_node(&self) -> bool {
        self.single_node
    }

    /// On a SQLite file, before fires with nominal times up to `through` (epoch ms) are sent:
    /// makes sure the dispatch mark covers them (at a restart, the fires still pending at or
    /// before it are the ones that may have been sent, and are settled by asking their
    /// executors; those after it are sent as usual). The mark is written [`MARK_AHEAD`] ahead,
    /// between the writer's batches, so the next second's fires find it written and wait for
    /// nothing; only a mark not yet written is waited for. Elsewhere a no-op: a shared
    /// database's buckets carry their own marks.
    pub(crate) async fn dispatch_mark(
        &self,
        through: i64,
        clock: &crate::clock::Clock,
    ) -> Result<()> {
        if !self.single_node {
            return Ok(());
        }
        let m = &self.marks;
        m.sent.fetch_max(through, Ordering::AcqRel);
        let ahead = through.saturating_add(MARK_AHEAD.as_millis() as i64);
        if m.written.load(Ordering::Acquire) >= through {
            if m.asked.fetch_max(ahead, Ordering::AcqRel) < ahead {
                // written shortly before the next second's fires go: a crash before then finds
                // the mark at the fires actually sent, not a second ahead of them
                let wait = ahead - MARK_LEAD.as_millis() as i64 - clock.now_ms();
                let me = self.clone();
                actix::spawn(async move {
                    if wait > 0 {
                        tokio::time::sleep(Duration::from_millis(wait as u64)).await;
                    }
                    if let Err(e) = me.write_mark(ahead, false).await {
                        tracing::warn!(error = %e, "dispatch mark not written; the next dispatch waits for it");
                    }
                });
            }
            return Ok(());
        }
        m.asked.fetch_max(ahead, Ordering::AcqRel);
        self.write_mark(ahead, false).await
    }

    /// At a graceful stop, once nothing is being sent: brings the dispatch mark back to the
    /// fires actually sent, so the next start finds no fire in doubt that never went out.
    pub(crate) async fn settle_mark(&self) -> Result<()> {
        if !self.single_node {
            return Ok(());
        }
        let sent = self.marks.sent.load(Ordering::Acquire);
        self.write_mark(sent, true).await
    }

    async fn write_mark(&self, through: i64, exact: bool) -> Result<()> {
        self.exec(move |c| journal::write_mark(c, through, exact))
            .await??;
        if exact {
            self.marks.written.store(through, Ordering::Release);
        } else {
            self.marks.written.fetch_max(through, Ordering::AcqRel);
        }
        Ok(())
    }

    /// The CPU the SQLite writer was given to itself (`database.separate_writer_cpu` on a
    /// machine with several CPUs); the dispatching thread and the threads it starts later are
    /// kept off it.
    pub(crate) fn writer_cpu(&self) -> Option<usize> {
        self.writer_cpu
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
        self.queue(Op::Outcomes(vec![record.bounded()])).await
    }

    /// Tells the writer that these runs' executor calls are being made, before the calls: a
    /// result that comes before its run's outcome is then held for it, so one row update
    /// writes both. Never waits (a full queue skips the notice; nothing depends on it).
    pub fn dispatching(&self, log_ids: Vec<i64>) {
        if log_ids.is_empty() {
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
        let records = records.into_iter().map(TriggerRecord::bounded).collect();
        self.queue(Op::Outcomes(records)).await
    }

    /// Queues results received at `at_ms` without waiting (neither for room in the queue nor
    /// for the write): answers what tells when they are written (`true`) or given up
    /// (`false`), or `Err(items)` when the queue is full (the caller then waits with
    /// [`LogWriter::results_acked`]).
    pub fn try_results_acked(
        &self,
        items: Vec<HandleResult>,
        at_ms: i64,
    ) -> std::result::Result<Written, Vec<HandleResult>> {
        let (ack, done) = oneshot::channel();
        let q = Queued {
            op: Op::Results {
                items: bounded(items),
                at_ms,
                ack: Some(Ack::new(ack)),
            },
            _activity: self.activity.enter(),
        };
        match self.tx.try_send(q) {
            Ok(()) => Ok(Written(done)),
            Err(e) => Err(match e.into_inner().op {
                Op::Results { items, .. } => items,
                _ => Vec::new(),
            }),
        }
    }

    /// Queues results received at `at_ms` (waiting while the queue is full); answers what tells
    /// when they are written.
    pub async fn results_acked(&self, items: Vec<HandleResult>, at_ms: i64) -> Result<Written> {
        let (ack, done) = oneshot::channel();
        self.queue(Op::Results {
            items: bounded(items),
            at_ms,
            ack: Some(Ack::new(ack)),
        })
        .await?;
        Ok(Written(done))
    }

    /// Queues results and answers once they are written (`false`: the write failed).
    pub async fn results_written(&self, items: Vec<HandleResult>, at_ms: i64) -> Result<bool> {
        self.results_acked(items, at_ms).await?.wait().await
    }

    /// Runs `f` on the SQLite writer's connection, between batches: the scan store's passes
    /// and job starts on a SQLite file this node holds (elsewhere it fails with
    /// [`Error::Stopped`]).
    pub(crate) async fn exec<R: Send + 'static>(
        &self,
        f: impl FnOnce(&mut rusqlite::Connection) -> R + Send + Sync + 'static,
    ) -> Result<R> {
        self.exec_journalled(move |c, _| f(c)).await
    }

    /// Runs `f`, a rule written on the store's port, in a write transaction on the SQLite
    /// writer's connection (committed when `f` answers `Ok`, rolled back otherwise), on the calling thread when the writer is between
    /// batches and the database's write lock is free at once, else on the writer's thread as
    /// [`LogWriter::exec`] does. For a console change that waits for its answer and does not
    /// depend on run rows queued before it (creating or starting a job): it saves the hand-over
    /// to the writer thread and back, two wake-ups and two context switches, a third of such a
    /// request's cost on an otherwise idle node (BENCHMARKS.md, 2026-11-28, abdc9e2). It never waits
    /// here: not for a batch in progress, and not for another connection's write transaction,
    /// which may be one this thread's own runtime has to drive to its commit. The transaction
    /// holds the write lock from its start (`BEGIN IMMEDIATE`): a deferred one that reads first
    /// takes a snapshot, and when a pool connection commits before its first write, that write
    /// fails at once with `SQLITE_BUSY_SNAPSHOT` instead of waiting its turn.
    pub(crate) async fn transact_now<R: Send + 'static>(
        &self,
        f: impl AsyncFnOnce(&crate::store::port::Port<'_>) -> Result<R> + Send + Sync + 'static,
    ) -> Result<R> {
        if let Some(mut slot) = self.conn.as_ref().and_then(|c| c.try_lock())
            && let Some(conn) = slot.as_mut()
            && sqlite_file::began_at_once(conn)
        {
            // a panic rolls the transaction back and is answered as the queued path answers it
            return std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                crate::store::port::file_tx_begun(conn, f)
            }))
            .map_err(|_| Error::Stopped("run-row writer"))?;
        }
        self.exec(move |conn| crate::store::port::file_tx(conn, f))
            .await?
    }

    /// As [`LogWriter::exec`], with the writer's journal of pending fires (the scan's pages
    /// record their fires in it).
    pub(crate) async fn exec_journalled<R: Send + 'static>(
        &self,
        f: impl FnOnce(&mut rusqlite::Connection, &mut Journal) -> R + Send + Sync + 'static,
    ) -> Result<R> {
        let (tx, rx) = oneshot::channel();
        self.queue(Op::Exec(Box::new(move |c, j| {
            let _ = tx.send(f(c, j));
        })))
        .await?;
        rx.await.map_err(|_| Error::Stopped("run-row writer"))
    }

    /// Queues an audit entry, written with the next batch in its transaction (one commit for
    /// many console changes: an insert of its own per change cost a third of the job-creation
    /// rate, BENCHMARKS.md, 2026-11-24, 74d9bc7). [`LogWriter::flush`] makes it visible.
    /// On a SQLite file the entry goes into a list the writer takes with its next batch, and
    /// only the list's first entry sends the writer a message: one wake-up of the writer per
    /// batch rather than per console change (a loop of creates and starts on one connection
    /// otherwise woke it twice per job). The message holds the engine's activity until its
    /// batch is written, and every entry listed before that batch is in it; an entry listed
    /// after it finds the list empty and sends its own. While a clone of this handle exists
    /// the writer thread runs, so a listed entry is never left behind.
    pub(crate) async fn audit(&self, entry: crate::store::audit::Entry) -> Result<()> {
        let Some(audits) = &self.audits else {
            return self.queue(Op::Audit(Box::new(entry))).await;
        };
        let first = {
            let mut list = audits.lock();
            list.push(entry);
            list.len() == 1
        };
        if first {
            self.queue(Op::AuditsListed).await
        } else {
            Ok(())
        }
    }

    /// Batches waiting for the writer now (its queue is bounded: a full queue makes senders wait).
    pub fn queued(&self) -> usize {
        self.tx.max_capacity() - self.tx.capacity()
    }

    /// Trigger outcomes the writer holds now for their results.
    pub fn held(&self) -> usize {
        self.held.load(Ordering::Relaxed)
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

/// Tells when queued results are written: [`Written::wait`] answers `true` once every one is,
/// `false` when the writer gave any up.
#[derive(Debug)]
pub struct Written(oneshot::Receiver<bool>);

impl Written {
    /// Waits for the write.
    pub async fn wait(self) -> Result<bool> {
        self.0.await.map_err(|_| Error::Stopped("run-row writer"))
    }
}

/// Results with their messages bounded to their column.
fn bounded(items: Vec<HandleResult>) -> Vec<HandleResult> {
    items.into_iter().map(HandleResult::bounded).collect()
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

mod batches;
pub(crate) mod journal;
mod pairing;
mod pool;
mod sqlite_file;

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
            let writer = LogWriter::start(target, Activity::default(), Box::new(|_| {}))
                .await
                .unwrap();
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
            // after a batch took the list: the next entries are written by a later one
            for i in 5..7 {
                writer
                    .audit(crate::store::audit::Entry {
                        action: "job.start",
                        target_type: "job",
                        target_id: i.to_string(),
                        ..Default::default()
                    })
                    .await
                    .unwrap();
            }
            writer.flush().await.unwrap();
            let (total, _) =
                crate::store::audit::page(&db, &crate::store::audit::Filter::default(), 0, 10)
                    .await
                    .unwrap();
            assert_eq!(total, 7, "{:?}", db.get_database_backend());
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
        )
        .await
        .unwrap();
        let result = |log_id: i64, code: i32, msg: &str| HandleResult {
            log_id,
            code,
            msg: Some(msg.into()),
        };
        writer
            .outcome(TriggerRecord {
                log_id: ids[0],
                job_id: parent,
                children: Some("2".into()),
                trigger_ms: 1_500,
                trigger_code: 200,
                trigger_msg: "triggered".into(),
                trigger_type: TriggerType::Manual,
                ..Default::default()
            })
            .await
            .unwrap();
        writer
            .results_acked(
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

    /// Makes the database refuse any run row whose trigger or handle message holds `poison`
    /// (a stand-in for whatever a backend may refuse that bounding cannot foresee).
    async fn poison_rows(db: &DatabaseConnection) {
        let sql: &[&str] = match db.get_database_backend() {
            DbBackend::Postgres => &[
                "CREATE FUNCTION refuse_poison() RETURNS trigger AS $$ BEGIN \
                 IF NEW.trigger_msg LIKE '%poison%' OR NEW.handle_msg LIKE '%poison%' THEN \
                 RAISE EXCEPTION 'row refused by the test'; END IF; RETURN NEW; END $$ \
                 LANGUAGE plpgsql",
                "CREATE TRIGGER refuse_poison BEFORE UPDATE ON xxl_job_log FOR EACH ROW \
                 EXECUTE FUNCTION refuse_poison()",
            ],
            DbBackend::MySql => &[
                "CREATE TRIGGER refuse_poison BEFORE UPDATE ON xxl_job_log FOR EACH ROW \
                 BEGIN IF NEW.trigger_msg LIKE '%poison%' OR NEW.handle_msg LIKE '%poison%' \
                 THEN SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'row refused by the test'; \
                 END IF; END",
            ],
            _ => &[
                "CREATE TRIGGER refuse_poison BEFORE UPDATE ON xxl_job_log FOR EACH ROW \
                 WHEN NEW.trigger_msg LIKE '%poison%' OR NEW.handle_msg LIKE '%poison%' \
                 BEGIN SELECT RAISE(ABORT, 'row refused by the test'); END",
            ],
        };
        for s in sql {
            db.execute_unprepared(s).await.unwrap();
        }
    }

    /// One bad row never costs the rest of its batch, on every backend: a NUL, a 100 KB param
    /// and a 300-character address are bounded when queued; a row the database still refuses
    /// (here by a trigger) is found by splitting the batch and stored reduced with the reason;
    /// every ordinary outcome and result of the same batches lands.
    #[tokio::test]
    async fn one_bad_row_never_costs_its_batch() {
        for db in crate::store::tests::every_backend().await {
            let backend = db.get_database_backend();
            poison_rows(&db).await;
            let now = crate::clock::ms_to_naive(1_000);
            let g = crate::store::groups::insert(&db, "app", "App", 1, None, now)
                .await
                .unwrap();
            let spec = crate::JobSpec::cron(g, "job", "* * * * * ?", "h");
            let job = crate::store::jobs::insert(&db, spec.validate(chrono_tz::UTC, now).unwrap())
                .await
                .unwrap();
            let mut ids = vec![];
            for _ in 0..24 {
                ids.push(
                    logs::insert_run(&db, g, job, 1_000, TriggerType::Manual, 0)
                        .await
                        .unwrap(),
                );
            }
            let writer = LogWriter::start(
                Target::Pool(db.clone()),
                Activity::default(),
                Box::new(|_| {}),
            )
            .await
            .unwrap();
            let record = |k: usize| TriggerRecord {
                log_id: ids[k],
                job_id: job,
                trigger_ms: 2_000,
                executor_address: Some("http://e:1/".into()),
                executor_param: Some(format!("p{k}")),
                trigger_code: 200,
                trigger_msg: format!("ordinary {k}"),
                trigger_type: TriggerType::Manual,
                ..Default::default()
            };
            let mut records: Vec<TriggerRecord> = (0..20).map(record).collect();
            records[3].trigger_msg = "with a \0 NUL".into();
            records[7].executor_param = Some("x".repeat(100_000));
            records[11].executor_address = Some(format!("http://{}/", "h".repeat(300)));
            records[15].trigger_msg = "poison".into();
            writer.outcomes(records).await.unwrap();
            let result = |k: usize, msg: &str| HandleResult {
                log_id: ids[k],
                code: 200,
                msg: Some(msg.into()),
            };
            let mut results: Vec<HandleResult> =
                (20..24).map(|k| result(k, &format!("done {k}"))).collect();
            results[1].msg = Some("poison result".into());
            results[2].msg = Some("nul \0 here".into());
            assert!(
                writer.results_written(results, 3_000).await.unwrap(),
                "{backend:?}: the results' write is acknowledged"
            );
            writer.flush().await.unwrap();
            let row = |k: usize| logs::get(&db, ids[k]);
            for k in (0..20).filter(|k| ![3, 7, 11, 15].contains(k)) {
                let r = row(k).await.unwrap();
                assert_eq!(r.trigger_code, 200, "{backend:?} run {k}");
                assert_eq!(r.executor_param.as_deref(), Some(format!("p{k}").as_str()));
            }
            let msg = |r: &entity::xxl_job_log::Model| r.trigger_msg.clone().unwrap_or_default();
            assert_eq!(msg(&row(3).await.unwrap()), "with a  NUL", "{backend:?}");
            let param = row(7).await.unwrap().executor_param.unwrap();
            assert_eq!(
                param.chars().count(),
                crate::jobs::MAX_PARAM_CHARS,
                "{backend:?}"
            );
            assert!(param.ends_with("[cut: 100000 characters in all]"));
            let address = row(11).await.unwrap().executor_address.unwrap();
            assert_eq!(address.chars().count(), 255, "{backend:?}");
            let poisoned = row(15).await.unwrap();
            assert_eq!(
                poisoned.trigger_code, 200,
                "{backend:?}: the refused row is stored"
            );
            assert!(
                msg(&poisoned).starts_with("[xjob] the trigger outcome could not be stored")
                    && msg(&poisoned).contains("row refused by the test"),
                "{backend:?}: {}",
                msg(&poisoned)
            );
            for (k, want) in [(20, "done 20"), (23, "done 23"), (22, "nul  here")] {
                let r = row(k).await.unwrap();
                assert_eq!(
                    (r.handle_code, r.handle_msg.as_deref()),
                    (200, Some(want)),
                    "{backend:?}"
                );
            }
            let r = row(21).await.unwrap();
            assert_eq!(
                r.handle_code, 200,
                "{backend:?}: the refused result is stored"
            );
            assert!(
                r.handle_msg
                    .unwrap()
                    .starts_with("[xjob] the result message could not be stored"),
                "{backend:?}"
            );
            db.close().await.unwrap();
        }
    }

    /// A writer that cannot open its SQLite file fails to start, naming the file (it used to
    /// log the error and leave the engine running with no writer).
    #[tokio::test]
    async fn a_writer_that_cannot_open_its_file_does_not_start() {
        let dir = tempfile::tempdir().unwrap();
        let lock = std::fs::File::create(dir.path().join("lock")).unwrap();
        let path = dir.path().join("missing-dir/xjob.db").display().to_string();
        let target = Target::SqliteFile {
            path: path.clone(),
            lock,
            separate_cpus: false,
        };
        let e = LogWriter::start(target, Activity::default(), Box::new(|_| {}))
            .await
            .err()
            .expect("refused");
        assert!(e.to_string().contains(&path), "{e}");
    }

    /// A batch that panics (here an `exec` closure with a bug) fails only its own callers:
    /// the writer thread goes on and later writes land.
    #[tokio::test]
    async fn a_panicking_batch_does_not_stop_the_writer() {
        let dir = tempfile::tempdir().unwrap();
        let (db, target, _job, ids) = fixture(dir.path(), None).await;
        let writer = LogWriter::start(target, Activity::default(), Box::new(|_| {}))
            .await
            .unwrap();
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

    /// `transact_now` runs on the caller's thread while the SQLite writer is between batches, and
    /// waits its turn on the writer's thread while a batch holds the connection; its write is
    /// committed either way. The pool has no such connection and refuses as `exec` does.
    #[tokio::test]
    // the test stands in for a batch in progress by holding the connection across awaits
    #[allow(clippy::await_holding_lock)]
    async fn transact_now_runs_here_unless_a_batch_holds_the_connection() {
        let dir = tempfile::tempdir().unwrap();
        let (db, target, job, _) = fixture(dir.path(), None).await;
        let writer = LogWriter::start(target, Activity::default(), Box::new(|_| {}))
            .await
            .unwrap();
        let set_desc = move |desc: &'static str| {
            async move |p: &crate::store::port::Port<'_>| -> Result<std::thread::ThreadId> {
                p.execute(
                    "UPDATE xxl_job_info SET job_desc = ? WHERE id = ?",
                    &[desc.into(), job.into()],
                )
                .await?;
                Ok(std::thread::current().id())
            }
        };
        let desc = || async { crate::store::jobs::get(&db, job).await.unwrap().job_desc };
        let here = std::thread::current().id();

        let ran_on = writer.transact_now(set_desc("idle")).await.unwrap();
        assert_eq!(
            ran_on, here,
            "an idle writer's connection is used on this thread"
        );
        assert_eq!(desc().await, "idle");

        // a batch in progress: the writer thread holds the connection
        let slot = writer.conn.as_ref().unwrap().lock();
        let mut queued = Box::pin(writer.transact_now(set_desc("queued")));
        for _ in 0..3 {
            assert!(futures::poll!(queued.as_mut()).is_pending());
            tokio::task::yield_now().await;
        }
        drop(slot);
        let ran_on = queued.await.unwrap();
        assert_ne!(
            ran_on, here,
            "queued behind the batch, on the writer's thread"
        );
        assert_eq!(desc().await, "queued");

        // another connection's write transaction, which this thread's runtime drives: not
        // waited for here (that would hold up its commit), but on the writer's thread
        use sea_orm::TransactionTrait;
        let other = db.begin().await.unwrap();
        other
            .execute_unprepared("UPDATE xxl_job_info SET author = 'other' WHERE id > 0")
            .await
            .unwrap();
        let mut waiting = Box::pin(writer.transact_now(set_desc("after the other")));
        for _ in 0..3 {
            assert!(futures::poll!(waiting.as_mut()).is_pending());
            tokio::task::yield_now().await;
        }
        other.commit().await.unwrap();
        let ran_on = waiting.await.unwrap();
        assert_ne!(ran_on, here);
        assert_eq!(desc().await, "after the other");

        // an error rolls back; a panic is answered as an error; the connection stays usable
        let r = writer
            .transact_now(async move |p| -> Result<()> {
                set_desc("rolled back")(p).await?;
                Err(Error::Conflict {
                    reason: "refused".into(),
                })
            })
            .await;
        assert!(matches!(r, Err(Error::Conflict { .. })), "{r:?}");
        assert_eq!(desc().await, "after the other");
        let r = writer
            .transact_now(async |_| -> Result<i32> {
                panic!("a bug in a console write (expected by this test)")
            })
            .await;
        assert!(matches!(r, Err(Error::Stopped(_))), "{r:?}");
        writer.transact_now(set_desc("after")).await.unwrap();
        assert_eq!(desc().await, "after");

        let pool = crate::store::tests::memory_db().await;
        let pooled = LogWriter::start(
            Target::of(&pool).await.unwrap(),
            Activity::default(),
            Box::new(|_| {}),
        )
        .await
        .unwrap();
        let r = pooled.transact_now(async |_| Ok(())).await;
        assert!(matches!(r, Err(Error::Stopped(_))), "{r:?}");
    }

    /// A pooled writer whose pool was closed (the engine stopped past its grace) gives up at
    /// once and ends, instead of retrying every queued batch against a pool that cannot open.
    #[tokio::test]
    async fn a_pooled_writer_ends_when_its_pool_is_closed() {
        let db = crate::store::tests::memory_db().await;
        let writer = LogWriter::start(
            Target::of(&db).await.unwrap(),
            Activity::default(),
            Box::new(|_| {}),
        )
        .await
        .unwrap();
        db.close_by_ref().await.unwrap();
        let result = |id| HandleResult {
            log_id: id,
            code: 200,
            msg: None,
        };
        assert!(
            !writer
                .results_written(vec![result(1)], 2_000)
                .await
                .unwrap()
        );
        let after = writer.results_written(vec![result(2)], 2_000).await;
        assert!(matches!(after, Err(Error::Stopped(_))), "{after:?}");
    }

    /// The SQLite writer pairs a run's outcome and result in memory: a dispatched outcome waits
    /// for its result (not visible meanwhile, written by `visible`), a result that comes before
    /// its dispatched run's outcome waits for it and is acknowledged only once written, and a
    /// failed trigger is written at once.
    #[tokio::test]
    async fn the_sqlite_writer_pairs_outcomes_and_results() {
        let dir = tempfile::tempdir().unwrap();
        let (db, target, job, ids) = fixture(dir.path(), None).await;
        let writer = LogWriter::start(target, Activity::default(), Box::new(|_| {}))
            .await
            .unwrap();
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
        writer.results_acked(vec![ok(ids[0])], 2_000).await.unwrap();
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

    /// Journals `fires` as a scan page does: answers the new ones' ids and times.
    async fn journal(
        writer: &LogWriter,
        fires: Vec<crate::fire::PendingFire>,
    ) -> Result<Vec<(i64, i64)>> {
        writer
            .exec_journalled(move |conn, j| {
                let tx = conn.transaction().unwrap();
                let r = j.record(&tx, &fires).unwrap();
                tx.commit().unwrap();
                r.map(|r| j.apply(r, &fires, |_| None, 0))
                    .unwrap_or_default()
                    .iter()
                    .map(|f| (f.log_id, f.fire_time))
                    .collect::<Vec<_>>()
            })
            .await
    }

    /// On a SQLite file a scan page journals its fires instead of inserting pending rows: their
    /// log ids are reserved (a row inserted meanwhile takes the next one), a fire is journalled
    /// once per job and nominal time (one already in the log table or the journal is skipped,
    /// one earlier than the job's latest but new is not), each run's row is inserted once with
    /// what the writer has (outcome and result, the outcome alone, a result alone as a pending
    /// row), a deleted job gets none, a page's journal row goes once all its runs have rows,
    /// and a restarted writer turns what is left into pending rows.
    #[tokio::test]
    async fn journalled_fires_get_one_row_each_and_pending_rows_after_a_restart() {
        use crate::fire::PendingFire;
        let dir = tempfile::tempdir().unwrap();
        let (db, target, job, ids) = fixture(dir.path(), None).await;
        let group = logs::get(&db, ids[0]).await.unwrap().job_group;
        let writer = LogWriter::start(target, Activity::default(), Box::new(|_| {}))
            .await
            .unwrap();
        let fire = |job_id: i32, fire_time: i64| PendingFire {
            job_id,
            job_group: group,
            fire_time,
            trigger_type: TriggerType::Cron,
        };
        let pages = || {
            let db = db.clone();
            async move {
                db.query_one_raw(Statement::from_string(
                    DbBackend::Sqlite,
                    "SELECT count(*) AS n FROM xjob_fire_journal",
                ))
                .await
                .unwrap()
                .unwrap()
                .try_get::<i64>("", "n")
                .unwrap()
            }
        };
        // an old recorded fire of the job: the log table has it
        let old = logs::insert_run(&db, group, job, 1_000, TriggerType::Cron, 0)
            .await
            .unwrap();
        db.execute_unprepared(&format!(
            "UPDATE xxl_job_log SET fire_time = 5000 WHERE id = {old}"
        ))
        .await
        .unwrap();

        let first = journal(
            &writer,
            vec![fire(job, 5_000), fire(job, 10_000), fire(job, 11_000)],
        )
        .await
        .unwrap();
        assert_eq!(
            first,
            vec![(old + 1, 10_000), (old + 2, 11_000)],
            "ids reserved after the last row; the fire in the log table skipped"
        );
        for (id, _) in &first {
            assert!(
                logs::get(&db, *id).await.is_err(),
                "no pending row for {id}"
            );
        }
        let manual = logs::insert_run(&db, group, job, 1_000, TriggerType::Manual, 0)
            .await
            .unwrap();
        assert_eq!(
            manual,
            old + 3,
            "a row inserted meanwhile takes no reserved id"
        );
        let again = journal(
            &writer,
            vec![fire(job, 10_000), fire(job, 10_500), fire(job, 12_000)],
        )
        .await
        .unwrap();
        assert_eq!(
            again,
            vec![(manual + 1, 10_500), (manual + 2, 12_000)],
            "a journalled fire is skipped, an earlier new one is not"
        );
        assert_eq!(pages().await, 2);

        let outcome = |log_id: i64| TriggerRecord {
            log_id,
            job_id: job,
            children: Some("7".into()),
            trigger_ms: 10_003,
            executor_address: Some("http://e/".into()),
            trigger_code: 200,
            trigger_msg: "triggered".into(),
            trigger_type: TriggerType::Cron,
            ..Default::default()
        };
        let ok = |log_id: i64| HandleResult {
            log_id,
            code: 200,
            msg: Some("done".into()),
        };
        let (a, b) = (first[0].0, first[1].0);
        // outcome and result together
        writer.dispatching(vec![a]);
        writer.outcome(outcome(a)).await.unwrap();
        assert!(writer.results_written(vec![ok(a)], 10_050).await.unwrap());
        let row = logs::get(&db, a).await.unwrap();
        assert_eq!(
            (row.job_id, row.job_group, row.fire_time, row.fire_state),
            (
                job,
                group,
                Some(10_000),
                crate::model::fire_state::DISPATCHED
            )
        );
        assert_eq!((row.trigger_code, row.handle_code), (200, 200));
        assert_eq!(row.handle_msg.as_deref(), Some("done"));
        assert_eq!(
            row.alarm_status,
            crate::model::AlarmStatus::NotNeeded.code()
        );
        assert_eq!(row.executor_address.as_deref(), Some("http://e/"));
        assert_eq!(row.trigger_type.as_deref(), Some("CRON"));
        // a result alone: the run's pending row with it, its outcome later
        assert!(writer.results_written(vec![ok(b)], 11_050).await.unwrap());
        let row = logs::get(&db, b).await.unwrap();
        assert_eq!(
            (row.trigger_code, row.handle_code, row.fire_state),
            (0, 200, crate::model::fire_state::PENDING)
        );
        assert_eq!(pages().await, 1, "the first page's runs all have rows");
        writer.outcome(outcome(b)).await.unwrap();
        writer.flush().await.unwrap();
        assert_eq!(logs::get(&db, b).await.unwrap().trigger_code, 200);

        // the outcome alone; a deleted job's run gets no row
        let (c, d) = (again[0].0, again[1].0);
        writer.outcome(outcome(c)).await.unwrap();
        writer.flush().await.unwrap();
        let row = logs::get(&db, c).await.unwrap();
        assert_eq!((row.trigger_code, row.handle_code), (200, 0));
        assert_eq!(
            row.alarm_status,
            crate::model::AlarmStatus::Unchecked.code()
        );
        let other = journal(&writer, vec![fire(job + 100, 20_000)])
            .await
            .unwrap();
        assert_eq!(other.len(), 1);
        writer.outcome(outcome(other[0].0)).await.unwrap();
        writer.flush().await.unwrap();
        assert!(
            logs::get(&db, other[0].0).await.is_err(),
            "no row for a missing job"
        );
        assert_eq!(pages().await, 1, "the second page waits for {d}");

        // a restart: the unwritten fire becomes a pending row with its id
        writer.release_lock();
        drop(writer);
        let target = Target::of(&db).await.unwrap();
        let writer = LogWriter::start(target, Activity::default(), Box::new(|_| {}))
            .await
            .unwrap();
        let pending = logs::all_pending(&db).await.unwrap();
        assert_eq!(
            pending
                .iter()
                .map(|f| (f.log_id, f.job_id, f.fire_time))
                .collect::<Vec<_>>(),
            vec![(d, job, 12_000)]
        );
        assert_eq!(pages().await, 0);
        // and is recorded: the journal skips it
        let after = journal(&writer, vec![fire(job, 12_000), fire(job, 13_000)])
            .await
            .unwrap();
        assert_eq!(after.iter().map(|f| f.1).collect::<Vec<_>>(), vec![13_000]);
        // a page naming a fire twice, and a job's fires out of order: each once, with
        // consecutive ids
        let mixed = journal(
            &writer,
            vec![
                fire(job, 15_000),
                fire(job, 15_000),
                fire(job, 14_000),
                fire(job, 14_000),
                fire(job, 13_000),
                fire(job, 16_000),
            ],
        )
        .await
        .unwrap();
        let first = mixed[0].0;
        assert_eq!(
            mixed,
            vec![(first, 15_000), (first + 1, 14_000), (first + 2, 16_000)]
        );
        // a page whose transaction rolls back records nothing (its job's latest time stays
        // raised in memory): the next page journals the fire, with the id it would have had
        let late = fire(job, 17_000);
        let rolled_back = writer
            .exec_journalled(move |conn, j| {
                let tx = conn.transaction().unwrap();
                let r = j.record(&tx, &[late]).unwrap();
                drop(tx);
                r.is_some()
            })
            .await
            .unwrap();
        assert!(rolled_back);
        let again = journal(&writer, vec![fire(job, 17_000)]).await.unwrap();
        assert_eq!(again, vec![(first + 3, 17_000)]);
        writer.release_lock();
    }

    /// The writer remembers its rows' jobs from batch to batch, but a job deleted through
    /// another connection since is read again: its journalled run gets no row.
    #[tokio::test]
    async fn a_job_deleted_meanwhile_gets_no_row() {
        use crate::fire::PendingFire;
        let dir = tempfile::tempdir().unwrap();
        let (db, target, job, ids) = fixture(dir.path(), Some("7")).await;
        let group = logs::get(&db, ids[0]).await.unwrap().job_group;
        let (tx, mut finished) = mpsc::unbounded_channel();
        let sink: FinishedSink = Box::new(move |r| {
            let _ = tx.send(r);
        });
        let writer = LogWriter::start(target, Activity::default(), sink)
            .await
            .unwrap();
        let fire = |fire_time: i64| PendingFire {
            job_id: job,
            job_group: group,
            fire_time,
            trigger_type: TriggerType::Cron,
        };
        let runs: Vec<i64> = journal(&writer, vec![fire(10_000), fire(11_000)])
            .await
            .unwrap()
            .into_iter()
            .map(|(id, _)| id)
            .collect();
        let outcome = |log_id: i64| TriggerRecord {
            log_id,
            job_id: job,
            children: Some("7".into()),
            trigger_ms: 10_003,
            trigger_code: 200,
            trigger_type: TriggerType::Cron,
            ..Default::default()
        };
        let ok = |log_id: i64| HandleResult {
            log_id,
            code: 200,
            msg: None,
        };
        writer.dispatching(vec![runs[0]]);
        writer.outcome(outcome(runs[0])).await.unwrap();
        assert!(
            writer
                .results_written(vec![ok(runs[0])], 10_050)
                .await
                .unwrap()
        );
        assert_eq!(logs::get(&db, runs[0]).await.unwrap().handle_code, 200);
        let done = finished.recv().await.unwrap();
        assert_eq!(done.0[0].children, "7", "the job as dispatched");

        db.execute_unprepared(&format!("DELETE FROM xxl_job_info WHERE id = {job}"))
            .await
            .unwrap();
        writer.dispatching(vec![runs[1]]);
        writer.outcome(outcome(runs[1])).await.unwrap();
        assert!(
            writer
                .results_written(vec![ok(runs[1])], 11_050)
                .await
                .unwrap()
        );
        assert!(
            logs::get(&db, runs[1]).await.is_err(),
            "no row for a job deleted since the writer read it"
        );
        assert!(finished.try_recv().is_err(), "and no child jobs to trigger");
        writer.release_lock();
    }
}
