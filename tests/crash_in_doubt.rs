//! Fires in doubt across `kill -9`, with an executor outside the process: `xjob serve` sends
//! jobs firing every second and a workflow `a → {b, c} → d → e` (started every two seconds) to
//! an XXL-JOB-protocol executor — a stand-in in this test that counts every `/run` it receives,
//! answers `/log` for the log ids it received (and XXL-JOB's `readLog fail, logFile not
//! exists` for the others), refuses a log id it already has, and calls each result back 300 ms
//! later (again and again while the center is down, as executors retry callbacks). The node is
//! killed with SIGKILL at several random points 0–1.5 s after the executor received a run, and
//! restarted on the same data each time. Then: no log id was received twice, no job received two
//! runs for one nominal second, no workflow node ran twice in one attempt; every nominal second
//! of the window has its run, received once; every workflow run ended SUCCEEDED with one attempt
//! per node. On a SQLite file, and on PostgreSQL when `XJOB_TEST_PG_URL` is set (in CI). Real
//! processes and real time.
#![allow(clippy::unwrap_used)]

mod common;

use std::collections::HashMap;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use serde_json::{Value, json};

const PASSWORD: &str = "crash-admin-password";
const TOKEN: &str = "crash-token-0123456789";
/// Jobs firing every second.
const JOBS: usize = 4;
/// Kills per backend (`XJOB_CRASH_KILLS` sets another number: the benchmark's 30 and more).
fn kills() -> usize {
    std::env::var("XJOB_CRASH_KILLS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(6)
}

/// What the stand-in executor saw.
#[derive(Default)]
struct Seen {
    /// Every `/run` accepted: (log id, job id).
    runs: Vec<(i64, i32)>,
    /// `/run` calls refused as repeated log ids.
    repeats: Vec<i64>,
    /// Results not yet accepted by the center: (log id, log time).
    callbacks: Vec<(i64, i64)>,
}

/// Starts the stand-in executor on its own thread; answers its address and what it sees, and
/// a channel told of every run it accepts.
fn stand_in(admin: String) -> (String, Arc<Mutex<Seen>>, std::sync::mpsc::Receiver<i64>) {
    let seen: Arc<Mutex<Seen>> = Arc::default();
    let (tx, rx) = std::sync::mpsc::channel::<i64>();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let address = format!("http://{}/", listener.local_addr().unwrap());
    let s = seen.clone();
    std::thread::spawn(move || {
        actix_rt::System::new().block_on(async move {
            let state = (s.clone(), tx);
            let server = actix_web::HttpServer::new(move || {
                let (seen, tx) = state.clone();
                actix_web::App::new().default_service(actix_web::web::to(
                    move |req: actix_web::HttpRequest, body: actix_web::web::Bytes| {
                        let (seen, tx) = (seen.clone(), tx.clone());
                        async move { executor(&req, &body, &seen, &tx) }
                    },
                ))
            })
            .workers(2)
            .listen(listener)
            .unwrap()
            .run();
            // results go back 300 ms after their run, and again every 200 ms while refused
            actix_rt::spawn(callbacks(admin, s));
            server.await.unwrap();
        });
    });
    (address, seen, rx)
}

fn executor(
    req: &actix_web::HttpRequest,
    body: &[u8],
    seen: &Mutex<Seen>,
    tx: &std::sync::mpsc::Sender<i64>,
) -> actix_web::HttpResponse {
    use actix_web::HttpResponse;
    let token = req
        .headers()
        .get("XXL-JOB-ACCESS-TOKEN")
        .and_then(|v| v.to_str().ok());
    if token != Some(TOKEN) {
        return HttpResponse::Ok().json(json!({"code": 500, "msg": "The access token is wrong."}));
    }
    let v: Value = serde_json::from_slice(body).unwrap_or(Value::Null);
    let log_id = v["logId"].as_i64().unwrap_or(0);
    match req.path() {
        "/run" => {
            let mut s = seen.lock();
            if s.runs.iter().any(|(id, _)| *id == log_id) {
                s.repeats.push(log_id);
                return HttpResponse::Ok().json(
                    json!({"code": 500, "msg": format!("repeat trigger job, logId:{log_id}")}),
                );
            }
            s.runs
                .push((log_id, v["jobId"].as_i64().unwrap_or(0) as i32));
            let at = v["logDateTime"].as_i64().unwrap_or(0);
            s.callbacks.push((log_id, at));
            let _ = tx.send(log_id);
            HttpResponse::Ok().json(json!({"code": 200, "msg": null}))
        }
        "/log" => {
            let has = seen.lock().runs.iter().any(|(id, _)| *id == log_id);
            let content = if has {
                "2026-12-02 12:00:00 [stand-in] run received\n"
            } else {
                "readLog fail, logFile not exists"
            };
            HttpResponse::Ok().json(json!({"code": 200, "msg": null, "content": {
                "fromLineNum": 1, "toLineNum": if has { 1 } else { 0 },
                "logContent": content, "isEnd": !has }}))
        }
        _ => HttpResponse::Ok().json(json!({"code": 200, "msg": null})),
    }
}

/// Sends the results the stand-in holds, 300 ms after each run, until the center takes them.
async fn callbacks(admin: String, seen: Arc<Mutex<Seen>>) {
    let mut held: Vec<(i64, i64, Instant)> = Vec::new();
    loop {
        actix_rt::time::sleep(Duration::from_millis(100)).await;
        let now = Instant::now();
        held.extend(
            std::mem::take(&mut seen.lock().callbacks)
                .into_iter()
                .map(|(id, at)| (id, at, now + Duration::from_millis(300))),
        );
        let due: Vec<Value> = held
            .iter()
            .filter(|(_, _, t)| *t <= now)
            .map(|(id, at, _)| {
                json!({"logId": id, "logDateTim": at, "handleCode": 200, "handleMsg": "done"})
            })
            .collect();
        if due.is_empty() {
            continue;
        }
        let ok = awc::Client::default()
            .post(format!("{admin}api/callback"))
            .insert_header(("XXL-JOB-ACCESS-TOKEN", TOKEN))
            .timeout(Duration::from_secs(2))
            .send_json(&due)
            .await
            .ok()
            .filter(|r| r.status().is_success())
            .is_some();
        if ok {
            held.retain(|(_, _, t)| *t > now);
        }
    }
}

fn serve(dir: &std::path::Path, cfg: &std::path::Path) -> Child {
    // the node's log, kept for a failure's diagnosis (appended across restarts)
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(dir.join("serve.log"))
        .unwrap();
    Command::new(env!("CARGO_BIN_EXE_xjob"))
        .current_dir(dir)
        .args(["serve", "--config"])
        .arg(cfg)
        .env("RUST_LOG", "info")
        .stdin(Stdio::null())
        .stdout(log.try_clone().unwrap())
        .stderr(log)
        .spawn()
        .unwrap()
}

/// Sends `body` to `path` (`None` when the node is down).
fn send(
    base: &str,
    method: &str,
    path: &str,
    token: Option<&str>,
    body: Value,
) -> Option<(u16, Value)> {
    actix_rt::System::new().block_on(async {
        let c = awc::Client::default();
        let url = format!("{base}{path}");
        let mut req = match method {
            "GET" => c.get(url),
            _ => c.post(url),
        }
        .timeout(Duration::from_secs(5));
        if let Some(t) = token {
            req = req.bearer_auth(t);
        }
        let mut res = if method == "GET" {
            req.send().await.ok()?
        } else {
            req.send_json(&body).await.ok()?
        };
        let bytes = res.body().limit(16 << 20).await.ok()?;
        Some((
            res.status().as_u16(),
            serde_json::from_slice(&bytes).unwrap_or(Value::Null),
        ))
    })
}

/// Waits until the node answers a login; answers its token.
fn login(base: &str) -> String {
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        if let Some((200, v)) = send(
            base,
            "POST",
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

fn kill(p: &mut Child) {
    p.kill().unwrap(); // SIGKILL: no shutdown, no hand-back
    p.wait().unwrap();
}

/// Every page of a `/v1` list.
fn all(base: &str, token: &str, path: &str) -> Vec<Value> {
    let mut out = Vec::new();
    loop {
        let sep = if path.contains('?') { '&' } else { '?' };
        let (s, v) = send(
            base,
            "GET",
            &format!("{path}{sep}offset={}&limit=1000", out.len()),
            Some(token),
            Value::Null,
        )
        .unwrap();
        assert_eq!(s, 200, "{v}");
        let items = v["items"].as_array().unwrap().clone();
        let total = v["total"].as_u64().unwrap() as usize;
        out.extend(items);
        if out.len() >= total {
            return out;
        }
    }
}

/// Runs the whole scenario against `database_url`.
fn scenario(database_url: &str, extra: &str) {
    let dir = tempfile::tempdir().unwrap();
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let base = format!("http://127.0.0.1:{port}/");
    let (exec, seen, received) = stand_in(base.clone());
    let cfg = dir.path().join("xjob.toml");
    std::fs::write(
        &cfg,
        format!(
            "[http]\nbind = \"127.0.0.1:{port}\"\n[database]\nurl = \"{database_url}\"\n\
             [security]\naccess_token = \"{TOKEN}\"\nadmin_password = \"{PASSWORD}\"\n\
             [executor]\napp_name = \"\"\n\
             [scheduler]\nclaim_timeout_ms = 5000\nmisfire_threshold_ms = 60000\n{extra}"
        ),
    )
    .unwrap();
    let mut p = serve(dir.path(), &cfg);
    let token = login(&base);
    let (s, g) = send(
        &base,
        "POST",
        "v1/groups",
        Some(&token),
        json!({"appName": "stand-in", "title": "stand-in", "addressType": 1, "addressList": exec}),
    )
    .unwrap();
    assert_eq!(s, 201, "{g}");
    let group = g["id"].as_i64().unwrap();
    let job = |name: &str, schedule: &str| {
        let (s, j) = send(
            &base,
            "POST",
            "v1/jobs",
            Some(&token),
            json!({"jobGroup": group, "jobDesc": name, "author": "crash",
                   "scheduleType": schedule, "scheduleConf": if schedule == "CRON" { "* * * * * ?" } else { "" },
                   "misfireStrategy": "FIRE_ONCE_NOW",
                   "executorHandler": "count", "executorRouteStrategy": "FIRST",
                   "triggerStatus": if schedule == "CRON" { 1 } else { 0 }}),
        )
        .unwrap();
        assert_eq!(s, 201, "{j}");
        j["id"].as_i64().unwrap()
    };
    let cron: Vec<i64> = (0..JOBS)
        .map(|i| job(&format!("every second {i}"), "CRON"))
        .collect();
    let nodes: Vec<i64> = (0..5).map(|i| job(&format!("node {i}"), "NONE")).collect();
    let n = |k: &str, j: i64| json!({"key": k, "type": "JOB", "jobId": j});
    let (s, w) = send(
        &base,
        "POST",
        "v1/workflows",
        Some(&token),
        json!({"jobGroup": group, "name": "fan", "scheduleType": "CRON",
               "scheduleConf": "*/2 * * * * ?", "enabled": true,
               "definition": {"nodes": [n("a", nodes[0]), n("b", nodes[1]), n("c", nodes[2]),
                                        n("d", nodes[3]), n("e", nodes[4])],
                              "edges": [{"from": "a", "to": "b"}, {"from": "a", "to": "c"},
                                        {"from": "b", "to": "d"}, {"from": "c", "to": "d"},
                                        {"from": "d", "to": "e"}]}}),
    )
    .unwrap();
    assert_eq!(s, 201, "{w}");

    // kills 0–1.5 s after the executor received a run (a seeded choice of points)
    let mut rng_state: u64 = 0x5eed_1234_abcd_0001;
    let mut next = || {
        rng_state ^= rng_state << 13;
        rng_state ^= rng_state >> 7;
        rng_state ^= rng_state << 17;
        rng_state
    };
    let started = Instant::now();
    for k in 0..kills() {
        // drain what came before, then wait for a run received after this point
        while received.try_recv().is_ok() {}
        received
            .recv_timeout(Duration::from_secs(60))
            .expect("the executor received a run");
        let after = Duration::from_millis(next() % 1500);
        std::thread::sleep(after);
        kill(&mut p);
        eprintln!("kill {k}: {after:?} after a run was received");
        p = serve(dir.path(), &cfg);
        login(&base);
    }
    // let the last restart settle what it found in doubt and run on a while; then no new
    // workflow run, and every one ends
    std::thread::sleep(Duration::from_secs(8));
    let token = login(&base);
    let wid = w["id"].as_i64().unwrap();
    let (s, v) = send(
        &base,
        "POST",
        &format!("v1/workflows/{wid}/stop"),
        Some(&token),
        json!({}),
    )
    .unwrap();
    assert_eq!(s, 200, "{v}");
    let window_end = chrono::Utc::now().timestamp_millis() / 1000 * 1000 - 6_000;
    let deadline = Instant::now() + Duration::from_secs(60);
    let runs = loop {
        let runs = all(&base, &token, "v1/workflow-runs");
        if runs
            .iter()
            .all(|r| r["status"] != "RUNNING" && r["status"] != "QUEUED")
            || Instant::now() > deadline
        {
            break runs;
        }
        std::thread::sleep(Duration::from_millis(500));
    };
    let elapsed = started.elapsed();
    let rows: Vec<Value> = cron
        .iter()
        .chain(&nodes)
        .flat_map(|j| all(&base, &token, &format!("v1/logs?jobId={j}")))
        .collect();
    kill(&mut p);

    let seen = seen.lock();
    if std::env::var_os("XJOB_KEEP").is_some() {
        let kept = dir.keep();
        eprintln!("kept {}", kept.display());
    }
    // no log id received twice (a repeat is refused by the executor and counted)
    let mut by_id: HashMap<i64, usize> = HashMap::new();
    for (id, _) in &seen.runs {
        *by_id.entry(*id).or_default() += 1;
    }
    assert!(by_id.values().all(|n| *n == 1));
    // the center never sent a log id again to an executor that had it
    assert!(
        seen.repeats.is_empty(),
        "repeated log ids: {:?}",
        seen.repeats
    );
    let received: std::collections::HashSet<i64> = by_id.keys().copied().collect();
    // per job and nominal second: one run row, received once
    let mut per_second: HashMap<(i64, i64), Vec<i64>> = HashMap::new();
    for r in &rows {
        if let (Some(job), Some(fire)) = (r["jobId"].as_i64(), r["fireTime"].as_i64()) {
            per_second
                .entry((job, fire))
                .or_default()
                .push(r["id"].as_i64().unwrap());
        }
    }
    let first = per_second.keys().map(|(_, f)| *f).min().unwrap();
    for &job in &cron {
        let mut t = first + 3_000;
        while t <= window_end {
            let ids = per_second.get(&(job, t)).cloned().unwrap_or_default();
            assert_eq!(ids.len(), 1, "job {job} at {t}: rows {ids:?}");
            assert!(
                received.contains(&ids[0]),
                "job {job} at {t}: run {} never reached the executor",
                ids[0]
            );
            t += 1_000;
        }
    }
    // every workflow run ended, each node once
    assert!(!runs.is_empty());
    for r in &runs {
        assert_eq!(r["status"], "SUCCEEDED", "{r}");
    }
    let node_rows = rows
        .iter()
        .filter(|r| nodes.contains(&r["jobId"].as_i64().unwrap()))
        .count();
    assert_eq!(node_rows, runs.len() * 5, "one run row per node per run");
    eprintln!(
        "{} kills in {elapsed:?}: {} runs received, {} workflow runs",
        kills(),
        seen.runs.len(),
        runs.len()
    );
}

#[test]
fn in_doubt_fires_run_once_across_kill_9_on_sqlite() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!(
        "sqlite://{}?mode=rwc",
        dir.path().join("crash.db").display()
    );
    scenario(&url, "");
}

#[test]
fn in_doubt_fires_run_once_across_kill_9_on_postgres() {
    let Some(base) = common::database_url("XJOB_TEST_PG_URL") else {
        return;
    };
    let url = common::fresh_database(&base);
    scenario(&url, "");
}
