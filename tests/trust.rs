//! Trust boundaries over real HTTP: who may name executor addresses on a manual trigger, which
//! access token goes to which address, how much of a foreign answer is kept, and how the admin
//! API authorises callers — before reading a body, and result by result inside a batch.
#![allow(clippy::unwrap_used)]

mod common;

use std::io::{Read, Write};
use std::net::TcpListener;
use std::sync::Arc;
use std::time::Duration;

use actix_web::{App, HttpRequest, HttpResponse, HttpServer, web};
use common::*;
use parking_lot::Mutex;
use serde_json::{Value, json};
use xjob::console::Console;
use xjob::console::groups::GroupInput;
use xjob::console::users::UserInput;
use xjob::prelude::*;

const TOKEN: &str = "global-token-0123456789";
const A_TOKEN: &str = "group-a-token-0123456789";
const ADMIN_PW: &str = "admin-secret-1";

/// What a stand-in executor saw: (path, access token header) per request.
type Seen = Arc<Mutex<Vec<(String, Option<String>)>>>;

/// A stand-in executor on 127.0.0.1 answering every path; `/big/run` answers 1 MiB that is not
/// JSON, every other `/run` a success. Answers its base URL.
fn stand_in(seen: Seen) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let server = HttpServer::new(move || {
        let seen = seen.clone();
        App::new().default_service(web::to(move |req: HttpRequest| {
            let seen = seen.clone();
            async move {
                let token = req
                    .headers()
                    .get("XXL-JOB-ACCESS-TOKEN")
                    .map(|v| v.to_str().unwrap().to_string());
                seen.lock().push((req.path().to_string(), token));
                if req.path() == "/big/run" {
                    HttpResponse::Ok().body("<html>".to_string() + &"x".repeat(1 << 20))
                } else {
                    HttpResponse::Ok().json(json!({"code": 200, "msg": null}))
                }
            }
        }))
    })
    .workers(1)
    .listen(listener)
    .unwrap()
    .run();
    actix_rt::spawn(server);
    base
}

/// The token the stand-in saw on the last request to `path`.
fn token_at(seen: &Seen, path: &str) -> Option<Option<String>> {
    seen.lock()
        .iter()
        .rev()
        .find(|(p, _)| p == path)
        .map(|(_, t)| t.clone())
}

/// A manual group listing `addresses`, with its own token when given; answers its id.
async fn manual_group(engine: &Engine, app: &str, addresses: &str, token: Option<&str>) -> i32 {
    engine
        .add_group(GroupInput {
            app_name: app.into(),
            title: app.into(),
            address_type: 1,
            address_list: Some(addresses.into()),
            access_token: token.map(Into::into),
        })
        .await
        .unwrap()
        .id
}

/// A normal user may name only addresses of the job's own group on a manual trigger; an
/// administrator may name any. A call carries the dispatched group's token (A's own, or the
/// global one for a group without one) to that group's addresses only, and no token to any
/// other address; a foreign
/// answer is kept cut to a few KiB in the run's summary.
#[test]
fn manual_addresses_and_tokens_stay_within_their_groups() {
    init_tracing();
    let dir = tempfile::tempdir().unwrap();
    actix_rt::System::new().block_on(async {
        let seen: Seen = Arc::default();
        let exec = stand_in(seen.clone());
        let node = http_node(dir.path(), TOKEN, false, |c| {
            c.security.admin_password = ADMIN_PW.into();
        })
        .await;
        let engine = node.engine.clone();
        let console = Console::new(engine.clone());
        console.bootstrap_admin().await.unwrap();
        let a = manual_group(
            &engine,
            "group-a",
            &format!("{exec}/a/,{exec}/big/"),
            Some(A_TOKEN),
        )
        .await;
        let b = manual_group(&engine, "group-b", &format!("{exec}/b/"), None).await;
        let job = |g: i32| {
            let engine = engine.clone();
            async move {
                let mut spec = JobSpec::cron(g, "manual", "0 0 0 * * ?", "anything");
                spec.executor_route_strategy = "FIRST".into();
                engine.add_job(spec).await.unwrap()
            }
        };
        let (ja, jb) = (job(a).await, job(b).await);
        let admin = console
            .login("admin", ADMIN_PW, "127.0.0.1")
            .await
            .unwrap()
            .user;
        console
            .create_user(
                &admin,
                UserInput {
                    username: "alice".into(),
                    password: Some("alice-secret-1".into()),
                    role: 0,
                    permission: vec![a],
                },
            )
            .await
            .unwrap();
        let alice = console
            .login("alice", "alice-secret-1", "127.0.0.1")
            .await
            .unwrap()
            .user;

        // a normal user: addresses outside the job's group are refused before anything is sent
        for other in [format!("{exec}/none/"), format!("{exec}/b/")] {
            let e = console
                .trigger_job(&alice, ja, None, Some(other.clone()))
                .await
                .unwrap_err();
            assert!(
                matches!(
                    e,
                    Error::Forbidden {
                        field: Some("addressList"),
                        ..
                    }
                ),
                "{other}: {e}"
            );
        }
        assert!(seen.lock().is_empty(), "nothing was called");
        // its own group's address (written without the trailing slash) is fine, with A's token
        console
            .trigger_job(&alice, ja, None, Some(format!("{exec}/a")))
            .await
            .unwrap();
        eventually("A's executor called", 15, || async {
            token_at(&seen, "/a/run").is_some()
        })
        .await;
        assert_eq!(token_at(&seen, "/a/run"), Some(Some(A_TOKEN.into())));

        // an administrator may name any address; outside every group it gets no token at all
        console
            .trigger_job(&admin, ja, None, Some(format!("{exec}/none/")))
            .await
            .unwrap();
        eventually("the unlisted address called", 15, || async {
            token_at(&seen, "/none/run").is_some()
        })
        .await;
        assert_eq!(
            token_at(&seen, "/none/run"),
            Some(None),
            "no token to an address of no group"
        );
        // group B's own address gets the global token; B's job on A's address gets no token:
        // a token is the dispatched group's, and only for the addresses that group lists
        engine.trigger_job(jb, None, None).await.unwrap();
        eventually("B's executor called", 15, || async {
            token_at(&seen, "/b/run").is_some()
        })
        .await;
        assert_eq!(token_at(&seen, "/b/run"), Some(Some(TOKEN.into())));
        let before = seen.lock().len();
        console
            .trigger_job(&admin, jb, None, Some(format!("{exec}/a/")))
            .await
            .unwrap();
        eventually("A's address called for B's job", 15, || async {
            seen.lock().len() > before
        })
        .await;
        assert_eq!(
            token_at(&seen, "/a/run"),
            Some(None),
            "neither A's token nor the global one"
        );

        // a 1 MiB answer that is not JSON: the run's stored summary keeps a few KiB, marked cut
        console
            .trigger_job(&alice, ja, None, Some(format!("{exec}/big/")))
            .await
            .unwrap();
        let db = engine.db().clone();
        eventually("the big answer recorded", 15, || async {
            xjob::testing::store::logs::for_job(&db, ja)
                .await
                .unwrap()
                .iter()
                .any(|r| {
                    r.executor_address.as_deref() == Some(&format!("{exec}/big/"))
                        && r.trigger_code != 0
                })
        })
        .await;
        let rows = xjob::testing::store::logs::for_job(&db, ja).await.unwrap();
        let big = rows
            .iter()
            .find(|r| r.executor_address.as_deref() == Some(&format!("{exec}/big/")))
            .unwrap();
        let stored = big.trigger_msg.clone().unwrap_or_default();
        assert!(stored.len() < 8 * 1024, "{} bytes kept", stored.len());
        assert!(stored.contains("cut"), "{stored}");
        node.shutdown().await;
    });
}

/// Posts `body` to the node's admin API `path` with `token`; answers the JSON reply.
async fn post(node: &HttpNode, path: &str, token: &str, body: Value) -> Value {
    awc::Client::default()
        .post(format!("{}api/{path}", node.address))
        .insert_header(("XXL-JOB-ACCESS-TOKEN", token.to_string()))
        .send_json(&body)
        .await
        .unwrap()
        .json::<Value>()
        .limit(1 << 20)
        .await
        .unwrap()
}

/// A caller holding no token the node knows is refused from its headers, before its body is
/// read: the answer comes while most of a declared 30 MiB body was never sent.
#[test]
fn an_unknown_token_is_refused_before_the_body_is_read() {
    init_tracing();
    let dir = tempfile::tempdir().unwrap();
    actix_rt::System::new().block_on(async {
        let node = http_node(dir.path(), TOKEN, false, |_| {}).await;
        manual_group(&node.engine, "group-a", "http://10.9.9.9:1/", Some(A_TOKEN)).await;
        let addr = node
            .address
            .trim_start_matches("http://")
            .trim_end_matches('/')
            .to_string();
        let answer = tokio::task::spawn_blocking(move || {
            let mut s = std::net::TcpStream::connect(addr).unwrap();
            s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
            write!(
                s,
                "POST /api/callback HTTP/1.1\r\nHost: x\r\nXXL-JOB-ACCESS-TOKEN: not-a-token\r\n\
                 Content-Type: application/json\r\nContent-Length: {}\r\n\r\n[",
                30 << 20
            )
            .unwrap();
            let mut buf = vec![0u8; 4096];
            let n = s.read(&mut buf).unwrap();
            String::from_utf8_lossy(&buf[..n]).into_owned()
        })
        .await
        .unwrap();
        assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
        assert!(answer.contains("The access token is wrong."), "{answer}");
        // a group's own token and the global one are both let through to the body
        for t in [A_TOKEN, TOKEN] {
            let v = post(&node, "callback", t, json!("not a batch")).await;
            assert!(
                v["msg"].as_str().unwrap().contains("invalid callback body"),
                "{v}"
            );
        }
        node.shutdown().await;
    });
}

/// A batch mixing runs of groups with different tokens and runs the center no longer knows is
/// not refused whole: the results the caller may write are written, the others skipped (logged
/// and counted in `xjob_callback_results_skipped_total`), and the answer is 200.
#[test]
fn a_callback_batch_writes_what_its_caller_may_write() {
    init_tracing();
    let dir = tempfile::tempdir().unwrap();
    actix_rt::System::new().block_on(async {
        let node = http_node(dir.path(), TOKEN, false, |_| {}).await;
        let engine = node.engine.clone();
        let a = manual_group(&engine, "group-a", "http://10.9.9.9:1/", Some(A_TOKEN)).await;
        let b = manual_group(&engine, "group-b", "http://10.9.9.8:1/", None).await;
        let db = engine.db().clone();
        let run = |g: i32| {
            let (db, engine) = (db.clone(), engine.clone());
            async move {
                let job = engine
                    .add_job(JobSpec::cron(g, "cb", "0 0 0 * * ?", "h"))
                    .await
                    .unwrap();
                xjob::testing::store::logs::insert_run(&db, g, job, T0, xjob::model::TriggerType::Manual, 0)
                    .await
                    .unwrap()
            }
        };
        let (ra, rb) = (run(a).await, run(b).await);
        let item = |id: i64, msg: &str| json!({"logId": id, "logDateTim": 0, "handleCode": 200, "handleMsg": msg});
        let batch = json!([item(ra, "a-done"), item(rb, "b-done"), item(987_654, "gone"),
            {"logId": rb, "handleCode": 4294967496u64}]);
        let v = post(&node, "callback", A_TOKEN, batch.clone()).await;
        assert_eq!(v["code"], 200, "{v}");
        let row = |id: i64| {
            let db = db.clone();
            async move { xjob::testing::store::logs::get(&db, id).await.unwrap() }
        };
        eventually("A's result written", 15, || async { row(ra).await.handle_code == 200 }).await;
        assert_eq!(row(ra).await.handle_msg.as_deref(), Some("a-done"));
        assert_eq!(row(rb).await.handle_code, 0, "B's run needs the global token");
        let metrics = engine.metrics().render(Default::default());
        for (reason, n) in [("token", 1), ("unknown_run", 1), ("invalid", 1)] {
            let line = format!("xjob_callback_results_skipped_total{{reason=\"{reason}\"}} {n}");
            assert!(metrics.contains(&line), "{line}\n{metrics}");
        }
        // with the global token, B's result is taken; A's (already written) changes nothing
        let v = post(&node, "callback", TOKEN, batch).await;
        assert_eq!(v["code"], 200, "{v}");
        eventually("B's result written", 15, || async { row(rb).await.handle_code == 200 }).await;
        assert_eq!(row(rb).await.handle_msg.as_deref(), Some("b-done"));
        assert_eq!(row(ra).await.handle_msg.as_deref(), Some("a-done"));
        node.shutdown().await;
    });
}

/// The registry list of group `id`.
async fn registry_list(engine: &Engine, id: i32) -> Vec<String> {
    engine.group(id).await.unwrap().registry_list
}

/// App names are exact, on a database whose collation folds case (MariaDB) as on the others: a
/// case variant of a group with its own token is refused with the global token, removing a
/// case variant's registration never touches the real group's, and two groups whose names
/// differ in case are two groups.
#[test]
fn app_names_are_exact_on_every_backend() {
    init_tracing();
    let mut urls = vec![None];
    for var in ["XJOB_TEST_MYSQL_URL", "XJOB_TEST_PG_URL"] {
        if let Some(base) = database_url(var) {
            urls.push(Some(fresh_database(&base)));
        }
    }
    for url in urls {
        let dir = tempfile::tempdir().unwrap();
        actix_rt::System::new().block_on(async {
            let node = http_node(dir.path(), TOKEN, false, |c| {
                if let Some(u) = &url {
                    c.database.url = u.clone();
                }
            })
            .await;
            let engine = node.engine.clone();
            let tokened = engine
                .add_group(GroupInput {
                    app_name: "app-tok".into(),
                    title: "tokened".into(),
                    address_type: 0,
                    access_token: Some(A_TOKEN.into()),
                    ..Default::default()
                })
                .await
                .unwrap()
                .id;
            let reg = |app: &str, address: &str| {
                json!({"registryGroup": "EXECUTOR", "registryKey": app, "registryValue": address})
            };
            let x = "http://10.1.1.1:9999/";
            assert_eq!(post(&node, "registry", A_TOKEN, reg("app-tok", x)).await["code"], 200);
            assert_eq!(registry_list(&engine, tokened).await, vec![x.to_string()]);
            // a case variant of the tokened name: the global token is refused
            for variant in ["APP-TOK", "App-Tok"] {
                let v = post(&node, "registry", TOKEN, reg(variant, x)).await;
                assert_eq!(v["msg"], "The access token is wrong.", "{url:?} {variant}");
                let v = post(&node, "registryRemove", TOKEN, reg(variant, x)).await;
                assert_eq!(v["msg"], "The access token is wrong.", "{url:?} {variant}");
            }
            // even with the group's token, removing the variant's registration leaves the
            // group's own alone
            assert_eq!(post(&node, "registryRemove", A_TOKEN, reg("APP-TOK", x)).await["code"], 200);
            assert_eq!(registry_list(&engine, tokened).await, vec![x.to_string()], "{url:?}");
            // a group whose name differs only in case is another group, with the global token
            let other = engine
                .add_group(GroupInput {
                    app_name: "APP-TOK".into(),
                    title: "upper".into(),
                    address_type: 0,
                    ..Default::default()
                })
                .await
                .unwrap()
                .id;
            assert_ne!(other, tokened);
            let y = "http://10.2.2.2:9999/";
            assert_eq!(post(&node, "registry", TOKEN, reg("APP-TOK", y)).await["code"], 200);
            assert_eq!(registry_list(&engine, other).await, vec![y.to_string()], "{url:?}");
            assert_eq!(registry_list(&engine, tokened).await, vec![x.to_string()], "{url:?}");
            node.shutdown().await;
        });
    }
}

/// A call carries the dispatched group's token, whatever other group lists the same address:
/// a group without a token of its own gets the global one even where a group with one lists
/// its address too, and that group gets its own. An address another group with its own token
/// lists or has registered cannot be registered under a different app name, with or without
/// its trailing slash; the answer names the group.
#[test]
fn tokens_follow_the_dispatched_group_and_addresses_cannot_be_taken_over() {
    init_tracing();
    let dir = tempfile::tempdir().unwrap();
    actix_rt::System::new().block_on(async {
        const B_TOKEN: &str = "group-b-token-0123456789";
        const C_TOKEN: &str = "group-c-token-0123456789";
        const D_TOKEN: &str = "group-d-token-0123456789";
        let seen: Seen = Arc::default();
        let exec = stand_in(seen.clone());
        let node = http_node(dir.path(), TOKEN, false, |_| {}).await;
        let engine = node.engine.clone();
        // B registers its executors (automatic), C lists its own
        engine
            .add_group(GroupInput {
                app_name: "group-b".into(),
                title: "b".into(),
                address_type: 0,
                address_list: None,
                access_token: Some(B_TOKEN.into()),
            })
            .await
            .unwrap();
        manual_group(&engine, "group-c", &format!("{exec}/c/"), Some(C_TOKEN)).await;
        for value in [format!("{exec}/c/"), format!("{exec}/c")] {
            let v = post(
                &node,
                "registry",
                B_TOKEN,
                json!({"registryGroup": "EXECUTOR", "registryKey": "group-b", "registryValue": value}),
            )
            .await;
            assert_eq!(v["code"], 500, "{v}");
            assert!(v["msg"].as_str().unwrap().contains("group-c"), "{v}");
        }
        // an address C's executor registered (not in C's manual list) is C's too
        let v = post(
            &node,
            "registry",
            C_TOKEN,
            json!({"registryGroup": "EXECUTOR", "registryKey": "group-c", "registryValue": format!("{exec}/c2/")}),
        )
        .await;
        assert_eq!(v["code"], 200, "{v}");
        let v = post(
            &node,
            "registry",
            B_TOKEN,
            json!({"registryGroup": "EXECUTOR", "registryKey": "group-b", "registryValue": format!("{exec}/c2/")}),
        )
        .await;
        assert_eq!(v["code"], 500, "{v}");
        // B's own address is fine
        let v = post(
            &node,
            "registry",
            B_TOKEN,
            json!({"registryGroup": "EXECUTOR", "registryKey": "group-b", "registryValue": format!("{exec}/b/")}),
        )
        .await;
        assert_eq!(v["code"], 200, "{v}");

        // D (own token, the lower id) and E (none) both list one address
        let d = manual_group(&engine, "group-d", &format!("{exec}/shared/"), Some(D_TOKEN)).await;
        let e = manual_group(&engine, "group-e", &format!("{exec}/shared/"), None).await;
        assert!(d < e);
        let job = |g: i32| {
            let engine = engine.clone();
            async move {
                let mut spec = JobSpec::cron(g, "shared", "0 0 0 * * ?", "anything");
                spec.executor_route_strategy = "FIRST".into();
                engine.add_job(spec).await.unwrap()
            }
        };
        let (jd, je) = (job(d).await, job(e).await);
        for (j, want) in [(je, TOKEN), (jd, D_TOKEN)] {
            let before = seen.lock().len();
            engine.trigger_job(j, None, None).await.unwrap();
            eventually("the shared address called", 15, || async {
                seen.lock().len() > before
            })
            .await;
            assert_eq!(token_at(&seen, "/shared/run"), Some(Some(want.into())));
        }
        node.shutdown().await;
    });
}
