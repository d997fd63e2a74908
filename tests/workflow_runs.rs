//! Running workflows: trigger rules and branches (a failed branch leaves its sibling running),
//! decisions on the context, params rendered from it, retries as attempts, a sharding broadcast
//! completing once after its last shard, and stopping a run.
#![allow(clippy::unwrap_used)]

mod common;

use std::collections::HashMap;
use std::sync::Arc;

use futures::FutureExt;
use futures::future::BoxFuture;
use parking_lot::Mutex;
use sea_orm::ConnectionTrait;
use serde_json::{Value, json};
use xjob::console::workflow_runs::{RunQuery, RunView};
use xjob::console::workflows::WorkflowInput;
use xjob::model::TriggerType;
use xjob::model::wire::{HandleCallbackParam, LogParam, LogResult, ReturnT, TriggerParam};
use xjob::prelude::*;

use common::{T0, TestApp, call, run_paused, settle};

fn workflow(group: i32, name: &str, def: Value) -> WorkflowInput {
    WorkflowInput {
        job_group: group,
        name: name.into(),
        definition: serde_json::from_value(def).unwrap(),
        ..WorkflowInput::default()
    }
}

/// The runs of workflow `id`, newest first (the first page).
async fn runs_of(app: &TestApp, id: i32) -> Vec<RunView> {
    app.engine
        .workflow_runs(&RunQuery {
            workflow_id: Some(id),
            ..RunQuery::default()
        })
        .await
        .unwrap()
        .items
}

/// Steps time until run `id` ended (bounded); answers it.
async fn until_ended(app: &TestApp, id: i64) -> RunView {
    for _ in 0..300 {
        let r = app.engine.workflow_run(id).await.unwrap();
        if r.status != "RUNNING" {
            return r;
        }
        app.advance(200).await;
    }
    panic!(
        "run {id} did not end: {:?}",
        app.engine.workflow_run(id).await.unwrap()
    );
}

/// An app on a fresh database in `dir` whose engine `build` adjusts (handlers, alarms, a remote
/// client) and whose config `tweak` adjusts, with the demo group.
async fn app_with(
    dir: &std::path::Path,
    tweak: impl FnOnce(&mut Config),
    build: impl FnOnce(xjob::EngineBuilder) -> xjob::EngineBuilder,
) -> TestApp {
    let mut cfg = common::test_config(dir);
    tweak(&mut cfg);
    let builder = Engine::builder(cfg)
        .clock(Clock::tokio_at(T0))
        .handlers(xjob::demo::handlers().unwrap())
        .log_dir(dir.join("joblogs"));
    let engine = build(builder).start().await.unwrap();
    let group = engine
        .ensure_group(xjob::demo::DEMO_APP, "demo")
        .await
        .unwrap();
    settle(engine.activity()).await;
    TestApp {
        engine,
        group,
        dir: dir.to_path_buf(),
    }
}

fn states(r: &RunView) -> HashMap<String, String> {
    // the latest attempt of each node
    let mut out = HashMap::new();
    for n in r.nodes.as_ref().unwrap() {
        out.insert(n.node_key.clone(), n.state.clone());
    }
    out
}

fn attempts(r: &RunView, key: &str) -> usize {
    r.nodes
        .as_ref()
        .unwrap()
        .iter()
        .filter(|n| n.node_key == key)
        .count()
}

#[test]
fn a_failed_branch_ends_only_what_depends_on_it_and_decisions_read_the_context() {
    run_paused(|| async {
        let dir = tempfile::tempdir().unwrap();
        let app = TestApp::start_in(dir.path(), T0, |_| {}).await;
        let g = app.group;
        let ok = app
            .job(JobSpec::cron(g, "ok", "0 0 3 * * ?", "demoJobHandler"))
            .await;
        let fail = app
            .job(JobSpec::cron(g, "fail", "0 0 3 * * ?", "failJobHandler"))
            .await;
        let w = app
            .engine
            .add_workflow(workflow(
                g,
                "branches",
                json!({
                    "nodes": [
                        { "key": "extract", "type": "JOB", "jobId": ok },
                        { "key": "check", "type": "DECISION", "expression": "go == true" },
                        { "key": "load", "type": "JOB", "jobId": ok, "param": "day=${day}" },
                        { "key": "never", "type": "JOB", "jobId": ok },
                        { "key": "bad", "type": "JOB", "jobId": fail },
                        { "key": "after_bad", "type": "JOB", "jobId": ok },
                        { "key": "on_bad", "type": "JOB", "jobId": ok },
                        { "key": "off", "type": "JOB", "jobId": fail, "disabled": true },
                        { "key": "final", "type": "JOB", "jobId": ok, "triggerRule": "ALL_DONE" }
                    ],
                    "edges": [
                        { "from": "extract", "to": "check" },
                        { "from": "check", "to": "load", "condition": "TRUE" },
                        { "from": "check", "to": "never", "condition": "FALSE" },
                        { "from": "bad", "to": "after_bad" },
                        { "from": "bad", "to": "on_bad", "condition": "ON_FAILURE" },
                        { "from": "load", "to": "final" },
                        { "from": "on_bad", "to": "final" },
                        { "from": "off", "to": "final" }
                    ]
                }),
            ))
            .await
            .unwrap();
        let id = app
            .engine
            .trigger_workflow(
                w.id,
                TriggerType::Manual,
                Some(r#"{"go": true, "day": "2026-11-26"}"#.into()),
            )
            .await
            .unwrap();
        let r = until_ended(&app, id).await;
        // the failure of `bad` is handled by its ON_FAILURE edge: the run succeeds
        assert_eq!(r.status, "SUCCEEDED", "{r:?}");
        let s = states(&r);
        let want = [
            ("extract", "SUCCEEDED"),
            ("check", "SUCCEEDED"),
            ("load", "SUCCEEDED"),
            ("never", "SKIPPED"),
            ("bad", "FAILED"),
            ("after_bad", "SKIPPED"),
            ("on_bad", "SUCCEEDED"),
            ("off", "SUCCEEDED"),
            ("final", "SUCCEEDED"),
        ];
        for (k, v) in want {
            assert_eq!(s.get(k).map(String::as_str), Some(v), "node {k}: {r:?}");
        }
        let nodes = r.nodes.as_ref().unwrap();
        let check = nodes.iter().find(|n| n.node_key == "check").unwrap();
        assert_eq!(check.decision, Some(true));
        // every job node that ran has exactly one run row, dispatched once
        let mut rows = 0;
        for n in nodes {
            let ran = ["extract", "load", "bad", "on_bad", "final"].contains(&n.node_key.as_str());
            assert_eq!(n.log_ids.len(), usize::from(ran), "{n:?}");
            rows += n.log_ids.len();
        }
        let logs: Vec<_> = app
            .dispatched(ok)
            .await
            .into_iter()
            .chain(app.dispatched(fail).await)
            .collect();
        assert_eq!(logs.len(), rows, "no other run rows of the workflow's jobs");
        assert!(
            logs.iter()
                .all(|l| l.trigger_type.as_deref() == Some("WORKFLOW"))
        );
        let load = nodes.iter().find(|n| n.node_key == "load").unwrap();
        let row = app.engine.run(load.log_ids[0]).await.unwrap();
        assert_eq!(row.executor_param.as_deref(), Some("day=2026-11-26"));
        assert_eq!(r.context["day"], json!("2026-11-26"));

        // the same workflow with `go` false takes the other branch
        let id = app
            .engine
            .trigger_workflow(w.id, TriggerType::Api, Some(r#"{"go": false}"#.into()))
            .await
            .unwrap();
        let r = until_ended(&app, id).await;
        let s = states(&r);
        assert_eq!(s["load"], "SKIPPED");
        assert_eq!(s["never"], "SUCCEEDED");
        // `final` waits for all its inputs and runs whatever they were
        assert_eq!(s["final"], "SUCCEEDED");
        assert_eq!(r.trigger_type, "API");

        // ended runs go with the run logs' retention (30 days by default), node runs included:
        // the center again, 40 days on
        let ticker = common::drive_clock(app.engine.activity().clone());
        app.engine
            .stop(std::time::Duration::from_millis(100))
            .await
            .unwrap();
        ticker.abort();
        app.close().await;
        let app = TestApp::start_in(dir.path(), T0 + 40 * 86_400_000, |_| {}).await;
        app.engine
            .log_report()
            .send(xjob::testing::actors::CleanLogs)
            .await
            .unwrap()
            .unwrap();
        let gone = app.engine.workflow_run(id).await.unwrap_err();
        assert!(matches!(gone, xjob::Error::NotFound { .. }), "{gone}");
        app.close().await;
    });
}

#[test]
fn a_failing_node_retries_as_attempts_and_fails_the_run_and_a_stop_cancels_what_is_left() {
    run_paused(|| async {
        let dir = tempfile::tempdir().unwrap();
        let app = TestApp::start_in(dir.path(), T0, |_| {}).await;
        let g = app.group;
        let mut spec = JobSpec::cron(g, "flaky", "0 0 3 * * ?", "failJobHandler");
        spec.executor_fail_retry_count = 2;
        let flaky = app.job(spec).await;
        let ok = app
            .job(JobSpec::cron(g, "ok", "0 0 3 * * ?", "demoJobHandler"))
            .await;
        let w = app
            .engine
            .add_workflow(workflow(
                g,
                "retries",
                json!({
                    "nodes": [
                        { "key": "flaky", "type": "JOB", "jobId": flaky },
                        { "key": "next", "type": "JOB", "jobId": ok }
                    ],
                    "edges": [{ "from": "flaky", "to": "next" }]
                }),
            ))
            .await
            .unwrap();
        let id = app
            .engine
            .trigger_workflow(w.id, TriggerType::Manual, None)
            .await
            .unwrap();
        let r = until_ended(&app, id).await;
        assert_eq!(r.status, "FAILED");
        assert_eq!(attempts(&r, "flaky"), 3, "{r:?}");
        assert_eq!(states(&r)["next"], "SKIPPED");
        // each attempt's trigger message states the node's retries left (the job's count, 2,
        // at first), not its run row's own 0
        let mut rows = app.dispatched(flaky).await;
        rows.sort_by_key(|r| r.id);
        let shown: Vec<bool> = rows
            .iter()
            .zip([2, 1, 0])
            .map(|(r, left)| {
                let msg =
                    xjob::testing::trigger_msg::render(r.trigger_msg.as_deref().unwrap_or(""))
                        .into_owned();
                msg.contains(&format!("Retry count on failure：{left}<br>"))
                    && r.executor_fail_retry_count == 0
            })
            .collect();
        assert_eq!(shown, [true, true, true], "{rows:?}");
        assert_eq!(app.dispatched(flaky).await.len(), 3);
        // the fail monitor does not retry a workflow's run rows on its own
        app.advance(15_000).await;
        assert_eq!(app.dispatched(flaky).await.len(), 3);
        assert!(r.message.unwrap().contains("flaky"));

        // a stop: the sleeping node is stopped, its successor never runs
        let sleepy = app
            .job(JobSpec::cron(g, "sleepy", "0 0 3 * * ?", "sleepJobHandler"))
            .await;
        let w = app
            .engine
            .add_workflow(workflow(
                g,
                "stoppable",
                json!({
                    "nodes": [
                        { "key": "sleep", "type": "JOB", "jobId": sleepy, "param": "100" },
                        { "key": "next", "type": "JOB", "jobId": ok }
                    ],
                    "edges": [{ "from": "sleep", "to": "next" }]
                }),
            ))
            .await
            .unwrap();
        let id = app
            .engine
            .trigger_workflow(w.id, TriggerType::Manual, None)
            .await
            .unwrap();
        app.advance(2_000).await;
        assert!(app.engine.stop_workflow_run(id, "tester").await.unwrap());
        assert!(!app.engine.stop_workflow_run(id, "tester").await.unwrap());
        app.advance(2_000).await;
        let r = app.engine.workflow_run(id).await.unwrap();
        assert_eq!(r.status, "STOPPED");
        assert_eq!(states(&r)["sleep"], "STOPPED");
        assert!(!states(&r).contains_key("next"));
        let ok_runs = app.dispatched(ok).await.len();
        app.advance(5_000).await;
        assert_eq!(app.dispatched(ok).await.len(), ok_runs);
        let listed = app
            .engine
            .workflow_runs(&RunQuery {
                workflow_id: Some(w.id),
                ..RunQuery::default()
            })
            .await
            .unwrap();
        assert_eq!(listed.total, 1);
        assert_eq!(listed.items[0].status, "STOPPED");
        app.close().await;
    });
}

/// Answers every `/run` at once and records (address, log id, shard) for the test to answer.
#[derive(Clone, Default)]
struct Recording(Arc<Mutex<Vec<(String, TriggerParam)>>>);

impl ExecutorClient for Recording {
    fn run(&self, address: &str, param: TriggerParam) -> BoxFuture<'static, ReturnT> {
        self.0.lock().push((address.to_string(), param));
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
    fn log(&self, _a: &str, _p: LogParam) -> BoxFuture<'static, ReturnT<LogResult>> {
        futures::future::ready(ReturnT::success()).boxed()
    }
}

#[test]
fn a_sharding_broadcast_node_starts_its_downstream_once_after_the_last_shard() {
    run_paused(|| async {
        let dir = tempfile::tempdir().unwrap();
        let client = Recording::default();
        let app = app_with(
            dir.path(),
            |_| {},
            |b| b.remote_client(Arc::new(client.clone())),
        )
        .await;
        let (engine, demo) = (app.engine.clone(), app.group);
        let fleet = engine
            .add_group(xjob::console::groups::GroupInput {
                app_name: "fleet".into(),
                title: "fleet".into(),
                address_type: 1,
                address_list: Some(
                    "http://10.0.0.1:9999/,http://10.0.0.2:9999/,http://10.0.0.3:9999/".into(),
                ),
                ..Default::default()
            })
            .await
            .unwrap()
            .id;
        let mut spec = JobSpec::cron(fleet, "shards", "0 0 3 * * ?", "shardingJobHandler");
        spec.executor_route_strategy = "SHARDING_BROADCAST".into();
        let shards = app.job(spec).await;
        let after = app
            .job(JobSpec::cron(
                demo,
                "after",
                "0 0 3 * * ?",
                "demoJobHandler",
            ))
            .await;
        let w = engine
            .add_workflow(workflow(
                demo,
                "fan-in",
                json!({
                    "nodes": [
                        { "key": "shards", "type": "JOB", "jobId": shards },
                        { "key": "after", "type": "JOB", "jobId": after }
                    ],
                    "edges": [{ "from": "shards", "to": "after" }]
                }),
            ))
            .await
            .unwrap();
        let id = engine
            .trigger_workflow(w.id, TriggerType::Manual, None)
            .await
            .unwrap();
        app.advance(1_000).await;
        let calls = client.0.lock().clone();
        assert_eq!(calls.len(), 3, "one call per executor");
        let mut seen: Vec<(String, i32, i32)> = calls
            .iter()
            .map(|(a, p)| (a.clone(), p.broadcast_index, p.broadcast_total))
            .collect();
        seen.sort();
        assert_eq!(
            seen,
            vec![
                ("http://10.0.0.1:9999/".into(), 0, 3),
                ("http://10.0.0.2:9999/".into(), 1, 3),
                ("http://10.0.0.3:9999/".into(), 2, 3),
            ]
        );
        let answer = |log_id: i64| {
            engine
                .complete()
                .do_send(xjob::testing::executor::Callback(vec![
                    HandleCallbackParam {
                        log_id,
                        log_date_tim: T0,
                        handle_code: 200,
                        handle_msg: None,
                    },
                ]))
        };
        for (_, p) in &calls[..2] {
            answer(p.log_id);
            app.advance(3_000).await;
            assert!(
                app.dispatched(after).await.is_empty(),
                "downstream waits for every shard"
            );
        }
        let r = engine.workflow_run(id).await.unwrap();
        let node = &r.nodes.as_ref().unwrap()[0];
        assert_eq!((node.shards_total, node.shards_done), (3, 2));
        assert_eq!(node.state, "RUNNING");
        answer(calls[2].1.log_id);
        let r = until_ended(&app, id).await;
        assert_eq!(r.status, "SUCCEEDED", "{r:?}");
        assert_eq!(app.dispatched(after).await.len(), 1, "downstream ran once");
        // a repeated result changes nothing
        answer(calls[2].1.log_id);
        app.advance(3_000).await;
        assert_eq!(app.dispatched(after).await.len(), 1);
        app.close().await;
    });
}

#[test]
fn what_a_node_left_at_a_crash_point_is_recovered_once() {
    run_paused(|| async {
        let dir = tempfile::tempdir().unwrap();
        let (ok, left_pending, left_claimed);
        {
            let app = TestApp::start_in(dir.path(), T0, |_| {}).await;
            let g = app.group;
            let mut spec = JobSpec::cron(g, "ok", "0 0 3 * * ?", "demoJobHandler");
            spec.executor_fail_retry_count = 1;
            ok = app.job(spec).await;
            let w = app
                .engine
                .add_workflow(workflow(
                    g,
                    "crash points",
                    json!({
                        "nodes": [
                            { "key": "a", "type": "JOB", "jobId": ok },
                            { "key": "b", "type": "JOB", "jobId": ok }
                        ],
                        "edges": [{ "from": "a", "to": "b" }]
                    }),
                ))
                .await
                .unwrap()
                .id;
            // what a node that died at two points had recorded: a run whose first node run is
            // recorded but not claimed (as earlier releases recorded them before claiming), and
            // one whose first node run is recorded, claimed by its transaction, but not sent
            let runs = xjob::testing::store::workflow_runs::Runs::default();
            let db = app.engine.db();
            let (p, ch) = runs
                .start(db, w, TriggerType::Manual, None, T0)
                .await
                .unwrap();
            assert_eq!(ch.dispatch.len(), 1);
            let pending = ch.dispatch[0].log_id;
            db.execute_unprepared(&format!(
                "UPDATE xxl_job_log SET fire_state = 1 WHERE id = {pending}"
            ))
            .await
            .unwrap();
            let (c, ch) = runs
                .start(db, w, TriggerType::Manual, None, T0)
                .await
                .unwrap();
            // recorded claimed: no other claim wins it
            let claimed = xjob::testing::store::logs::claim(db, &[ch.dispatch[0].log_id])
                .await
                .unwrap();
            assert!(claimed.is_empty());
            (left_pending, left_claimed) = (p, c);
            let ticker = common::drive_clock(app.engine.activity().clone());
            app.engine
                .stop(std::time::Duration::from_millis(100))
                .await
                .unwrap();
            ticker.abort();
            app.close().await;
        }
        let app = TestApp::start_in(dir.path(), T0 + 10_000, |_| {}).await;
        // recorded, never claimed: sent once by the restarted node
        let r = until_ended(&app, left_pending).await;
        assert_eq!(r.status, "SUCCEEDED", "{r:?}");
        assert_eq!((attempts(&r, "a"), attempts(&r, "b")), (1, 1));
        // claimed, maybe sent: in doubt, so its executor is asked; the node's own executor
        // restarted since and cannot have it (a run it had died with the process): never sent
        // again, recorded as failed, and the node's next attempt runs
        let r = until_ended(&app, left_claimed).await;
        assert_eq!(r.status, "SUCCEEDED", "{r:?}");
        let a: Vec<_> = r
            .nodes
            .as_ref()
            .unwrap()
            .iter()
            .filter(|n| n.node_key == "a")
            .collect();
        assert_eq!(a.len(), 2);
        assert_eq!(a[0].state, "FAILED");
        assert!(
            a[0].message.as_deref().unwrap().contains("restarted since"),
            "{:?}",
            a[0]
        );
        assert_eq!(a[1].state, "SUCCEEDED");
        // 2 + 3 run rows in all, each dispatched once
        let rows = app.dispatched(ok).await;
        assert_eq!(rows.len(), 5);
        app.close().await;
    });
}

#[test]
fn handlers_pass_values_downstream_and_nested_workflows_run_as_nodes() {
    run_paused(|| async {
        let dir = tempfile::tempdir().unwrap();
        let seen: Arc<Mutex<Vec<String>>> = Arc::default();
        let mut handlers = xjob::demo::handlers().unwrap();
        let s = seen.clone();
        handlers
            .register_fn("produce", |ctx: JobContext| async move {
                ctx.put("rows", 42);
                ctx.put("name", "orders");
                Ok(())
            })
            .unwrap()
            .register_fn("bloat", |ctx: JobContext| async move {
                ctx.put("blob", "x".repeat(xjob::executor::MAX_OUTPUTS));
                Ok(())
            })
            .unwrap()
            .register_fn("consume", move |ctx: JobContext| {
                s.lock().push(ctx.param.clone());
                async { Ok(()) }
            })
            .unwrap();
        let app = app_with(dir.path(), |_| {}, |b| b.handlers(handlers)).await;
        let (engine, g) = (app.engine.clone(), app.group);
        let job = |h: &str| JobSpec::cron(g, h, "0 0 3 * * ?", h);
        let produce = app.job(job("produce")).await;
        let consume = app.job(job("consume")).await;
        let bloat = app.job(job("bloat")).await;
        let child = engine
            .add_workflow(workflow(
                g,
                "child",
                json!({
                    "nodes": [{ "key": "c", "type": "JOB", "jobId": consume, "param": "child:${name}" }],
                    "edges": []
                }),
            ))
            .await
            .unwrap();
        let w = engine
            .add_workflow(workflow(
                g,
                "parent",
                json!({
                    "nodes": [
                        { "key": "produce", "type": "JOB", "jobId": produce },
                        { "key": "big", "type": "DECISION", "expression": "rows > 10 && name == 'orders'" },
                        { "key": "use", "type": "JOB", "jobId": consume, "param": "rows=${rows} name=${name}" },
                        { "key": "nested", "type": "WORKFLOW", "workflowId": child.id },
                        { "key": "after", "type": "JOB", "jobId": consume, "param": "after" }
                    ],
                    "edges": [
                        { "from": "produce", "to": "big" },
                        { "from": "big", "to": "use", "condition": "TRUE" },
                        { "from": "use", "to": "nested" },
                        { "from": "nested", "to": "after" }
                    ]
                }),
            ))
            .await
            .unwrap();
        let id = engine
            .trigger_workflow(w.id, TriggerType::Manual, None)
            .await
            .unwrap();
        let r = until_ended(&app, id).await;
        assert_eq!(r.status, "SUCCEEDED", "{r:?}");
        assert_eq!(r.context, json!({"rows": 42, "name": "orders"}));
        assert_eq!(
            seen.lock().clone(),
            vec!["rows=42 name=orders", "child:orders", "after"]
        );
        let nested = r
            .nodes
            .as_ref()
            .unwrap()
            .iter()
            .find(|n| n.node_key == "nested")
            .unwrap()
            .clone();
        assert_eq!(nested.state, "SUCCEEDED");
        let sub = engine
            .workflow_run(nested.child_run.unwrap())
            .await
            .unwrap();
        assert_eq!(sub.status, "SUCCEEDED");
        assert_eq!(sub.parent_node_run, Some(nested.id));
        assert_eq!(sub.trigger_type, "WORKFLOW");

        // values beyond the bound fail the run that put them, with the reason
        let w = engine
            .add_workflow(workflow(
                g,
                "too much",
                json!({ "nodes": [{ "key": "b", "type": "JOB", "jobId": bloat }], "edges": [] }),
            ))
            .await
            .unwrap();
        let id = engine
            .trigger_workflow(w.id, TriggerType::Manual, None)
            .await
            .unwrap();
        let r = until_ended(&app, id).await;
        assert_eq!(r.status, "FAILED");
        let b = &r.nodes.as_ref().unwrap()[0];
        assert!(b.message.as_deref().unwrap().contains("at most"), "{b:?}");
        app.close().await;
    });
}

#[test]
fn a_failed_run_is_rerun_from_its_failed_node_or_a_chosen_one_and_a_node_can_be_marked() {
    use actix_web::http::{Method, StatusCode};
    run_paused(|| async {
        let dir = tempfile::tempdir().unwrap();
        let healthy = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let mut handlers = xjob::demo::handlers().unwrap();
        let h = healthy.clone();
        handlers
            .register_fn("flaky", move |_ctx: JobContext| {
                let ok = h.load(std::sync::atomic::Ordering::SeqCst);
                async move {
                    if ok {
                        Ok(())
                    } else {
                        Err(anyhow::anyhow!("not yet"))
                    }
                }
            })
            .unwrap();
        let app = app_with(
            dir.path(),
            |c| c.security.admin_password = "admin-secret-1".into(),
            |b| b.handlers(handlers),
        )
        .await;
        let (engine, g) = (app.engine.clone(), app.group);
        let console = xjob::console::Console::new(engine.clone());
        console.bootstrap_admin().await.unwrap();
        let svc = actix_web::test::init_service(
            actix_web::App::new().configure(xjob::routes::center(console, Some("tok".into()))),
        )
        .await;
        let (_, login) = call(
            &svc,
            Method::POST,
            "/v1/auth/login",
            "",
            Some(json!({"username": "admin", "password": "admin-secret-1"})),
        )
        .await;
        let tok = login["token"].as_str().unwrap().to_string();
        let ok = app
            .job(JobSpec::cron(g, "ok", "0 0 3 * * ?", "demoJobHandler"))
            .await;
        let flaky = app
            .job(JobSpec::cron(g, "flaky", "0 0 3 * * ?", "flaky"))
            .await;
        let w = engine
            .add_workflow(workflow(
                g,
                "rerun",
                json!({
                    "nodes": [
                        { "key": "a", "type": "JOB", "jobId": ok },
                        { "key": "bad", "type": "JOB", "jobId": flaky },
                        { "key": "c", "type": "JOB", "jobId": ok },
                        { "key": "s", "type": "JOB", "jobId": ok }
                    ],
                    "edges": [{ "from": "a", "to": "bad" }, { "from": "bad", "to": "c" }]
                }),
            ))
            .await
            .unwrap();
        let (s, r) = call(
            &svc,
            Method::POST,
            "/v1/workflow-runs",
            &tok,
            Some(json!({ "workflowId": w.id, "params": { "day": 1 } })),
        )
        .await;
        assert_eq!(s, StatusCode::CREATED, "{r}");
        let id = r["id"].as_i64().unwrap();
        let r = until_ended(&app, id).await;
        assert_eq!(r.status, "FAILED");
        let st = states(&r);
        assert_eq!(
            (
                st["a"].as_str(),
                st["bad"].as_str(),
                st["c"].as_str(),
                st["s"].as_str()
            ),
            ("SUCCEEDED", "FAILED", "SKIPPED", "SUCCEEDED")
        );
        // refused: marking a node that succeeded, an unknown node, stopping an ended run
        let path = format!("/v1/workflow-runs/{id}");
        let (s, _) = call(
            &svc,
            Method::POST,
            &format!("{path}/mark"),
            &tok,
            Some(json!({"node": "a"})),
        )
        .await;
        assert_eq!(s, StatusCode::CONFLICT);
        let (s, e) = call(
            &svc,
            Method::POST,
            &format!("{path}/rerun"),
            &tok,
            Some(json!({"from": "ghost"})),
        )
        .await;
        assert_eq!(
            (s, e["field"].as_str()),
            (StatusCode::BAD_REQUEST, Some("node"))
        );
        let (s, _) = call(&svc, Method::POST, &format!("{path}/stop"), &tok, None).await;
        assert_eq!(s, StatusCode::CONFLICT);

        // re-run from the failed node: `a` and `s` keep their results
        healthy.store(true, std::sync::atomic::Ordering::SeqCst);
        let (s, v) = call(&svc, Method::POST, &format!("{path}/rerun"), &tok, None).await;
        assert_eq!(s, StatusCode::OK, "{v}");
        let r = until_ended(&app, id).await;
        assert_eq!(r.status, "SUCCEEDED", "{r:?}");
        assert_eq!(
            (attempts(&r, "a"), attempts(&r, "bad"), attempts(&r, "c")),
            (1, 2, 2)
        );
        assert_eq!(app.dispatched(ok).await.len(), 3, "a, s once; c once");
        let cleared: Vec<_> = r
            .nodes
            .as_ref()
            .unwrap()
            .iter()
            .filter(|n| n.cleared)
            .collect();
        assert_eq!(
            cleared.len(),
            2,
            "the failed attempt and the skip are history"
        );

        // re-run from a chosen node: it and its downstream run again, `s` does not
        let (s, _) = call(
            &svc,
            Method::POST,
            &format!("{path}/rerun"),
            &tok,
            Some(json!({"from": "bad"})),
        )
        .await;
        assert_eq!(s, StatusCode::OK);
        let r = until_ended(&app, id).await;
        assert_eq!(r.status, "SUCCEEDED");
        assert_eq!(
            (attempts(&r, "a"), attempts(&r, "bad"), attempts(&r, "s")),
            (1, 3, 1)
        );
        assert_eq!(app.dispatched(ok).await.len(), 4);

        // a failed node marked succeeded: what is downstream runs
        healthy.store(false, std::sync::atomic::Ordering::SeqCst);
        let (_, r) = call(
            &svc,
            Method::POST,
            "/v1/workflow-runs",
            &tok,
            Some(json!({ "workflowId": w.id })),
        )
        .await;
        let id = r["id"].as_i64().unwrap();
        assert_eq!(until_ended(&app, id).await.status, "FAILED");
        let (s, v) = call(
            &svc,
            Method::POST,
            &format!("/v1/workflow-runs/{id}/mark"),
            &tok,
            Some(json!({"node": "bad"})),
        )
        .await;
        assert_eq!(s, StatusCode::OK, "{v}");
        let r = until_ended(&app, id).await;
        assert_eq!(r.status, "SUCCEEDED");
        let bad = r
            .nodes
            .as_ref()
            .unwrap()
            .iter()
            .rfind(|n| n.node_key == "bad")
            .unwrap();
        assert_eq!(bad.message.as_deref(), Some("marked succeeded by admin"));
        assert_eq!(states(&r)["c"], "SUCCEEDED");

        // listed, with its filters, and audited
        let (s, v) = call(
            &svc,
            Method::GET,
            &format!("/v1/workflow-runs?workflowId={}&status=SUCCEEDED", w.id),
            &tok,
            None,
        )
        .await;
        assert_eq!((s, v["total"].as_u64()), (StatusCode::OK, Some(2)));
        // each names its workflow as it is called now
        assert_eq!(v["items"][0]["workflowName"], json!(w.name), "{v}");
        let (s, _) = call(
            &svc,
            Method::GET,
            "/v1/workflow-runs?status=DONE",
            &tok,
            None,
        )
        .await;
        assert_eq!(s, StatusCode::BAD_REQUEST);
        let (_, v) = call(
            &svc,
            Method::GET,
            "/v1/audit?action=workflow.rerun",
            &tok,
            None,
        )
        .await;
        assert_eq!(v["total"].as_u64(), Some(2), "{v}");
        app.close().await;
    });
}

#[test]
fn scheduled_workflows_fire_once_per_time_under_their_concurrency_and_misfire_policies() {
    run_paused(|| async {
        let dir = tempfile::tempdir().unwrap();
        let (skip_id, once_id, nothing_id);
        {
            let app = TestApp::start_in(dir.path(), T0, |_| {}).await;
            let g = app.group;
            let sleepy = app
                .job(JobSpec::cron(g, "sleepy", "0 0 3 * * ?", "sleepJobHandler"))
                .await;
            let one = |name: &str, extra: Value| -> WorkflowInput {
                let mut v = json!({
                    "jobGroup": g, "name": name,
                    "definition": {
                        "nodes": [{ "key": "s", "type": "JOB", "jobId": sleepy, "param": "15" }],
                        "edges": []
                    }
                });
                v.as_object_mut()
                    .unwrap()
                    .extend(extra.as_object().unwrap().clone());
                serde_json::from_value(v).unwrap()
            };
            // every 10 s, a run lasting 15 s: the fire while one runs is skipped
            let w = app
                .engine
                .add_workflow(one(
                    "skip",
                    json!({ "scheduleType": "FIX_RATE", "scheduleConf": "10", "enabled": true, "concurrency": "SKIP" }),
                ))
                .await
                .unwrap();
            skip_id = w.id;
            assert!(w.enabled && w.trigger_next_time.is_some());
            // a schedule without a type is refused; so is an unknown policy
            let bad = app
                .engine
                .add_workflow(one("bad", json!({ "enabled": true })))
                .await
                .unwrap_err();
            assert!(
                matches!(
                    bad,
                    xjob::Error::Invalid {
                        field: "enabled",
                        ..
                    }
                ),
                "{bad}"
            );
            let bad = app
                .engine
                .add_workflow(one("bad", json!({ "concurrency": "SOMETIMES" })))
                .await
                .unwrap_err();
            assert!(
                matches!(
                    bad,
                    xjob::Error::Invalid {
                        field: "concurrency",
                        ..
                    }
                ),
                "{bad}"
            );
            app.advance(36_000).await;
            let runs = |id: i32| runs_of(&app, id);
            // fires at +10 (runs to +25), +20 (skipped), +30 (runs)
            let r = runs(skip_id).await;
            assert_eq!(r.len(), 2, "{r:?}");
            assert!(r.iter().all(|r| r.trigger_type == "CRON"));
            assert_eq!(
                app.engine.metrics().workflow_counts().0,
                2,
                "scheduled runs are counted as started"
            );
            let w = app.engine.schedule_workflow(skip_id, false).await.unwrap();
            assert!(!w.enabled && w.trigger_next_time.is_none());
            app.advance(30_000).await;
            assert_eq!(
                runs(skip_id).await.len(),
                2,
                "a stopped schedule fires no more"
            );

            // QUEUE, at most one waiting: a third start is refused; the queued one starts when
            // the running one ends; a queued run can be stopped
            let q = app
                .engine
                .add_workflow(one(
                    "queue",
                    json!({ "concurrency": "QUEUE", "maxQueued": 1 }),
                ))
                .await
                .unwrap()
                .id;
            let first = app
                .engine
                .trigger_workflow(q, TriggerType::Manual, None)
                .await
                .unwrap();
            let second = app
                .engine
                .trigger_workflow(q, TriggerType::Manual, None)
                .await
                .unwrap();
            assert_eq!(
                app.engine.workflow_run(second).await.unwrap().status,
                "QUEUED"
            );
            let third = app
                .engine
                .trigger_workflow(q, TriggerType::Manual, None)
                .await;
            assert!(
                matches!(third, Err(xjob::Error::Conflict { .. })),
                "{third:?}"
            );
            until_ended(&app, first).await;
            let r = app.engine.workflow_run(second).await.unwrap();
            assert_eq!(r.status, "RUNNING", "started when the first ended");
            // running an ended run again obeys the policy too
            let again = app
                .engine
                .rerun_workflow_run(first, Some("s".into()), "tester")
                .await;
            assert!(
                matches!(&again, Err(xjob::Error::Conflict { reason }) if reason.contains("concurrency QUEUE")),
                "{again:?}"
            );
            assert_eq!(
                app.engine.workflow_run(first).await.unwrap().status,
                "SUCCEEDED"
            );
            let third = app
                .engine
                .trigger_workflow(q, TriggerType::Manual, None)
                .await
                .unwrap();
            assert!(app.engine.stop_workflow_run(third, "tester").await.unwrap());
            assert_eq!(
                app.engine.workflow_run(third).await.unwrap().status,
                "STOPPED"
            );
            assert_eq!(until_ended(&app, second).await.status, "SUCCEEDED");

            // two schedules that will misfire while no node runs
            let at = |name: &str, strategy: &str| {
                one(
                    name,
                    json!({ "scheduleType": "CRON", "scheduleConf": "0 0 * * * ?", "enabled": true,
                            "misfireStrategy": strategy }),
                )
            };
            once_id = app
                .engine
                .add_workflow(at("once", "FIRE_ONCE_NOW"))
                .await
                .unwrap()
                .id;
            nothing_id = app
                .engine
                .add_workflow(at("nothing", "DO_NOTHING"))
                .await
                .unwrap()
                .id;
            let ticker = common::drive_clock(app.engine.activity().clone());
            app.engine
                .stop(std::time::Duration::from_millis(100))
                .await
                .unwrap();
            ticker.abort();
            app.close().await;
        }
        // back two hours later: FIRE_ONCE_NOW runs once (MISFIRE), DO_NOTHING not at all, and
        // both schedules go on from now
        let app = TestApp::start_in(dir.path(), T0 + 2 * 3_600_000 + 60_000, |_| {}).await;
        app.advance(2_000).await;
        let list = |id: i32| runs_of(&app, id);
        let once = list(once_id).await;
        assert_eq!(once.len(), 1);
        assert_eq!(once[0].trigger_type, "MISFIRE");
        assert!(list(nothing_id).await.is_empty());
        let w = app.engine.workflow(nothing_id).await.unwrap();
        assert!(w.trigger_next_time.unwrap().as_str() > "2026-11-21T16:01:00Z");
        let _ = skip_id;
        app.close().await;
    });
}

/// Keeps every alarm event it is given.
#[derive(Clone, Default)]
struct Alarms(Arc<Mutex<Vec<xjob::alarm::AlarmEvent>>>);

impl xjob::alarm::Alarm for Alarms {
    fn name(&self) -> &'static str {
        "test"
    }
    fn send(&self, event: xjob::alarm::AlarmEvent) -> BoxFuture<'static, Result<(), String>> {
        self.0.lock().push(event);
        futures::future::ready(Ok(())).boxed()
    }
}

#[test]
fn a_failed_workflow_run_raises_one_alarm_naming_its_failed_nodes() {
    run_paused(|| async {
        let dir = tempfile::tempdir().unwrap();
        let alarms = Alarms::default();
        let app = app_with(dir.path(), |_| {}, |b| b.alarm(Box::new(alarms.clone()))).await;
        let (engine, g) = (app.engine.clone(), app.group);
        let mut spec = JobSpec::cron(g, "broken", "0 0 3 * * ?", "failJobHandler");
        spec.alarm_email = Some("ops@example.com".into());
        let broken = app.job(spec).await;
        let ok = app
            .job(JobSpec::cron(g, "ok", "0 0 3 * * ?", "demoJobHandler"))
            .await;
        let w = engine
            .add_workflow(workflow(
                g,
                "alarmed",
                json!({
                    "nodes": [
                        { "key": "fine", "type": "JOB", "jobId": ok },
                        { "key": "broken", "type": "JOB", "jobId": broken }
                    ],
                    "edges": []
                }),
            ))
            .await
            .unwrap();
        let id = engine
            .trigger_workflow(w.id, TriggerType::Manual, None)
            .await
            .unwrap();
        assert_eq!(until_ended(&app, id).await.status, "FAILED");
        app.advance(2_000).await;
        let events = alarms.0.lock().clone();
        let wf: Vec<_> = events
            .iter()
            .filter(|e| e.event == "workflow_failed")
            .collect();
        assert_eq!(wf.len(), 1, "{events:?}");
        let a = wf[0].workflow.as_ref().unwrap();
        assert_eq!((a.workflow_id, a.run_id), (w.id, id));
        assert_eq!(a.failed_nodes, vec!["broken".to_string()]);
        assert_eq!(wf[0].job_id, broken);
        assert_eq!(wf[0].alarm_email.as_deref(), Some("ops@example.com"));
        let body = serde_json::to_value(wf[0]).unwrap();
        assert_eq!(body["workflow"]["failedNodes"], json!(["broken"]));
        app.close().await;
    });
}

/// Looks of the workflow actor for finished node runs over the next `ms` of paused time.
async fn looks_over(app: &TestApp, ms: i64) -> u64 {
    let before = app.engine.metrics().workflow_looks();
    app.advance(ms).await;
    app.engine.metrics().workflow_looks() - before
}

/// Asserts the actor is idle: in 5 s it looks five times (one poll in five), or six when its
/// recovery pass (every 5 s, which always looks) fell on another poll.
async fn assert_idle(app: &TestApp, when: &str) {
    let n = looks_over(app, 5_000).await;
    assert!((5..=6).contains(&n), "{when}: {n} looks in 5 s idle");
}

/// The workflow actor looks for finished node runs at every 200 ms poll while it is active —
/// after a start, after `poll_workflows`, after node runs sent outside it (a re-run), and for
/// 30 s after a pass that moved runs on — and once a second otherwise, so an idle node costs
/// its database one look a second (`src/actors/workflow.rs`, `looks_for_results`; the
/// counter is the `xjob_workflow_result_looks_total` metric).
#[test]
fn the_workflow_actor_looks_at_every_poll_while_runs_move_and_once_a_second_when_idle() {
    run_paused(|| async {
        let dir = tempfile::tempdir().unwrap();
        let app = TestApp::start_in(dir.path(), T0, |_| {}).await;
        let (engine, g) = (app.engine.clone(), app.group);
        // a node run that takes 10 s: no result arrives in the second after it is sent, and
        // the start's 30 s of looking end 20 s after its result
        let mut spec = JobSpec::cron(g, "slow", "0 0 3 * * ?", "sleepJobHandler");
        spec.executor_param = Some("10".into());
        let slow = app.job(spec).await;
        let w = engine
            .add_workflow(workflow(
                g,
                "slow",
                json!({ "nodes": [{ "key": "a", "type": "JOB", "jobId": slow }], "edges": [] }),
            ))
            .await
            .unwrap();
        app.advance(31_000).await;
        assert_idle(&app, "before any run").await;

        // a start
        let id = engine
            .trigger_workflow(w.id, TriggerType::Manual, None)
            .await
            .unwrap();
        let n = looks_over(&app, 1_000).await;
        assert!(n >= 5, "{n} looks in the second after a start");
        assert_eq!(until_ended(&app, id).await.status, "SUCCEEDED");
        // the pass that applied the result keeps the actor looking at every poll for 30 s
        let n = looks_over(&app, 25_000).await;
        assert!(
            n >= 125,
            "{n} looks in the 25 s after a pass that moved a run on"
        );
        app.advance(6_000).await;
        assert_idle(&app, "30 s after the last pass that worked").await;

        // an explicit poll
        engine.poll_workflows().await.unwrap();
        let n = looks_over(&app, 1_000).await;
        assert!(n >= 5, "{n} looks in the second after `poll_workflows`");
        app.advance(31_000).await;
        assert_idle(&app, "30 s after `poll_workflows`").await;

        // node runs sent outside the actor: a re-run from a chosen node
        engine
            .rerun_workflow_run(id, Some("a".into()), "tester")
            .await
            .unwrap();
        let n = looks_over(&app, 1_000).await;
        assert!(n >= 5, "{n} looks in the second after a re-run");
        assert_eq!(until_ended(&app, id).await.status, "SUCCEEDED");
        app.close().await;
    });
}

/// Scheduled workflows are looked for once a second and at the next fire a look saw, not at
/// every 200 ms poll, so an idle node asks its database once a second; a schedule made on the
/// node is looked for at its next poll, and a fire starts within a poll of its time
/// (`src/actors/workflow.rs`; the counter is `xjob_workflow_schedule_looks_total`).
#[test]
fn scheduled_workflows_are_looked_for_at_their_time_and_once_a_second() {
    use sea_orm::EntityTrait;
    run_paused(|| async {
        let dir = tempfile::tempdir().unwrap();
        let app = TestApp::start_in(dir.path(), T0, |_| {}).await;
        let (engine, g) = (app.engine.clone(), app.group);
        let ok = app
            .job(JobSpec::cron(g, "ok", "0 0 3 * * ?", "demoJobHandler"))
            .await;
        let looks = || engine.metrics().workflow_schedule_looks();
        app.advance(2_000).await;
        let before = looks();
        app.advance(10_000).await;
        let n = looks() - before;
        // once a second, and at the recovery pass (every 5 s) when it falls between
        assert!((10..=12).contains(&n), "{n} looks in 10 s idle");
        for k in 0..2 {
            // just after a look (the next is a second away), a schedule is made
            let before = looks();
            for _ in 0..30 {
                if looks() > before {
                    break;
                }
                app.advance(100).await;
            }
            assert!(looks() > before, "no look in 3 s");
            let mut input = workflow(
                g,
                &format!("every 30 s ({k})"),
                json!({ "nodes": [{ "key": "a", "type": "JOB", "jobId": ok }], "edges": [] }),
            );
            input.schedule_type = Some("FIX_RATE".into());
            input.schedule_conf = Some("30".into());
            input.enabled = Some(true);
            let w = engine.add_workflow(input).await.unwrap();
            let before = looks();
            app.advance(300).await;
            assert!(
                looks() > before,
                "workflow {k}: not looked for in the 300 ms after its schedule was made"
            );
            let due = entity::xjob_workflow::Entity::find_by_id(w.id)
                .one(engine.db())
                .await
                .unwrap()
                .unwrap()
                .trigger_next_time;
            let left = due - engine.clock().now_ms();
            assert!(left > 1_000, "{left} ms to the first fire");
            app.advance(left - 100).await;
            assert!(
                runs_of(&app, w.id).await.is_empty(),
                "workflow {k} fired early"
            );
            app.advance(350).await;
            let runs = runs_of(&app, w.id).await;
            assert_eq!(
                runs.len(),
                1,
                "workflow {k} not fired within 250 ms of its time"
            );
        }
        app.close().await;
    });
}
