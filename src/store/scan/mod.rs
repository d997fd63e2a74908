//! The scan's store: one interface in front of the two places a scan pass runs, so the scan
//! actor and the engine never ask which backend they are on.
//!
//! A pass reads the due jobs of the buckets this node schedules, records their fires as pending
//! run rows, advances the jobs' schedules and, on a shared database, fences on its leases (protocol.md
//! §7.2, docs/architecture.md §7). [`ScanStore::pass`] runs one:
//!
//! - on a SQLite file ([`file`]): on the run-row writer's own connection, between its batches,
//!   page by page with cached single-row statements (the first pass, which recovers what an
//!   earlier run left, goes through the pool);
//! - anywhere else ([`pool`]): one transaction through the pool, taking over the fires of
//!   buckets just taken, fenced on the node's leases.
//!
//! Either way the fires reach the ring ([`PassContext::sink`]) only once committed, and what a
//! pass plans is the same ([`plan`]). [`ScanStore::start_job`] writes a job's first fire on
//! the connection the passes use.

mod file;
mod page;
mod plan;
mod pool;

use std::sync::Arc;

use chrono_tz::Tz;
use futures::future::LocalBoxFuture;
use sea_orm::{DatabaseConnection, DbBackend};

pub(crate) use plan::ScanCache;

use crate::clock::Clock;
use crate::config::SchedulerConfig;
use crate::directory::Directory;
use crate::error::{Error, Result};
use crate::fire::Fire;
use crate::model::TriggerStatus;
use crate::ownership::Ownership;
use crate::store::audit::Entry;
use crate::store::jobs;
use crate::store::port::Port;
use crate::store::writer::LogWriter;

/// Most stale pending fires one pass recovers.
pub(crate) const RECOVER_BATCH: u64 = 10_000;

/// What one pass did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ScanReport {
    /// Jobs read.
    pub jobs: usize,
    /// Fires recorded and pushed to the ring.
    pub fires: usize,
    /// Fires skipped by the misfire policy.
    pub misfired: usize,
    /// Pending fires recovered from the database.
    pub recovered: usize,
    /// Jobs stopped because their next time could not be computed.
    pub stopped: usize,
}

impl ScanReport {
    /// Whether the pass may have written (besides taking buckets over): it read a due job
    /// (only a due job's schedule is advanced, only its fires are recorded), or recovered or
    /// skipped a pending fire. A pass on a shared database that wrote nothing needs no fence:
    /// the fence stops a node that lost a lease from committing writes under it, and makes a
    /// taker wait for them. Without it an idle pass locks no row, so its commit flushes no
    /// write-ahead log of its own (two statements and a flush a second fewer on an idle node).
    pub(super) fn wrote(&self) -> bool {
        self.jobs > 0 || self.recovered > 0 || self.misfired > 0
    }

    pub(super) fn add(&mut self, o: &ScanReport) {
        self.jobs += o.jobs;
        self.fires += o.fires;
        self.misfired += o.misfired;
        self.recovered += o.recovered;
        self.stopped += o.stopped;
    }
}

/// Which stale pending fires a pass recovers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Recovery {
    /// A single-node database: every pending fire recorded after start-up is this node's and is
    /// in its ring or lanes, so only the first pass recovers, and only what an earlier run left
    /// before `before` (fires after it were adopted into the ring at start-up).
    FirstPass {
        /// Nominal times at or before this (epoch ms) are recovered.
        before: i64,
    },
    /// Nothing left to recover.
    Done,
}

/// Where a pass's fires go once committed (the ring).
pub(crate) type FireSink = Arc<dyn Fn(Vec<Fire>) + Send + Sync>;

/// What every pass of a scan shares.
#[derive(Clone)]
pub(crate) struct PassContext {
    pub(crate) clock: Clock,
    pub(crate) cfg: SchedulerConfig,
    /// The default time zone of schedules.
    pub(crate) tz: Tz,
    /// Refreshed with the groups every pass.
    pub(crate) directory: Directory,
    /// The buckets this node schedules.
    pub(crate) ownership: Ownership,
    /// This node's id in the lease table.
    pub(crate) node: String,
    pub(crate) sink: FireSink,
}

/// What a pass answers: its report, and the cache it borrowed.
pub(crate) type PassOutput = (Result<ScanReport>, ScanCache);

/// The scan's store (see the module docs).
#[derive(Clone)]
pub(crate) struct ScanStore {
    db: DatabaseConnection,
    /// The writer of a SQLite file this node holds, whose connection runs the passes.
    file: Option<LogWriter>,
}

impl ScanStore {
    /// The store over `db`, whose run rows `writer` writes.
    pub(crate) fn new(db: DatabaseConnection, writer: &LogWriter) -> Self {
        ScanStore {
            file: writer.single_node().then(|| writer.clone()),
            db,
        }
    }

    /// The buckets a node on this store schedules: on SQLite (a file or memory, one node)
    /// every one; on a shared database those it holds leases on.
    pub(crate) fn ownership(&self) -> Ownership {
        if self.db.get_database_backend() == DbBackend::Sqlite {
            Ownership::all()
        } else {
            Ownership::leased()
        }
    }

    /// One pass reading at most `limit` jobs, making `recovery`, with the cache of the
    /// previous pass; answers its report and the cache.
    pub(crate) fn pass(
        &self,
        cx: &PassContext,
        limit: u64,
        recovery: Recovery,
        cache: ScanCache,
    ) -> LocalBoxFuture<'static, PassOutput> {
        match (&self.file, recovery) {
            (Some(writer), Recovery::Done) => {
                Box::pin(file::pass(writer.clone(), cx.clone(), limit, cache))
            }
            _ => Box::pin(pool::pass(
                self.db.clone(),
                cx.clone(),
                limit,
                recovery,
                cache,
            )),
        }
    }

    /// Stores a new job, created stopped or (`first`) running from that first fire time;
    /// answers it as stored, and `audit` (its target id set to the new job's) for the caller to
    /// record. On a SQLite file, on the writer's connection
    /// ([`crate::store::writer::LogWriter::transact_now`]: on the caller's thread when the
    /// writer is between batches), where the pool's INSERT … RETURNING took a hop to one of
    /// sqlx's worker threads and back. The entry is not written in the job's transaction:
    /// queued, it goes with the writer's next batch, many console changes to one commit (two
    /// pages fewer per change in the WAL, BENCHMARKS.md, 2026-11-28, abdc9e2).
    pub(crate) async fn insert_job(
        &self,
        job: entity::xxl_job_info::Model,
        first: Option<i64>,
        audit: Option<Entry>,
    ) -> Result<(entity::xxl_job_info::Model, Option<Entry>)> {
        let insert = async move |port: &Port<'_>| {
            let stored = jobs::insert_in(port, &job, first).await?;
            let audit = audit.map(|mut e| {
                e.target_id = stored.id.to_string();
                e
            });
            Ok((stored, audit))
        };
        match &self.file {
            Some(writer) => writer.transact_now(insert).await,
            None => insert(&Port::db(&self.db)).await,
        }
    }

    /// Starts job `job_id` at the first fire `first` answers for it as read (an error leaves
    /// it unchanged); answers the job as stored, and `audit` for the caller to record. The
    /// read and the write are one transaction, on the writer's connection on a SQLite file
    /// as in [`ScanStore::insert_job`].
    pub(crate) async fn start_job(
        &self,
        job_id: i32,
        first: impl FnOnce(&entity::xxl_job_info::Model) -> Result<i64> + Send + Sync + 'static,
        audit: Option<Entry>,
    ) -> Result<(entity::xxl_job_info::Model, Option<Entry>)> {
        let start = async move |port: &Port<'_>| {
            let job = jobs::by_id(port, job_id)
                .await?
                .ok_or(Error::JobNotFound { job_id })?;
            let next = first(&job)?;
            jobs::set_running_in(port, job_id, next).await?;
            // the row as read, with what the update set
            let stored = entity::xxl_job_info::Model {
                trigger_status: TriggerStatus::Running.code(),
                trigger_last_time: 0,
                trigger_next_time: next,
                ..job
            };
            Ok((stored, audit))
        };
        match &self.file {
            Some(writer) => writer.transact_now(start).await,
            None => {
                let txn = crate::store::begin_writing(&self.db).await?;
                let out = start(&Port::tx(&txn)).await?;
                txn.commit().await?;
                Ok(out)
            }
        }
    }
}
