//! A scan pass through the pool (PostgreSQL, MySQL/MariaDB, and a SQLite database's first
//! pass): one transaction over the buckets this node schedules, in named steps: refresh the
//! groups; take over the fires of buckets just taken ([`take_over`]) or, on one node, recover
//! what an earlier run left ([`recover_stale`]); fail orphaned claims; record the due fires
//! ([`record_due`]); on a shared database, when the pass wrote anything, check that every
//! lease of the pass is still this node's at its epoch ([`leases::fence`]); commit. No global
//! lock: nodes scan their own buckets at the same time. The fires go to the sink only once
//! committed.

use std::collections::{HashMap, HashSet};

use sea_orm::DatabaseConnection;

use super::page::{PageOf, due_page};
use super::plan::ScanCache;
use super::{PassContext, PassOutput, RECOVER_BATCH, Recovery, ScanReport};
use crate::config::SchedulerConfig;
use crate::error::Result;
use crate::fire::Fire;
use crate::model::{MisfireStrategy, TriggerType};
use crate::ownership::ScanSet;
use crate::store::jobs;
use crate::store::leases::{self, Lease};
use crate::store::logs;
use crate::store::port::Port;

/// One pass of at most `limit` jobs through `db`; on success the buckets taken over are
/// marked as such and the fires go to the context's sink.
pub(super) async fn pass(
    db: DatabaseConnection,
    cx: PassContext,
    limit: u64,
    recovery: Recovery,
    mut cache: ScanCache,
) -> PassOutput {
    let set = cx
        .ownership
        .scan_set(std::time::Instant::now(), cx.clock.now_ms());
    let res = transaction(db, &cx, limit, recovery, &set, &mut cache).await;
    let res = res.map(|(fires, report)| {
        cx.ownership.took_over(&set.takeovers);
        if !fires.is_empty() {
            (cx.sink)(fires);
        }
        report
    });
    (res, cache)
}

/// The pass's transaction. Answers the fires to push (taken-over ones first) and a report.
async fn transaction(
    db: DatabaseConnection,
    cx: &PassContext,
    pre_read_count: u64,
    recovery: Recovery,
    set: &ScanSet,
    cache: &mut ScanCache,
) -> Result<(Vec<Fire>, ScanReport)> {
    let (cfg, node) = (&cx.cfg, cx.node.as_str());
    let txn = crate::store::begin_writing(&db).await?;
    let now = cx.clock.now_ms();
    let mut report = ScanReport::default();
    let ticket = cx.directory.read_ticket();
    cx.directory
        .set_groups_read(ticket, crate::store::groups::all(&txn).await?);
    if set.is_empty() && set.takeovers.is_empty() {
        txn.commit().await?;
        return Ok((Vec::new(), report));
    }
    let (mut to_ring, compensated) = if set.all {
        recover_stale(&txn, now, cfg, recovery, &mut report).await?
    } else {
        take_over(&txn, now, cfg, &set.takeovers, &mut report).await?
    };
    let of = PageOf {
        now,
        cfg,
        tz: cx.tz,
        directory: &cx.directory,
        exclusive: false,
        after_id: 0,
        limit: pre_read_count,
        set: Some(set),
        compensated: &compensated,
    };
    let recorded = record_due(&txn, &of, cache, &mut report).await?;
    to_ring.extend(recorded);
    if !set.all && (report.wrote() || !set.takeovers.is_empty()) {
        let mut all: Vec<Lease> = set.leases.clone();
        all.extend(set.takeovers.iter().map(|(l, _)| *l));
        all.sort();
        all.dedup();
        if !leases::fence(&txn, node, &all).await? {
            // rolled back (the transaction is dropped): nothing of this pass is recorded
            return Err(crate::Error::LeaseLost);
        }
    }
    txn.commit().await?;
    report.fires = to_ring.len();
    Ok((to_ring, report))
}

/// Takes over the fires the previous holders of buckets just taken recorded: those at or
/// before a bucket's dispatch mark may have been sent, so they are handed over (never sent
/// again; recorded as failed unless their outcome arrives); the later ones were never sent
/// and go to the ring under the new lease, or get their job's misfire policy when later
/// than the threshold. Answers the fires and the jobs whose FIRE_ONCE_NOW compensation this
/// made.
async fn take_over(
    txn: &sea_orm::DatabaseTransaction,
    now: i64,
    cfg: &SchedulerConfig,
    takeovers: &[(Lease, i64)],
    report: &mut ScanReport,
) -> Result<(Vec<Fire>, HashSet<i32>)> {
    if takeovers.is_empty() {
        return Ok((Vec::new(), HashSet::new()));
    }
    let marks: HashMap<i32, (i64, i64)> = takeovers
        .iter()
        .map(|(l, through)| (l.bucket, (l.epoch, *through)))
        .collect();
    let buckets: Vec<i32> = marks.keys().copied().collect();
    let pending = logs::pending_in_buckets(txn, &buckets).await?;
    let mut handed = Vec::new();
    let mut fresh = Vec::new();
    for mut f in pending {
        let Some(&(epoch, through)) = marks.get(&crate::store::leases::bucket_of(f.job_id)) else {
            continue;
        };
        if f.fire_time <= through {
            handed.push(f.log_id);
        } else {
            f.epoch = epoch;
            fresh.push(f);
        }
    }
    if !handed.is_empty() {
        let n = logs::hand_over(txn, &handed).await?;
        tracing::warn!(
            fires = n,
            "fires a previous holder may have sent are not sent again; recorded as failed unless their outcome arrives"
        );
    }
    let (late, on_time): (Vec<Fire>, Vec<Fire>) = fresh
        .into_iter()
        .partition(|f| now > f.fire_time + cfg.misfire_threshold_ms);
    report.recovered += on_time.len();
    let mut to_ring = on_time;
    let mut compensated = HashSet::new();
    if !late.is_empty() {
        let (fire, skip) = misfire_recovered(txn, late).await?;
        compensated.extend(fire.iter().map(|f| f.job_id));
        report.recovered += fire.len();
        report.misfired += skip.len();
        logs::delete_pending(txn, &skip.iter().map(|f| f.log_id).collect::<Vec<_>>()).await?;
        to_ring.extend(fire);
    }
    if !to_ring.is_empty() {
        tracing::info!(
            fires = to_ring.len(),
            buckets = buckets.len(),
            "fires of buckets taken over go out from this node"
        );
    }
    Ok((to_ring, compensated))
}

/// Pending fires whose node should have dispatched them by now (per `recovery`): those
/// within the misfire threshold go to the ring again, later ones get their job's misfire
/// policy. Answers the fires and the jobs whose FIRE_ONCE_NOW compensation this made.
async fn recover_stale(
    txn: &sea_orm::DatabaseTransaction,
    now: i64,
    cfg: &SchedulerConfig,
    recovery: Recovery,
    report: &mut ScanReport,
) -> Result<(Vec<Fire>, HashSet<i32>)> {
    let mut to_ring = Vec::new();
    let mut compensated = HashSet::new();
    let recover_before = match recovery {
        Recovery::FirstPass { before } => Some(before.min(now - cfg.recover_after_ms)),
        Recovery::Done => None,
    };
    let stale = match recover_before {
        Some(before) => logs::stale_pending(txn, before, RECOVER_BATCH).await?,
        None => Vec::new(),
    };
    if stale.is_empty() {
        return Ok((to_ring, compensated));
    }
    let (late, on_time): (Vec<Fire>, Vec<Fire>) = stale
        .into_iter()
        .partition(|f| now > f.fire_time + cfg.misfire_threshold_ms);
    report.recovered += on_time.len();
    to_ring.extend(on_time);
    if !late.is_empty() {
        let (fire, skip) = misfire_recovered(txn, late).await?;
        compensated.extend(fire.iter().map(|f| f.job_id));
        report.recovered += fire.len();
        report.misfired += skip.len();
        for f in &skip {
            tracing::warn!(
                job_id = f.job_id,
                fire_time = f.fire_time,
                "recovered fire is past the misfire threshold; skipped"
            );
        }
        logs::delete_pending(txn, &skip.iter().map(|f| f.log_id).collect::<Vec<_>>()).await?;
        to_ring.extend(fire);
    }
    Ok((to_ring, compensated))
}

/// The shared page ([`due_page`]) in the pass's transaction, its fires recorded as pending
/// rows. Answers the recorded fires, each carrying its job as read now (shared), so dispatch
/// reads nothing.
async fn record_due(
    txn: &sea_orm::DatabaseTransaction,
    of: &PageOf<'_>,
    cache: &mut ScanCache,
    report: &mut ScanReport,
) -> Result<Vec<Fire>> {
    let Some(set) = of.set.filter(|s| !s.is_empty()) else {
        return Ok(Vec::new());
    };
    let planned = due_page(&Port::tx(txn), of, cache, report).await?;
    if planned.pending.is_empty() {
        return Ok(Vec::new());
    }
    let recorded = logs::record_pending(txn, &planned.pending).await?;
    Ok(recorded
        .into_iter()
        .map(|mut f| {
            f.job = cache.jobs.get(&f.job_id).cloned();
            f.read_ms = of.now;
            f.epoch = set.epoch_of(f.job_id);
            f
        })
        .collect())
}

/// Applies each job's misfire policy to recovered fires later than the threshold: the newest
/// of a FIRE_ONCE_NOW job fires (as MISFIRE), the rest are skipped.
async fn misfire_recovered(
    txn: &sea_orm::DatabaseTransaction,
    late: Vec<Fire>,
) -> Result<(Vec<Fire>, Vec<Fire>)> {
    let mut by_job: HashMap<i32, Vec<Fire>> = HashMap::new();
    for f in late {
        by_job.entry(f.job_id).or_default().push(f);
    }
    let (mut fire, mut skip) = (Vec::new(), Vec::new());
    for (job_id, mut fs) in by_job {
        let policy = match jobs::get(txn, job_id).await {
            Ok(j) => j
                .misfire_strategy
                .parse()
                .unwrap_or(MisfireStrategy::DoNothing),
            Err(crate::Error::JobNotFound { .. }) => MisfireStrategy::DoNothing,
            Err(e) => return Err(e),
        };
        fs.sort_by_key(|f| f.fire_time);
        if policy == MisfireStrategy::FireOnceNow
            && let Some(mut newest) = fs.pop()
        {
            newest.trigger_type = TriggerType::Misfire;
            fire.push(newest);
        }
        skip.extend(fs);
    }
    Ok((fire, skip))
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};
    use std::time::{Duration, Instant};

    use sea_orm::{ConnectionTrait, Statement};

    use super::*;
    use crate::clock::Clock;
    use crate::directory::Directory;
    use crate::ownership::Ownership;

    /// On a shared database a pass that wrote nothing (no bucket taken over, nothing
    /// recovered, no due job) reads the groups and the due jobs and commits: it checks no lease
    /// and so locks no row (its commit flushes no log of its own). A pass that takes buckets
    /// over, or records a due job's fire, fences its leases before it commits.
    #[tokio::test]
    async fn only_a_pass_that_writes_fences_its_leases() {
        for (db, seen) in crate::store::tests::servers_recording().await {
            let b = db.get_database_backend();
            leases::renew(&db, "n1", "http://n1/", 60_000)
                .await
                .unwrap();
            let taken = leases::acquire(&db, "n1", 1024, 60_000).await.unwrap();
            assert_eq!(taken.len(), 1024, "{b:?}");
            let ownership = Ownership::leased();
            ownership.taken(&taken, Instant::now() + Duration::from_secs(50));
            let fired = Arc::new(Mutex::new(Vec::<Fire>::new()));
            let out = fired.clone();
            let clock = Clock::system();
            let cx = PassContext {
                clock: clock.clone(),
                cfg: SchedulerConfig::default(),
                tz: chrono_tz::UTC,
                directory: Directory::default(),
                ownership,
                node: "n1".into(),
                sink: Arc::new(move |f| out.lock().unwrap().extend(f)),
            };
            let fenced = |statements: &[String]| {
                statements
                    .iter()
                    .any(|s| s.contains("FROM xjob_node") || s.contains("FROM xjob_lease"))
            };
            let run = |cx: PassContext| {
                let db = db.clone();
                async move {
                    let (res, _) = pass(db, cx, 100, Recovery::Done, ScanCache::default()).await;
                    res.unwrap()
                }
            };
            // the buckets just taken are taken over: a write, fenced
            seen.lock().unwrap().clear();
            run(cx.clone()).await;
            let statements = std::mem::take(&mut *seen.lock().unwrap());
            assert!(fenced(&statements), "{b:?}: {statements:#?}");
            // nothing due, nothing taken over: no lease read, no row locked
            let report = run(cx.clone()).await;
            let statements = std::mem::take(&mut *seen.lock().unwrap());
            assert_eq!(report.jobs, 0);
            assert!(!fenced(&statements), "{b:?}: {statements:#?}");
            assert!(
                statements.iter().all(|s| !s.contains("FOR ")
                    && !s.contains("LOCK IN")
                    && !s.starts_with("UPDATE")
                    && !s.starts_with("INSERT")),
                "{b:?}: {statements:#?}"
            );
            // a job due now: its fire is recorded under the fence
            let now = clock.now_ms();
            let g = crate::store::groups::insert(&db, "app", "App", 0, None, clock.now_naive())
                .await
                .unwrap();
            let spec = crate::JobSpec::cron(g, "j", "0 0 3 1 1 ? 2099", "h")
                .validate(chrono_tz::UTC, clock.now_naive())
                .unwrap();
            let job = crate::store::jobs::insert(&db, spec).await.unwrap();
            let due_at = |t: i64| {
                Statement::from_string(
                    b,
                    format!(
                        "UPDATE xxl_job_info SET trigger_status = 1, trigger_next_time = {t}, \
                         misfire_strategy = 'DO_NOTHING' WHERE id = {job}"
                    ),
                )
            };
            // a minute late (DO_NOTHING; next due in 2099): no fire, but its schedule moves on,
            // under the fence
            db.execute_raw(due_at(now - 60_000)).await.unwrap();
            seen.lock().unwrap().clear();
            let report = run(cx.clone()).await;
            let statements = std::mem::take(&mut *seen.lock().unwrap());
            assert_eq!((report.jobs, report.misfired), (1, 1), "{b:?}");
            assert!(fired.lock().unwrap().is_empty(), "{b:?}");
            assert!(fenced(&statements), "{b:?}: {statements:#?}");
            // due now: its fire is recorded under the fence
            db.execute_raw(due_at(now)).await.unwrap();
            seen.lock().unwrap().clear();
            let report = run(cx.clone()).await;
            let statements = std::mem::take(&mut *seen.lock().unwrap());
            assert_eq!(report.jobs, 1, "{b:?}");
            assert!(
                !fired.lock().unwrap().is_empty(),
                "{b:?}: the fire was pushed"
            );
            assert!(fenced(&statements), "{b:?}: {statements:#?}");
            db.close().await.unwrap();
        }
    }
}
