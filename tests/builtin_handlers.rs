//! The built-in handlers through a node's in-process executor, in real time: `httpJobHandler`
//! calls a stand-in server only under `executor.http_allowlist` (follows redirects that stay in
//! it, fails on other statuses, timeouts and refused URLs, each with its reason in the run) and
//! `commandJobHandler` runs a command line with its output in the run log.
#![allow(clippy::unwrap_used)]

mod common;

use std::net::TcpListener;
use std::time::Duration;

use actix_web::{App, HttpRequest, HttpResponse, HttpServer, web};
use common::*;
use xjob::executor::{COMMAND_HANDLER, HTTP_HANDLER};
use xjob::prelude::*;

const TOKEN: &str = "builtin-token";

/// A target answering `/ok` (200 with the method, body and `X-Run` header it got), `/fail`
/// (500), `/slow` (200 after 3 s), `/in` (302 to `/ok`) and `/out` (302 to `localhost`, a host
/// not in the list). Answers its `http://127.0.0.1:<port>` origin.
fn target() -> (String, actix_web::dev::ServerHandle) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let server = HttpServer::new(move || {
        App::new()
            .route(
                "/ok",
                web::to(|req: HttpRequest, body: String| async move {
                    let run = req
                        .headers()
                        .get("X-Run")
                        .and_then(|v| v.to_str().ok())
                        .unwrap_or("-")
                        .to_string();
                    HttpResponse::Ok().body(format!("pong {} {body} {run}", req.method()))
                }),
            )
            .route(
                "/fail",
                web::to(|| async { HttpResponse::InternalServerError().body("boom") }),
            )
            .route(
                "/slow",
                web::to(|| async {
                    actix_rt::time::sleep(Duration::from_secs(3)).await;
                    HttpResponse::Ok().finish()
                }),
            )
            .route(
                "/in",
                web::to(|| async {
                    HttpResponse::Found()
                        .insert_header(("Location", "/ok"))
                        .finish()
                }),
            )
            .route(
                "/out",
                web::to(move || async move {
                    HttpResponse::Found()
                        .insert_header(("Location", format!("http://localhost:{port}/ok")))
                        .finish()
                }),
            )
    })
    .workers(1)
    .listen(listener)
    .unwrap()
    .run();
    let handle = server.handle();
    actix_rt::spawn(server);
    (format!("http://127.0.0.1:{port}"), handle)
}

/// Triggers `job` with `param` and answers its finished run's code, message and log.
async fn run_once(engine: &Engine, job: i32, param: String) -> (i32, String, String) {
    let runs = || async {
        engine
            .runs(job, xjob::console::Paging::first(1))
            .await
            .unwrap()
    };
    let before = runs().await.total;
    engine.trigger_job(job, Some(param), None).await.unwrap();
    let mut waited = 0;
    let run = loop {
        let page = runs().await;
        let newest = page.items.into_iter().next();
        if let Some(r) = newest.filter(|r| page.total > before && r.handle_code != 0) {
            break r;
        }
        assert!(waited < 500, "the run finishes within 10 s");
        waited += 1;
        actix_rt::time::sleep(Duration::from_millis(20)).await;
    };
    let log = engine.run_log(run.id, 1).await.unwrap().content;
    (run.handle_code, run.handle_msg.unwrap_or_default(), log)
}

/// Each way an HTTP job ends, with what its run records.
#[test]
fn http_and_command_jobs_run_on_the_built_in_handlers() {
    init_tracing();
    let dir = tempfile::tempdir().unwrap();
    actix_rt::System::new().block_on(async {
        let (origin, target) = target();
        let node = http_node(dir.path(), TOKEN, true, |c| {
            c.executor.http_allowlist = vec![format!("{origin}/")];
            c.executor.scripts_enabled = true;
        })
        .await;
        let engine = node.engine.clone();
        let group = engine
            .ensure_group(xjob::demo::DEMO_APP, "demo")
            .await
            .unwrap();
        let http = engine
            .add_job(JobSpec::cron(group, "http", "0 0 0 * * ?", HTTP_HANDLER))
            .await
            .unwrap();
        let call = |path: &str, extra: &str| format!(r#"{{"url":"{origin}{path}"{extra}}}"#);

        let (code, _, log) = run_once(
            &engine,
            http,
            call(
                "/ok",
                r#","method":"PUT","data":"hi","headers":{"X-Run":"r1"}"#,
            ),
        )
        .await;
        assert_eq!(code, 200, "{log}");
        assert!(log.contains(&format!("PUT {origin}/ok")), "{log}");
        assert!(
            log.contains("HTTP 200") && log.contains("pong PUT hi r1"),
            "{log}"
        );

        let (code, msg, log) = run_once(&engine, http, call("/fail", "")).await;
        assert_eq!(code, 500);
        assert!(msg.contains("answered HTTP 500"), "{msg}");
        assert!(log.contains("boom"), "{log}");

        let (code, msg, _) = run_once(&engine, http, call("/slow", r#","timeout":300"#)).await;
        assert_eq!(code, 500);
        assert!(msg.contains("timed out"), "{msg}");

        let (code, _, log) = run_once(&engine, http, call("/in", "")).await;
        assert_eq!(code, 200, "{log}");
        assert!(log.contains(&format!("redirected to {origin}/ok")), "{log}");
        assert!(log.contains("pong GET"), "{log}");

        let (code, msg, _) = run_once(&engine, http, call("/out", "")).await;
        assert_eq!(code, 500);
        assert!(
            msg.contains("redirect not followed") && msg.contains("localhost"),
            "{msg}"
        );

        // the cloud metadata address of CVE-2025-7787's reports: not in the list
        let (code, msg, log) = run_once(
            &engine,
            http,
            r#"{"url":"http://169.254.169.254/latest/meta-data"}"#.into(),
        )
        .await;
        assert_eq!(code, 500);
        assert!(msg.contains("URL refused"), "{msg}");
        assert!(!log.contains("HTTP "), "no request was sent: {log}");

        let cmd = engine
            .add_job(JobSpec::cron(group, "cmd", "0 0 0 * * ?", COMMAND_HANDLER))
            .await
            .unwrap();
        let (code, _, log) = run_once(&engine, cmd, r#"echo hello "big  world""#.into()).await;
        assert_eq!(code, 200, "{log}");
        assert!(log.contains("hello big  world"), "{log}");
        let (code, msg, _) = run_once(&engine, cmd, "sh -c 'exit 3'".into()).await;
        assert_eq!(code, 500);
        assert!(msg.contains("command exit value(3) is failed"), "{msg}");

        target.stop(false).await;
        node.shutdown().await;
    });
}

/// With scripts off (the default) the command handler refuses and says how to turn it on;
/// with an empty allowlist (the default) the HTTP handler calls nothing and says how to allow.
#[test]
fn the_defaults_refuse_commands_and_urls() {
    init_tracing();
    let dir = tempfile::tempdir().unwrap();
    actix_rt::System::new().block_on(async {
        let node = http_node(dir.path(), TOKEN, true, |_| {}).await;
        let engine = node.engine.clone();
        let group = engine
            .ensure_group(xjob::demo::DEMO_APP, "demo")
            .await
            .unwrap();
        let cmd = engine
            .add_job(JobSpec::cron(group, "cmd", "0 0 0 * * ?", COMMAND_HANDLER))
            .await
            .unwrap();
        let (code, msg, _) = run_once(&engine, cmd, "echo hi".into()).await;
        assert_eq!(code, 500);
        assert!(msg.contains("executor.scripts_enabled"), "{msg}");
        let http = engine
            .add_job(JobSpec::cron(group, "http", "0 0 0 * * ?", HTTP_HANDLER))
            .await
            .unwrap();
        let (code, msg, _) =
            run_once(&engine, http, r#"{"url":"https://example.com/"}"#.into()).await;
        assert_eq!(code, 500);
        assert!(msg.contains("XJOB_EXECUTOR__HTTP_ALLOWLIST"), "{msg}");
        node.shutdown().await;
    });
}
