//! Workflow starts on a database server go through the start lane (`actors/workflow_starts.rs`:
//! recorded and answered on a thread of their own, with a pool of its own): callers on four
//! threads of their own and on the engine's thread start runs at once; every start answers a
//! run of its own, every run ends SUCCEEDED, and each node run's handler ran once. A start of a
//! workflow that does not exist answers an error and records nothing.
//!
//! Real time (a second or two) with the system clock, which the lane needs; the assertions read
//! what the engine and the handler recorded. In CI a missing database fails the test.
#![allow(clippy::unwrap_used)]

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::*;
use parking_lot::Mutex;
use serde_json::json;
use xjob::console::workflows::WorkflowInput;
use xjob::model::TriggerType;
use xjob::prelude::*;

const APP: &str = "wf-lane";
/// Callers on threads of their own, and the starts each asks.
const THREADS: usize = 4;
const STARTS: usize = 10;

/// Whether this process has the start lane's thread (Linux names it in `/proc`).
fn lane_thread_runs() -> bool {
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
        return false;
    };
    tasks.flatten().any(|t| {
        std::fs::read_to_string(t.path().join("comm"))
            .is_ok_and(|c| c.trim().starts_with("xjob-workflow-s"))
    })
}

fn lane(base_url: &str, backend: &str) {
    let url = fresh_database(base_url);
    actix_rt::System::new().block_on(async move {
        let ran: Arc<Mutex<Vec<i64>>> = Arc::default();
        let mut handlers = HandlerRegistry::new();
        let seen = ran.clone();
        handlers
            .register_fn("count", move |ctx: JobContext| {
                seen.lock().push(ctx.log_id);
                async { Ok(()) }
            })
            .unwrap();
        let mut cfg = Config::default();
        cfg.database.url = url;
        cfg.database.max_connections = 4;
        cfg.executor.app_name = APP.into();
        cfg.executor.address = "http://127.0.0.1:1/".into();
        let engine = Engine::builder(cfg)
            .handlers(handlers)
            .start()
            .await
            .unwrap();
        let g = engine.ensure_group(APP, "lane").await.unwrap();
        let job = engine
            .add_job(JobSpec::cron(g, "count", "0 0 3 * * ?", "count"))
            .await
            .unwrap();
        let mut nodes = vec![json!({ "key": "start", "type": "JOB", "jobId": job })];
        let mut edges = Vec::new();
        for k in ["a", "b", "c"] {
            nodes.push(json!({ "key": k, "type": "JOB", "jobId": job }));
            edges.push(json!({ "from": "start", "to": k }));
            edges.push(json!({ "from": k, "to": "join" }));
        }
        nodes.push(json!({ "key": "join", "type": "JOB", "jobId": job }));
        let w = engine
            .add_workflow(WorkflowInput {
                job_group: g,
                name: "lane".into(),
                definition: serde_json::from_value(json!({ "nodes": nodes, "edges": edges }))
                    .unwrap(),
                ..WorkflowInput::default()
            })
            .await
            .unwrap()
            .id;

        // a workflow that does not exist: an error, nothing recorded; the lane's thread runs
        // from the first start on
        let missing = engine
            .trigger_workflow(w + 1000, TriggerType::Api, None)
            .await;
        assert!(missing.is_err(), "{backend}: {missing:?}");
        if cfg!(target_os = "linux") {
            assert!(lane_thread_runs(), "{backend}: the start lane runs");
        }

        // callers on threads of their own (answered over channels: this thread keeps running
        // the engine meanwhile) and on the engine's own thread, all at once
        let mut answers = Vec::new();
        for _ in 0..THREADS {
            let (tx, rx) = tokio::sync::oneshot::channel();
            let e = engine.clone();
            std::thread::spawn(move || {
                let rt = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .unwrap();
                let ids = rt.block_on(async {
                    let mut ids = Vec::new();
                    for _ in 0..STARTS {
                        ids.push(e.trigger_workflow(w, TriggerType::Api, None).await.unwrap());
                    }
                    ids
                });
                tx.send(ids).unwrap();
            });
            answers.push(rx);
        }
        let mut ids = Vec::new();
        for _ in 0..STARTS {
            ids.push(
                engine
                    .trigger_workflow(w, TriggerType::Api, None)
                    .await
                    .unwrap(),
            );
        }
        for rx in answers {
            ids.extend(rx.await.unwrap());
        }
        let total = (THREADS + 1) * STARTS;
        let mut distinct = ids.clone();
        distinct.sort_unstable();
        distinct.dedup();
        assert_eq!(
            distinct.len(),
            total,
            "{backend}: a run of its own per start"
        );

        let e = engine.clone();
        eventually(&format!("{backend}: every run ends"), 60, || {
            let (e, ids) = (e.clone(), ids.clone());
            async move {
                for id in ids {
                    if e.workflow_run(id).await.unwrap().status == "RUNNING" {
                        return false;
                    }
                }
                true
            }
        })
        .await;
        for id in &ids {
            let run = engine.workflow_run(*id).await.unwrap();
            assert_eq!(run.status, "SUCCEEDED", "{backend}: {run:?}");
        }
        // the only runs are the ones answered
        let page = engine
            .workflow_runs(&xjob::console::workflow_runs::RunQuery {
                workflow_id: Some(w),
                ..Default::default()
            })
            .await
            .unwrap();
        assert_eq!(page.total as usize, total, "{backend}");
        let mut ran = ran.lock().clone();
        assert_eq!(ran.len(), total * 5, "{backend}: each node run once");
        ran.sort_unstable();
        ran.dedup();
        assert_eq!(ran.len(), total * 5, "{backend}: no run row executed twice");
        engine.stop(Duration::from_secs(5)).await.unwrap();
        engine.db().clone().close().await.unwrap();
    });
}

/// PostgreSQL: starts from five threads at once through the lane.
#[test]
fn starts_through_the_lane_on_postgres() {
    if let Some(url) = database_url("XJOB_TEST_PG_URL") {
        lane(&url, "postgres");
    }
}

/// The same on MariaDB.
#[test]
fn starts_through_the_lane_on_mariadb() {
    if let Some(url) = database_url("XJOB_TEST_MYSQL_URL") {
        lane(&url, "mariadb");
    }
}
