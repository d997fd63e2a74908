//! End to end with remote executors that speak only the XXL-JOB 2.4 protocol (written here
//! from the spec, independent of xjob's executor): they register over `/api/registry`, take
//! `/run`, and report over `/api/callback`. Jobs are routed ROUND and SHARDING_BROADCAST across
//! them; one dies mid-run and its run is marked lost after the dead timeout while routing moves
//! to the survivor. Real time (a few seconds): heartbeats every second, dead after three.
#![allow(clippy::unwrap_used)]

mod common;

use std::net::TcpListener;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use actix_web::{App, HttpResponse, HttpServer, web};
use common::*;
use parking_lot::Mutex;
use serde_json::{Value, json};
use xjob::prelude::*;

const TOKEN: &str = "e2e-token";

/// What a fake executor's handlers share.
#[derive(Clone)]
struct FakeState {
    name: String,
    admin: String,
    received: Arc<Mutex<Vec<Value>>>,
    hold: Arc<AtomicBool>,
}

struct Fake {
    address: String,
    received: Arc<Mutex<Vec<Value>>>,
    hold: Arc<AtomicBool>,
    alive: Arc<AtomicBool>,
    server: actix_web::dev::ServerHandle,
}

async fn admin_post(admin: &str, path: &str, body: Value) -> Value {
    let mut r = awc::Client::default()
        .post(format!("{admin}{path}"))
        .insert_header(("XXL-JOB-ACCESS-TOKEN", TOKEN))
        .send_json(&body)
        .await
        .unwrap();
    r.json().await.unwrap()
}

async fn run(req: web::Json<Value>, me: web::Data<FakeState>) -> HttpResponse {
    me.received.lock().push(req.0.clone());
    if !me.hold.load(Ordering::SeqCst) {
        let (admin, name, log_id, at) = (
            me.admin.clone(),
            me.name.clone(),
            req["logId"].clone(),
            req["logDateTime"].clone(),
        );
        actix_rt::spawn(async move {
            let cb = json!([{"logId": log_id, "logDateTim": at, "handleCode": 200, "handleMsg": format!("done by {name}")}]);
            admin_post(&admin, "api/callback", cb).await;
        });
    }
    HttpResponse::Ok().json(json!({"code": 200}))
}

async fn ok() -> HttpResponse {
    HttpResponse::Ok().json(json!({"code": 200}))
}

/// Starts a fake executor that registers with `admin` every second while alive.
async fn fake(name: &str, admin: &str) -> Fake {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let address = format!("http://{}/", l.local_addr().unwrap());
    let state = FakeState {
        name: name.into(),
        admin: admin.into(),
        received: Arc::default(),
        hold: Arc::default(),
    };
    let data = web::Data::new(state.clone());
    let server = HttpServer::new(move || {
        App::new()
            .app_data(data.clone())
            .route("/run", web::post().to(run))
            .route("/beat", web::post().to(ok))
            .route("/idleBeat", web::post().to(ok))
            .route("/kill", web::post().to(ok))
    })
    .workers(1)
    .listen(l)
    .unwrap()
    .run();
    let me = Fake {
        address: address.clone(),
        received: state.received,
        hold: state.hold,
        alive: Arc::new(AtomicBool::new(true)),
        server: server.handle(),
    };
    actix_rt::spawn(server);
    let (alive, admin, addr) = (me.alive.clone(), admin.to_string(), address);
    let body = json!({"registryGroup":"EXECUTOR","registryKey":"py-exec","registryValue": addr});
    let first = admin_post(&admin, "api/registry", body.clone()).await;
    assert_eq!(first["code"], 200);
    actix_rt::spawn(async move {
        while alive.load(Ordering::SeqCst) {
            actix_rt::time::sleep(Duration::from_secs(1)).await;
            if alive.load(Ordering::SeqCst) {
                admin_post(&admin, "api/registry", body.clone()).await;
            }
        }
    });
    me
}

/// Stand-in XXL-protocol executors register over HTTP, run and call back; one dies and its runs are marked lost.
#[test]
fn remote_xxl_executors_register_run_call_back_and_one_dies() {
    init_tracing();
    let dir = tempfile::tempdir().unwrap();
    actix_rt::System::new().block_on(async {
        let node = http_node(dir.path(), TOKEN, false, |c| {
            c.registry.beat_secs = 1;
            c.registry.dead_secs = 3;
        })
        .await;
        let admin = format!("{}xxl-job-admin/", node.address);
        let engine = node.engine.clone();
        let group = engine
            .ensure_group("py-exec", "python executors")
            .await
            .unwrap();
        let e1 = fake("e1", &admin).await;
        let e2 = fake("e2", &admin).await;
        let db = engine.db().clone();
        let addresses = || {
            let db = db.clone();
            async move {
                xjob::testing::store::groups::get(&db, group)
                    .await
                    .unwrap()
                    .address_list
                    .unwrap_or_default()
            }
        };
        let mut both = [e1.address.clone(), e2.address.clone()];
        both.sort();
        assert_eq!(addresses().await, both.join(","), "both registered, sorted");

        let job_with = |route: &str| {
            let mut s = JobSpec::cron(group, route, "0 0 0 * * ?", "pyHandler");
            s.executor_route_strategy = route.into();
            s
        };
        let round = engine.add_job(job_with("ROUND")).await.unwrap();
        for _ in 0..4 {
            engine
                .trigger_job(round, Some("r".into()), None)
                .await
                .unwrap();
        }
        let done = |job: i32, n: usize| {
            let db = db.clone();
            async move {
                let rows = xjob::testing::store::logs::for_job(&db, job).await.unwrap();
                rows.len() == n && rows.iter().all(|r| r.handle_code != 0)
            }
        };
        eventually("4 ROUND runs called back", 10, || done(round, 4)).await;
        assert_eq!(
            (e1.received.lock().len(), e2.received.lock().len()),
            (2, 2),
            "ROUND alternates"
        );
        let rows = xjob::testing::store::logs::for_job(engine.db(), round)
            .await
            .unwrap();
        assert!(rows.iter().all(|r| {
            r.handle_code == 200
                && r.handle_msg
                    .as_deref()
                    .unwrap_or("")
                    .starts_with("done by e")
        }));

        let shard = engine
            .add_job(job_with("SHARDING_BROADCAST"))
            .await
            .unwrap();
        engine.trigger_job(shard, None, None).await.unwrap();
        eventually("both shards called back", 10, || done(shard, 2)).await;
        let mut shards: Vec<String> = xjob::testing::store::logs::for_job(engine.db(), shard)
            .await
            .unwrap()
            .iter()
            .map(|r| r.executor_sharding_param.clone().unwrap_or_default())
            .collect();
        shards.sort();
        assert_eq!(shards, vec!["0/2", "1/2"]);
        let last = |f: &Fake| f.received.lock().last().cloned().unwrap();
        let mut idx = vec![
            last(&e1)["broadcastIndex"].as_i64().unwrap(),
            last(&e2)["broadcastIndex"].as_i64().unwrap(),
        ];
        idx.sort();
        assert_eq!(idx, vec![0, 1]);
        assert_eq!(last(&e1)["broadcastTotal"], 2);

        // every other strategy routes these executors too
        let mut runs = e1.received.lock().len() + e2.received.lock().len();
        for route in [
            "LAST",
            "RANDOM",
            "CONSISTENT_HASH",
            "LEAST_FREQUENTLY_USED",
            "LEAST_RECENTLY_USED",
            "FAILOVER",
            "BUSYOVER",
        ] {
            let job = engine.add_job(job_with(route)).await.unwrap();
            engine.trigger_job(job, None, None).await.unwrap();
            eventually(&format!("{route} run called back"), 10, || done(job, 1)).await;
            let row = xjob::testing::store::logs::for_job(engine.db(), job)
                .await
                .unwrap()
                .remove(0);
            assert_eq!(row.handle_code, 200, "{route}");
            runs += 1;
            assert_eq!(
                e1.received.lock().len() + e2.received.lock().len(),
                runs,
                "{route} reached an executor"
            );
            let addr = row.executor_address.unwrap();
            assert!(addr == e1.address || addr == e2.address, "{route} → {addr}");
            if route == "LAST" {
                assert_eq!(addr, both[1], "LAST is the last of the sorted list");
            }
        }
        let before_death = e2.received.lock().len();

        // e2 takes a run and dies before reporting
        e2.hold.store(true, Ordering::SeqCst);
        let doomed = engine.add_job(job_with("FIRST")).await.unwrap();
        engine
            .trigger_job(doomed, None, Some(e2.address.clone()))
            .await
            .unwrap();
        eventually("e2 took the run", 10, || async {
            e2.received.lock().len() == before_death + 1
        })
        .await;
        e2.alive.store(false, Ordering::SeqCst);
        e2.server.stop(false).await;
        let died = Instant::now();
        eventually("the run on e2 marked lost", 10, || {
            let db = db.clone();
            async move {
                xjob::testing::store::logs::for_job(&db, doomed)
                    .await
                    .unwrap()[0]
                    .handle_code
                    == 500
            }
        })
        .await;
        let lost_after = died.elapsed();
        let r = xjob::testing::store::logs::for_job(engine.db(), doomed)
            .await
            .unwrap()
            .remove(0);
        assert_eq!(
            r.handle_msg.as_deref(),
            Some("Job result lost, marked as failure")
        );
        assert!(
            lost_after <= Duration::from_secs(5),
            "lost within the dead timeout plus a check: {lost_after:?}"
        );
        assert_eq!(
            addresses().await,
            e1.address,
            "the dead executor left its group"
        );
        let e1_before = e1.received.lock().len();
        for _ in 0..2 {
            engine.trigger_job(round, None, None).await.unwrap();
        }
        eventually("ROUND on the survivor", 10, || done(round, 6)).await;
        assert_eq!(
            e1.received.lock().len(),
            e1_before + 2,
            "every new run goes to e1"
        );

        e1.alive.store(false, Ordering::SeqCst);
        e1.server.stop(false).await;
        node.shutdown().await;
    });
}

/// A stand-in executor answering `/log` as XXL-JOB's do: every line from `fromLineNum` to the
/// end of `file` in one body, `toLineNum` the file's line count. Answers its address.
fn whole_file_log_server(file: Arc<Vec<String>>) -> (String, actix_web::dev::ServerHandle) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let address = format!(
        "http://127.0.0.1:{}/",
        listener.local_addr().unwrap().port()
    );
    let server = HttpServer::new(move || {
        let file = file.clone();
        App::new().route(
            "/log",
            web::post().to(move |p: web::Json<Value>| {
                let file = file.clone();
                async move {
                    let from = p["fromLineNum"].as_u64().unwrap_or(1).max(1) as usize;
                    let mut content = String::new();
                    for l in file.iter().skip(from - 1) {
                        content.push_str(l);
                        content.push('\n');
                    }
                    HttpResponse::Ok().json(json!({
                        "code": 200,
                        "msg": null,
                        "content": {
                            "fromLineNum": from,
                            "toLineNum": file.len(),
                            "logContent": content,
                            "end": false,
                        },
                    }))
                }
            }),
        )
    })
    .workers(1)
    .listen(listener)
    .unwrap()
    .run();
    let handle = server.handle();
    actix_rt::spawn(server);
    (address, handle)
}

/// A foreign executor's `/log` answer far over the 5 MiB read per answer (its whole 12 MiB file,
/// quotes, tabs, Chinese and emoji included, one line longer than a page) is read page by page:
/// every line once, in order, the long line cut and marked, and the reader reaches the end.
#[test]
fn a_foreign_executors_log_of_any_size_is_read_in_pages() {
    use xjob::executor::{ExecutorClient, HttpExecutorClient};
    use xjob::model::wire::LogParam;
    init_tracing();
    actix_rt::System::new().block_on(async {
        let mut lines: Vec<String> = (0..150_000)
            .map(|i| format!("{i:06} \"quoted\"\tline 中文 😀 {}", "x".repeat(40)))
            .collect();
        lines[100_000] = "y".repeat(6 * 1024 * 1024);
        let file = Arc::new(lines);
        let (address, server) = whole_file_log_server(file.clone());
        let client = HttpExecutorClient::new(None, Duration::from_secs(20));
        let (mut from, mut read, mut pages) = (1usize, Vec::new(), 0);
        loop {
            let param = LogParam {
                log_date_tim: 0,
                log_id: 1,
                from_line_num: from as i32,
            };
            let r = client.log(&address, param).await;
            assert!(r.is_success(), "{:?}", r.msg);
            let page = r.content.unwrap();
            assert_eq!(page.from_line_num as usize, from);
            if page.from_line_num > page.to_line_num {
                break;
            }
            let got: Vec<&str> = page.log_content.lines().collect();
            assert_eq!(
                got.len(),
                (page.to_line_num - page.from_line_num + 1) as usize
            );
            read.extend(got.into_iter().map(str::to_string));
            from = page.to_line_num as usize + 1;
            pages += 1;
            assert!(pages < 100, "the reader makes progress");
        }
        assert!(pages >= 4, "12 MiB takes several 5 MiB pages, read {pages}");
        assert_eq!(read.len(), file.len());
        for (i, (got, want)) in read.iter().zip(file.iter()).enumerate() {
            if i == 100_000 {
                assert!(
                    got.starts_with("yyyy") && got.contains("line cut"),
                    "{}",
                    &got[got.len() - 60..]
                );
                assert!(got.len() < 5 * 1024 * 1024 + 100);
            } else {
                assert_eq!(got, want, "line {}", i + 1);
            }
        }
        server.stop(true).await;
    });
}
