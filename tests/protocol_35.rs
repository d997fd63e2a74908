//! XXL-JOB's next executor protocol (upstream master, 3.5.0-SNAPSHOT; protocol.md §10), both ways,
//! against stand-ins written here from the spec's facts alone: executors serve `/trigger` (not
//! `/run`), every call in both directions carries `XXL-JOB-ACCESS-TOKEN` and `XXL-JOB-APPNAME`
//! (both required, checked against the group's own token), callbacks are
//! `{"callbackList":[{logId, logDateTime, handleCode, handleMsg}]}`, and a log request names
//! `logDateTime`. Real time, a few seconds.
#![allow(clippy::unwrap_used)]

mod common;

use std::net::TcpListener;
use std::sync::Arc;

use actix_web::{App, HttpRequest, HttpResponse, HttpServer, web};
use common::*;
use parking_lot::Mutex;
use serde_json::{Value, json};
use xjob::console::{Console, Principal};
use xjob::executor::StandaloneExecutor;
use xjob::prelude::*;

const APP: &str = "next-exec";
const GROUP_TOKEN: &str = "next-group-token-0123456789";
const GLOBAL_TOKEN: &str = "next-global-token";
const BAD: &str = "invalid request, accessToken or appname is invalid.";

/// Serves the `App` that `$app` builds (per worker) on a fresh loopback port with one worker:
/// answers its base URL (with the trailing slash) and the server's handle.
macro_rules! serve {
    ($app:expr) => {{
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let address = format!("http://{}/", l.local_addr().unwrap());
        let server = HttpServer::new($app).workers(1).listen(l).unwrap().run();
        let handle = server.handle();
        actix_rt::spawn(server);
        (address, handle)
    }};
}

/// What a stand-in saw: (path, token header, app header, body).
type Seen = Arc<Mutex<Vec<(String, String, String, Value)>>>;

fn header(req: &HttpRequest, name: &str) -> String {
    req.headers()
        .get(name)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_string()
}

/// Both headers, as a 3.5 peer requires them.
fn authorised(req: &HttpRequest, token: &str, app: &str) -> bool {
    header(req, "XXL-JOB-ACCESS-TOKEN") == token && header(req, "XXL-JOB-APPNAME") == app
}

fn answer(code: i32, msg: &str) -> HttpResponse {
    HttpResponse::Ok().json(json!({ "code": code, "msg": msg }))
}

async fn post(url: &str, token: &str, app: &str, body: Value) -> Value {
    let mut req = awc::Client::default()
        .post(url)
        .insert_header(("XXL-JOB-ACCESS-TOKEN", token));
    // a 2.x admin sends no app name at all
    if !app.is_empty() {
        req = req.insert_header(("XXL-JOB-APPNAME", app));
    }
    let mut r = req.send_json(&body).await.unwrap();
    // XXL-JOB's executors answer JSON as `text/html`: read the bytes
    serde_json::from_slice(&r.body().await.unwrap()).unwrap_or(Value::Null)
}

/// The stand-in executor's state.
#[derive(Clone)]
struct Executor {
    admin: String,
    seen: Seen,
}

/// A 3.5 executor: `/trigger`, `/beat`, `/idleBeat`, `/kill`, `/log` with both headers
/// required; any other path is not mapped (`/run` included). A run calls back at once in 3.5's
/// object shape.
async fn executor_call(
    req: HttpRequest,
    body: web::Bytes,
    me: web::Data<Executor>,
) -> HttpResponse {
    let path = req.path().to_string();
    let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    me.seen.lock().push((
        path.clone(),
        header(&req, "XXL-JOB-ACCESS-TOKEN"),
        header(&req, "XXL-JOB-APPNAME"),
        body.clone(),
    ));
    if !["/trigger", "/beat", "/idleBeat", "/kill", "/log"].contains(&path.as_str()) {
        return answer(
            500,
            &format!("invalid request, uri-mapping({path}) not found."),
        );
    }
    if !authorised(&req, GROUP_TOKEN, APP) {
        return answer(500, BAD);
    }
    match path.as_str() {
        "/trigger" => {
            let (admin, log_id, at) = (
                me.admin.clone(),
                body["logId"].clone(),
                body["logDateTime"].clone(),
            );
            actix_rt::spawn(async move {
                let cb = json!({ "callbackList": [
                    { "logId": log_id, "logDateTime": at, "handleCode": 200, "handleMsg": "done by 3.5" }
                ]});
                post(&format!("{admin}api/callback"), GROUP_TOKEN, APP, cb).await;
            });
            answer(200, "Success")
        }
        "/log" => {
            let at = body["logDateTime"].as_i64().unwrap_or_default();
            HttpResponse::Ok().json(json!({ "code": 200, "msg": "Success", "data": {
                "fromLineNum": 1, "toLineNum": 1,
                "logContent": format!("log of {} at {at}\n", body["logId"]), "isEnd": true
            }}))
        }
        _ => answer(200, "Success"),
    }
}

/// A stand-in 3.5 executor registers with our admin, takes `/trigger` (our admin knows it from
/// the registration, which names the app in `XXL-JOB-APPNAME`: no call on `/run`), calls back in 3.5's shape, and serves a log read that
/// names `logDateTime`; every call our admin makes names the group's app and its own token.
#[test]
fn a_3_5_executor_works_with_our_admin() {
    init_tracing();
    let dir = tempfile::tempdir().unwrap();
    actix_rt::System::new().block_on(async {
        let node = http_node(dir.path(), GLOBAL_TOKEN, false, |_| {}).await;
        let admin = node.address.clone();
        let engine = node.engine.clone();
        let group = engine.ensure_group(APP, "next").await.unwrap();
        // 3.5 has per-group tokens only: the group gets its own
        let console = Console::new(engine.clone());
        let root = Principal {
            id: 0,
            username: "root".into(),
            role: 1,
            permission: vec![],
            client: String::new(),
            key: None,
        };
        let g = console.get_group(&root, group).await.unwrap();
        console
            .update_group(
                &root,
                group,
                xjob::console::groups::GroupInput {
                    app_name: g.app_name,
                    title: g.title,
                    address_type: 0,
                    address_list: None,
                    access_token: Some(GROUP_TOKEN.into()),
                },
            )
            .await
            .unwrap();

        let seen: Seen = Arc::default();
        let state = web::Data::new(Executor {
            admin: admin.clone(),
            seen: seen.clone(),
        });
        let (address, handle) = serve!(move || {
            App::new()
                .app_data(state.clone())
                .default_service(web::to(executor_call))
        });
        let reg =
            json!({ "registryGroup": "EXECUTOR", "registryKey": APP, "registryValue": address });
        let r = post(&format!("{admin}api/registry"), GROUP_TOKEN, APP, reg).await;
        assert_eq!(r["code"], 200, "{r}");

        let job = engine
            .add_job(JobSpec::cron(group, "next", "0 0 0 * * ?", "nextHandler"))
            .await
            .unwrap();
        let db = engine.db().clone();
        let done = |n: usize| {
            let db = db.clone();
            async move {
                let rows = xjob::testing::store::logs::for_job(&db, job).await.unwrap();
                rows.len() == n && rows.iter().all(|r| r.handle_code != 0)
            }
        };
        for n in 1..=2 {
            engine
                .trigger_job(job, Some(format!("p{n}")), None)
                .await
                .unwrap();
            eventually("the run called back", 10, || done(n)).await;
        }
        let rows = xjob::testing::store::logs::for_job(engine.db(), job)
            .await
            .unwrap();
        for r in &rows {
            assert_eq!((r.trigger_code, r.handle_code), (200, 200), "{r:?}");
            assert_eq!(r.handle_msg.as_deref(), Some("done by 3.5"));
        }
        let paths: Vec<String> = seen.lock().iter().map(|s| s.0.clone()).collect();
        assert_eq!(
            paths,
            ["/trigger", "/trigger"],
            "its registration (with XXL-JOB-APPNAME) said it speaks 3.5: /trigger from the first call"
        );
        for (path, token, app, _) in seen.lock().iter() {
            assert_eq!((token.as_str(), app.as_str()), (GROUP_TOKEN, APP), "{path}");
        }

        let log = engine.run_log(rows[0].id, 1).await.unwrap();
        assert!(
            log.content.starts_with(&format!("log of {}", rows[0].id)),
            "{}",
            log.content
        );
        let asked = seen.lock().last().cloned().unwrap();
        assert_eq!(asked.0, "/log");
        let at = rows[0].trigger_time.unwrap().and_utc().timestamp_millis();
        assert_eq!(asked.3["logDateTime"], at, "3.5's key: {}", asked.3);

        // a wrong token never gets through the admin, whatever the app name says
        let r = post(
            &format!("{admin}api/callback"),
            "wrong-token",
            APP,
            json!({ "callbackList": [{ "logId": rows[0].id, "handleCode": 500 }] }),
        )
        .await;
        assert_ne!(r["code"], 200, "{r}");
        handle.stop(false).await;
        node.shutdown().await;
    });
}

/// The stand-in admin's state.
#[derive(Clone)]
struct Admin {
    seen: Seen,
}

/// A 3.5 admin: `/api/registry`, `/api/registryRemove` and `/api/callback` with both headers
/// required; a callback must be the `{"callbackList": [...]}` object (an array is a bad
/// request, as Spring answers a body it cannot bind).
async fn admin_call(req: HttpRequest, body: web::Bytes, me: web::Data<Admin>) -> HttpResponse {
    let path = req.path().to_string();
    let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    me.seen.lock().push((
        path.clone(),
        header(&req, "XXL-JOB-ACCESS-TOKEN"),
        header(&req, "XXL-JOB-APPNAME"),
        body.clone(),
    ));
    if !authorised(&req, GROUP_TOKEN, APP) {
        return answer(500, BAD);
    }
    match path.as_str() {
        "/api/registry" | "/api/registryRemove" => answer(200, "Success"),
        "/api/callback" if body["callbackList"].is_array() => answer(200, "Success"),
        "/api/callback" => HttpResponse::BadRequest().finish(),
        other => answer(
            500,
            &format!("invalid request, uri-mapping({other}) not found."),
        ),
    }
}

/// Our executor against a stand-in 3.5 admin: it registers naming its app, serves `/trigger`
/// (and still `/run`), refuses a call naming another app, calls back in the object shape the
/// admin takes (learnt after one array it refuses), and reads a log request that names
/// `logDateTime`.
#[test]
fn our_executor_works_with_a_3_5_admin() {
    init_tracing();
    let dir = tempfile::tempdir().unwrap();
    actix_rt::System::new().block_on(async {
        let seen: Seen = Arc::default();
        let state = web::Data::new(Admin { seen: seen.clone() });
        let (admin, handle) = serve!(move || {
            App::new()
                .app_data(state.clone())
                .default_service(web::to(admin_call))
        });

        let mut c = Config::default();
        c.executor.app_name = APP.into();
        c.executor.admin_addresses = vec![admin.clone()];
        c.executor.log_path = dir.path().join("exec-logs").display().to_string();
        c.executor.callback_retry_secs = 1;
        c.executor.access_token = GROUP_TOKEN.into();
        c.registry.beat_secs = 1;
        let exec = StandaloneExecutor::start(
            &c,
            xjob::demo::handlers().unwrap(),
            Some(TcpListener::bind("127.0.0.1:0").unwrap()),
        )
        .await
        .unwrap();
        let address = exec.address.clone();
        eventually("registered", 10, || async {
            seen.lock().iter().any(|s| s.0 == "/api/registry")
        })
        .await;
        for (path, token, app, _) in seen.lock().iter() {
            assert_eq!((token.as_str(), app.as_str()), (GROUP_TOKEN, APP), "{path}");
        }

        let trigger = |log_id: i64, path: &'static str, app: &'static str| {
            let address = address.clone();
            async move {
                let param = json!({
                    "jobId": 7, "executorHandler": "demoJobHandler", "executorParams": "from 3.5",
                    "executorBlockStrategy": "SERIAL_EXECUTION", "executorTimeout": 0,
                    "logId": log_id, "logDateTime": 1_795_269_600_000_i64, "glueType": "BEAN",
                    "glueSource": "", "glueUpdatetime": 0, "broadcastIndex": 0, "broadcastTotal": 1
                });
                post(&format!("{address}{path}"), GROUP_TOKEN, app, param).await
            }
        };
        let r = trigger(101, "trigger", "another-app").await;
        assert_eq!(
            (r["code"].as_i64(), r["msg"].as_str()),
            (Some(500), Some(BAD)),
            "{r}"
        );
        let r = trigger(101, "trigger", APP).await;
        assert_eq!(r["code"], 200, "{r}");
        let called_back = |log_id: i64| {
            let seen = seen.clone();
            async move {
                seen.lock().iter().any(|s| {
                    s.0 == "/api/callback"
                        && s.3["callbackList"].as_array().is_some_and(|l| {
                            l.iter()
                                .any(|i| i["logId"] == log_id && i["handleCode"] == 200)
                        })
                })
            }
        };
        eventually("the result called back", 10, || called_back(101)).await;
        let cb = seen
            .lock()
            .iter()
            .rev()
            .find(|s| s.0 == "/api/callback")
            .cloned()
            .unwrap();
        let item = &cb.3["callbackList"][0];
        assert_eq!(
            item["logDateTime"], 1_795_269_600_000_i64,
            "3.5's key: {item}"
        );
        let arrays = || {
            seen.lock()
                .iter()
                .filter(|s| s.0 == "/api/callback" && s.3.is_array())
                .count()
        };
        assert_eq!(arrays(), 1, "one array refused, then the object");

        // a 2.x admin's `/run` (no app name) still works; the callback goes straight in the
        // shape this admin takes
        let r = trigger(102, "run", "").await;
        assert_eq!(r["code"], 200, "{r}");
        eventually("the second result called back", 10, || called_back(102)).await;
        assert_eq!(arrays(), 1, "the admin's shape was remembered");

        let mut r = awc::Client::default()
            .post(format!("{address}log"))
            .insert_header(("XXL-JOB-ACCESS-TOKEN", GROUP_TOKEN))
            .insert_header(("XXL-JOB-APPNAME", APP))
            .send_json(
                &json!({ "logDateTime": 1_795_269_600_000_i64, "logId": 101, "fromLineNum": 1 }),
            )
            .await
            .unwrap();
        let log: Value = serde_json::from_slice(&r.body().await.unwrap()).unwrap();
        assert_eq!(log["code"], 200, "{log}");
        assert!(
            log["data"]["logContent"]
                .as_str()
                .unwrap()
                .contains("from 3.5"),
            "the run's log, found by logDateTime: {log}"
        );
        exec.stop().await;
        handle.stop(false).await;
    });
}

/// A stand-in executor at `127.0.0.1:0` answering `/run` (2.x) or, with `next`, `/trigger` only
/// (3.5), recording each call's path and `logId`; answers the address and the server's handle.
/// A path it does not serve gets XXL-JOB's unknown-path answer.
fn stand_in(
    next: bool,
    seen: Arc<Mutex<Vec<(String, i64)>>>,
) -> (String, actix_web::dev::ServerHandle) {
    stand_in_with(next, seen, |path| {
        answer(
            500,
            &format!("invalid request, uri-mapping({path}) not found."),
        )
    })
}

/// [`stand_in`], answering a path it does not serve with `unknown(path)`.
fn stand_in_with(
    next: bool,
    seen: Arc<Mutex<Vec<(String, i64)>>>,
    unknown: fn(&str) -> HttpResponse,
) -> (String, actix_web::dev::ServerHandle) {
    serve!(move || {
        let seen = seen.clone();
        App::new().default_service(web::to(move |req: HttpRequest, body: web::Bytes| {
            let seen = seen.clone();
            async move {
                let path = req.path().to_string();
                let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
                seen.lock()
                    .push((path.clone(), body["logId"].as_i64().unwrap_or(-1)));
                let served = if next { "/trigger" } else { "/run" };
                if path != served {
                    return unknown(&path);
                }
                answer(200, &format!("ran {}", body["logId"]))
            }
        }))
    })
}

/// One batch of `/run` calls (a dispatch pass's `run_each`) to a 2.x executor, a 3.5 executor
/// and an address nobody serves, none of them registered: every call is answered once under its
/// own index — the 2.x ones on `/run`, the 3.5 ones on `/trigger` after one refused `/run` (the
/// first call alone learns the path, the rest follow it), the unserved ones with the remoting
/// error text; none is offered xjob's `/runBatch` (only executors registered as xjob's are) —
/// and a second batch goes to the 3.5 executor on `/trigger` only.
#[test]
fn a_batch_of_runs_is_answered_call_by_call_whatever_each_executor_speaks() {
    use futures::StreamExt;
    use xjob::executor::{ExecutorClient, HttpExecutorClient};
    use xjob::model::wire::TriggerParam;
    init_tracing();
    actix_rt::System::new().block_on(async {
        let (old_seen, new_seen) = (Arc::default(), Arc::default());
        let (old, h1) = stand_in(false, Arc::clone(&old_seen));
        let (new, h2) = stand_in(true, Arc::clone(&new_seen));
        let dead = {
            let l = TcpListener::bind("127.0.0.1:0").unwrap();
            format!("http://{}/", l.local_addr().unwrap())
        };
        let client = HttpExecutorClient::new(None, std::time::Duration::from_secs(5));
        let at = |i: usize| [&old, &new, &dead][i % 3].clone();
        let batch = |from: i64, n: usize, to: &dyn Fn(usize) -> String| {
            (0..n)
                .map(|i| {
                    let param = TriggerParam {
                        log_id: from + i as i64,
                        ..Default::default()
                    };
                    (to(i), param)
                })
                .collect::<Vec<_>>()
        };
        let answers: Vec<(usize, xjob::model::wire::ReturnT)> =
            client.run_each(batch(100, 30, &at)).concat().await;
        let mut by_index: Vec<_> = answers.iter().map(|(i, r)| (*i, r.clone())).collect();
        by_index.sort_by_key(|(i, _)| *i);
        assert_eq!(
            by_index.iter().map(|(i, _)| *i).collect::<Vec<_>>(),
            (0..30).collect::<Vec<_>>(),
            "each call answered once"
        );
        for (i, r) in &by_index {
            let log_id = 100 + *i as i64;
            match i % 3 {
                0 | 1 => assert_eq!(
                    (r.code, r.msg.clone()),
                    (200, Some(format!("ran {log_id}"))),
                    "call {i}"
                ),
                _ => assert!(
                    r.code == 500
                        && r.msg
                            .as_deref()
                            .is_some_and(|m| m.starts_with("xxl-job remoting error(")),
                    "call {i}: {r:?}"
                ),
            }
        }
        let served = |seen: &Arc<Mutex<Vec<(String, i64)>>>, path: &str| {
            let mut ids: Vec<i64> = seen
                .lock()
                .iter()
                .filter(|s| s.0 == path)
                .map(|s| s.1)
                .collect();
            ids.sort_unstable();
            ids
        };
        let expect = |r: usize| {
            (0..30)
                .filter(|i| i % 3 == r)
                .map(|i| 100 + i as i64)
                .collect::<Vec<_>>()
        };
        assert_eq!(served(&old_seen, "/run"), expect(0));
        assert_eq!(served(&new_seen, "/trigger"), expect(1));
        // no batch offered to an executor that did not register as xjob's; the 3.5 executor
        // was sent one call on /run to learn its path, not one per call: one extra request
        assert!(served(&old_seen, "/runBatch").is_empty());
        assert!(served(&new_seen, "/runBatch").is_empty());
        assert_eq!(
            served(&new_seen, "/run").len(),
            1,
            "one refused /run to learn the path, then /trigger"
        );

        // learned: the next batch goes to the 3.5 executor on /trigger alone
        new_seen.lock().clear();
        let again: Vec<_> = client
            .run_each(batch(200, 5, &|_| new.clone()))
            .concat()
            .await;
        assert_eq!(again.len(), 5);
        assert!(again.iter().all(|(_, r)| r.code == 200), "{again:?}");
        let paths: Vec<String> = new_seen.lock().iter().map(|s| s.0.clone()).collect();
        assert_eq!(paths, vec!["/trigger"; 5], "no batch offered again");
        h1.stop(false).await;
        h2.stop(false).await;
    });
}

/// Executors registered as xjob's that do not take its `/runBatch` after all (a proxy, an
/// impostor) answer it in their own ways — another text than XXL-JOB's, a success without the
/// answers, a 404: none of it is taken for the runs' answers. Each executor's share goes as
/// `/run` calls at once, every call is answered by its own, and the next batch goes as `/run`
/// calls only.
#[test]
fn an_executor_that_does_not_take_a_batch_gets_run_calls_whatever_it_answers() {
    use futures::StreamExt;
    use xjob::executor::{ExecutorClient, HttpExecutorClient};
    use xjob::model::wire::TriggerParam;
    init_tracing();
    actix_rt::System::new().block_on(async {
        // how each stand-in answers a path it does not serve
        let kinds: [fn(&str) -> HttpResponse; 3] = [
            |p| answer(500, &format!("unknown path {p}")),
            |_| HttpResponse::Ok().json(json!({ "code": 200 })),
            |_| HttpResponse::NotFound().finish(),
        ];
        let mut stand_ins = Vec::new();
        for unknown in kinds {
            let seen: Arc<Mutex<Vec<(String, i64)>>> = Arc::default();
            let (address, handle) = stand_in_with(false, Arc::clone(&seen), unknown);
            stand_ins.push((address, handle, seen));
        }
        let client = HttpExecutorClient::new(None, std::time::Duration::from_secs(5));
        for (address, _, _) in &stand_ins {
            client.learn(address, xjob::executor::ExecutorKind::Xjob);
        }
        let batch = |from: i64| {
            (0..12)
                .map(|i| {
                    let param = TriggerParam {
                        log_id: from + i as i64,
                        ..Default::default()
                    };
                    (stand_ins[i % 3].0.clone(), param)
                })
                .collect::<Vec<_>>()
        };
        for (round, from) in [(0, 100), (1, 200)] {
            let mut answers: Vec<(usize, xjob::model::wire::ReturnT)> =
                client.run_each(batch(from)).concat().await;
            answers.sort_by_key(|(i, _)| *i);
            let got: Vec<(usize, i32, Option<String>)> = answers
                .into_iter()
                .map(|(i, r)| (i, r.code, r.msg))
                .collect();
            let want: Vec<(usize, i32, Option<String>)> = (0..12)
                .map(|i| (i, 200, Some(format!("ran {}", from + i as i64))))
                .collect();
            assert_eq!(got, want, "round {round}");
            for (k, (_, _, seen)) in stand_ins.iter().enumerate() {
                let paths: Vec<String> = seen.lock().drain(..).map(|s| s.0).collect();
                let mut want = if round == 0 {
                    vec!["/runBatch".to_string()]
                } else {
                    vec![]
                };
                want.extend(vec!["/run".to_string(); 4]);
                assert_eq!(paths, want, "stand-in {k}, round {round}");
            }
        }
        for (_, h, _) in stand_ins {
            h.stop(false).await;
        }
    });
}

/// What an executor's registration said decides its calls from the first one: a 2.x–3.4
/// executor (`Xxl`) is offered no batch and gets `/run`, a 3.5 one (`Xxl35`) `/trigger`, with
/// no refused request to learn either.
#[test]
fn a_registered_executor_is_called_on_its_own_path_from_the_first_call() {
    use futures::StreamExt;
    use xjob::executor::{ExecutorClient, ExecutorKind, HttpExecutorClient};
    use xjob::model::wire::TriggerParam;
    init_tracing();
    actix_rt::System::new().block_on(async {
        let old_seen: Arc<Mutex<Vec<(String, i64)>>> = Arc::default();
        let new_seen: Arc<Mutex<Vec<(String, i64)>>> = Arc::default();
        let (old, h1) = stand_in(false, Arc::clone(&old_seen));
        let (new, h2) = stand_in(true, Arc::clone(&new_seen));
        let client = HttpExecutorClient::new(None, std::time::Duration::from_secs(5));
        client.learn(&old, ExecutorKind::Xxl);
        client.learn(&new, ExecutorKind::Xxl35);
        let calls: Vec<(String, TriggerParam)> = (0..8)
            .map(|i| {
                let to = if i % 2 == 0 { &old } else { &new };
                let param = TriggerParam {
                    log_id: 300 + i,
                    ..Default::default()
                };
                (to.clone(), param)
            })
            .collect();
        let answers: Vec<_> = client.run_each(calls).concat().await;
        assert_eq!(answers.len(), 8);
        assert!(answers.iter().all(|(_, r)| r.code == 200), "{answers:?}");
        let paths = |seen: &Arc<Mutex<Vec<(String, i64)>>>| -> Vec<String> {
            seen.lock().iter().map(|s| s.0.clone()).collect()
        };
        assert_eq!(paths(&old_seen), vec!["/run"; 4]);
        assert_eq!(paths(&new_seen), vec!["/trigger"; 4]);
        h1.stop(false).await;
        h2.stop(false).await;
    });
}
