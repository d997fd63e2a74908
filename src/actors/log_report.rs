//! LogReport: daily run counts and run-log retention (protocol.md §7.11).
//!
//! Every [`REPORT_EVERY`] it counts runs for today and the two previous days (days of the
//! center's time zone) into `xxl_job_log_report` — less often when counting takes long: a pass
//! costs in proportion to the days' runs (millions a day at thousands of fires a second), so the
//! next one waits at least [`REPORT_BUDGET`] times as long as the last took, which keeps the
//! counting under 5 % of the node's time whatever the table holds; once a day it deletes runs older than
//! `report.log_retention_days` (off below 7, XXL-JOB's rule), 1000 at a time. [`RefreshReport`]
//! and [`CleanLogs`] run either step now. [`FreshReport`] (the dashboard asks it first) counts
//! today again when the last count is older than [`FRESH`] and the budget allows, so the
//! dashboard shows runs as they finish instead of up to a minute later.

use std::time::Duration;

use actix::prelude::*;
use chrono::{Days, NaiveDate, TimeZone};
use chrono_tz::Tz;
use sea_orm::DatabaseConnection;

use crate::activity::Activity;
use crate::clock::Clock;
use crate::error::Result;
use crate::store::reports;

/// How often the counts are refreshed (XXL-JOB: every minute).
pub(crate) const REPORT_EVERY: Duration = Duration::from_secs(60);
/// A count pass is followed by at least this many times its own duration before the next.
pub(crate) const REPORT_BUDGET: i64 = 20;
/// Retention below this many days turns cleanup off.
pub(crate) const MIN_RETENTION_DAYS: i64 = 7;

/// How often growing tables are looked at for statistics ([`crate::store::table_stats`]).
pub(crate) const STATS_EVERY: Duration = Duration::from_secs(2);

/// How old today's counts may be when the dashboard is read (budget permitting).
pub(crate) const FRESH: Duration = Duration::from_secs(1);

/// Counts today's runs again when the last count is older than [`FRESH`] and
/// [`REPORT_BUDGET`] allows a pass now; answers once the counts are as fresh as that.
#[derive(Message, Debug)]
#[rtype(result = "Result<()>")]
pub(crate) struct FreshReport;

/// Refreshes the counts now.
#[derive(Message, Debug)]
#[rtype(result = "Result<()>")]
pub struct RefreshReport;

/// Runs the retention cleanup now; answers how many runs were deleted.
#[derive(Message, Debug)]
#[rtype(result = "Result<u64>")]
pub struct CleanLogs;

/// The reporter.
pub struct LogReport {
    db: DatabaseConnection,
    clock: Clock,
    tz: Tz,
    retention_days: i64,
    last_clean_ms: Option<i64>,
    pacing: Pacing,
    activity: Activity,
    /// The database is PostgreSQL (growing tables are analyzed).
    postgres: bool,
    /// A look at growing tables is in progress.
    analyzing: bool,
}

/// When count passes may run, shared by the minute's pass and [`FreshReport`]'s.
#[derive(Clone)]
struct Pacing {
    /// No count pass starts before this (epoch ms): see [`REPORT_BUDGET`].
    next_ms: std::sync::Arc<std::sync::atomic::AtomicI64>,
    /// When the last count pass ended (epoch ms).
    counted_ms: std::sync::Arc<std::sync::atomic::AtomicI64>,
    /// Held by a count pass: passes never overlap, and a [`FreshReport`] that waited for one
    /// finds the counts fresh.
    counting: std::sync::Arc<tokio::sync::Mutex<()>>,
}

impl Default for Pacing {
    fn default() -> Self {
        Pacing {
            next_ms: Default::default(),
            counted_ms: std::sync::Arc::new(std::sync::atomic::AtomicI64::new(i64::MIN)),
            counting: Default::default(),
        }
    }
}

impl Pacing {
    /// Counts the last `days` days (the caller holds `counting`), then sets when the next pass
    /// may start ([`REPORT_BUDGET`] times this one's duration later); answers how long it took.
    async fn count(
        &self,
        db: DatabaseConnection,
        clock: &Clock,
        tz: Tz,
        days: u64,
    ) -> (Result<()>, i64) {
        use std::sync::atomic::Ordering;
        let started = clock.now_ms();
        let r = LogReport::count_days(db, clock.clone(), tz, days).await;
        let took = clock.now_ms() - started;
        self.next_ms
            .store(started + took * REPORT_BUDGET, Ordering::Relaxed);
        self.counted_ms.store(clock.now_ms(), Ordering::Relaxed);
        (r, took)
    }
}

/// The UTC instant a local day starts at.
fn day_start(tz: Tz, d: NaiveDate) -> chrono::NaiveDateTime {
    let local = d.and_hms_opt(0, 0, 0).unwrap_or_default();
    tz.from_local_datetime(&local)
        .earliest()
        .map(|t| t.naive_utc())
        .unwrap_or(local)
}

impl LogReport {
    /// A reporter over `db` for days of `tz`, keeping `retention_days` of runs.
    pub fn new(
        db: DatabaseConnection,
        clock: Clock,
        tz: Tz,
        retention_days: i64,
        activity: Activity,
    ) -> Self {
        let postgres = db.get_database_backend() == sea_orm::DbBackend::Postgres;
        LogReport {
            postgres,
            analyzing: false,
            db,
            clock,
            tz,
            retention_days,
            last_clean_ms: None,
            pacing: Pacing::default(),
            activity,
        }
    }

    /// Counts today and the two days before (runs finish after their day has ended).
    async fn refresh(db: DatabaseConnection, clock: Clock, tz: Tz) -> Result<()> {
        Self::count_days(db, clock, tz, 3).await
    }

    /// Counts the last `days` days, today first, into the report table.
    async fn count_days(db: DatabaseConnection, clock: Clock, tz: Tz, days: u64) -> Result<()> {
        let today = tz
            .timestamp_millis_opt(clock.now_ms())
            .single()
            .map(|t| t.date_naive())
            .unwrap_or_default();
        for back in 0..days {
            let Some(d) = today.checked_sub_days(Days::new(back)) else {
                continue;
            };
            let from = day_start(tz, d);
            let to = day_start(tz, d.succ_opt().unwrap_or(d));
            let n = reports::count_between(&db, from, to).await?;
            // trigger_day holds the local day's date at midnight, as XXL-JOB stores it
            let key = d.and_hms_opt(0, 0, 0).unwrap_or_default();
            reports::upsert_day(&db, key, n, clock.now_naive()).await?;
        }
        Ok(())
    }

    async fn clean(db: DatabaseConnection, clock: Clock, tz: Tz, days: i64) -> Result<u64> {
        if days < MIN_RETENTION_DAYS {
            return Ok(0);
        }
        let today = tz
            .timestamp_millis_opt(clock.now_ms())
            .single()
            .map(|t| t.date_naive())
            .unwrap_or_default();
        let Some(cut) = today.checked_sub_days(Days::new(days as u64)) else {
            return Ok(0);
        };
        let n = reports::delete_logs_before(&db, day_start(tz, cut)).await?;
        if n > 0 {
            tracing::info!(deleted = n, days, "old run logs cleaned up");
        }
        // so are the workflow runs that ended (with their node runs)
        let cut_ms = day_start(tz, cut).and_utc().timestamp_millis();
        let flows = crate::store::workflow_runs::delete_ended_before(&db, cut_ms).await?;
        if flows > 0 {
            tracing::info!(deleted = flows, days, "old workflow runs cleaned up");
        }
        // the audit log is kept as long as the runs
        let audits = crate::store::audit::delete_before(&db, day_start(tz, cut)).await?;
        if audits > 0 {
            tracing::info!(deleted = audits, days, "old audit entries cleaned up");
        }
        Ok(n)
    }
}

impl LogReport {
    /// Analyzes the hot tables that outgrew their statistics (PostgreSQL), one look at a time.
    fn stats(&mut self, ctx: &mut Context<Self>) {
        if self.activity.halted() || self.analyzing || !self.postgres {
            return;
        }
        self.analyzing = true;
        let (db, guard) = (self.db.clone(), self.activity.enter());
        ctx.spawn(
            async move {
                if let Err(e) = crate::store::table_stats::analyze_grown(&db).await {
                    tracing::warn!(error = %e, "growing tables' statistics not refreshed");
                }
                drop(guard);
            }
            .into_actor(self)
            .map(|_, act, _| act.analyzing = false),
        );
    }

    /// One round: the report when due, the retention cleanup once a day.
    fn round(&mut self, ctx: &mut Context<Self>) {
        if self.activity.halted() {
            return;
        }
        let (db, clock, tz, days) = (
            self.db.clone(),
            self.clock.clone(),
            self.tz,
            self.retention_days,
        );
        let now = clock.now_ms();
        let clean_due = self
            .last_clean_ms
            .is_none_or(|last| now - last >= 24 * 3600 * 1000);
        if clean_due {
            self.last_clean_ms = Some(now);
        }
        use std::sync::atomic::Ordering;
        let pacing = self.pacing.clone();
        let report_due = now >= pacing.next_ms.load(Ordering::Relaxed);
        let guard = self.activity.enter();
        ctx.spawn(
            async move {
                let _guard = guard;
                if report_due {
                    let _pass = pacing.counting.lock().await;
                    let (r, took) = pacing.count(db.clone(), &clock, tz, 3).await;
                    if let Err(e) = r {
                        tracing::error!(error = %e, "log report failed");
                    }
                    if took * REPORT_BUDGET > REPORT_EVERY.as_millis() as i64 {
                        tracing::info!(took_ms = took, "run counts are large; counting less often");
                    }
                }
                if clean_due && let Err(e) = Self::clean(db, clock, tz, days).await {
                    tracing::error!(error = %e, "log cleanup failed");
                }
            }
            .into_actor(self),
        );
    }
}

impl actix::Supervised for LogReport {
    fn restarting(&mut self, _ctx: &mut Self::Context) {
        tracing::warn!(actor = "log report", "actor stopped; restarting it");
    }
}

impl Actor for LogReport {
    type Context = Context<Self>;

    /// A round at start (a node restarted daily still cleans), then every [`REPORT_EVERY`];
    /// growing tables' statistics every [`STATS_EVERY`].
    fn started(&mut self, ctx: &mut Self::Context) {
        self.round(ctx);
        ctx.run_interval(REPORT_EVERY, |a, ctx| a.round(ctx));
        ctx.run_interval(STATS_EVERY, |a, ctx| a.stats(ctx));
    }
}

impl Handler<RefreshReport> for LogReport {
    type Result = ResponseFuture<Result<()>>;

    fn handle(&mut self, _: RefreshReport, _ctx: &mut Self::Context) -> Self::Result {
        Box::pin(Self::refresh(self.db.clone(), self.clock.clone(), self.tz))
    }
}

impl Handler<FreshReport> for LogReport {
    type Result = ResponseFuture<Result<()>>;

    fn handle(&mut self, _: FreshReport, _ctx: &mut Self::Context) -> Self::Result {
        Box::pin(Self::fresh(
            self.db.clone(),
            self.clock.clone(),
            self.tz,
            self.pacing.clone(),
        ))
    }
}

impl LogReport {
    /// [`FreshReport`]: counts today unless the last count is younger than [`FRESH`] or the
    /// budget's next pass is not due yet; one pass at a time.
    async fn fresh(db: DatabaseConnection, clock: Clock, tz: Tz, pacing: Pacing) -> Result<()> {
        use std::sync::atomic::Ordering;
        let _pass = pacing.counting.lock().await;
        let now = clock.now_ms();
        let age = now.saturating_sub(pacing.counted_ms.load(Ordering::Relaxed));
        if age < FRESH.as_millis() as i64 || now < pacing.next_ms.load(Ordering::Relaxed) {
            return Ok(());
        }
        pacing.count(db, &clock, tz, 1).await.0
    }
}

impl Handler<CleanLogs> for LogReport {
    type Result = ResponseFuture<Result<u64>>;

    fn handle(&mut self, _: CleanLogs, _ctx: &mut Self::Context) -> Self::Result {
        Box::pin(Self::clean(
            self.db.clone(),
            self.clock.clone(),
            self.tz,
            self.retention_days,
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::audit::{self, Entry, Filter};

    /// The retention cleanup removes audit entries older than the kept days with the runs.
    #[tokio::test]
    async fn the_cleanup_keeps_the_audit_log_as_long_as_runs() {
        let db = crate::store::tests::memory_db().await;
        let clock = Clock::system();
        let now = clock.now_naive();
        for (days_ago, action) in [(40, "job.delete"), (1, "job.create")] {
            let e = Entry {
                time: now - chrono::Duration::days(days_ago),
                username: "admin".into(),
                action,
                target_type: "job",
                ..Entry::default()
            };
            audit::record(&db, e).await.unwrap();
        }
        LogReport::clean(db.clone(), clock, chrono_tz::UTC, 30)
            .await
            .unwrap();
        let (total, left) = audit::page(&db, &Filter::default(), 0, 10).await.unwrap();
        assert_eq!(total, 1);
        assert_eq!(left[0].action, "job.create");
    }

    /// A fresh report counts today's runs when the last count is older than [`FRESH`], and not
    /// while it is younger or while the budget holds the next pass back.
    #[tokio::test]
    async fn a_fresh_report_counts_today_unless_counted_just_now_or_over_budget() {
        use std::sync::Arc;
        use std::sync::atomic::{AtomicI64, Ordering};
        let db = crate::store::tests::memory_db().await;
        let clock = Clock::system();
        let (next, counted) = (Arc::new(AtomicI64::new(0)), Arc::new(AtomicI64::new(0)));
        let pacing = Pacing {
            next_ms: next.clone(),
            counted_ms: counted.clone(),
            counting: Default::default(),
        };
        let fresh = || LogReport::fresh(db.clone(), clock.clone(), chrono_tz::UTC, pacing.clone());
        let running = || async {
            reports::all(&db)
                .await
                .unwrap()
                .iter()
                .map(|r| r.running_count)
                .sum::<i32>()
        };
        let run = || {
            crate::store::logs::insert_run(
                &db,
                1,
                1,
                clock.now_ms(),
                crate::model::TriggerType::Manual,
                0,
            )
        };
        run().await.unwrap();
        fresh().await.unwrap();
        assert_eq!(running().await, 1, "an old count is counted again");
        let later = clock.now_ms() + 600_000;
        run().await.unwrap();
        counted.store(later, Ordering::Relaxed);
        fresh().await.unwrap();
        assert_eq!(running().await, 1, "a count younger than FRESH stands");
        counted.store(0, Ordering::Relaxed);
        next.store(later, Ordering::Relaxed);
        fresh().await.unwrap();
        assert_eq!(running().await, 1, "the budget holds the next pass back");
        next.store(0, Ordering::Relaxed);
        fresh().await.unwrap();
        assert_eq!(running().await, 2);
    }
}
