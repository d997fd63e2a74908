//! Fires in doubt (a node stopped while sending them) are settled by asking their group's
//! executors, never by guessing: a run an executor has is recorded received and not sent again;
//! one no executor has is sent again with its own log id; one nobody can answer for is asked
//! again, and recorded failed once the bound passed; a claim whose node stopped becomes one in
//! doubt. On paused time, with a stand-in executor client answering `/log` as told.
#![allow(clippy::unwrap_used)]

mod common;

use std::collections::HashMap;
use std::sync::Arc;

use futures::FutureExt;
use futures::future::BoxFuture;
use parking_lot::Mutex;
use sea_orm::{ConnectionTrait, Statement};
use xjob::model::wire::{LogParam, LogResult, ReturnT, TriggerParam};
use xjob::prelude::*;

use common::{T0, TestApp, run_paused, settle};

/// What the stand-in says of a log id.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Says {
    Has,
    HasNot,
    Unreachable,
}

/// A stand-in executor client: `/log` answers as `says` tells per log id (unknown ids: not
/// received), `/run` is recorded and accepted.
#[derive(Clone, Default)]
struct Stand {
    says: Arc<Mutex<HashMap<i64, Says>>>,
    runs: Arc<Mutex<Vec<TriggerParam>>>,
    asked: Arc<Mutex<Vec<(String, i64)>>>,
}

impl ExecutorClient for Stand {
    fn run(&self, _a: &str, p: TriggerParam) -> BoxFuture<'static, ReturnT> {
        self.runs.lock().push(p);
        futures::future::ready(ReturnT::success()).boxed()
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
    fn log(&self, a: &str, p: LogParam) -> BoxFuture<'static, ReturnT<LogResult>> {
        self.asked.lock().push((a.to_string(), p.log_id));
        let says = self
            .says
            .lock()
            .get(&p.log_id)
            .copied()
            .unwrap_or(Says::HasNot);
        let page = |text: &str| ReturnT {
            code: 200,
            msg: None,
            content: Some(LogResult {
                from_line_num: 1,
                to_line_num: 1,
                log_content: text.into(),
                is_end: false,
            }),
        };
        let r = match says {
            Says::Has => page("2026-11-21 14:00:00 [main] job start\n"),
            Says::HasNot => page("readLog fail, logFile not exists"),
            Says::Unreachable => {
                ReturnT::fail("xxl-job remoting error(connection refused), for url : x")
            }
        };
        futures::future::ready(r).boxed()
    }
}

/// One run row as the test reads it back: (fire_state, trigger_code, executor_address,
/// trigger_msg).
async fn row(app: &TestApp, id: i64) -> (i64, i32, Option<String>, Option<String>) {
    let r = xjob::testing::store::logs::get(app.engine.db(), id)
        .await
        .unwrap();
    (
        r.fire_state,
        r.trigger_code,
        r.executor_address,
        r.trigger_msg,
    )
}

/// Inserts a row of `job` in `group` with `fire_state`, recorded at `at_ms`, without an
/// outcome (as a node that stopped mid-dispatch leaves it); answers its id.
async fn left(app: &TestApp, group: i32, job: i32, state: i64, at_ms: i64, handle: i32) -> i64 {
    let db = app.engine.db();
    let at = chrono::DateTime::from_timestamp_millis(at_ms)
        .unwrap()
        .naive_utc()
        .format("%Y-%m-%d %H:%M:%S%.3f");
    db.execute_raw(Statement::from_string(
        db.get_database_backend(),
        format!(
            "INSERT INTO xxl_job_log (job_group, job_id, trigger_time, trigger_code, handle_code, \
             executor_fail_retry_count, alarm_status, fire_time, fire_state, trigger_type, \
             chain_depth) VALUES ({group}, {job}, '{at}', 0, {handle}, 0, 0, {at_ms}, {state}, \
             'CRON', 0)"
        ),
    ))
    .await
    .unwrap();
    let r = db
        .query_one_raw(Statement::from_string(
            db.get_database_backend(),
            format!("SELECT id FROM xxl_job_log WHERE job_id = {job} AND fire_time = {at_ms}"),
        ))
        .await
        .unwrap()
        .unwrap();
    r.try_get("", "id").unwrap()
}

#[test]
fn fires_in_doubt_are_settled_by_asking_their_executors() {
    run_paused(|| async {
        let dir = tempfile::tempdir().unwrap();
        let stand = Stand::default();
        let s = stand.clone();
        let mut cfg = common::test_config(dir.path());
        cfg.scheduler.claim_timeout_ms = 10_000;
        let engine = Engine::builder(cfg)
            .clock(Clock::tokio_at(T0))
            .handlers(xjob::demo::handlers().unwrap())
            .remote_client(Arc::new(s))
            .log_dir(dir.path().join("joblogs"))
            .start()
            .await
            .unwrap();
        settle(engine.activity()).await;
        let fleet = engine
            .add_group(xjob::console::groups::GroupInput {
                app_name: "fleet".into(),
                title: "fleet".into(),
                address_type: 1,
                address_list: Some("http://10.0.0.1:9999/,http://10.0.0.2:9999/".into()),
                ..Default::default()
            })
            .await
            .unwrap()
            .id;
        let app = TestApp {
            engine: engine.clone(),
            group: fleet,
            dir: dir.path().to_path_buf(),
        };
        // jobs that never fire by themselves: one fires misfires, one skips them (the default)
        let mut spec = JobSpec::cron(fleet, "in doubt", "0 0 3 1 1 ? 2099", "anything");
        spec.misfire_strategy = "FIRE_ONCE_NOW".into();
        let job = app.job(spec).await;
        let skipper = app
            .job(JobSpec::cron(
                fleet,
                "skips misfires",
                "0 0 3 1 1 ? 2099",
                "anything",
            ))
            .await;
        let now = T0;
        let (has, has_not, unreachable, with_result) = (
            left(&app, fleet, job, 2, now - 1_000, 0).await,
            left(&app, fleet, job, 2, now - 2_000, 0).await,
            left(&app, fleet, job, 2, now - 3_000, 0).await,
            left(&app, fleet, job, 2, now - 4_000, 200).await,
        );
        // a claim whose node stopped: in doubt once older than the claim timeout
        let claimed = left(&app, fleet, job, 987_654, now - 5_000, 0).await;
        // not received, a minute late, of a job that skips misfires: dropped, as the scan
        // drops a misfire
        let stale = left(&app, fleet, skipper, 2, now - 60_000, 0).await;
        {
            let mut says = stand.says.lock();
            says.insert(has, Says::Has);
            says.insert(has_not, Says::HasNot);
            says.insert(unreachable, Says::Unreachable);
        }

        let r = engine.settle_now().await.unwrap();
        settle(engine.activity()).await;
        assert_eq!(
            (
                r.orphaned, r.received, r.resent, r.failed, r.waiting, r.dropped
            ),
            (0, 2, 1, 0, 1, 1),
            "{r:?}"
        );
        // and /metrics counts them: received, resent, failed, dropped
        assert_eq!(engine.metrics().in_doubt_counts(), [2, 1, 0, 1]);
        assert!(
            xjob::testing::store::logs::get(app.engine.db(), stale)
                .await
                .is_err(),
            "the misfire is dropped"
        );
        // received: recorded as dispatched to the executor that has it, not sent again
        let (st, code, addr, msg) = row(&app, has).await;
        assert_eq!((st, code), (0, 200));
        assert!(addr.is_some(), "the executor that has it");
        assert!(msg.unwrap().contains("In doubt"));
        let (st, code, _, _) = row(&app, with_result).await;
        assert_eq!(
            (st, code),
            (0, 200),
            "a result came: received, nobody asked"
        );
        assert!(
            !stand.asked.lock().iter().any(|(_, id)| *id == with_result),
            "nobody is asked about a run whose result came"
        );
        // not received by any executor: sent again, once, with its own log id
        let runs: Vec<i64> = stand.runs.lock().iter().map(|p| p.log_id).collect();
        assert_eq!(runs, vec![has_not]);
        let (st, code, _, _) = row(&app, has_not).await;
        assert_eq!(
            (st, code),
            (0, 200),
            "its outcome recorded by the new dispatch"
        );
        // every executor of the group was asked about it
        let asked: Vec<String> = stand
            .asked
            .lock()
            .iter()
            .filter(|(_, id)| *id == has_not)
            .map(|(a, _)| a.clone())
            .collect::<std::collections::BTreeSet<_>>()
            .into_iter()
            .collect();
        assert_eq!(
            asked,
            vec!["http://10.0.0.1:9999/", "http://10.0.0.2:9999/"]
        );
        // nobody can say: still in doubt, not sent
        let (st, code, _, _) = row(&app, unreachable).await;
        assert_eq!((st, code), (2, 0));
        // the claim is not yet old enough
        assert_eq!(row(&app, claimed).await.0, 987_654);

        // later: the claim is orphaned, and the unanswerable row failed once past the bound
        app.advance(11_000).await;
        let r = engine.settle_now().await.unwrap();
        settle(engine.activity()).await;
        let (st, code, _, msg) = row(&app, unreachable).await;
        assert_eq!((st, code), (0, 500), "recorded failed: {msg:?}");
        assert!(msg.unwrap().contains("could not say"));
        let (st, code, _, _) = row(&app, claimed).await;
        assert_eq!(
            (st, code),
            (0, 200),
            "orphaned, asked, not received: sent again"
        );
        assert!(r.orphaned >= 1 || stand.runs.lock().iter().any(|p| p.log_id == claimed));
        let runs: Vec<i64> = stand.runs.lock().iter().map(|p| p.log_id).collect();
        assert_eq!(
            runs.iter().filter(|id| **id == claimed).count(),
            1,
            "{runs:?}"
        );
        assert!(!runs.contains(&has) && !runs.contains(&unreachable));
        app.close().await;
    });
}
