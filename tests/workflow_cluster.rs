//! Workflows on a shared PostgreSQL or MariaDB database with two admin nodes: both start runs of
//! the same workflow (a fan-out of five then a fan-in, a decision, a last node) and both apply
//! results, so the runs' row locks and the once-only result links decide each step once. Every
//! run ends SUCCEEDED, each job node run has one run row, and each run row's handler ran once.
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
    stop: mpsc::Receiver<mpsc::Sender<()>>,
) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        init_tracing();
        actix_rt::System::new().block_on(async move {
            let mut handlers = HandlerRegistry::new();
            handlers
                .register_fn("count", move |ctx: JobContext| {
                    ran.lock().push((id, ctx.log_id));
                    async { Ok(()) }
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
            created.send(w).unwrap();
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
                    Ok(ack) => {
                        engine.stop(Duration::from_secs(5)).await.unwrap();
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

fn two_nodes(base_url: &str, backend: &str) {
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
    let (stop1, stop_rx1) = mpsc::channel();
    let n1 = spawn_node(1, url.clone(), ran.clone(), Some(w), created_tx, stop_rx1);
    created.recv_timeout(Duration::from_secs(60)).unwrap();

    // read what the database recorded, over a connection of its own (not a third node)
    let total = 2 * RUNS_PER_NODE;
    let deadline = std::time::Instant::now() + Duration::from_secs(90);
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
            "{backend}: the runs did not all end within 90 s"
        );
        std::thread::sleep(Duration::from_millis(500));
    };
    for (stop, node) in [(stop0, n0), (stop1, n1)] {
        let (ack, done) = mpsc::channel();
        stop.send(ack).unwrap();
        done.recv_timeout(Duration::from_secs(60)).unwrap();
        node.join().unwrap();
    }
    let ran = ran.lock().clone();
    let mut rows = Vec::new();
    for (r, nodes, links) in &runs {
        assert_eq!(r.status, "SUCCEEDED", "{backend}: {r:?} {nodes:?}");
        assert_eq!(
            nodes.len(),
            9,
            "{backend}: one node run per node: {nodes:?}"
        );
        for n in nodes {
            assert_eq!(n.attempt, 1);
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
    assert_eq!(
        executed, rows,
        "{backend}: each run row executed exactly once"
    );
    let by = |node: usize| ran.iter().filter(|(n, _)| *n == node).count();
    eprintln!(
        "{backend}: {} runs, {} node runs, executed by node 0: {}, node 1: {}",
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
        two_nodes(&url, "postgres");
    }
}

/// The same on MariaDB.
#[test]
fn two_nodes_on_mariadb_run_each_node_once() {
    if let Some(url) = database_url("XJOB_TEST_MYSQL_URL") {
        two_nodes(&url, "mariadb");
    }
}
