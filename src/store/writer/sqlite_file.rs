//! The SQLite file's connection of the run-row writer: one OS thread owns a synchronous
//! connection (rusqlite over the same `libsqlite3-sys` as sqlx) and runs the writer's loop
//! ([`batches::run`]) on a runtime of its own; each batch is one `BEGIN IMMEDIATE` transaction
//! on the store port ([`batches::write_rows`], with the fire journal), and the scan's pages run
//! between batches.

use super::journal::{self, JobCache, Journal};
use super::*;
use crate::store::run_rows::Children;
use crate::store::{log_by_job, port};
use rusqlite::Connection;
use std::time::Instant;

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
        rx,
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
    // the writer's loop runs on this thread, on a runtime of its own
    let rt = match tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            let _ = ready.send(Err(format!("cannot start its runtime: {e}")));
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
    let file = FileConn {
        shared: shared.clone(),
        audits,
        journal: Journal::default(),
        jobs: JobCache::default(),
        tail: Tail {
            rows: 0,
            since: Instant::now(),
        },
    };
    rt.block_on(batches::run(file, rx, sink, activity, held_count));
    // closed here, on this thread, and nobody uses it after
    shared.lock().take();
}

/// What [`FileConn::write`] answers once the connection is gone (the writer stops).
const GONE: &str = "the SQLite writer's connection";

/// The writer's own connection, as the writer's loop uses it: locked for each write (a console
/// change may use it in between, [`LogWriter::transact_now`]), with the fire journal.
struct FileConn {
    shared: SharedConn,
    audits: Audits,
    journal: Journal,
    /// Which jobs the journalled runs' rows name exist.
    jobs: JobCache,
    tail: Tail,
}

impl batches::Conn for FileConn {
    async fn write(
        &mut self,
        rows: &batches::Rows,
        children: &mut Children,
    ) -> Result<Vec<FinishedRun>> {
        let mut slot = self.shared.lock();
        let conn = slot.as_mut().ok_or(Error::Stopped(GONE))?;
        let journal = Some((&self.journal, &mut self.jobs));
        let (finished, inserted) = port::file_tx(conn, async |p| {
            batches::write_rows(p, rows, children, journal).await
        })?;
        self.journal.settle(&inserted);
        self.tail.rows += inserted.len();
        Ok(finished)
    }

    fn refused(&self, _: &Error) -> bool {
        false
    }

    fn closed(&self, e: &Error) -> bool {
        matches!(e, Error::Stopped(m) if *m == GONE)
    }

    fn exec(&mut self, f: Exec) {
        let mut slot = self.shared.lock();
        let Some(conn) = slot.as_mut() else {
            return; // dropped: its caller hears the writer stopped
        };
        let journal = &mut self.journal;
        // a bug in one piece of work must not stop the writer (its caller hears it stopped)
        if std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| f(conn, journal))).is_err() {
            tracing::error!("work on the SQLite writer's connection panicked; the writer goes on");
        }
    }

    fn listed(&mut self) -> Vec<crate::store::audit::Entry> {
        std::mem::take(&mut *self.audits.lock())
    }

    async fn after_batch(&mut self) {
        if let Some(conn) = self.shared.lock().as_mut() {
            self.tail.index_if_due(conn, &self.journal);
        }
    }

    fn lingers(&self) -> bool {
        true
    }
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
