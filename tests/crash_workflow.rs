//! Workflow runs across `kill -9`: a single SQLite node running 40 workflow runs (a fan-out of
//! three nodes sleeping 0 or 1 s then a fan-in, a decision, a last node; jobs with nine fail
//! retries, more than the kills) is killed with SIGKILL eight times at different moments — while runs are being triggered, while node runs
//! are recorded, claimed, dispatched and applied — and restarted each time. Every run then ends
//! SUCCEEDED; each node has one node run per attempt, and an attempt after the first only when
//! the one before it failed (its run row lost with the killed process); every node run has one
//! run row; and no run row's handler started twice (one "execute start" line in its log file).
//! Real processes and real time (about a minute). The kills land while run rows are claimed
//! and running (the counts at each kill are printed); the exact points between a commit and its
//! claim are tested one by one in `tests/workflow_runs.rs`.
#![allow(clippy::unwrap_used)]

use std::collections::HashMap;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

const RUNS: usize = 40;

/// A node run as read back: (run, node, attempt, state, shards_total, id).
type NodeRow = (i64, String, i32, String, i32, i64);
const PASSWORD: &str = "crash-admin-password";

fn serve(dir: &std::path::Path, cfg: &std::path::Path) -> Child {
    Command::new(env!("CARGO_BIN_EXE_xjob"))
        .current_dir(dir)
        .args(["serve", "--config"])
        .arg(cfg)
        .env_remove("RUST_LOG")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap()
}

/// POSTs `body` to `path`; answers the status and JSON body (None when the node is down).
fn post(base: &str, path: &str, token: Option<&str>, body: Value) -> Option<(u16, Value)> {
    actix_rt::System::new().block_on(async {
        let mut req = awc::Client::default()
            .post(format!("{base}{path}"))
            .timeout(Duration::from_secs(5));
        if let Some(t) = token {
            req = req.bearer_auth(t);
        }
        let mut res = req.send_json(&body).await.ok()?;
        let bytes = res.body().await.ok()?;
        Some((
            res.status().as_u16(),
            serde_json::from_slice(&bytes).unwrap_or(Value::Null),
        ))
    })
}

/// Waits until the node answers a login; answers its token.
fn login(base: &str) -> String {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if let Some((200, v)) = post(
            base,
            "v1/auth/login",
            None,
            json!({"username": "admin", "password": PASSWORD}),
        ) {
            return v["token"].as_str().unwrap().to_string();
        }
        assert!(Instant::now() < deadline, "the node did not start");
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn read<T>(
    db: &std::path::Path,
    f: impl FnOnce(&rusqlite::Connection) -> rusqlite::Result<T>,
) -> T {
    let c = rusqlite::Connection::open_with_flags(db, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
        .unwrap();
    c.busy_timeout(Duration::from_secs(5)).unwrap();
    f(&c).unwrap()
}

fn kill(p: &mut Child) {
    p.kill().unwrap(); // SIGKILL: no shutdown, no hand-back
    p.wait().unwrap();
}

#[test]
fn workflow_runs_survive_kill_9_with_each_node_run_once() {
    let dir = tempfile::tempdir().unwrap();
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let base = format!("http://127.0.0.1:{port}/");
    let db_path = dir.path().join("crash.db");
    let url = format!("sqlite://{}?mode=rwc", db_path.display());
    let cfg = dir.path().join("xjob.toml");
    std::fs::write(
        &cfg,
        format!(
            "[http]\nbind = \"127.0.0.1:{port}\"\n[database]\nurl = \"{url}\"\n[security]\n\
             access_token = \"t\"\nadmin_password = \"{PASSWORD}\"\n[scheduler]\nclaim_timeout_ms = 5000\n"
        ),
    )
    .unwrap();
    let (a, b) = actix_rt::System::new().block_on(async {
        let db = sea_orm::Database::connect(url.as_str()).await.unwrap();
        xjob::testing::store::migrate(&db).await.unwrap();
        let now = chrono::Utc::now().naive_utc();
        let g = xjob::testing::store::groups::insert(
            &db,
            "xjob-demo",
            "demo",
            1,
            Some(base.clone()),
            now,
        )
        .await
        .unwrap();
        let mut ids = Vec::new();
        for (name, handler) in [("a", "demoJobHandler"), ("b", "sleepJobHandler")] {
            let mut spec = xjob::JobSpec::cron(g, name, "0 0 3 * * ?", handler);
            spec.executor_fail_retry_count = 9;
            ids.push(
                xjob::testing::store::jobs::insert(
                    &db,
                    spec.validate(chrono_tz::UTC, now).unwrap(),
                )
                .await
                .unwrap(),
            );
        }
        db.close().await.unwrap();
        (ids[0], ids[1])
    });

    let mut p = serve(dir.path(), &cfg);
    let mut token = login(&base);
    let (s, w) = post(
        &base,
        "v1/workflows",
        Some(&token),
        json!({
            "jobGroup": 1, "name": "crash",
            "definition": {
                "nodes": [
                    { "key": "start", "type": "JOB", "jobId": a },
                    { "key": "b0", "type": "JOB", "jobId": b, "param": "${pause}" },
                    { "key": "b1", "type": "JOB", "jobId": b, "param": "${pause}" },
                    { "key": "b2", "type": "JOB", "jobId": b, "param": "${pause}" },
                    { "key": "join", "type": "JOB", "jobId": a },
                    { "key": "check", "type": "DECISION", "expression": "n >= 0" },
                    { "key": "end", "type": "JOB", "jobId": a }
                ],
                "edges": [
                    { "from": "start", "to": "b0" }, { "from": "start", "to": "b1" },
                    { "from": "start", "to": "b2" }, { "from": "b0", "to": "join" },
                    { "from": "b1", "to": "join" }, { "from": "b2", "to": "join" },
                    { "from": "join", "to": "check" },
                    { "from": "check", "to": "end", "condition": "TRUE" }
                ]
            }
        }),
    )
    .unwrap();
    assert_eq!(s, 201, "{w}");
    let wid = w["id"].as_i64().unwrap();

    // triggers go on across the kills; a trigger whose node died may or may not have recorded
    // its run (the runs are counted from the database)
    let mut n = 0;
    let mut trigger = |token: &str, count: usize| {
        for _ in 0..count {
            post(
                &base,
                "v1/workflow-runs",
                Some(token),
                json!({ "workflowId": wid, "params": { "n": n, "pause": n % 2 } }),
            );
            n += 1;
        }
    };
    let runs_in_db = || {
        read(&db_path, |c| {
            c.query_row("SELECT COUNT(*) FROM xjob_workflow_run", [], |r| {
                r.get::<_, i64>(0)
            })
        }) as usize
    };
    let pauses = [30u64, 90, 170, 260, 380, 520, 700, 60];
    for (i, pause) in pauses.into_iter().enumerate() {
        trigger(&token, RUNS / pauses.len());
        std::thread::sleep(Duration::from_millis(pause));
        kill(&mut p);
        let (nodes, pending, claimed, running): (i64, i64, i64, i64) = read(&db_path, |c| {
            c.query_row(
                "SELECT (SELECT COUNT(*) FROM xjob_workflow_node_run), \
                 (SELECT COUNT(*) FROM xxl_job_log WHERE fire_state = 1), \
                 (SELECT COUNT(*) FROM xxl_job_log WHERE fire_state > 1 AND trigger_code = 0), \
                 (SELECT COUNT(*) FROM xxl_job_log WHERE trigger_code = 200 AND handle_code = 0)",
                [],
                |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)),
            )
        });
        eprintln!(
            "kill {}: {} runs, {nodes} node runs; run rows pending {pending}, claimed {claimed}, \
             without a result {running}",
            i + 1,
            runs_in_db()
        );
        p = serve(dir.path(), &cfg);
        token = login(&base);
    }
    // top up to RUNS runs (some triggers may have died with their node)
    while runs_in_db() < RUNS {
        trigger(&token, 1);
    }

    let deadline = Instant::now() + Duration::from_secs(150);
    loop {
        let running: i64 = read(&db_path, |c| {
            c.query_row(
                "SELECT COUNT(*) FROM xjob_workflow_run WHERE status = 'RUNNING'",
                [],
                |r| r.get(0),
            )
        });
        if running == 0 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "{running} runs still running 150 s after the last restart"
        );
        std::thread::sleep(Duration::from_millis(500));
    }
    kill(&mut p);

    let runs: Vec<(i64, String)> = read(&db_path, |c| {
        let mut s = c.prepare("SELECT id, status FROM xjob_workflow_run")?;
        s.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?.collect()
    });
    // (run, node, attempt, state, shards_total, id)
    let nodes: Vec<NodeRow> = read(&db_path, |c| {
        let mut s = c.prepare(
            "SELECT run_id, node_key, attempt, state, shards_total, id FROM xjob_workflow_node_run",
        )?;
        s.query_map([], |r| {
            Ok((
                r.get(0)?,
                r.get(1)?,
                r.get(2)?,
                r.get(3)?,
                r.get(4)?,
                r.get(5)?,
            ))
        })?
        .collect()
    });
    // (log id, node run, trigger code, handle code, trigger time)
    let links: Vec<(i64, i64, i32, i32, String)> = read(&db_path, |c| {
        let mut s = c.prepare(
            "SELECT l.id, nl.node_run_id, l.trigger_code, l.handle_code, l.trigger_time \
             FROM xjob_workflow_node_log nl JOIN xxl_job_log l ON l.id = nl.log_id",
        )?;
        s.query_map([], |r| {
            Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?))
        })?
        .collect()
    });
    let all_rows: i64 = read(&db_path, |c| {
        c.query_row("SELECT COUNT(*) FROM xxl_job_log", [], |r| r.get(0))
    });

    assert!(runs.len() >= RUNS);
    for (id, status) in &runs {
        let mine: Vec<_> = nodes.iter().filter(|n| n.0 == *id).collect();
        let msgs: Vec<(i64, String)> = read(&db_path, |c| {
            let mut s = c.prepare(
                "SELECT nr.id, COALESCE(nr.message, '') FROM xjob_workflow_node_run nr WHERE run_id = ?1",
            )?;
            s.query_map([id], |r| Ok((r.get(0)?, r.get(1)?)))?.collect()
        });
        assert_eq!(status, "SUCCEEDED", "run {id}: {mine:?} {msgs:?}");
    }
    let mut per_node: HashMap<(i64, &str), Vec<&NodeRow>> = HashMap::new();
    for n in &nodes {
        per_node.entry((n.0, n.1.as_str())).or_default().push(n);
    }
    let mut retried = 0;
    for ((run, key), mut attempts) in per_node {
        attempts.sort_by_key(|n| n.2);
        for (i, n) in attempts.iter().enumerate() {
            assert_eq!(
                n.2 as usize,
                i + 1,
                "run {run} node {key}: attempts 1, 2, …"
            );
            if i + 1 < attempts.len() {
                assert_eq!(
                    n.3, "FAILED",
                    "run {run} node {key}: retried only after a failure"
                );
                retried += 1;
            }
        }
        assert_eq!(per_node_len(&nodes, run), 7, "run {run}: every node ran");
    }
    let mut rows_of: HashMap<i64, usize> = HashMap::new();
    for l in &links {
        *rows_of.entry(l.1).or_default() += 1;
    }
    for n in &nodes {
        let want = if n.1 == "check" { 0 } else { n.4 as usize };
        assert_eq!(
            rows_of.get(&n.5).copied().unwrap_or(0),
            want,
            "node run {n:?}"
        );
    }
    assert_eq!(
        all_rows as usize,
        links.len(),
        "no run row outside a node run"
    );
    let (mut started_twice, mut unconfirmed) = (0, 0);
    for (id, _, trigger, handle, time) in &links {
        if *trigger != 200 {
            continue;
        }
        let day = &time[..10];
        let log = dir.path().join(format!("data/joblogs/{day}/{id}.log"));
        let starts = std::fs::read_to_string(&log)
            .map(|s| s.matches("xxl-job job execute start").count())
            .unwrap_or(0);
        match starts {
            1 => {}
            0 => {
                unconfirmed += 1;
                assert_ne!(*handle, 200, "run row {id} succeeded without starting");
            }
            _ => started_twice += 1,
        }
    }
    eprintln!(
        "workflow crash: {} runs, {} node runs, {} retried after a kill, {} dispatched as the \
         process died, {} started twice",
        runs.len(),
        nodes.len(),
        retried,
        unconfirmed,
        started_twice
    );
    assert_eq!(started_twice, 0);
}

fn per_node_len(nodes: &[NodeRow], run: i64) -> usize {
    let keys: std::collections::HashSet<&str> = nodes
        .iter()
        .filter(|n| n.0 == run)
        .map(|n| n.1.as_str())
        .collect();
    keys.len()
}
