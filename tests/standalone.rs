//! The standalone executor (`xjob executor`) over real HTTP: it registers with our admin, runs
//! what the admin routes to it, serves the rolling log, obeys kill, answers unknown paths as
//! XXL-JOB does, and leaves its group on stop. Its results survive an admin outage and an
//! executor restart: spooled, retried, delivered exactly once.
#![allow(clippy::unwrap_used)]

mod common;

use std::collections::HashMap;
use std::net::TcpListener;
use std::sync::Arc;
use std::time::Duration;

use actix_web::{App, HttpResponse, HttpServer, web};
use common::*;
use parking_lot::Mutex;
use serde_json::{Value, json};
use xjob::executor::StandaloneExecutor;
use xjob::executor::{ExecutorClient, HttpExecutorClient};
use xjob::model::wire::{LogParam, TriggerParam};
use xjob::prelude::*;

const TOKEN: &str = "standalone-token";

fn executor_config(dir: &std::path::Path, admin: &str) -> Config {
    let mut c = Config::default();
    c.executor.app_name = "remote-exec".into();
    c.executor.admin_addresses = vec![admin.to_string()];
    c.executor.log_path = dir.join("exec-logs").display().to_string();
    c.executor.callback_retry_secs = 1;
    c.executor.access_token = TOKEN.into();
    c.registry.beat_secs = 1;
    c
}

/// The standalone executor registers with our admin, runs, logs, kills and applies block strategies.
#[test]
fn a_standalone_executor_works_for_our_admin() {
    init_tracing();
    let dir = tempfile::tempdir().unwrap();
    actix_rt::System::new().block_on(async {
        let node = http_node(dir.path(), TOKEN, false, |_| {}).await;
        let admin = format!("{}xxl-job-admin", node.address);
        let engine = node.engine.clone();
        let client = HttpExecutorClient::new(Some(TOKEN.into()), Duration::from_secs(3));
        let group = engine.ensure_group("remote-exec", "remote").await.unwrap();

        let exec = StandaloneExecutor::start(
            &executor_config(dir.path(), &admin),
            xjob::demo::handlers().unwrap(),
            Some(TcpListener::bind("127.0.0.1:0").unwrap()),
        )
        .await
        .unwrap();
        let address = exec.address.clone();
        let db = engine.db().clone();
        let list = || {
            let db = db.clone();
            async move {
                xjob::testing::store::groups::get(&db, group)
                    .await
                    .unwrap()
                    .address_list
            }
        };
        eventually("registered", 15, || async {
            list().await.as_deref() == Some(address.as_str())
                && xjob::testing::routed_addresses(&engine, group) == vec![address.clone()]
        })
        .await;

        // a run, its result over /api/callback, and its rolling log over /log
        let job = engine
            .add_job(JobSpec::cron(
                group,
                "hello",
                "0 0 0 * * ?",
                "demoJobHandler",
            ))
            .await
            .unwrap();
        engine
            .trigger_job(job, Some("p-1".into()), None)
            .await
            .unwrap();
        let row = || {
            let db = db.clone();
            async move {
                xjob::testing::store::logs::for_job(&db, job)
                    .await
                    .unwrap()
                    .first()
                    .cloned()
            }
        };
        eventually("result reported", 15, || async {
            row().await.is_some_and(|r| r.handle_code != 0)
        })
        .await;
        let r = row().await.unwrap();
        assert_eq!((r.trigger_code, r.handle_code), (200, 200));
        let log = client
            .log(
                &address,
                LogParam {
                    log_date_tim: r.trigger_time.unwrap().and_utc().timestamp_millis(),
                    log_id: r.id,
                    from_line_num: 1,
                },
            )
            .await;
        let content = log.content.unwrap();
        assert!(
            content.log_content.contains("Hello World. param: p-1"),
            "{content:?}"
        );
        assert!(content.to_line_num >= 3 && !content.is_end);
        // the admin side reads it the console's way: from a line on, `end` once finished
        let first = engine.run_log(r.id, 1).await.unwrap();
        assert!(
            first.content.contains("Hello World. param: p-1") && !first.end,
            "{first:?}"
        );
        let rest = engine.run_log(r.id, first.to_line + 1).await.unwrap();
        assert!(rest.content.is_empty() && rest.end, "{rest:?}");
        let from_two = engine.run_log(r.id, 2).await.unwrap();
        assert_eq!(from_two.content.lines().count() as i32, first.to_line - 1);

        // kill a long run from the admin side
        let sleeper = engine
            .add_job(JobSpec::cron(
                group,
                "sleep",
                "0 0 0 * * ?",
                "sleepJobHandler",
            ))
            .await
            .unwrap();
        engine
            .trigger_job(sleeper, Some("60".into()), None)
            .await
            .unwrap();
        eventually("sleeper running", 15, || async {
            client.idle_beat(&address, sleeper).await.code == 500
        })
        .await;
        let running = xjob::testing::store::logs::for_job(engine.db(), sleeper)
            .await
            .unwrap()[0]
            .id;
        // the executor runs it before its `/run` answer is recorded as the run's outcome: a
        // kill before that is refused ("only a run whose trigger succeeded"), as in the console
        eventually("sleeper killed", 15, || async {
            match engine.kill_run(running).await {
                Ok(()) => true,
                Err(xjob::Error::Invalid { field: "logId", .. }) => false,
                Err(e) => panic!("kill failed: {e}"),
            }
        })
        .await;
        eventually("kill reported", 15, || {
            let db = db.clone();
            async move {
                xjob::testing::store::logs::for_job(&db, sleeper)
                    .await
                    .unwrap()
                    .first()
                    .is_some_and(|r| r.handle_code == 500)
            }
        })
        .await;
        let killed = xjob::testing::store::logs::for_job(engine.db(), sleeper)
            .await
            .unwrap()
            .remove(0);
        // the center's message, whether the executor's own report of the kill reached the
        // log row before or after it
        assert_eq!(
            killed.handle_msg.as_deref(),
            Some("Manual operation, kill job:")
        );

        // block strategies through the center: DISCARD_LATER refuses while busy, COVER_EARLY
        // replaces the running run (which reports as covered)
        for (strategy, expect) in [("DISCARD_LATER", "discard"), ("COVER_EARLY", "cover")] {
            let mut spec = JobSpec::cron(group, strategy, "0 0 0 * * ?", "sleepJobHandler");
            spec.executor_block_strategy = strategy.into();
            let job = engine.add_job(spec).await.unwrap();
            engine
                .trigger_job(job, Some("60".into()), None)
                .await
                .unwrap();
            eventually("first run busy", 15, || async {
                client.idle_beat(&address, job).await.code == 500
            })
            .await;
            engine
                .trigger_job(job, Some("0".into()), None)
                .await
                .unwrap();
            eventually("both settled", 15, || {
                let db = db.clone();
                async move {
                    let rows = xjob::testing::store::logs::for_job(&db, job).await.unwrap();
                    rows.len() == 2
                        && rows.iter().all(|r| r.trigger_code != 0)
                        && (expect == "discard" || rows.iter().all(|r| r.handle_code != 0))
                }
            })
            .await;
            let rows = xjob::testing::store::logs::for_job(engine.db(), job)
                .await
                .unwrap();
            if expect == "discard" {
                assert_eq!(rows[1].trigger_code, 500);
                assert!(
                    rows[1]
                        .trigger_msg
                        .as_deref()
                        .unwrap()
                        .contains("block strategy effect：Discard Later")
                );
                assert_eq!(client.kill(&address, job).await.code, 200);
            } else {
                assert_eq!(
                    rows[0].handle_msg.as_deref(),
                    Some("block strategy effect：Cover Early [job running, killed]")
                );
                assert_eq!((rows[1].trigger_code, rows[1].handle_code), (200, 200));
            }
        }

        // unknown path, wrong token
        let resp: Value = awc::Client::default()
            .post(format!("{address}nope"))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        assert_eq!(
            resp["msg"],
            "invalid request, uri-mapping(/nope) not found."
        );
        let wrong = HttpExecutorClient::new(Some("wrong".into()), Duration::from_secs(3));
        assert_eq!(
            wrong.beat(&address).await.msg.as_deref(),
            Some("The access token is wrong.")
        );

        // a graceful stop leaves the group at once
        exec.stop().await;
        eventually("deregistered", 15, || async { list().await.is_none() }).await;
        node.shutdown().await;
    });
}

type Seen = Arc<Mutex<HashMap<i64, usize>>>;

async fn fake_admin_callback(body: web::Json<Value>, seen: web::Data<Seen>) -> HttpResponse {
    for item in body.as_array().unwrap() {
        *seen
            .lock()
            .entry(item["logId"].as_i64().unwrap())
            .or_default() += 1;
    }
    HttpResponse::Ok().json(json!({"code": 200}))
}

async fn ok() -> HttpResponse {
    HttpResponse::Ok().json(json!({"code": 200}))
}

/// Results spooled during an admin outage survive an executor restart and arrive once.
#[test]
fn results_survive_an_admin_outage_and_an_executor_restart() {
    init_tracing();
    let dir = tempfile::tempdir().unwrap();
    actix_rt::System::new().block_on(async {
        // the admin is down: nothing listens at its address, connections are refused. It lives
        // on 127.0.0.2, which no other test binds, so its port cannot be taken meanwhile.
        let port = TcpListener::bind("127.0.0.2:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let admin = format!("http://127.0.0.2:{port}/xxl-job-admin");
        let cfg = executor_config(dir.path(), &admin);
        let spool = dir.path().join("exec-logs/callbacklog");
        // a batch being retried is renamed .sending for the attempt: still spooled
        let spooled = || {
            std::fs::read_dir(&spool)
                .map(|d| {
                    d.flatten()
                        .filter(|e| {
                            e.path()
                                .extension()
                                .is_some_and(|x| x == "json" || x == "sending")
                        })
                        .count()
                })
                .unwrap_or(0)
        };

        let e1 = StandaloneExecutor::start(
            &cfg,
            xjob::demo::handlers().unwrap(),
            Some(TcpListener::bind("127.0.0.1:0").unwrap()),
        )
        .await
        .unwrap();
        let client = HttpExecutorClient::new(Some(TOKEN.into()), Duration::from_secs(3));
        let run = TriggerParam {
            job_id: 5,
            executor_handler: Some("demoJobHandler".into()),
            executor_params: Some("x".into()),
            log_id: 4242,
            log_date_time: chrono::Utc::now().timestamp_millis(),
            glue_type: Some("BEAN".into()),
            broadcast_total: 1,
            ..Default::default()
        };
        assert_eq!(client.run(&e1.address, run).await.code, 200);
        eventually("result spooled", 15, || async { spooled() == 1 }).await;
        e1.stop().await;

        // the executor restarts while the admin is still down: the spool stays
        let e2 = StandaloneExecutor::start(
            &cfg,
            xjob::demo::handlers().unwrap(),
            Some(TcpListener::bind("127.0.0.1:0").unwrap()),
        )
        .await
        .unwrap();
        actix_rt::time::sleep(Duration::from_millis(1500)).await;
        assert_eq!(spooled(), 1);

        // the admin comes back: the spooled result is delivered, once
        let seen: Seen = Arc::default();
        let data = web::Data::new(seen.clone());
        let server = HttpServer::new(move || {
            App::new()
                .app_data(data.clone())
                .route(
                    "/xxl-job-admin/api/callback",
                    web::post().to(fake_admin_callback),
                )
                .route("/xxl-job-admin/api/registry", web::post().to(ok))
                .route("/xxl-job-admin/api/registryRemove", web::post().to(ok))
        })
        .workers(1)
        .bind(("127.0.0.2", port))
        .unwrap()
        .run();
        let handle = server.handle();
        actix_rt::spawn(server);
        eventually("delivered", 15, || async {
            seen.lock().get(&4242) == Some(&1)
        })
        .await;
        eventually("spool emptied", 15, || async { spooled() == 0 }).await;
        actix_rt::time::sleep(Duration::from_millis(2500)).await;
        assert_eq!(seen.lock().get(&4242), Some(&1), "delivered exactly once");
        e2.stop().await;
        handle.stop(false).await;
    });
}

/// While one callback request is in flight, the results that arrive wait and all go in the
/// next request (not one request per result); a flush answers once everything is delivered.
#[test]
fn results_queued_during_a_callback_go_in_one_batch() {
    init_tracing();
    let dir = tempfile::tempdir().unwrap();
    actix_rt::System::new().block_on(async {
        use actix::Actor;
        use xjob::model::wire::HandleCallbackParam;
        use xjob::testing::executor::Callback;
        use xjob::testing::executor::{CallbackActor, FlushCallbacks};
        let sizes: Arc<Mutex<Vec<usize>>> = Arc::default();
        let gate = Arc::new(tokio::sync::Semaphore::new(0));
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let admin = format!("http://{}/", listener.local_addr().unwrap());
        let (s, g) = (sizes.clone(), gate.clone());
        let server = HttpServer::new(move || {
            let (s, g) = (s.clone(), g.clone());
            App::new().route(
                "/api/callback",
                web::post().to(move |body: web::Json<Vec<Value>>| {
                    let (s, g) = (s.clone(), g.clone());
                    async move {
                        s.lock().push(body.len());
                        // the first request is held until the test lets it go
                        g.acquire().await.unwrap().forget();
                        HttpResponse::Ok().json(json!({"code": 200}))
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
        let sender = CallbackActor::new(
            vec![admin],
            HttpExecutorClient::new(None, Duration::from_secs(10)),
            dir.path().join("spool"),
            Duration::from_secs(3600),
            Clock::system(),
        )
        .start();
        let result = |log_id: i64| HandleCallbackParam {
            log_id,
            log_date_tim: 0,
            handle_code: 200,
            handle_msg: None,
        };
        sender.do_send(Callback(vec![result(1)]));
        eventually("first request arrives", 10, || async {
            sizes.lock().len() == 1
        })
        .await;
        for id in 2..=6 {
            sender.do_send(Callback(vec![result(id)]));
        }
        gate.add_permits(10);
        sender.send(FlushCallbacks).await.unwrap();
        assert_eq!(
            *sizes.lock(),
            vec![1, 5],
            "one request for what queued meanwhile"
        );
        handle.stop(false).await;
    });
}

/// A spooled batch an admin answers but refuses (here: any batch holding run 1) stays in the
/// spool for later, and the batches spooled after it are delivered all the same; when no admin
/// answers at all, the spool waits in order.
#[test]
fn a_refused_spooled_batch_does_not_hold_up_the_others() {
    init_tracing();
    let dir = tempfile::tempdir().unwrap();
    actix_rt::System::new().block_on(async {
        use actix::Actor;
        use xjob::testing::executor::{CallbackActor, RetrySpool};
        let spool = dir.path().join("spool");
        std::fs::create_dir_all(&spool).unwrap();
        let batch =
            |id: i64| json!([{"logId": id, "logDateTim": 0, "handleCode": 200}]).to_string();
        std::fs::write(spool.join("xjob-callback-1000-00000001.json"), batch(1)).unwrap();
        std::fs::write(spool.join("xjob-callback-2000-00000002.json"), batch(2)).unwrap();
        std::fs::write(spool.join("xjob-callback-3000-00000003.json"), batch(3)).unwrap();
        let seen: Arc<Mutex<Vec<i64>>> = Arc::default();
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let admin = format!("http://{}/", listener.local_addr().unwrap());
        let s = seen.clone();
        let server = HttpServer::new(move || {
            let s = s.clone();
            App::new().route(
                "/api/callback",
                web::post().to(move |body: web::Json<Vec<Value>>| {
                    let s = s.clone();
                    async move {
                        let ids: Vec<i64> =
                            body.iter().map(|i| i["logId"].as_i64().unwrap()).collect();
                        if ids.contains(&1) {
                            return HttpResponse::Ok()
                                .json(json!({"code": 500, "msg": "The access token is wrong."}));
                        }
                        s.lock().extend(ids);
                        HttpResponse::Ok().json(json!({"code": 200}))
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
        let sender = CallbackActor::new(
            vec![admin],
            HttpExecutorClient::new(None, Duration::from_secs(10)),
            spool.clone(),
            Duration::from_secs(3600),
            Clock::system(),
        )
        .start();
        let delivered = sender.send(RetrySpool).await.unwrap();
        // (the actor's own first retry at start may have delivered them already)
        eventually("the later batches delivered", 10, || async {
            seen.lock().len() == 2
        })
        .await;
        assert!(delivered <= 2);
        assert_eq!(*seen.lock(), vec![2, 3]);
        let left: Vec<String> = std::fs::read_dir(&spool)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        assert_eq!(
            left,
            vec!["xjob-callback-1000-00000001.json"],
            "the refused one waits"
        );
        // no admin answering: nothing is set aside, the spool keeps its order
        handle.stop(false).await;
        std::fs::write(spool.join("xjob-callback-4000-00000004.json"), batch(4)).unwrap();
        assert_eq!(sender.send(RetrySpool).await.unwrap(), 0);
        let mut left: Vec<String> = std::fs::read_dir(&spool)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        left.sort();
        assert_eq!(left.len(), 2, "{left:?}");
    });
}

/// An executor cleans run logs past the retention when it starts (not only a day later), so
/// an executor restarted daily still cleans; today's logs stay.
#[test]
fn an_executor_cleans_old_run_logs_when_it_starts() {
    let dir = tempfile::tempdir().unwrap();
    let logs = dir.path().join("exec-logs");
    let old = logs.join("2000-01-01");
    let today = logs.join(chrono::Utc::now().format("%Y-%m-%d").to_string());
    for d in [&old, &today] {
        std::fs::create_dir_all(d).unwrap();
        std::fs::write(d.join("1.log"), "x").unwrap();
    }
    actix_rt::System::new().block_on(async {
        // no admin answers: registration fails, cleaning does not depend on it
        let exec = StandaloneExecutor::start(
            &executor_config(dir.path(), "http://127.0.0.1:9/xxl-job-admin"),
            xjob::demo::handlers().unwrap(),
            Some(TcpListener::bind("127.0.0.1:0").unwrap()),
        )
        .await
        .unwrap();
        eventually("the old day removed", 5, || async { !old.exists() }).await;
        assert!(today.join("1.log").exists(), "today's logs stay");
        exec.stop().await;
    });
}

/// `stop` hands the killed runs' results to the admin before it leaves: a run still running
/// and one queued behind it each arrive in a callback ("[job running, killed]" and "[job not
/// executed, …]"), and `registryRemove` comes after them; no result is left spooled.
#[test]
fn stop_sends_the_killed_runs_results_before_deregistering() {
    init_tracing();
    let dir = tempfile::tempdir().unwrap();
    actix_rt::System::new().block_on(async {
        // what the stand-in admin received, in order
        let seen: Arc<Mutex<Vec<String>>> = Arc::default();
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let admin = format!("http://{}/", listener.local_addr().unwrap());
        let s = seen.clone();
        let server = HttpServer::new(move || {
            let s = s.clone();
            App::new().route(
                "/api/{what}",
                web::post().to(move |what: web::Path<String>, body: web::Json<Value>| {
                    let s = s.clone();
                    async move {
                        let what = what.into_inner();
                        if what == "callback" {
                            for r in body.as_array().cloned().unwrap_or_default() {
                                s.lock().push(format!(
                                    "callback {} {}",
                                    r["logId"],
                                    r["handleMsg"].as_str().unwrap_or_default()
                                ));
                            }
                        } else {
                            s.lock().push(what);
                        }
                        HttpResponse::Ok().json(json!({"code": 200}))
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

        let mut handlers = xjob::executor::HandlerRegistry::new();
        handlers
            .register_fn("hang", |_ctx| futures::future::pending())
            .unwrap();
        let mut cfg = executor_config(dir.path(), &admin);
        cfg.executor.callback_retry_secs = 3600;
        let exec =
            StandaloneExecutor::start(&cfg, handlers, Some(TcpListener::bind("127.0.0.1:0").unwrap()))
                .await
                .unwrap();
        let address = exec.address.clone();
        eventually("registered", 10, || async {
            seen.lock().iter().any(|e| e == "registry")
        })
        .await;
        let client = HttpExecutorClient::new(Some(TOKEN.into()), Duration::from_secs(3));
        for log_id in [41, 42] {
            let r = client
                .run(
                    &address,
                    TriggerParam {
                        job_id: 9,
                        executor_handler: Some("hang".into()),
                        executor_block_strategy: Some("SERIAL_EXECUTION".into()),
                        log_id,
                        ..Default::default()
                    },
                )
                .await;
            assert_eq!(r.code, 200, "{:?}", r.msg);
        }
        eventually("running", 10, || async {
            client.idle_beat(&address, 9).await.code != 200
        })
        .await;
        exec.stop().await;

        let seen = seen.lock().clone();
        let remove = seen
            .iter()
            .position(|e| e == "registryRemove")
            .expect("deregistered");
        let mut results: Vec<&String> = seen[..remove]
            .iter()
            .filter(|e| e.starts_with("callback"))
            .collect();
        results.sort();
        assert_eq!(
            results,
            [
                "callback 41 web container destroy and kill the job. [job running, killed]",
                "callback 42 web container destroy and kill the job. [job not executed, in the job queue, killed.]",
            ],
            "{seen:?}"
        );
        assert!(
            !seen[remove..].iter().any(|e| e.starts_with("callback")),
            "{seen:?}"
        );
        let spooled = std::fs::read_dir(dir.path().join("exec-logs/callbacklog"))
            .map(|d| d.count())
            .unwrap_or(0);
        assert_eq!(spooled, 0, "nothing left to retry");
        handle.stop(false).await;
    });
}

/// A group with its own access token: its executor registers, is called (`/run`, `/log`,
/// `/kill`, `/beat`) and calls back with that token; the global token no longer works for it
/// (registration, callbacks), while groups without one keep the global token. The node's own
/// executor endpoints follow its group's token too.
#[test]
fn a_group_with_its_own_token_takes_only_that_token() {
    use xjob::console::groups::GroupInput;
    const GROUP_TOKEN: &str = "group-token-0123456789";
    init_tracing();
    let dir = tempfile::tempdir().unwrap();
    actix_rt::System::new().block_on(async {
        let node = http_node(dir.path(), TOKEN, true, |_| {}).await;
        let admin = format!("{}xxl-job-admin", node.address);
        let engine = node.engine.clone();
        let group = engine
            .add_group(GroupInput {
                app_name: "remote-exec".into(),
                title: "tokened".into(),
                address_type: 0,
                access_token: Some(GROUP_TOKEN.into()),
                ..Default::default()
            })
            .await
            .unwrap();
        assert!(group.has_access_token);
        assert_eq!(group.access_token.as_deref(), Some(GROUP_TOKEN), "administrators see it");
        let post = |path: &str, token: &str, body: Value| {
            let url = format!("{admin}/api/{path}");
            let token = token.to_string();
            async move {
                awc::Client::default()
                    .post(url)
                    .insert_header(("XXL-JOB-ACCESS-TOKEN", token))
                    .send_json(&body)
                    .await
                    .unwrap()
                    .json::<Value>()
                    .await
                    .unwrap()
            }
        };
        let reg = |app: &str| json!({"registryGroup":"EXECUTOR","registryKey":app,"registryValue":"http://10.1.1.1:9999/"});
        // the global token no longer registers this group's executors; others still do
        assert_eq!(post("registry", TOKEN, reg("remote-exec")).await["msg"], "The access token is wrong.");
        assert_eq!(post("registry", TOKEN, reg("other-app")).await["code"], 200);
        assert_eq!(post("registry", GROUP_TOKEN, reg("other-app")).await["code"], 500);
        assert_eq!(post("registryRemove", GROUP_TOKEN, reg("remote-exec")).await["code"], 200);

        // an executor holding the group's token registers, runs, logs and is killed
        let mut cfg = executor_config(dir.path(), &admin);
        cfg.executor.access_token = GROUP_TOKEN.into();
        let exec = StandaloneExecutor::start(
            &cfg,
            xjob::demo::handlers().unwrap(),
            Some(TcpListener::bind("127.0.0.1:0").unwrap()),
        )
        .await
        .unwrap();
        let address = exec.address.clone();
        // the list dispatch routes by (it follows the stored list a moment later)
        eventually("registered", 15, || async {
            xjob::testing::routed_addresses(&engine, group.id) == vec![address.clone()]
        })
        .await;
        let job = engine
            .add_job(JobSpec::cron(group.id, "hello", "0 0 0 * * ?", "demoJobHandler"))
            .await
            .unwrap();
        engine.trigger_job(job, Some("t-1".into()), None).await.unwrap();
        let db = engine.db().clone();
        let row = || {
            let db = db.clone();
            async move {
                xjob::testing::store::logs::for_job(&db, job)
                    .await
                    .unwrap()
                    .first()
                    .cloned()
            }
        };
        eventually("result reported", 15, || async {
            row().await.is_some_and(|r| r.handle_code != 0)
        })
        .await;
        let r = row().await.unwrap();
        assert_eq!((r.trigger_code, r.handle_code), (200, 200), "{:?}", r.trigger_msg);
        let log = engine.run_log(r.id, 1).await.unwrap();
        assert!(log.content.contains("param: t-1"), "{log:?}");
        // a callback for this group's run with the global token is answered but its result
        // skipped (counted), with its own token taken
        let cb = json!([{"logId": r.id, "logDateTim": 0, "handleCode": 500, "handleMsg": "late"}]);
        assert_eq!(post("callback", TOKEN, cb.clone()).await["code"], 200);
        let skipped = "xjob_callback_results_skipped_total{reason=\"token\"} 1";
        assert!(engine.metrics().render(Default::default()).contains(skipped));
        assert_eq!(post("callback", GROUP_TOKEN, cb).await["code"], 200);
        assert!(engine.metrics().render(Default::default()).contains(skipped));
        // a token no group has is refused outright
        assert_eq!(post("callback", "no-such-token", json!([])).await["msg"], "The access token is wrong.");

        // the node's own executor follows its group's token once it has one
        let demo = engine.ensure_group(xjob::demo::DEMO_APP, "demo").await.unwrap();
        let beat = |token: &str| {
            let url = format!("{}beat", node.address);
            let token = token.to_string();
            async move {
                let body = awc::Client::default()
                    .post(url)
                    .insert_header(("XXL-JOB-ACCESS-TOKEN", token))
                    .send_body("")
                    .await
                    .unwrap()
                    .body()
                    .await
                    .unwrap();
                // the executor protocol answers JSON as text/html, as XXL-JOB does
                serde_json::from_slice::<Value>(&body).unwrap()["code"].clone()
            }
        };
        assert_eq!(beat(TOKEN).await, 200);
        let current = engine.group(demo).await.unwrap();
        engine
            .update_group(
                demo,
                GroupInput {
                    app_name: current.app_name,
                    title: current.title,
                    address_type: current.address_type,
                    address_list: current.address_list,
                    access_token: Some("demo-group-token-abcdef".into()),
                },
            )
            .await
            .unwrap();
        assert_eq!(beat(TOKEN).await, 500);
        assert_eq!(beat("demo-group-token-abcdef").await, 200);
        exec.stop().await;
        node.shutdown().await;
    });
}

/// With `executor.run_logs` off a run writes no log file (a job firing every second would
/// otherwise leave 86,400 files a day) and `/log` says run logs are off; with it on (the
/// default) the same run leaves its file.
#[test]
fn run_logs_can_be_turned_off() {
    init_tracing();
    let dir = tempfile::tempdir().unwrap();
    actix_rt::System::new().block_on(async {
        // no admin listens (127.0.0.2, as above): a finished run's result is spooled
        let port = TcpListener::bind("127.0.0.2:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let admin = format!("http://127.0.0.2:{port}/xxl-job-admin");
        let client = HttpExecutorClient::new(Some(TOKEN.into()), Duration::from_secs(3));
        for (run_logs, log_id) in [(false, 5151_i64), (true, 5152)] {
            let mut cfg = executor_config(dir.path(), &admin);
            cfg.executor.run_logs = run_logs;
            let exec = StandaloneExecutor::start(
                &cfg,
                xjob::demo::handlers().unwrap(),
                Some(TcpListener::bind("127.0.0.1:0").unwrap()),
            )
            .await
            .unwrap();
            let now = chrono::Utc::now().timestamp_millis();
            let run = TriggerParam {
                job_id: 6,
                executor_handler: Some("demoJobHandler".into()),
                executor_params: Some("x".into()),
                log_id,
                log_date_time: now,
                glue_type: Some("BEAN".into()),
                broadcast_total: 1,
                ..Default::default()
            };
            assert_eq!(client.run(&exec.address, run).await.code, 200);
            let spool = dir.path().join("exec-logs/callbacklog");
            let spooled = || {
                std::fs::read_dir(&spool)
                    .map(|d| {
                        d.flatten()
                            .filter(|e| {
                                std::fs::read_to_string(e.path())
                                    .is_ok_and(|t| t.contains(&log_id.to_string()))
                            })
                            .count()
                    })
                    .unwrap_or(0)
            };
            eventually("result spooled", 15, || async { spooled() > 0 }).await;
            let files = walk(&dir.path().join("exec-logs"), &format!("{log_id}.log"));
            let read = client
                .log(
                    &exec.address,
                    LogParam {
                        log_date_tim: now,
                        log_id,
                        from_line_num: 1,
                    },
                )
                .await;
            let text = read.content.map(|c| c.log_content).unwrap_or_default();
            if run_logs {
                assert_eq!(files, 1, "the run's log file");
                assert!(text.contains("xxl-job job execute start"), "{text}");
            } else {
                assert_eq!(files, 0, "no log file");
                assert!(text.contains("run logs are off"), "{text}");
            }
            exec.stop().await;
        }
    });
}

/// Files named `name` under `root`.
fn walk(root: &std::path::Path, name: &str) -> usize {
    let Ok(dir) = std::fs::read_dir(root) else {
        return 0;
    };
    dir.flatten()
        .map(|e| {
            let p = e.path();
            if p.is_dir() {
                walk(&p, name)
            } else {
                usize::from(p.file_name().is_some_and(|n| n == name))
            }
        })
        .sum()
}

/// xjob's `/runBatch`: the standalone executor takes many triggers in one request and answers
/// each in order (an unknown handler's trigger fails alone); a wrong token, a body that is not
/// an array and a batch over the limit are refused as a whole. The HTTP client sends an
/// executor's share of a batch this way and answers each call by its index.
#[test]
fn a_batch_of_triggers_runs_in_one_request_and_is_answered_in_order() {
    use futures::StreamExt;
    init_tracing();
    let dir = tempfile::tempdir().unwrap();
    actix_rt::System::new().block_on(async {
        let dead_admin = {
            let l = TcpListener::bind("127.0.0.1:0").unwrap();
            format!("http://{}/", l.local_addr().unwrap())
        };
        let exec = StandaloneExecutor::start(
            &executor_config(dir.path(), &dead_admin),
            xjob::demo::handlers().unwrap(),
            Some(TcpListener::bind("127.0.0.1:0").unwrap()),
        )
        .await
        .unwrap();
        let address = exec.address.clone();
        let trigger = |job_id: i32, log_id: i64, handler: &str| TriggerParam {
            job_id,
            executor_handler: Some(handler.into()),
            executor_block_strategy: Some("SERIAL_EXECUTION".into()),
            glue_type: Some("BEAN".into()),
            log_id,
            log_date_time: 1_800_000_000_000,
            ..Default::default()
        };
        let post = |token: &str, body: Value| {
            let req = awc::Client::default()
                .post(format!("{address}runBatch"))
                .insert_header(("XXL-JOB-ACCESS-TOKEN", token.to_string()));
            async move {
                // XXL-JOB's executors answer JSON as `text/html`: read the bytes
                let bytes = req.send_json(&body).await.unwrap().body().await.unwrap();
                serde_json::from_slice::<Value>(&bytes).unwrap()
            }
        };
        let batch = json!([
            trigger(1, 11, "demoJobHandler"),
            trigger(2, 12, "noSuchHandler"),
            trigger(3, 13, "demoJobHandler"),
        ]);
        let r = post(TOKEN, batch.clone()).await;
        assert_eq!(r["code"], 200, "{r}");
        let answers = r["content"].as_array().unwrap();
        let codes: Vec<i64> = answers
            .iter()
            .map(|a| a["code"].as_i64().unwrap())
            .collect();
        assert_eq!(codes, vec![200, 500, 200], "{r}");
        assert_eq!(
            answers[1]["msg"], "job handler [noSuchHandler] not found.",
            "the unknown handler's trigger fails alone"
        );

        let wrong = post("wrong", batch).await;
        assert_eq!(wrong["code"], 500);
        assert!(wrong.get("content").is_none(), "{wrong}");
        let not_array = post(TOKEN, json!({"logId": 1})).await;
        assert_eq!(not_array["code"], 500);
        assert!(
            not_array["msg"]
                .as_str()
                .unwrap()
                .starts_with("request error:"),
            "{not_array}"
        );
        let too_many: Vec<TriggerParam> = (0..4_097)
            .map(|i| trigger(9, 100 + i, "demoJobHandler"))
            .collect();
        let over = post(TOKEN, json!(too_many)).await;
        assert_eq!(over["code"], 500);
        assert!(
            over["msg"].as_str().unwrap().contains("at most 4096"),
            "{over}"
        );

        // the client's batch path: every call answered under its own index
        let client = HttpExecutorClient::new(Some(TOKEN.into()), Duration::from_secs(3));
        let calls: Vec<(String, TriggerParam)> = (0..20)
            .map(|i| {
                let handler = if i == 7 {
                    "noSuchHandler"
                } else {
                    "demoJobHandler"
                };
                (address.clone(), trigger(20 + i, 200 + i as i64, handler))
            })
            .collect();
        let mut got: Vec<(usize, i32)> = client
            .run_each(calls)
            .concat()
            .await
            .into_iter()
            .map(|(i, r)| (i, r.code))
            .collect();
        got.sort_unstable();
        let want: Vec<(usize, i32)> = (0..20)
            .map(|i| (i, if i == 7 { 500 } else { 200 }))
            .collect();
        assert_eq!(got, want);
        exec.stop().await;
    });
}

/// In a cluster every node takes results, but the node that dispatched a run holds its outcome:
/// an xjob executor learns each admin's node id from its registration answer and sends a run's
/// result to the node named in the run's call (`xjobNode`), whatever its admins' order; a run
/// without one goes to the first admin, as before.
#[test]
fn a_result_goes_back_to_the_node_that_dispatched_its_run() {
    init_tracing();
    let dir = tempfile::tempdir().unwrap();
    actix_rt::System::new().block_on(async {
        // two admins: each answers registrations with its node id and notes the results it takes
        type Seen = Arc<Mutex<(usize, Vec<i64>)>>;
        let admin = |node: &'static str| {
            let seen: Seen = Arc::default();
            let listener = TcpListener::bind("127.0.0.1:0").unwrap();
            let url = format!("http://{}/", listener.local_addr().unwrap());
            let s = seen.clone();
            let server = HttpServer::new(move || {
                let (s1, s2) = (s.clone(), s.clone());
                App::new()
                    .route(
                        "/api/registry",
                        web::post().to(move || {
                            let s = s1.clone();
                            async move {
                                s.lock().0 += 1;
                                HttpResponse::Ok().json(json!({"code": 200, "content": node}))
                            }
                        }),
                    )
                    .route(
                        "/api/callback",
                        web::post().to(move |body: web::Json<Vec<Value>>| {
                            let s = s2.clone();
                            async move {
                                s.lock()
                                    .1
                                    .extend(body.iter().map(|i| i["logId"].as_i64().unwrap()));
                                HttpResponse::Ok().json(json!({"code": 200}))
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
            (url, seen, handle)
        };
        let (a, seen_a, stop_a) = admin("node-a");
        let (b, seen_b, stop_b) = admin("node-b");
        let mut cfg = executor_config(dir.path(), &a);
        cfg.executor.admin_addresses = vec![a.clone(), b.clone()];
        let exec = StandaloneExecutor::start(
            &cfg,
            xjob::demo::handlers().unwrap(),
            Some(TcpListener::bind("127.0.0.1:0").unwrap()),
        )
        .await
        .unwrap();
        // two rounds of registration: the first round's answers were read
        eventually("registered twice with both", 15, || async {
            seen_a.lock().0 >= 2 && seen_b.lock().0 >= 2
        })
        .await;
        let client = HttpExecutorClient::new(Some(TOKEN.into()), Duration::from_secs(5));
        let trigger = |job_id: i32, log_id: i64, node: Option<&str>| TriggerParam {
            job_id,
            executor_handler: Some("demoJobHandler".into()),
            executor_block_strategy: Some("SERIAL_EXECUTION".into()),
            glue_type: Some("BEAN".into()),
            log_id,
            log_date_time: 1_800_000_000_000,
            xjob_node: node.map(Arc::from),
            ..Default::default()
        };
        for (job, log, node) in [
            (1, 11, Some("node-b")),
            (2, 12, None),
            (3, 13, Some("node-a")),
        ] {
            let r = client.run(&exec.address, trigger(job, log, node)).await;
            assert_eq!(r.code, 200, "{r:?}");
        }
        eventually("three results delivered", 15, || async {
            seen_a.lock().1.len() + seen_b.lock().1.len() == 3
        })
        .await;
        let (mut at_a, at_b) = (seen_a.lock().1.clone(), seen_b.lock().1.clone());
        at_a.sort();
        assert_eq!(at_b, vec![11], "the run node-b dispatched");
        assert_eq!(at_a, vec![12, 13], "no node named, and node-a's own");
        exec.stop().await;
        stop_a.stop(false).await;
        stop_b.stop(false).await;
    });
}

/// A node of a cluster (here one node on PostgreSQL, with leases) answers an xjob executor's
/// registration with its node id, and every other executor's as XXL-JOB does; a node on a
/// SQLite file names none.
#[test]
fn a_cluster_node_tells_xjob_executors_its_id_when_they_register() {
    init_tracing();
    let Some(base) = database_url("XJOB_TEST_PG_URL") else {
        return;
    };
    let url = fresh_database(&base);
    let dir = tempfile::tempdir().unwrap();
    actix_rt::System::new().block_on(async {
        let register = |address: String, xjob: bool| async move {
            let mut body = json!({
                "registryGroup": "EXECUTOR",
                "registryKey": "remote-exec",
                "registryValue": "http://127.0.0.1:9/",
            });
            if xjob {
                body["xjobExecutor"] = json!("test");
            }
            let bytes = awc::Client::default()
                .post(format!("{address}xxl-job-admin/api/registry"))
                .insert_header(("XXL-JOB-ACCESS-TOKEN", TOKEN))
                .send_json(&body)
                .await
                .unwrap()
                .body()
                .await
                .unwrap();
            serde_json::from_slice::<Value>(&bytes).unwrap()
        };
        let node = http_node(dir.path(), TOKEN, false, |c| c.database.url = url.clone()).await;
        let id = node
            .engine
            .cluster_node()
            .expect("a node on PostgreSQL is a cluster's");
        let r = register(node.address.clone(), true).await;
        assert_eq!(
            (r["code"].as_i64(), r["content"].as_str()),
            (Some(200), Some(id)),
            "{r}"
        );
        let r = register(node.address.clone(), false).await;
        assert_eq!(r["code"], 200, "{r}");
        assert!(r.get("content").is_none(), "{r}");
        node.server.stop(false).await;
        node.engine.stop(Duration::from_secs(5)).await.unwrap();
        node.engine.db().clone().close().await.unwrap();

        let single = http_node(&dir.path().join("one"), TOKEN, false, |_| {}).await;
        assert_eq!(single.engine.cluster_node(), None);
        let r = register(single.address.clone(), true).await;
        assert_eq!(r["code"], 200, "{r}");
        assert!(r.get("content").is_none(), "{r}");
        single.server.stop(false).await;
    });
}
