//! Lost runs (protocol.md §7.10): the one place that decides a dispatched run will never report its
//! result and finishes it as failed with XXL-JOB's message. Two cases, each first-result-wins
//! (a result that arrives first stays):
//! - a run on an executor the registry evicts (no heartbeat for the dead timeout), unless the
//!   address still lives under another registration ([`on_evicted`], called by the registry
//!   once the groups no longer route to it);
//! - a run on an address that never registered (a manual group), running longer than
//!   XXL-JOB's ten minutes ([`on_unregistered`], swept every [`SWEEP`] by the completion actor);
//! - a run on this node's own executor, whose address is always registered, that the executor
//!   no longer has and whose result never reached the database (a result lost on the way, or
//!   a run of this node's previous process): [`LocalRuns`], found in two sweeps in a row after
//!   everything queued was written, then marked lost.

use std::time::Duration;

use sea_orm::DatabaseConnection;

use crate::clock::ms_to_naive;
use crate::error::Result;
use crate::fire::HandleResult;
use crate::model::wire::FAIL_CODE;
use crate::store::logs::record_handles;
use crate::store::{logs, registry};

/// How often runs on never-registered addresses are checked.
pub(crate) const SWEEP: Duration = Duration::from_secs(10);
/// XXL-JOB's age after which a run on an unregistered address counts as lost.
pub(crate) const UNREGISTERED_MS: i64 = 10 * 60 * 1000;
/// The message of a lost run.
pub(crate) const MSG: &str = "Job result lost, marked as failure";

/// How old a run on this node's own executor must be before it can count as lost.
pub(crate) const LOCAL_MARGIN_MS: i64 = 30_000;

/// The node's own executor as the lost-run sweep sees it: its address and the runs it still has.
#[derive(Clone)]
pub(crate) struct LocalRuns {
    /// The address runs are recorded with (with and without the trailing `/`).
    addresses: Vec<String>,
    executor: crate::executor::local::InProcessExecutor,
    /// Runs found without a result and unknown to the executor by the previous sweep.
    suspects: std::collections::HashSet<i64>,
}

impl LocalRuns {
    /// The executor at `address`.
    pub(crate) fn new(address: &str, executor: crate::executor::local::InProcessExecutor) -> Self {
        let a = crate::executor::client::normalise(address);
        let bare = a.trim_end_matches('/').to_string();
        LocalRuns {
            addresses: vec![a, bare],
            executor,
            suspects: Default::default(),
        }
    }

    /// The runs the executor has not reported yet (taken before the database is read).
    pub(crate) fn active(&self) -> foldhash::HashSet<i64> {
        self.executor.active_runs()
    }

    /// Marks lost the runs on this executor that are open in the database (dispatched over
    /// [`LOCAL_MARGIN_MS`] ago, no result), not in `active` (taken before everything queued
    /// was written) and not in `retrying` (results being written again), and were suspects
    /// already at the previous sweep; the others become this sweep's suspects. Answers how
    /// many were marked.
    pub(crate) async fn sweep(
        &mut self,
        db: &DatabaseConnection,
        active: &foldhash::HashSet<i64>,
        retrying: &std::collections::HashSet<i64>,
        now: i64,
    ) -> Result<usize> {
        let open = logs::running_on_before(db, &self.addresses, ms_to_naive(now - LOCAL_MARGIN_MS))
            .await?;
        let suspects: std::collections::HashSet<i64> = open
            .into_iter()
            .filter(|id| !active.contains(id) && !retrying.contains(id))
            .collect();
        let lost: Vec<HandleResult> = suspects
            .iter()
            .filter(|id| self.suspects.contains(id))
            .map(|&log_id| HandleResult {
                log_id,
                code: FAIL_CODE,
                msg: Some(MSG.into()),
            })
            .collect();
        self.suspects = suspects;
        if lost.is_empty() {
            return Ok(0);
        }
        let marked = record_handles(db, &lost, now).await?;
        let n = marked.iter().filter(|m| m.is_some()).count();
        for id in lost.iter().map(|l| l.log_id) {
            self.suspects.remove(&id);
        }
        if n > 0 {
            tracing::warn!(
                lost = n,
                "runs this node's executor no longer has, without a result, marked lost"
            );
        }
        Ok(n)
    }
}

/// Marks lost the runs still open on `gone` (addresses just evicted); answers how many.
pub(crate) async fn on_evicted(
    db: &DatabaseConnection,
    gone: &[String],
    now: i64,
) -> Result<usize> {
    if gone.is_empty() {
        return Ok(0);
    }
    let still = registry::all_values(db).await?;
    let gone: Vec<String> = gone
        .iter()
        .filter(|a| !still.contains(*a))
        .cloned()
        .collect();
    let lost: Vec<HandleResult> = logs::running_on(db, &gone)
        .await?
        .into_iter()
        .map(|log_id| HandleResult {
            log_id,
            code: FAIL_CODE,
            msg: Some(MSG.into()),
        })
        .collect();
    let marked = record_handles(db, &lost, now).await?;
    let mut n = 0;
    for (item, _) in lost.iter().zip(marked).filter(|(_, m)| m.is_some()) {
        tracing::warn!(
            log_id = item.log_id,
            "run lost with its executor; marked failed"
        );
        n += 1;
    }
    Ok(n)
}

/// Marks lost the runs on addresses that never registered, started over
/// [`UNREGISTERED_MS`] ago; answers how many.
pub(crate) async fn on_unregistered(db: &DatabaseConnection, now: i64) -> Result<usize> {
    let candidates = logs::running_since(db, ms_to_naive(now - UNREGISTERED_MS)).await?;
    if candidates.is_empty() {
        return Ok(0);
    }
    let known = registry::all_values(db).await?;
    let mut n = 0;
    for (id, addr) in candidates {
        if addr.as_ref().is_some_and(|a| known.contains(a)) {
            continue;
        }
        if logs::record_handle(db, id, FAIL_CODE, Some(MSG), now).await? {
            n += 1;
        }
    }
    if n > 0 {
        tracing::warn!(lost = n, "runs on unregistered executors marked lost");
    }
    Ok(n)
}
