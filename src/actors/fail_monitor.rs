//! FailMonitor: retries and alarms for failed runs (protocol.md §7.9).
//!
//! Every [`FAIL_SCAN`] (or on [`CheckFailures`]) it reads up to 1000 failed runs not yet handled
//! (`alarm_status = 0`), takes each with XXL-JOB's lock (`alarm_status` 0 → −1, so one node
//! handles it), retries it when retries are left (type RETRY, one fewer left, same param and
//! shard) — not before the job's `retry_interval` has passed since the failure — and raises every
//! configured [`Alarm`]: status 2 when all delivered, 3 when one failed, 1 when the job is gone.

use std::sync::Arc;
use std::time::Duration;

use actix::prelude::*;
use sea_orm::DatabaseConnection;

use crate::activity::Activity;
use crate::actors::trigger_pool::TriggerJob;
use crate::alarm::{Alarm, AlarmEvent};
use crate::clock::{Clock, naive_to_ms};
use crate::error::Result;
use crate::model::AlarmStatus;
use crate::model::TriggerType;
use crate::model::wire::SUCCESS_CODE;
use crate::store::{groups, jobs, logs};
use crate::trigger::TriggerRequest;

/// How often failures are checked (XXL-JOB: 10 s).
pub(crate) const FAIL_SCAN: Duration = Duration::from_secs(10);
/// Most failures handled per check.
pub(crate) const FAIL_BATCH: u64 = 1000;

/// Handles failures now; answers how many runs were handled.
#[derive(Message, Debug)]
#[rtype(result = "Result<usize>")]
pub(crate) struct CheckFailures;

/// The fail monitor.
pub(crate) struct FailMonitor {
    db: DatabaseConnection,
    clock: Clock,
    pool: Recipient<TriggerJob>,
    alarms: Arc<Vec<Box<dyn Alarm>>>,
    activity: Activity,
    busy: bool,
}

impl FailMonitor {
    /// A monitor retrying through `pool` and alarming through `alarms`.
    pub(crate) fn new(
        db: DatabaseConnection,
        clock: Clock,
        pool: Recipient<TriggerJob>,
        alarms: Arc<Vec<Box<dyn Alarm>>>,
        activity: Activity,
    ) -> Self {
        FailMonitor {
            db,
            clock,
            pool,
            alarms,
            activity,
            busy: false,
        }
    }

    async fn check(
        db: DatabaseConnection,
        clock: Clock,
        pool: Recipient<TriggerJob>,
        alarms: Arc<Vec<Box<dyn Alarm>>>,
    ) -> Result<usize> {
        let mut handled = 0;
        for log in logs::failed_unalarmed(&db, FAIL_BATCH).await? {
            let job = match jobs::get(&db, log.job_id).await {
                Ok(j) => Some(j),
                Err(crate::Error::JobNotFound { .. }) => None,
                Err(e) => return Err(e),
            };
            let retries = log.executor_fail_retry_count;
            if retries > 0
                && let Some(j) = &job
                && j.retry_interval > 0
            {
                let failed_at = log
                    .handle_time
                    .or(log.trigger_time)
                    .map(naive_to_ms)
                    .unwrap_or(0);
                if clock.now_ms() < failed_at + i64::from(j.retry_interval) * 1000 {
                    continue; // not yet: its retry waits for the interval
                }
            }
            if !logs::lock_alarm(&db, log.id).await? {
                continue;
            }
            handled += 1;
            if retries > 0 && job.is_some() {
                let mut req = TriggerRequest::new(log.job_id, TriggerType::Retry);
                req.fail_retry_count = Some(retries - 1);
                req.executor_param = Some(log.executor_param.clone().unwrap_or_default());
                req.sharding_param = log.executor_sharding_param.clone();
                req.chain_depth = log.chain_depth;
                match pool.send(TriggerJob(req)).await {
                    Ok(Ok(())) => {
                        logs::append_trigger_msg(
                            &db,
                            log.id,
                            "<br><br><span style=\"color:#F39C12;\" > >>>>>>>>>>>Fail retry trigger<<<<<<<<<<< </span><br>",
                        )
                        .await?;
                    }
                    Ok(Err(e)) => {
                        tracing::error!(log_id = log.id, error = %e, "retry not triggered")
                    }
                    Err(e) => tracing::error!(log_id = log.id, error = %e, "retry not triggered"),
                }
            }
            let status = match &job {
                None => AlarmStatus::NotNeeded,
                Some(j) => {
                    let title = groups::get(&db, j.job_group)
                        .await
                        .map(|g| g.title)
                        .unwrap_or_default();
                    let event = AlarmEvent {
                        event: "job_failed",
                        job_id: j.id,
                        job_desc: j.job_desc.clone(),
                        job_group: j.job_group,
                        group_title: title,
                        log_id: log.id,
                        trigger_code: log.trigger_code,
                        trigger_msg: (log.trigger_code != SUCCESS_CODE)
                            .then(|| log.trigger_msg.clone().unwrap_or_default()),
                        handle_code: log.handle_code,
                        handle_msg: (log.handle_code != 0)
                            .then(|| log.handle_msg.clone().unwrap_or_default()),
                        executor_address: log.executor_address.clone(),
                        alarm_email: j.alarm_email.clone(),
                        alarm_webhook: j.alarm_webhook.clone(),
                        workflow: None,
                    };
                    let mut ok = true;
                    for a in alarms.iter() {
                        if let Err(e) = a.send(event.clone()).await {
                            ok = false;
                            tracing::error!(log_id = log.id, alarm = a.name(), error = %e, "alarm not delivered");
                        }
                    }
                    if ok {
                        AlarmStatus::Sent
                    } else {
                        AlarmStatus::Failed
                    }
                }
            };
            logs::set_alarm_status(&db, log.id, status.code()).await?;
        }
        Ok(handled)
    }
}

impl FailMonitor {
    /// One pass, unless the previous one is still running.
    fn pass(&mut self, ctx: &mut Context<Self>) {
        if self.busy || self.activity.halted() {
            return;
        }
        self.busy = true;
        let fut = Self::check(
            self.db.clone(),
            self.clock.clone(),
            self.pool.clone(),
            self.alarms.clone(),
        );
        let guard = self.activity.enter();
        ctx.spawn(fut.into_actor(self).map(move |res, act, _| {
            drop(guard);
            act.busy = false;
            if let Err(e) = res {
                tracing::error!(error = %e, "fail monitor pass failed");
            }
        }));
    }
}

impl actix::Supervised for FailMonitor {
    fn restarting(&mut self, _ctx: &mut Self::Context) {
        tracing::warn!(actor = "fail monitor", "actor stopped; restarting it");
    }
}

impl Actor for FailMonitor {
    type Context = Context<Self>;

    /// A pass at start (failures left by a stopped node are handled at once), then every
    /// [`FAIL_SCAN`].
    fn started(&mut self, ctx: &mut Self::Context) {
        self.pass(ctx);
        ctx.run_interval(FAIL_SCAN, |a, ctx| a.pass(ctx));
    }
}

impl Handler<CheckFailures> for FailMonitor {
    type Result = ResponseFuture<Result<usize>>;

    fn handle(&mut self, _: CheckFailures, _ctx: &mut Self::Context) -> Self::Result {
        Box::pin(Self::check(
            self.db.clone(),
            self.clock.clone(),
            self.pool.clone(),
            self.alarms.clone(),
        ))
    }
}
