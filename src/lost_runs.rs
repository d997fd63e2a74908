//! Lost runs (spec §8.10): the one place that decides a dispatched run will never report its
//! result and finishes it as failed with XXL-JOB's message. Two cases, each first-result-wins
//! (a result that arrives first stays):
//! - a run on an executor the registry evicts (no heartbeat for the dead timeout), unless the
//!   address still lives under another registration ([`on_evicted`], called by the registry
//!   once the groups no longer route to it);
//! - a run on an address that never registered (a manual group), running longer than
//!   XXL-JOB's ten minutes ([`on_unregistered`], swept every [`SWEEP`] by the completion actor).

use std::time::Duration;

use sea_orm::DatabaseConnection;

use crate::clock::ms_to_naive;
use crate::error::Result;
use crate::model::wire::FAIL_CODE;
use crate::store::log_batches::{HandleResult, record_handles};
use crate::store::{logs, registry};

/// How often runs on never-registered addresses are checked.
pub(crate) const SWEEP: Duration = Duration::from_secs(10);
/// XXL-JOB's age after which a run on an unregistered address counts as lost.
pub(crate) const UNREGISTERED_MS: i64 = 10 * 60 * 1000;
/// The message of a lost run.
pub(crate) const MSG: &str = "Job result lost, marked as failure";

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
        if logs::record_handle(db, id, FAIL_CODE, Some(MSG), now)
            .await?
            .is_some()
        {
            n += 1;
        }
    }
    if n > 0 {
        tracing::warn!(lost = n, "runs on unregistered executors marked lost");
    }
    Ok(n)
}
