//! Trigger lanes: bounded concurrency with back-pressure (nothing dropped), and XXL-JOB's
//! slow-lane rule end to end. A gated client stands in for remote executors.
#![allow(clippy::unwrap_used)]

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use common::*;
use futures::future::BoxFuture;
use futures::{FutureExt, StreamExt};
use tokio::sync::Semaphore;
use xjob::console::Paging;
use xjob::model::wire::{LogParam, LogResult, ReturnT, TriggerParam};
use xjob::prelude::*;
use xjob::testing::actors::PoolStats;

/// `/run` waits for a gate permit (or a fixed delay) and counts concurrent calls.
#[derive(Clone)]
struct GatedClient {
    gate: Arc<Semaphore>,
    delay: Option<Duration>,
    in_flight: Arc<AtomicUsize>,
    max: Arc<AtomicUsize>,
    calls: Arc<AtomicUsize>,
}

impl Default for GatedClient {
    fn default() -> Self {
        GatedClient {
            gate: Arc::new(Semaphore::new(0)),
            delay: None,
            in_flight: Arc::default(),
            max: Arc::default(),
            calls: Arc::default(),
        }
    }
}

impl ExecutorClient for GatedClient {
    fn run(&self, _address: &str, _param: TriggerParam) -> BoxFuture<'static, ReturnT> {
        let me = self.clone();
        async move {
            let n = me.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
            me.max.fetch_max(n, Ordering::SeqCst);
            me.calls.fetch_add(1, Ordering::SeqCst);
            match me.delay {
                Some(d) => tokio::time::sleep(d).await,
                None => me.gate.acquire().await.unwrap().forget(),
            }
            me.in_flight.fetch_sub(1, Ordering::SeqCst);
            ReturnT::success()
        }
        .boxed()
    }
    fn beat(&self, _a: &str) -> BoxFuture<'static, ReturnT> {
        futures::future::ready(ReturnT::success()).boxed()
    }
    fn idle_beat(&self, _a: &str, _j: i32) -> BoxFuture<'static, ReturnT> {
        futures::future::ready(ReturnT::success()).boxed()
    }
    fn kill(&self, _a: &str, _j: i32) -> BoxFuture<'static, ReturnT> {
        futures::future::ready(ReturnT::success()).boxed()
    }
    fn log(&self, _a: &str, _p: LogParam) -> BoxFuture<'static, ReturnT<LogResult>> {
        futures::future::ready(ReturnT::success()).boxed()
    }
}

async fn wait_until(engine: &Engine, what: &str, f: impl Fn(&PoolStats) -> bool) {
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    loop {
        let s = engine.pool_stats().await.unwrap();
        if f(&s) {
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "timed out waiting for {what}: {s:?}"
        );
        tokio::task::yield_now().await;
    }
}

async fn wait_calls(client: &GatedClient, n: usize) {
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while client.calls.load(Ordering::SeqCst) < n {
        assert!(
            std::time::Instant::now() < deadline,
            "client call {n} never started"
        );
        tokio::task::yield_now().await;
    }
    for _ in 0..16 {
        tokio::task::yield_now().await;
    }
}

/// An engine with lanes of 2 + 1 places whose only executor is `client`, and a manual group
/// for it; `tweak` adjusts the config. Answers the engine and the group.
async fn engine_with(
    dir: &std::path::Path,
    client: impl ExecutorClient,
    tweak: impl FnOnce(&mut Config),
) -> (Engine, i32) {
    let mut cfg = test_config(dir);
    cfg.executor.app_name = String::new();
    cfg.trigger_pool.fast_max = 2;
    cfg.trigger_pool.slow_max = 1;
    tweak(&mut cfg);
    let engine = Engine::builder(cfg)
        .clock(Clock::tokio_at(T0))
        .remote_client(Arc::new(client))
        .start()
        .await
        .unwrap();
    let group = xjob::testing::store::groups::insert(
        engine.db(),
        "remote-app",
        "remote",
        1,
        Some("http://10.9.9.9:9999/".into()),
        engine.clock().now_naive(),
    )
    .await
    .unwrap();
    (engine, group)
}

/// [`engine_with`] and one job that fires once a day (triggered by hand in the tests).
async fn start(dir: &std::path::Path, client: GatedClient) -> (Engine, i32) {
    let (engine, group) = engine_with(dir, client, |_| {}).await;
    let job = engine
        .add_job(JobSpec::cron(group, "gated", "0 0 0 * * ?", "anything"))
        .await
        .unwrap();
    (engine, job)
}

/// A full trigger lane makes fires wait (back-pressure) and drops none.
#[test]
fn a_full_lane_applies_back_pressure_and_drops_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let client = GatedClient::default();
    run_paused(|| async {
        let (engine, job) = start(dir.path(), client.clone()).await;
        let mut waiting = Vec::new();
        for i in 0..5 {
            let e = engine.clone();
            waiting.push(actix::spawn(async move {
                e.trigger_job(job, Some(format!("n{i}")), None).await
            }));
        }
        // every trigger reaches the lane (each reads its job on a database thread first, so
        // the last may come well after the first two were admitted)
        wait_until(&engine, "all five triggers in the lane", |s| {
            s.fast_in_flight + s.fast_waiting == 5
        })
        .await;
        wait_calls(&client, 2).await;
        for _ in 0..200 {
            tokio::task::yield_now().await;
        }
        assert_eq!(
            client.calls.load(Ordering::SeqCst),
            2,
            "the lane admits only fast_max"
        );
        let s = engine.pool_stats().await.unwrap();
        assert_eq!(
            (s.fast_in_flight, s.fast_waiting),
            (2, 3),
            "three wait for a place"
        );
        client.gate.add_permits(5);
        wait_until(&engine, "all complete", |s| s.completed == 5).await;
        assert_eq!(engine.pool_stats().await.unwrap().fast_waiting, 0);
        for w in waiting {
            w.await.unwrap().unwrap();
        }
        assert_eq!(
            client.max.load(Ordering::SeqCst),
            2,
            "never more than fast_max at once"
        );
        // a trigger is complete once its outcome is queued; the writes land right after
        settle(engine.activity()).await;
        let rows = xjob::testing::store::logs::for_job(engine.db(), job)
            .await
            .unwrap();
        assert_eq!(rows.len(), 5, "nothing dropped");
        assert!(rows.iter().all(|r| r.trigger_code == 200));
        engine.db().clone().close().await.unwrap();
    });
}

/// A job slow more than ten times in a minute moves to the slow lane; others stay fast.
#[test]
fn a_job_slow_more_than_ten_times_a_minute_moves_to_the_slow_lane() {
    let dir = tempfile::tempdir().unwrap();
    let client = GatedClient {
        delay: Some(Duration::from_millis(600)),
        ..Default::default()
    };
    run_paused(|| async {
        let (engine, job) = start(dir.path(), client.clone()).await;
        for i in 0..11 {
            engine.trigger_job(job, None, None).await.unwrap();
            wait_until(&engine, "fast lane in use", |s| s.fast_in_flight == 1).await;
            wait_calls(&client, i as usize + 1).await;
            tokio::time::advance(Duration::from_millis(650)).await;
            wait_until(&engine, "trigger done", |s| s.completed == i + 1).await;
        }
        // the 12th trigger of the minute runs on the slow lane
        engine.trigger_job(job, None, None).await.unwrap();
        wait_until(&engine, "slow lane in use", |s| {
            s.slow_in_flight == 1 && s.fast_in_flight == 0
        })
        .await;
        wait_calls(&client, 12).await;
        tokio::time::advance(Duration::from_millis(650)).await;
        wait_until(&engine, "12 done", |s| s.completed == 12).await;
        // a new minute resets the count
        tokio::time::advance(Duration::from_secs(60)).await;
        engine.trigger_job(job, None, None).await.unwrap();
        wait_until(&engine, "back on the fast lane", |s| s.fast_in_flight == 1).await;
        wait_calls(&client, 13).await;
        tokio::time::advance(Duration::from_millis(650)).await;
        wait_until(&engine, "13 done", |s| s.completed == 13).await;
        engine.db().clone().close().await.unwrap();
    });
}

/// Past the dispatch ceiling the scan stops recording new fires (back-pressure): while more
/// fires wait for a lane than one pass may read, a pass reads no job, so fires get late but
/// memory does not grow; once dispatch catches up the scan records again.
#[test]
fn a_scan_records_nothing_while_dispatch_is_behind() {
    let dir = tempfile::tempdir().unwrap();
    let client = GatedClient::default();
    run_paused(|| async {
        let (engine, group) = engine_with(dir.path(), client.clone(), |c| {
            c.scheduler.pre_read_count = 10
        })
        .await;
        for i in 0..10 {
            let spec = JobSpec::cron(group, &format!("every second {i}"), "* * * * * ?", "x");
            let id = engine.add_job(spec).await.unwrap();
            engine.start_job(id).await.unwrap();
        }
        let first = engine.scan_now().await.unwrap();
        assert_eq!(first.jobs, 10);
        // two seconds of fires come due; three lane places, the executor never answers
        tokio::time::advance(Duration::from_millis(2_100)).await;
        wait_until(&engine, "dispatch is behind", |s| {
            s.fast_in_flight == 2 && s.slow_in_flight == 0 && s.fast_waiting + s.backlog > 10
        })
        .await;
        // 1.5 s later every job is due again (its next fire is within the half window a pass
        // reads ahead)
        tokio::time::advance(Duration::from_millis(1_500)).await;
        wait_until(&engine, "still behind", |s| s.fast_waiting + s.backlog > 10).await;
        let window = engine.clock().now_ms() + 2_500;
        let (_, jobs) = xjob::testing::store::jobs::page(engine.db(), &Default::default(), 0, 10)
            .await
            .unwrap();
        assert!(jobs.iter().all(|j| j.trigger_next_time <= window));
        let behind = engine.scan_now().await.unwrap();
        assert_eq!(
            (behind.jobs, behind.fires),
            (0, 0),
            "no job read while dispatch trails"
        );
        client.gate.add_permits(10_000);
        wait_until(&engine, "caught up", |s| {
            s.fast_in_flight + s.fast_waiting + s.backlog == 0
        })
        .await;
        let again = engine.scan_now().await.unwrap();
        assert_eq!(again.jobs, 10, "recording resumes");
        settle(engine.activity()).await;
        engine.db().clone().close().await.unwrap();
    });
}

/// `/api/callback`'s write (`RecordResults`) answers once the results are written, while the
/// child job they trigger still waits for a place in a full lane; the child runs once the lane
/// frees. (An executor re-sends a callback its 3 s timeout cuts off.)
#[test]
fn a_callback_answers_while_its_child_trigger_waits_for_a_lane() {
    use xjob::model::wire::HandleCallbackParam;
    use xjob::testing::actors::RecordResults;
    let dir = tempfile::tempdir().unwrap();
    let client = GatedClient::default();
    run_paused(|| async {
        let (engine, group) = engine_with(dir.path(), client.clone(), |_| {}).await;
        let child = engine
            .add_job(JobSpec::cron(group, "child", "0 0 0 * * ?", "anything"))
            .await
            .unwrap();
        let mut spec = JobSpec::cron(group, "parent", "0 0 0 * * ?", "anything");
        spec.child_job_id = Some(child.to_string());
        let parent = engine.add_job(spec).await.unwrap();
        // one run of the parent, dispatched (one permit) and recorded
        client.gate.add_permits(1);
        engine.trigger_job(parent, None, None).await.unwrap();
        wait_until(&engine, "the parent dispatched", |s| s.completed == 1).await;
        let runs = engine.runs(parent, Paging::default()).await.unwrap();
        let run = runs.items[0].id;
        // both fast places held by another job's runs
        let filler = engine
            .add_job(JobSpec::cron(group, "filler", "0 0 0 * * ?", "anything"))
            .await
            .unwrap();
        for _ in 0..2 {
            engine.trigger_job(filler, None, None).await.unwrap();
        }
        wait_until(&engine, "lane full", |s| s.fast_in_flight == 2).await;
        wait_calls(&client, 3).await;
        let result = HandleCallbackParam {
            log_id: run,
            log_date_tim: 0,
            handle_code: 200,
            handle_msg: None,
        };
        // paused time: a write stuck behind the lane would run the clock to the timeout
        tokio::time::timeout(
            Duration::from_secs(3),
            engine.complete().send(RecordResults(vec![result])),
        )
        .await
        .expect("the callback answers while the lane is full")
        .unwrap()
        .unwrap();
        assert_eq!(
            engine.run(run).await.unwrap().handle_code,
            200,
            "written before the answer"
        );
        wait_until(&engine, "the child waits", |s| s.fast_waiting == 1).await;
        assert_eq!(
            client.calls.load(Ordering::SeqCst),
            3,
            "the child is not dispatched"
        );
        client.gate.add_permits(3);
        wait_until(&engine, "all complete", |s| s.completed == 4).await;
        settle(engine.activity()).await;
        let runs = engine.runs(child, Paging::default()).await.unwrap();
        assert_eq!(runs.total, 1, "the child ran once");
        engine.db().clone().close().await.unwrap();
    });
}

/// Hands each batch of triggers over in one call (as the in-process executor and xjob's
/// `/runBatch` do), answering every trigger once the gate lets the call through.
#[derive(Clone, Default)]
struct BatchClient {
    gated: GatedClient,
    /// Triggers handed over so far.
    fires: Arc<AtomicUsize>,
}

impl ExecutorClient for BatchClient {
    fn run(&self, address: &str, param: TriggerParam) -> BoxFuture<'static, ReturnT> {
        self.gated.run(address, param)
    }
    fn run_each(&self, calls: Vec<(String, TriggerParam)>) -> xjob::executor::Answers {
        let me = self.clone();
        let n = calls.len();
        me.fires.fetch_add(n, Ordering::SeqCst);
        me.gated.calls.fetch_add(1, Ordering::SeqCst);
        futures::stream::once(async move {
            me.gated.gate.acquire().await.unwrap().forget();
            (0..n).map(|i| (i, ReturnT::success())).collect::<Vec<_>>()
        })
        .boxed()
    }
    fn run_each_counted(
        &self,
        calls: Vec<(String, TriggerParam)>,
    ) -> (usize, xjob::executor::Answers) {
        (usize::from(!calls.is_empty()), self.run_each(calls))
    }
    fn beat(&self, a: &str) -> BoxFuture<'static, ReturnT> {
        self.gated.beat(a)
    }
    fn idle_beat(&self, a: &str, j: i32) -> BoxFuture<'static, ReturnT> {
        self.gated.idle_beat(a, j)
    }
    fn kill(&self, a: &str, j: i32) -> BoxFuture<'static, ReturnT> {
        self.gated.kill(a, j)
    }
    fn log(&self, a: &str, p: LogParam) -> BoxFuture<'static, ReturnT<LogResult>> {
        self.gated.log(a, p)
    }
}

/// A batch of fires handed over in one executor call holds one fast-lane place once the call
/// is made (XXL-JOB's lane bounds calls: one trigger thread, one call), so more fires than
/// places can be in flight; fires called one by one still hold a place each (above).
#[test]
fn a_batch_handed_over_in_one_call_holds_one_place() {
    let dir = tempfile::tempdir().unwrap();
    let client = BatchClient::default();
    run_paused(|| async {
        // 8 places, chunks of 2 fires
        let (engine, group) =
            engine_with(dir.path(), client.clone(), |c| c.trigger_pool.fast_max = 8).await;
        for i in 0..12 {
            let spec = JobSpec::cron(group, &format!("every second {i}"), "* * * * * ?", "x");
            let id = engine.add_job(spec).await.unwrap();
            engine.start_job(id).await.unwrap();
        }
        engine.scan_now().await.unwrap();
        // one second's 12 fires come due; the executor answers nothing yet
        tokio::time::advance(Duration::from_millis(1_100)).await;
        wait_until(&engine, "every fire in flight", |s| s.fast_in_flight == 12).await;
        assert_eq!(client.fires.load(Ordering::SeqCst), 12, "all handed over");
        assert_eq!(client.gated.calls.load(Ordering::SeqCst), 6, "in six calls");
        let s = engine.pool_stats().await.unwrap();
        assert_eq!(s.fast_waiting, 0, "none waits for a place: {s:?}");
        client.gated.gate.add_permits(10_000);
        wait_until(&engine, "all answered", |s| s.fast_in_flight == 0).await;
        settle(engine.activity()).await;
        engine.db().clone().close().await.unwrap();
    });
}
