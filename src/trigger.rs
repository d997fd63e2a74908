//! The trigger procedure (protocol.md §7.5): from a job id and a trigger type to a dispatched run with
//! its log row written. Param override, retry count, sharding param, address-list override,
//! routing, the `/run` call and the HTML `trigger_msg` summary all happen here.
//!
//! The procedure is a plain async service ([`Trigger`]); the [`TriggerPool`] actor decides when
//! and on which lane it runs.
//!
//! [`TriggerPool`]: crate::actors::trigger_pool::TriggerPool

use std::sync::Arc;

use futures::StreamExt;
use sea_orm::DatabaseConnection;

use crate::clock::{Clock, naive_to_ms};
use crate::error::Result;
use crate::executor::ExecutorClient;
use crate::fire::TriggerRecord;
use crate::jobs::JobDef;
use crate::metrics::Metrics;
use crate::model::AddressType;
use crate::model::wire::{FAIL_CODE, ReturnT, TriggerParam};
use crate::model::{BlockStrategy, RouteStrategy, TriggerType};
use crate::router::{Router, busyover, failover, sharding_broadcast};
use crate::store::logs;
use crate::store::writer::LogWriter;
use crate::store::{groups, jobs};

/// One trigger request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TriggerRequest {
    /// The job.
    pub job_id: i32,
    /// Why it fires.
    pub trigger_type: TriggerType,
    /// Retries left; `None` = the job's configured count.
    pub fail_retry_count: Option<i32>,
    /// The retries the trigger message states when they are not the run row's own: a workflow
    /// node's attempts left (its run row is never retried itself, the node is).
    pub shown_retry: Option<i32>,
    /// Overrides the job's param when set.
    pub executor_param: Option<String>,
    /// `i/n`: run only shard i of n (retries of a broadcast shard).
    pub sharding_param: Option<String>,
    /// Comma-separated addresses overriding the group's (manual trigger).
    pub address_list: Option<String>,
    /// A claimed pending log row to fill (scheduled fires); `None` inserts a new row.
    pub log_id: Option<i64>,
    /// The nominal fire time of a scheduled fire, epoch ms.
    pub fire_time: Option<i64>,
    /// Parents above this run (child-job triggers), guarding against loops.
    pub chain_depth: i16,
    /// The job and its group, when the caller already loaded them (the pool loads a whole
    /// batch's in two queries); `None` reads them.
    pub preloaded: Option<Preloaded>,
}

/// A job and its group read ahead of the trigger.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Preloaded {
    /// The job.
    pub job: Arc<JobDef>,
    /// Its group, if it exists.
    pub group: Option<Arc<entity::xxl_job_group::Model>>,
}

impl TriggerRequest {
    /// A request of `trigger_type` for `job_id` with everything else defaulted.
    pub fn new(job_id: i32, trigger_type: TriggerType) -> Self {
        TriggerRequest {
            job_id,
            trigger_type,
            fail_retry_count: None,
            shown_retry: None,
            executor_param: None,
            sharding_param: None,
            address_list: None,
            log_id: None,
            fire_time: None,
            chain_depth: 0,
            preloaded: None,
        }
    }
}

/// What one shard's dispatch produced.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Dispatched {
    /// Log row id.
    pub log_id: i64,
    /// `/run` answer code.
    pub trigger_code: i32,
}

/// A fire of a batch, routed: its request, job, plan, picked address and routing message.
type Planned = (
    TriggerRequest,
    Arc<JobDef>,
    Plan,
    Option<String>,
    &'static str,
);

/// The trigger service shared by every lane.
pub struct Trigger {
    db: DatabaseConnection,
    clock: Clock,
    client: Arc<dyn ExecutorClient>,
    router: Router,
    admin_address: String,
    metrics: Metrics,
    /// Trigger outcomes are queued to the run-row writer (written in batches; nobody waits).
    writer: LogWriter,
    /// This node's id in a cluster (sent with each call), else `None`.
    node: Option<Arc<str>>,
}

fn split_list(s: &str) -> Vec<String> {
    s.split(',')
        .map(str::trim)
        .filter(|a| !a.is_empty())
        .map(str::to_string)
        .collect()
}

/// One shard's executor call, as its outcome row records it.
struct Call<'a> {
    /// The run row's id.
    log_id: i64,
    /// When it was sent (epoch ms).
    now: i64,
    /// `(index, total)` of a broadcast shard.
    shard: Option<(i32, i32)>,
    /// The address called (`None`: none could be routed).
    address: Option<String>,
    /// The routing transcript.
    route_msg: &'a str,
    /// The executor's answer (or the routing failure).
    result: &'a ReturnT,
}

/// What one trigger needs beyond its request (see [`Trigger::plan`]).
struct Plan {
    param: Option<String>,
    retry: i32,
    manual_registration: bool,
    addresses: Vec<String>,
    route: Option<RouteStrategy>,
    block: Option<BlockStrategy>,
}

/// The `/run` body of shard `index` of `total` of `job`'s run `log_id`.
fn trigger_param(
    job: &entity::xxl_job_info::Model,
    plan: &Plan,
    log_id: i64,
    now: i64,
    (index, total): (i32, i32),
    node: Option<&Arc<str>>,
) -> TriggerParam {
    TriggerParam {
        xjob_node: node.cloned(),
        job_id: job.id,
        executor_handler: job.executor_handler.clone(),
        executor_params: Some(plan.param.clone().unwrap_or_default()),
        executor_block_strategy: job.executor_block_strategy.clone(),
        executor_timeout: job.executor_timeout,
        log_id,
        log_date_time: now,
        glue_type: Some(job.glue_type.clone()),
        glue_source: job.glue_source.clone(),
        glue_updatetime: job.glue_updatetime.map(naive_to_ms).unwrap_or_default(),
        broadcast_index: index,
        broadcast_total: total,
    }
}

fn parse_shard(s: Option<&str>) -> Option<(i32, i32)> {
    let (i, n) = s?.split_once('/')?;
    Some((i.trim().parse().ok()?, n.trim().parse().ok()?))
}

impl Trigger {
    /// The database it records outcomes in.
    pub(crate) fn db(&self) -> &DatabaseConnection {
        &self.db
    }

    /// The engine's clock.
    pub(crate) fn clock(&self) -> &Clock {
        &self.clock
    }

    /// The engine's metrics.
    pub(crate) fn metrics(&self) -> &Metrics {
        &self.metrics
    }

    /// A trigger service writing outcomes through `writer`. `admin_address` is written into
    /// `trigger_msg`.
    pub fn new(
        db: DatabaseConnection,
        clock: Clock,
        client: Arc<dyn ExecutorClient>,
        admin_address: String,
        metrics: Metrics,
        writer: LogWriter,
    ) -> Self {
        Trigger {
            db,
            clock,
            client,
            router: Router::new(),
            admin_address,
            metrics,
            writer,
            node: None,
        }
    }

    /// In a cluster: this node's id, sent with every call ([`TriggerParam::xjob_node`]) so
    /// xjob's executors send results back to it.
    pub(crate) fn with_node(mut self, node: Option<String>) -> Self {
        self.node = node.map(Arc::from);
        self
    }

    /// Makes sure fires with nominal times up to `through` are covered by the dispatch mark
    /// before they are sent ([`LogWriter::dispatch_mark`]).
    pub(crate) async fn dispatch_mark(&self, through: i64) -> Result<()> {
        self.writer.dispatch_mark(through, &self.clock).await
    }

    /// The executor client.
    pub fn client(&self) -> &Arc<dyn ExecutorClient> {
        &self.client
    }

    /// The executor client for the executors of group `group` (its token and app name, see
    /// [`ExecutorClient::for_group`]).
    pub fn client_for(&self, group: i32) -> Arc<dyn ExecutorClient> {
        self.client
            .for_group(group)
            .unwrap_or_else(|| self.client.clone())
    }

    /// Runs the procedure; returns one entry per dispatched shard. A missing job or group is
    /// written onto the pending row (if any) as a failed trigger, not returned as an error.
    pub async fn trigger(&self, req: TriggerRequest) -> Result<Vec<Dispatched>> {
        self.trigger_on_lane(req, None).await
    }

    /// [`Trigger::trigger`] holding a trigger-lane place, which is released as soon as the
    /// executor calls are made and their outcomes are queued for writing: the lanes bound calls
    /// to executors and, through the bounded write queue, the outcomes waiting to be written.
    /// Nothing waits for the write itself.
    pub async fn trigger_on_lane(
        &self,
        req: TriggerRequest,
        lane: Option<tokio::sync::OwnedSemaphorePermit>,
    ) -> Result<Vec<Dispatched>> {
        use tracing::Instrument;
        let span = tracing::info_span!("trigger", job_id = req.job_id, log_id = req.log_id);
        self.trigger_in_span(req, lane).instrument(span).await
    }

    async fn trigger_in_span(
        &self,
        mut req: TriggerRequest,
        lane: Option<tokio::sync::OwnedSemaphorePermit>,
    ) -> Result<Vec<Dispatched>> {
        let (job, group) = match req.preloaded.take() {
            Some(p) => (p.job, p.group),
            None => match self.load(&req).await? {
                Some((j, g)) => (Arc::new(JobDef::new(j)), g.map(Arc::new)),
                None => return Ok(vec![]),
            },
        };
        self.dispatch(req, &job, group.as_deref(), lane).await
    }

    /// Reads the job and group; a missing job fails the pending row and answers `None`.
    async fn load(
        &self,
        req: &TriggerRequest,
    ) -> Result<
        Option<(
            entity::xxl_job_info::Model,
            Option<entity::xxl_job_group::Model>,
        )>,
    > {
        let job = match jobs::get(&self.db, req.job_id).await {
            Ok(j) => j,
            Err(crate::Error::JobNotFound { .. }) => {
                tracing::warn!(job_id = req.job_id, "trigger skipped: job no longer exists");
                if let Some(log_id) = req.log_id {
                    self.fail_row(log_id, req, "Trigger Fail：job not found")
                        .await?;
                }
                return Ok(None);
            }
            Err(e) => return Err(e),
        };
        let group = match groups::get(&self.db, job.job_group).await {
            Ok(g) => Some(g),
            Err(crate::Error::GroupNotFound { .. }) => None,
            Err(e) => return Err(e),
        };
        Ok(Some((job, group)))
    }

    /// What a trigger needs beyond its request, worked out once per trigger.
    fn plan(
        req: &TriggerRequest,
        job: &JobDef,
        group: Option<&entity::xxl_job_group::Model>,
    ) -> Plan {
        let manual = req
            .address_list
            .as_deref()
            .is_some_and(|s| !s.trim().is_empty());
        let addresses = match (&req.address_list, group) {
            (Some(list), _) if manual => split_list(list),
            (_, Some(g)) => split_list(g.address_list.as_deref().unwrap_or_default()),
            _ => vec![],
        };
        Plan {
            param: req.executor_param.clone().or(job.executor_param.clone()),
            retry: req
                .fail_retry_count
                .unwrap_or(job.executor_fail_retry_count),
            manual_registration: manual
                || group.is_some_and(|g| g.address_type == AddressType::Manual.code()),
            addresses,
            route: job.route,
            block: job.block,
        }
    }

    /// Whether `req` can go out in a batch ([`Trigger::dispatch_batch`]): a recorded fire
    /// with its job loaded, one shard, routed without asking executors.
    pub fn batchable(req: &TriggerRequest) -> bool {
        req.log_id.is_some()
            && req.preloaded.as_ref().is_some_and(|p| {
                !matches!(
                    p.job.route,
                    Some(
                        RouteStrategy::Failover
                            | RouteStrategy::Busyover
                            | RouteStrategy::ShardingBroadcast
                    )
                )
            })
    }

    /// Dispatches a batch of recorded fires: routes each, hands every executor call over in
    /// one step ([`ExecutorClient::run_each`]: one message for the in-process executor), and
    /// queues their outcomes as the answers come (answers that came together as one writer
    /// item). A request that is not
    /// [`Trigger::batchable`] goes through [`Trigger::trigger`] on its own.
    pub async fn dispatch_batch(&self, reqs: Vec<TriggerRequest>) -> Result<()> {
        self.dispatch_batch_on(reqs, None).await
    }

    /// [`Trigger::dispatch_batch`] holding `lane`, the fast lane's places taken for the batch
    /// (one per fire): once the executor calls are made, it keeps one place per call and
    /// gives the rest back (a call carrying many fires takes one place, as one of XXL-JOB's
    /// trigger threads would); the places it keeps are released as the last answer comes.
    pub(crate) async fn dispatch_batch_on(
        &self,
        reqs: Vec<TriggerRequest>,
        mut lane: Option<tokio::sync::OwnedSemaphorePermit>,
    ) -> Result<()> {
        let now = self.clock.now_ms();
        let mut planned = Vec::with_capacity(reqs.len());
        let mut calls = Vec::with_capacity(reqs.len());
        // each call's group: its executors get that group's token and app name
        let mut groups = Vec::with_capacity(reqs.len());
        for req in reqs {
            if !Self::batchable(&req) {
                let job_id = req.job_id;
                if let Err(e) = self.trigger(req).await {
                    tracing::error!(job_id, error = %e, "trigger failed");
                }
                continue;
            }
            let mut req = req;
            let Some(Preloaded { job, group }) = req.preloaded.take() else {
                continue;
            };
            let plan = Self::plan(&req, &job, group.as_deref());
            let log_id = req.log_id.unwrap_or_default();
            let (address, route_msg) = if plan.addresses.is_empty() {
                (None, "Trigger Fail：registry address is empty")
            } else {
                match plan.route {
                    Some(r) => (self.router.pick(r, job.id, &plan.addresses, now), ""),
                    None => (None, "Trigger Fail：route strategy not found"),
                }
            };
            if let Some(a) = &address {
                calls.push((
                    a.clone(),
                    trigger_param(&job, &plan, log_id, now, (0, 1), self.node.as_ref()),
                ));
                groups.push(job.job_group);
            }
            let p: Planned = (req, job, plan, address, route_msg);
            planned.push(p);
        }
        if !calls.is_empty() {
            self.writer
                .dispatching(calls.iter().map(|(_, p)| p.log_id).collect());
        }
        let started = std::time::Instant::now();
        let (made, mut answers) = self.run_grouped(calls, &groups);
        if let Some(places) = lane.as_mut() {
            let spare = places.num_permits().saturating_sub(made);
            if spare > 0 {
                drop(places.split(spare));
            }
        }
        // the planned fire of each call, by the call's index
        let call_at: Vec<usize> = planned
            .iter()
            .enumerate()
            .filter(|(_, p)| p.3.is_some())
            .map(|(i, _)| i)
            .collect();
        let mut planned: Vec<Option<Planned>> = planned.into_iter().map(Some).collect();
        // fires with no executor to call are recorded at once
        let no_call = || ReturnT {
            code: FAIL_CODE,
            msg: None,
            content: None,
        };
        let uncalled: Vec<TriggerRecord> = planned
            .iter_mut()
            .filter(|p| p.as_ref().is_some_and(|p| p.3.is_none()))
            .filter_map(Option::take)
            .map(|p| self.outcome_of(p, no_call(), now, 0))
            .collect();
        let mut n = uncalled.len();
        self.writer.outcomes(uncalled).await?;
        // each answer's outcome is queued as it comes, before the run's result can arrive
        while let Some(group) = answers.next().await {
            let elapsed = started.elapsed().as_micros() as u64;
            // sized up front: grown from empty, a large group's records were copied as it grew
            let mut records: Vec<TriggerRecord> = Vec::with_capacity(group.len());
            records.extend(group.into_iter().filter_map(|(i, r)| {
                let p = planned.get_mut(*call_at.get(i)?)?.take()?;
                Some(self.outcome_of(p, r, now, elapsed))
            }));
            n += records.len();
            self.writer.outcomes(records).await?;
        }
        let elapsed = started.elapsed().as_micros() as u64;
        let unanswered: Vec<TriggerRecord> = planned
            .into_iter()
            .flatten()
            .map(|p| self.outcome_of(p, ReturnT::fail("executor gave no answer"), now, elapsed))
            .collect();
        n += unanswered.len();
        self.writer.outcomes(unanswered).await?;
        drop(lane);
        tracing::debug!(fires = n, "triggered a batch");
        Ok(())
    }

    /// Makes a batch's calls, each through its group's client ([`Trigger::client_for`]):
    /// answers the executor calls made and every answer under its call's index.
    fn run_grouped(
        &self,
        calls: Vec<(String, TriggerParam)>,
        groups: &[i32],
    ) -> (usize, crate::executor::client::Answers) {
        let Some(&first) = groups.first() else {
            return (0, futures::stream::empty().boxed());
        };
        // most batches are of one group
        if groups.iter().all(|g| *g == first) {
            return self.client_for(first).run_each_counted(calls);
        }
        // each group's calls and their indexes in the batch
        type Share = (i32, Vec<(String, TriggerParam)>, Vec<usize>);
        let mut shares: Vec<Share> = Vec::new();
        for (i, (call, &g)) in calls.into_iter().zip(groups).enumerate() {
            match shares.iter_mut().find(|(k, _, _)| *k == g) {
                Some((_, calls, at)) => {
                    calls.push(call);
                    at.push(i);
                }
                None => shares.push((g, vec![call], vec![i])),
            }
        }
        let mut made = 0;
        let mut streams = Vec::with_capacity(shares.len());
        for (g, calls, at) in shares {
            let (n, answers) = self.client_for(g).run_each_counted(calls);
            made += n;
            streams.push(crate::executor::client::reindexed(answers, at));
        }
        (made, futures::stream::select_all(streams).boxed())
    }

    /// The outcome of one fire of a batch, counted in the metrics.
    fn outcome_of(&self, p: Planned, result: ReturnT, now: i64, elapsed_us: u64) -> TriggerRecord {
        let (req, job, plan, address, route_msg) = p;
        self.metrics.triggered(
            result.is_success(),
            req.fire_time.map(|f| now - f),
            elapsed_us,
        );
        let log_id = req.log_id.unwrap_or_default();
        tracing::debug!(
            job_id = req.job_id,
            log_id,
            address = address.as_deref(),
            code = result.code,
            "triggered"
        );
        let call = Call {
            log_id,
            now,
            shard: None,
            address,
            route_msg,
            result: &result,
        };
        self.record(&req, &job, &plan, call)
    }

    async fn dispatch(
        &self,
        req: TriggerRequest,
        job: &JobDef,
        group: Option<&entity::xxl_job_group::Model>,
        lane: Option<tokio::sync::OwnedSemaphorePermit>,
    ) -> Result<Vec<Dispatched>> {
        let plan = Self::plan(&req, job, group);
        let given_shard = parse_shard(req.sharding_param.as_deref());
        let broadcast = plan.route == Some(RouteStrategy::ShardingBroadcast);
        let shards: Vec<(i32, i32)> = if broadcast {
            sharding_broadcast::shards(plan.addresses.len(), given_shard)
        } else {
            vec![given_shard.unwrap_or((0, 1))]
        };
        let addresses = &plan.addresses;
        let now = self.clock.now_ms();
        let client = self.client_for(job.job_group);
        let mut records = Vec::with_capacity(shards.len());
        for (k, &(index, total)) in shards.iter().enumerate() {
            let log_id = match (k, req.log_id) {
                (0, Some(id)) => id,
                _ => {
                    logs::insert_run(
                        &self.db,
                        job.job_group,
                        job.id,
                        now,
                        req.trigger_type,
                        req.chain_depth,
                    )
                    .await?
                }
            };
            let tp = trigger_param(job, &plan, log_id, now, (index, total), self.node.as_ref());
            let (address, route_msg): (Option<String>, String) = if addresses.is_empty() {
                (None, "Trigger Fail：registry address is empty".into())
            } else if broadcast {
                (
                    sharding_broadcast::address(addresses, index).cloned(),
                    String::new(),
                )
            } else {
                match plan.route {
                    Some(RouteStrategy::Failover) => {
                        let p = failover::pick(client.as_ref(), addresses).await;
                        (p.address, p.transcript)
                    }
                    Some(RouteStrategy::Busyover) => {
                        let p = busyover::pick(client.as_ref(), addresses, job.id).await;
                        (p.address, p.transcript)
                    }
                    Some(r) => (self.router.pick(r, job.id, addresses, now), String::new()),
                    None => (None, "Trigger Fail：route strategy not found".into()),
                }
            };
            let started = std::time::Instant::now();
            let result: ReturnT = match &address {
                Some(a) => client.run(a, tp).await,
                None => ReturnT {
                    code: FAIL_CODE,
                    msg: None,
                    content: None,
                },
            };
            self.metrics.triggered(
                result.is_success(),
                req.fire_time.map(|f| now - f),
                started.elapsed().as_micros() as u64,
            );
            let shard = broadcast.then_some((index, total));
            let call = Call {
                log_id,
                now,
                shard,
                address,
                route_msg: &route_msg,
                result: &result,
            };
            records.push(self.record(&req, job, &plan, call));
        }
        let out: Vec<Dispatched> = records
            .iter()
            .map(|r| Dispatched {
                log_id: r.log_id,
                trigger_code: r.trigger_code,
            })
            .collect();
        // queued while holding the lane place (a full queue slows the lanes down)
        self.writer.outcomes(records).await?;
        drop(lane);
        tracing::debug!(shards = out.len(), "triggered");
        Ok(out)
    }

    /// The outcome row of one shard's executor call.
    fn record(
        &self,
        req: &TriggerRequest,
        job: &JobDef,
        plan: &Plan,
        call: Call<'_>,
    ) -> TriggerRecord {
        let Call {
            log_id,
            now,
            shard,
            address,
            route_msg,
            result,
        } = call;
        let summary = crate::trigger_msg::Summary {
            trigger_type: req.trigger_type,
            admin_address: &self.admin_address,
            manual_registration: plan.manual_registration,
            addresses: &plan.addresses,
            route: plan.route,
            shard,
            block: plan.block,
            timeout: job.executor_timeout,
            retry: req.shown_retry.unwrap_or(plan.retry),
            route_msg,
            run: address
                .as_deref()
                .map(|a| (a, result.code, result.msg.as_deref())),
        };
        TriggerRecord {
            log_id,
            job_id: job.id,
            chain_depth: req.chain_depth,
            children: job.children.clone(),
            trigger_ms: now,
            trigger_msg: summary.compact(),
            executor_address: address,
            executor_handler: job.executor_handler.clone(),
            executor_param: plan.param.clone(),
            executor_sharding_param: shard.map(|(i, n)| format!("{i}/{n}")),
            executor_fail_retry_count: plan.retry,
            trigger_code: result.code,
            trigger_type: req.trigger_type,
        }
    }

    async fn fail_row(&self, log_id: i64, req: &TriggerRequest, why: &str) -> Result<()> {
        self.writer
            .outcome(TriggerRecord {
                log_id,
                job_id: req.job_id,
                chain_depth: req.chain_depth,
                trigger_ms: self.clock.now_ms(),
                trigger_code: FAIL_CODE,
                trigger_msg: format!("Trigger type：{}<br>{why}", req.trigger_type.title()),
                trigger_type: req.trigger_type,
                ..Default::default()
            })
            .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Shard params (`i/n`) parse or are refused; address lists drop empty entries.
    #[test]
    fn shard_and_list_parsing() {
        assert_eq!(parse_shard(Some("1/3")), Some((1, 3)));
        assert_eq!(parse_shard(Some("x/3")), None);
        assert_eq!(parse_shard(None), None);
        assert_eq!(
            split_list(" a, ,b,"),
            vec!["a".to_string(), "b".to_string()]
        );
    }
}
