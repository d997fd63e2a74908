//! Workflows on a shared PostgreSQL or MariaDB database with two admin nodes: both start runs of
//! the same workflow (a fan-out of five then a fan-in, a decision, a last node) and both apply
//! results, so the runs' row locks and the once-only result links decide each step once. Every
//! run ends SUCCEEDED, each job node run has one run row, and each run row's handler ran once.
//! Then the same with one node killed mid-run (its runtime dropped, nothing handed back) and
//! started again: the other recovers its pending rows, fails its orphaned claims and lost runs,
//! and every run still ends SUCCEEDED with no run row executed twice.
//!
//! Real time (a few seconds), each node in its own thread and runtime, like `tests/cluster.rs`;
//! the assertions read what the database recorded. In CI a missing database fails the test.
#![allow(clippy::unwrap_used)]

mod common;

use std::sync::Arc;
use std::sync::mpsc;
use std::time::Duration;

use common::*;
use parking_lot::Mutex;
use serde_json::json;
use xjob::console::workflows::WorkflowInput;
use xjob::model::TriggerType;
use xjob::prelude::*;

const APP: &str = "wf-cluster";
const EXEC: &str = "http://executor.wf-cluster/";
const RUNS_PER_NODE: usize = 20;

type Ran = Arc<Mutex<Vec<(usize, i64)>>>;

fn cfg(url: &str) -> Config {
    let mut c = Config::default();
    c.database.url = url.to_string();
    c.database.max_connections = 5;
    c.executor.app_name = APP.into();
    c.executor.address = EXEC.into();
    c
}

/// Node `id`: node 0 creates the jobs and the workflow and sends its id; each node then starts
/// `RUNS_PER_NODE` runs and keeps working until told to stop.
fn spawn_node(
    id: usize,
    url: String,
    ran: Ran,
    workflow: Option<i32>,
    created: mpsc::Sender<i32>,
    stop: mpsc::Receiver<(bool, mpsc::Sender<()>)>,
) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        init_tracing();
        actix_rt::System::new().block_on(async move {
            let mut handlers = HandlerRegistry::new();
            handlers
                .register_fn("count", move |ctx: JobContext| {
                    ran.lock().push((id, ctx.log_id));
                    // a while in flight, so a kill finds runs running
                    async {
                        actix_rt::time::sleep(Duration::from_millis(100)).await;
                        Ok(())
                    }
                })
                .unwrap();
            let engine = Engine::builder(cfg(&url))
                .clock(Clock::tokio_at(T0))
                .handlers(handlers)
                .start()
                .await
                .unwrap();
            let w = match workflow {
                Some(w) => w,
                None => {
                    // a manual group: runs go to this address from the first moment
                    let g = engine
                        .add_group(xjob::console::groups::GroupInput {
                            app_name: APP.into(),
                            title: "wf cluster".into(),
                            address_type: 1,
                            address_list: Some(EXEC.into()),
                            ..Default::default()
                        })
                        .await
                        .unwrap()
                        .id;
                    let job = |name: &str| {
                        let spec = JobSpec::cron(g, name, "0 0 3 * * ?", "count");
                        let e = engine.clone();
                        async move { e.add_job(spec).await.unwrap() }
                    };
                    let (a, b) = (job("a").await, job("b").await);
                    // retries outnumber the crashes: a run row lost with a killed node runs again
                    for id in [a, b] {
                        let mut spec = JobSpec::cron(g, "retried", "0 0 3 * * ?", "count");
                        spec.executor_fail_retry_count = 5;
                        engine.update_job(id, spec).await.unwrap();
                    }
                    let mut nodes = vec![json!({ "key": "start", "type": "JOB", "jobId": a })];
                    let mut edges = Vec::new();
                    for i in 0..5 {
                        let k = format!("m{i}");
                        nodes.push(
                            json!({ "key": k, "type": "JOB", "jobId": b, "param": "${day}" }),
                        );
                        edges.push(json!({ "from": "start", "to": k }));
                        edges.push(json!({ "from": k, "to": "join" }));
                    }
                    nodes.push(json!({ "key": "join", "type": "JOB", "jobId": a }));
                    nodes.push(
                        json!({ "key": "check", "type": "DECISION", "expression": "day != ''" }),
                    );
                    nodes.push(json!({ "key": "end", "type": "JOB", "jobId": b }));
                    edges.push(json!({ "from": "join", "to": "check" }));
                    edges.push(json!({ "from": "check", "to": "end", "condition": "TRUE" }));
                    let w = engine
                        .add_workflow(WorkflowInput {
                            job_group: g,
                            name: "fan".into(),
                            definition: serde_json::from_value(
                                json!({ "nodes": nodes, "edges": edges }),
                            )
                            .unwrap(),
                            ..WorkflowInput::default()
                        })
                        .await
                        .unwrap();
                    w.id
                }
            };
            let _ = created.send(w);
            for i in 0..RUNS_PER_NODE {
                engine
                    .trigger_workflow(
                        w,
                        TriggerType::Api,
                        Some(format!(r#"{{"day": "d{id}-{i}"}}"#)),
                    )
                    .await
                    .unwrap();
            }
            loop {
                match stop.try_recv() {
                    Ok((kill, ack)) => {
                        // killed: the process dies, nothing is stopped or handed back
                        if !kill {
                            engine.stop(Duration::from_secs(5)).await.unwrap();
                        }
                        engine.db().clone().close().await.unwrap();
                        let _ = ack.send(());
                        return;
                    }
                    Err(mpsc::TryRecvError::Empty) => {
                        actix_rt::time::sleep(Duration::from_millis(20)).await
                    }
                    Err(mpsc::TryRecvError::Disconnected) => return,
                }
            }
        })
    })
}

/// Two nodes run `2 × RUNS_PER_NODE` runs; with `kill`, node 1 is killed mid-run and started
/// again later (its triggers then start more runs).
fn two_nodes(base_url: &str, backend: &str, kill: bool) {
    init_tracing();
    let url = fresh_database(base_url);
    let ran: Ran = Arc::default();
    let (created_tx, created) = mpsc::channel();
    let (stop0, stop_rx0) = mpsc::channel();
    let n0 = spawn_node(
        0,
        url.clone(),
        ran.clone(),
        None,
        created_tx.clone(),
        stop_rx0,
    );
    let w = created.recv_timeout(Duration::from_secs(60)).unwrap();
    let (mut stop1, stop_rx1) = mpsc::channel();
    let mut n1 = spawn_node(
        1,
        url.clone(),
        ran.clone(),
        Some(w),
        created_tx.clone(),
        stop_rx1,
    );
    created.recv_timeout(Duration::from_secs(60)).unwrap();
    let mut total = 2 * RUNS_PER_NODE;
    if kill {
        // killed while its runs' node runs are claimed, sent and applied
        std::thread::sleep(Duration::from_millis(400));
        let (ack, done) = mpsc::channel();
        stop1.send((true, ack)).unwrap();
        done.recv_timeout(Duration::from_secs(60)).unwrap();
        n1.join().unwrap();
        std::thread::sleep(Duration::from_secs(3));
        let (s, rx) = mpsc::channel();
        stop1 = s;
        n1 = spawn_node(1, url.clone(), ran.clone(), Some(w), created_tx, rx);
        created.recv_timeout(Duration::from_secs(60)).unwrap();
        total += RUNS_PER_NODE;
    }

    // read what the database recorded, over a connection of its own (not a third node); a run
    // row lost with the killed node is found lost 30–50 s later and its node runs again
    let deadline = std::time::Instant::now() + Duration::from_secs(150);
    let runs = loop {
        let got = actix_rt::System::new().block_on(async {
            use sea_orm::{ColumnTrait, EntityTrait, QueryFilter};
            let db = sea_orm::Database::connect(&url).await.unwrap();
            let runs = entity::xjob_workflow_run::Entity::find()
                .filter(entity::xjob_workflow_run::Column::WorkflowId.eq(w))
                .all(&db)
                .await
                .unwrap();
            let mut out = Vec::new();
            if runs.len() == total && runs.iter().all(|r| r.status != "RUNNING") {
                for r in runs {
                    let nodes = entity::xjob_workflow_node_run::Entity::find()
                        .filter(entity::xjob_workflow_node_run::Column::RunId.eq(r.id))
                        .all(&db)
                        .await
                        .unwrap();
                    let links = entity::xjob_workflow_node_log::Entity::find()
                        .filter(entity::xjob_workflow_node_log::Column::RunId.eq(r.id))
                        .all(&db)
                        .await
                        .unwrap();
                    out.push((r, nodes, links));
                }
            }
            db.close().await.unwrap();
            out
        });
        if got.len() == total {
            break got;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "{backend}: the runs did not all end within 150 s"
        );
        std::thread::sleep(Duration::from_millis(500));
    };
    for (stop, node) in [(stop0, n0), (stop1, n1)] {
        let (ack, done) = mpsc::channel();
        stop.send((false, ack)).unwrap();
        done.recv_timeout(Duration::from_secs(60)).unwrap();
        node.join().unwrap();
    }
    let ran = ran.lock().clone();
    let mut rows = Vec::new();
    let mut retried = 0;
    for (r, nodes, links) in &runs {
        assert_eq!(r.status, "SUCCEEDED", "{backend}: {r:?} {nodes:?}");
        let mut keys: Vec<&str> = nodes.iter().map(|n| n.node_key.as_str()).collect();
        keys.sort_unstable();
        keys.dedup();
        assert_eq!(keys.len(), 9, "{backend}: every node ran: {nodes:?}");
        for n in nodes {
            // an attempt after the first only after a failure (a row lost with the killed node)
            let later = nodes
                .iter()
                .any(|m| m.node_key == n.node_key && m.attempt > n.attempt);
            if later {
                assert_eq!(n.state, "FAILED", "{backend}: {n:?}");
                retried += 1;
            } else {
                assert!(kill || n.attempt == 1, "{backend}: {n:?}");
            }
            let mine = links.iter().filter(|l| l.node_run_id == n.id).count();
            let want = usize::from(n.node_key != "check");
            assert_eq!(mine, want, "{backend}: {n:?}");
        }
        assert!(links.iter().all(|l| l.done == 1));
        rows.extend(links.iter().map(|l| l.log_id));
    }
    let mut executed: Vec<i64> = ran.iter().map(|(_, l)| *l).collect();
    executed.sort_unstable();
    rows.sort_unstable();
    if kill {
        // a row sent as its node died may never have started; none started twice
        let n = executed.len();
        executed.dedup();
        assert_eq!(executed.len(), n, "{backend}: a run row executed twice");
        assert!(executed.iter().all(|l| rows.binary_search(l).is_ok()));
    } else {
        assert_eq!(
            executed, rows,
            "{backend}: each run row executed exactly once"
        );
    }
    let by = |node: usize| ran.iter().filter(|(n, _)| *n == node).count();
    eprintln!(
        "{backend}{}: {} runs, {} node runs ({retried} retried), executed by node 0: {}, node 1: {}",
        if kill { " with a kill" } else { "" },
        runs.len(),
        rows.len(),
        by(0),
        by(1)
    );
    assert!(by(0) > 0 && by(1) > 0, "both nodes dispatched node runs");
}

/// Two nodes on PostgreSQL run 40 workflow runs: each node run once, every run succeeds.
#[test]
fn two_nodes_on_postgres_run_each_node_once() {
    if let Some(url) = database_url("XJOB_TEST_PG_URL") {
        two_nodes(&url, "postgres", false);
    }
}

/// The same on MariaDB.
#[test]
fn two_nodes_on_mariadb_run_each_node_once() {
    if let Some(url) = database_url("XJOB_TEST_MYSQL_URL") {
        two_nodes(&url, "mariadb", false);
    }
}

/// Two nodes on PostgreSQL, one killed mid-run and restarted: every run ends, each run row
/// executed at most once, a node run again only after its attempt failed.
#[test]
fn two_nodes_on_postgres_one_killed_mid_run() {
    if let Some(url) = database_url("XJOB_TEST_PG_URL") {
        two_nodes(&url, "postgres", true);
    }
}

/// The same on MariaDB.
#[test]
fn two_nodes_on_mariadb_one_killed_mid_run() {
    if let Some(url) = database_url("XJOB_TEST_MYSQL_URL") {
        two_nodes(&url, "mariadb", true);
    }
}
