//! What an operation reaches decides who may run it: a workflow is triggered, re-run, marked,
//! scheduled or edited only by a user who may act on every group it reaches through its jobs
//! and nested workflows; what one trigger expands to is bounded (rendered params, nested
//! fan-out, the context a nested run keeps); a command-line job is a script job for every rule
//! about script jobs; checking a workflow reads each nested workflow once.
#![allow(clippy::unwrap_used)]

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use actix_web::dev::{Service, ServiceResponse};
use actix_web::http::{Method, StatusCode};
use actix_web::test::init_service;
use serde_json::{Value, json};
use xjob::console::Console;
use xjob::prelude::*;

use common::{T0, TestApp, call, run_paused, settle};

const ADMIN_PW: &str = "admin-secret-1";
const USER_PW: &str = "user-secret-1";

/// The center's routes over `app`, with the admin signed in: (service, admin token).
async fn center(
    app: &TestApp,
) -> (
    impl Service<actix_http::Request, Response = ServiceResponse, Error = actix_web::Error>,
    String,
) {
    let console = Console::new(app.engine.clone());
    console.bootstrap_admin().await.unwrap();
    let svc = init_service(
        actix_web::App::new().configure(xjob::routes::center(console, Some("tok".into()))),
    )
    .await;
    let token = login(&svc, "admin", ADMIN_PW).await;
    (svc, token)
}

async fn login<S>(svc: &S, user: &str, pw: &str) -> String
where
    S: Service<actix_http::Request, Response = ServiceResponse, Error = actix_web::Error>,
{
    let (s, v) = call(
        svc,
        Method::POST,
        "/v1/auth/login",
        "",
        Some(json!({"username": user, "password": pw})),
    )
    .await;
    assert_eq!(s, StatusCode::OK, "{v}");
    v["token"].as_str().unwrap().to_string()
}

/// Creates a manual group (as the admin) and answers its id.
async fn group<S>(svc: &S, admin: &str, app_name: &str) -> i32
where
    S: Service<actix_http::Request, Response = ServiceResponse, Error = actix_web::Error>,
{
    let (s, v) = call(
        svc,
        Method::POST,
        "/v1/groups",
        admin,
        Some(
            json!({"appName": app_name, "title": app_name, "addressType": 1,
                    "addressList": "http://127.0.0.1:9/"}),
        ),
    )
    .await;
    assert_eq!(s, StatusCode::CREATED, "{v}");
    v["id"].as_i64().unwrap() as i32
}

/// Creates a user with rights on `groups` and answers their token.
async fn user<S>(svc: &S, admin: &str, name: &str, groups: &[i32]) -> String
where
    S: Service<actix_http::Request, Response = ServiceResponse, Error = actix_web::Error>,
{
    let (s, v) = call(
        svc,
        Method::POST,
        "/v1/users",
        admin,
        Some(json!({"username": name, "password": USER_PW, "role": 0, "permission": groups})),
    )
    .await;
    assert_eq!(s, StatusCode::CREATED, "{v}");
    login(svc, name, USER_PW).await
}

/// Saves a workflow (as `token`); answers the status and the answer.
async fn save<S>(svc: &S, token: &str, group: i32, name: &str, def: Value) -> (StatusCode, Value)
where
    S: Service<actix_http::Request, Response = ServiceResponse, Error = actix_web::Error>,
{
    call(
        svc,
        Method::POST,
        "/v1/workflows",
        token,
        Some(json!({"jobGroup": group, "name": name, "definition": def})),
    )
    .await
}

fn job_node(key: &str, job: i32, param: Option<&str>) -> Value {
    match param {
        Some(p) => json!({"key": key, "type": "JOB", "jobId": job, "param": p}),
        None => json!({"key": key, "type": "JOB", "jobId": job}),
    }
}

fn nested_node(key: &str, workflow: i64) -> Value {
    json!({"key": key, "type": "WORKFLOW", "workflowId": workflow})
}

/// Steps time until workflow run `id` ended; answers it as the admin reads it.
async fn until_ended<S>(app: &TestApp, svc: &S, admin: &str, id: i64) -> Value
where
    S: Service<actix_http::Request, Response = ServiceResponse, Error = actix_web::Error>,
{
    for _ in 0..200 {
        let (_, r) = call(
            svc,
            Method::GET,
            &format!("/v1/workflow-runs/{id}"),
            admin,
            None,
        )
        .await;
        if r["status"] != "RUNNING" {
            return r;
        }
        app.advance(200).await;
    }
    panic!("run {id} did not end");
}

/// A user with rights on group B only cannot trigger, re-run, mark, stop, schedule or edit a
/// workflow of group B that runs a job of group A, directly or through a nested workflow; nor
/// save one that nests such a workflow. A user with rights on both can.
#[test]
fn a_workflow_is_run_only_by_users_allowed_every_group_it_reaches() {
    run_paused(|| async {
        let dir = tempfile::tempdir().unwrap();
        let app = TestApp::start_in(dir.path(), T0, |c| {
            c.security.admin_password = ADMIN_PW.into()
        })
        .await;
        let (svc, admin) = center(&app).await;
        let a = app.group;
        let b = group(&svc, &admin, "group-bbb").await;
        let job1 = app
            .job(JobSpec::cron(a, "a's job", "0 0 3 * * ?", "demoJobHandler"))
            .await;
        let userb = user(&svc, &admin, "userb", &[b]).await;
        let both = user(&svc, &admin, "userab", &[a, b]).await;

        let (s, _) = call(&svc, Method::GET, &format!("/v1/jobs/{job1}"), &userb, None).await;
        assert_eq!(s, StatusCode::FORBIDDEN, "B's user cannot see A's job");

        // the admin saves a workflow of group B running A's job with a param from the trigger
        let (s, wb) = save(
            &svc,
            &admin,
            b,
            "b runs a",
            json!({"nodes": [job_node("n1", job1, Some("${x}"))], "edges": []}),
        )
        .await;
        assert_eq!(s, StatusCode::CREATED, "{wb}");
        let wb = wb["id"].as_i64().unwrap();

        let trigger = json!({"workflowId": wb, "params": {"x": "chosen"}});
        let (s, v) = call(
            &svc,
            Method::POST,
            "/v1/workflow-runs",
            &userb,
            Some(trigger.clone()),
        )
        .await;
        assert_eq!(s, StatusCode::FORBIDDEN, "{v}");
        assert!(
            v["error"].as_str().unwrap().contains(&format!("group {a}")),
            "{v}"
        );
        let (_, runs) = call(&svc, Method::GET, "/v1/workflow-runs", &admin, None).await;
        assert_eq!(runs["total"], 0, "nothing ran: {runs}");
        assert!(
            app.dispatched(job1).await.is_empty(),
            "A's job was not dispatched"
        );

        // schedule start and stop, and an edit, are refused alike
        let (s, _) = call(
            &svc,
            Method::PUT,
            &format!("/v1/workflows/{wb}"),
            &admin,
            Some(json!({"jobGroup": b, "name": "b runs a", "version": 1,
                        "scheduleType": "CRON", "scheduleConf": "0 0 3 * * ?",
                        "definition": {"nodes": [job_node("n1", job1, Some("${x}"))], "edges": []}})),
        )
        .await;
        assert_eq!(s, StatusCode::OK);
        for op in ["start", "stop"] {
            let (s, v) = call(
                &svc,
                Method::POST,
                &format!("/v1/workflows/{wb}/{op}"),
                &userb,
                None,
            )
            .await;
            assert_eq!(s, StatusCode::FORBIDDEN, "{op}: {v}");
        }
        let (s, v) = call(
            &svc,
            Method::PUT,
            &format!("/v1/workflows/{wb}"),
            &userb,
            Some(json!({"jobGroup": b, "name": "b runs a", "version": 2,
                        "definition": {"nodes": [job_node("n1", job1, Some("mine"))], "edges": []}})),
        )
        .await;
        assert_eq!(s, StatusCode::FORBIDDEN, "{v}");

        // a run the admin started cannot be re-run, marked or stopped by B's user
        let (s, run) = call(
            &svc,
            Method::POST,
            "/v1/workflow-runs",
            &admin,
            Some(json!({"workflowId": wb, "params": {"x": "admin's"}})),
        )
        .await;
        assert_eq!(s, StatusCode::CREATED, "{run}");
        let run_id = run["id"].as_i64().unwrap();
        until_ended(&app, &svc, &admin, run_id).await;
        for (op, body) in [
            ("rerun", json!({"from": "n1"})),
            ("mark", json!({"node": "n1"})),
            ("stop", json!({})),
        ] {
            let (s, v) = call(
                &svc,
                Method::POST,
                &format!("/v1/workflow-runs/{run_id}/{op}"),
                &userb,
                Some(body),
            )
            .await;
            assert_eq!(s, StatusCode::FORBIDDEN, "{op}: {v}");
        }

        // through a nested workflow of group A
        let (s, wa) = save(
            &svc,
            &admin,
            a,
            "a's own",
            json!({"nodes": [job_node("j", job1, None)], "edges": []}),
        )
        .await;
        assert_eq!(s, StatusCode::CREATED, "{wa}");
        let (s, wb2) = save(
            &svc,
            &admin,
            b,
            "b nests a",
            json!({"nodes": [nested_node("inner", wa["id"].as_i64().unwrap())], "edges": []}),
        )
        .await;
        assert_eq!(s, StatusCode::CREATED, "{wb2}");
        let wb2 = wb2["id"].as_i64().unwrap();
        let (s, v) = call(
            &svc,
            Method::POST,
            "/v1/workflow-runs",
            &userb,
            Some(json!({"workflowId": wb2})),
        )
        .await;
        assert_eq!(s, StatusCode::FORBIDDEN, "{v}");

        // B's user cannot save a workflow that nests one reaching group A, even of group B
        let (s, v) = save(
            &svc,
            &userb,
            b,
            "sneaky",
            json!({"nodes": [nested_node("via", wb2)], "edges": []}),
        )
        .await;
        assert_eq!(s, StatusCode::BAD_REQUEST, "{v}");
        let msg = v["error"].as_str().unwrap();
        assert!(
            msg.contains("`via`") && msg.contains(&format!("group {a}")),
            "{msg}"
        );

        // a user allowed both groups may
        let (s, v) = call(
            &svc,
            Method::POST,
            "/v1/workflow-runs",
            &both,
            Some(trigger),
        )
        .await;
        assert_eq!(s, StatusCode::CREATED, "{v}");
        let r = until_ended(&app, &svc, &admin, v["id"].as_i64().unwrap()).await;
        assert_eq!(r["status"], "SUCCEEDED", "{r}");
        app.close().await;
    });
}

/// One trigger's expansion is bounded: a node param rendered past a job param's length fails
/// the node with the reason; a nesting that would start more than the bound's node runs is
/// refused when saved; a nested run keeps only its own values, reading its parent's.
#[test]
fn what_one_trigger_expands_to_is_bounded() {
    run_paused(|| async {
        let dir = tempfile::tempdir().unwrap();
        let app = TestApp::start_in(dir.path(), T0, |c| {
            c.security.admin_password = ADMIN_PW.into()
        })
        .await;
        let (svc, admin) = center(&app).await;
        let g = app.group;
        let job = app
            .job(JobSpec::cron(g, "echo", "0 0 3 * * ?", "demoJobHandler"))
            .await;

        // 500 × ${a} with a 60 KB `a`
        let (s, w) = save(
            &svc,
            &admin,
            g,
            "amplifier",
            json!({"nodes": [job_node("n", job, Some(&"${a}".repeat(500)))], "edges": []}),
        )
        .await;
        assert_eq!(s, StatusCode::CREATED, "{w}");
        let (s, run) = call(
            &svc,
            Method::POST,
            "/v1/workflow-runs",
            &admin,
            Some(json!({"workflowId": w["id"], "params": {"a": "x".repeat(60_000)}})),
        )
        .await;
        assert_eq!(s, StatusCode::CREATED, "{run}");
        let r = until_ended(&app, &svc, &admin, run["id"].as_i64().unwrap()).await;
        assert_eq!(r["status"], "FAILED", "{}", r["nodes"]);
        let node = &r["nodes"][0];
        assert_eq!(node["state"], "FAILED");
        assert!(
            node["message"]
                .as_str()
                .unwrap()
                .contains("longer than a job's param"),
            "{node}"
        );
        assert!(app.dispatched(job).await.is_empty(), "nothing was sent");
        // a param naming a key the context does not have fails the node, naming it
        let (s, typo) = save(
            &svc,
            &admin,
            g,
            "typo",
            json!({"nodes": [job_node("n", job, Some("day=${dya}"))], "edges": []}),
        )
        .await;
        assert_eq!(s, StatusCode::CREATED, "{typo}");
        let (s, run) = call(
            &svc,
            Method::POST,
            "/v1/workflow-runs",
            &admin,
            Some(json!({"workflowId": typo["id"], "params": {"day": "2026-12-02"}})),
        )
        .await;
        assert_eq!(s, StatusCode::CREATED, "{run}");
        let r = until_ended(&app, &svc, &admin, run["id"].as_i64().unwrap()).await;
        assert_eq!(r["nodes"][0]["state"], "FAILED", "{}", r["nodes"]);
        assert!(
            r["nodes"][0]["message"]
                .as_str()
                .unwrap()
                .contains("`${dya}`"),
            "{}",
            r["nodes"]
        );
        assert!(app.dispatched(job).await.is_empty(), "nothing was sent");

        // 3 levels × 25 nodes: 16,275 node runs from one trigger
        let plain: Vec<Value> = (0..25)
            .map(|i| job_node(&format!("j{i}"), job, None))
            .collect();
        let (s, l3) = save(
            &svc,
            &admin,
            g,
            "level 3",
            json!({"nodes": plain, "edges": []}),
        )
        .await;
        assert_eq!(s, StatusCode::CREATED, "{l3}");
        let nest = |id: i64| -> Value {
            let nodes: Vec<Value> = (0..25).map(|i| nested_node(&format!("w{i}"), id)).collect();
            json!({"nodes": nodes, "edges": []})
        };
        let (s, l2) = save(&svc, &admin, g, "level 2", nest(l3["id"].as_i64().unwrap())).await;
        assert_eq!(s, StatusCode::CREATED, "{l2}");
        let (s, v) = save(&svc, &admin, g, "level 1", nest(l2["id"].as_i64().unwrap())).await;
        assert_eq!(s, StatusCode::BAD_REQUEST, "{v}");
        assert!(
            v["error"].as_str().unwrap().contains("16275 node runs"),
            "{v}"
        );

        // a nested run stores its own values only and reads its parent's
        let (s, child) = save(
            &svc,
            &admin,
            g,
            "child",
            json!({"nodes": [job_node("c", job, Some("k=${k}"))], "edges": []}),
        )
        .await;
        assert_eq!(s, StatusCode::CREATED, "{child}");
        let (s, parent) = save(
            &svc,
            &admin,
            g,
            "parent",
            json!({"nodes": [nested_node("sub", child["id"].as_i64().unwrap())], "edges": []}),
        )
        .await;
        assert_eq!(s, StatusCode::CREATED, "{parent}");
        let (s, run) = call(
            &svc,
            Method::POST,
            "/v1/workflow-runs",
            &admin,
            Some(json!({"workflowId": parent["id"], "params": {"k": "v", "pad": "p".repeat(50_000)}})),
        )
        .await;
        assert_eq!(s, StatusCode::CREATED, "{run}");
        let r = until_ended(&app, &svc, &admin, run["id"].as_i64().unwrap()).await;
        assert_eq!(r["status"], "SUCCEEDED", "{}", r["nodes"]);
        let sub = r["nodes"][0]["childRun"].as_i64().unwrap();
        let (_, sub) = call(
            &svc,
            Method::GET,
            &format!("/v1/workflow-runs/{sub}"),
            &admin,
            None,
        )
        .await;
        assert_eq!(sub["context"], json!({}), "no copy of the parent's context");
        let rows = app.dispatched(job).await;
        assert_eq!(rows.len(), 1, "{rows:?}");
        assert_eq!(rows[0].executor_param.as_deref(), Some("k=v"));
        app.close().await;
    });
}

/// Checking a workflow whose many nodes name one nested workflow reads that workflow once,
/// not once per node.
#[test]
fn a_check_reads_each_nested_workflow_once() {
    run_paused(|| async {
        let dir = tempfile::tempdir().unwrap();
        let mut cfg = common::test_config(dir.path());
        cfg.security.admin_password = ADMIN_PW.into();
        let mut db = xjob::testing::store::connect(&cfg.database).await.unwrap();
        let reads = Arc::new(AtomicUsize::new(0));
        let r = reads.clone();
        db.set_metric_callback(move |info| {
            if info.statement.sql.contains("xjob_workflow\"")
                || info.statement.sql.contains("xjob_workflow ")
            {
                r.fetch_add(1, Ordering::Relaxed);
            }
        });
        let engine = Engine::builder(cfg)
            .database(db)
            .clock(Clock::tokio_at(T0))
            .handlers(xjob::demo::handlers().unwrap())
            .log_dir(dir.path().join("joblogs"))
            .start()
            .await
            .unwrap();
        let g = engine
            .ensure_group(xjob::demo::DEMO_APP, "demo")
            .await
            .unwrap();
        settle(engine.activity()).await;
        let app = TestApp {
            engine,
            group: g,
            dir: dir.path().to_path_buf(),
        };
        let (svc, admin) = center(&app).await;
        let job = app
            .job(JobSpec::cron(g, "echo", "0 0 3 * * ?", "demoJobHandler"))
            .await;
        let (s, inner) = save(
            &svc,
            &admin,
            g,
            "inner",
            json!({"nodes": [job_node("j", job, None)], "edges": []}),
        )
        .await;
        assert_eq!(s, StatusCode::CREATED, "{inner}");
        let inner = inner["id"].as_i64().unwrap();
        let nodes: Vec<Value> = (0..1000)
            .map(|i| nested_node(&format!("n{i}"), inner))
            .collect();
        let before = reads.load(Ordering::Relaxed);
        let (s, v) = call(
            &svc,
            Method::POST,
            "/v1/workflows/validate",
            &admin,
            Some(
                json!({"jobGroup": g, "name": "wide", "definition": {"nodes": nodes, "edges": []}}),
            ),
        )
        .await;
        assert_eq!((s, &v["valid"]), (StatusCode::OK, &json!(true)), "{v}");
        let n = reads.load(Ordering::Relaxed) - before;
        assert!(n <= 4, "{n} statements read workflows for one check");
        app.close().await;
    });
}

/// A job whose handler is the built-in command handler is a script job: with scripts
/// disabled (`security.scripts_enabled`), it is refused when created (`/v1` and the job API),
/// made one by an edit, given another command, triggered with a chosen param, or given a node
/// param in a workflow — even though the executor runs commands.
#[test]
fn the_command_handler_is_a_script_job() {
    run_paused(|| async {
        let dir = tempfile::tempdir().unwrap();
        let app = TestApp::start_in(dir.path(), T0, |c| {
            c.security.admin_password = ADMIN_PW.into();
            c.executor.scripts_enabled = true;
            c.security.scripts_enabled = false;
        })
        .await;
        let (svc, admin) = center(&app).await;
        let g = app.group;
        let userg = user(&svc, &admin, "userg", &[g]).await;
        let command = json!({"jobGroup": g, "jobDesc": "cmd", "author": "u", "scheduleType": "NONE",
                             "glueType": "BEAN", "executorHandler": "commandJobHandler",
                             "executorParam": "touch /tmp/xjob-mark"});
        for who in [&userg, &admin] {
            let (s, v) = call(&svc, Method::POST, "/v1/jobs", who, Some(command.clone())).await;
            assert_eq!(s, StatusCode::FORBIDDEN, "{v}");
            assert_eq!(v["field"], "executorHandler", "{v}");
        }
        // through XXL-JOB's job API, with the group's own token
        let (s, v) = call(
            &svc,
            Method::PUT,
            &format!("/v1/groups/{g}"),
            &admin,
            Some(
                json!({"appName": xjob::demo::DEMO_APP, "title": "demo", "addressType": 0,
                        "accessToken": "demo-group-token-0123"}),
            ),
        )
        .await;
        assert_eq!(s, StatusCode::OK, "{v}");
        let res = actix_web::test::call_service(
            &svc,
            actix_web::test::TestRequest::post()
                .uri("/api/addJob")
                .insert_header(("XXL-JOB-ACCESS-TOKEN", "demo-group-token-0123"))
                .insert_header(("XXL-JOB-APPNAME", xjob::demo::DEMO_APP))
                .set_json(&command)
                .to_request(),
        )
        .await;
        let v: Value = serde_json::from_slice(&actix_web::test::read_body(res).await).unwrap();
        assert_eq!(v["code"], 500, "{v}");
        assert!(
            v["msg"].as_str().unwrap().contains("scripts_enabled"),
            "{v}"
        );
        // made one by an edit
        let (s, plain) = call(
            &svc,
            Method::POST,
            "/v1/jobs",
            &userg,
            Some(
                json!({"jobGroup": g, "jobDesc": "plain", "author": "u", "scheduleType": "NONE",
                        "executorHandler": "demoJobHandler"}),
            ),
        )
        .await;
        assert_eq!(s, StatusCode::CREATED, "{plain}");
        let id = plain["id"].as_i64().unwrap();
        let mut edit = command.clone();
        edit["jobDesc"] = json!("plain");
        let (s, v) = call(
            &svc,
            Method::PUT,
            &format!("/v1/jobs/{id}"),
            &userg,
            Some(edit),
        )
        .await;
        assert_eq!(s, StatusCode::FORBIDDEN, "{v}");

        // a command job made while scripts were enabled (straight through the engine)
        let mut spec = JobSpec::cron(g, "cmd", "0 0 3 * * ?", "commandJobHandler");
        spec.executor_param = Some("true".into());
        let cmd = app.engine.add_job(spec).await.unwrap();
        let (s, v) = call(
            &svc,
            Method::POST,
            &format!("/v1/jobs/{cmd}/trigger"),
            &userg,
            Some(json!({"executorParam": "touch /tmp/xjob-mark"})),
        )
        .await;
        assert_eq!(s, StatusCode::FORBIDDEN, "{v}");
        assert_eq!(v["field"], "executorParam", "{v}");
        // its own param still runs
        let (s, v) = call(
            &svc,
            Method::POST,
            &format!("/v1/jobs/{cmd}/trigger"),
            &userg,
            Some(json!({})),
        )
        .await;
        assert_eq!(s, StatusCode::OK, "{v}");
        // a new command is refused, other edits are not
        let (_, current) = call(&svc, Method::GET, &format!("/v1/jobs/{cmd}"), &userg, None).await;
        let mut other = current.clone();
        other["executorParam"] = json!("touch /tmp/xjob-mark");
        let (s, v) = call(
            &svc,
            Method::PUT,
            &format!("/v1/jobs/{cmd}"),
            &userg,
            Some(other),
        )
        .await;
        assert_eq!(s, StatusCode::FORBIDDEN, "{v}");
        let mut desc = current.clone();
        desc["jobDesc"] = json!("renamed");
        let (s, v) = call(
            &svc,
            Method::PUT,
            &format!("/v1/jobs/{cmd}"),
            &userg,
            Some(desc),
        )
        .await;
        assert_eq!(s, StatusCode::OK, "{v}");

        // a workflow node param on it would choose the command
        let (s, v) = save(
            &svc,
            &userg,
            g,
            "chooser",
            json!({"nodes": [job_node("c", cmd, Some("${cmd}"))], "edges": []}),
        )
        .await;
        assert_eq!(s, StatusCode::BAD_REQUEST, "{v}");
        assert!(
            v["error"].as_str().unwrap().contains("commandJobHandler"),
            "{v}"
        );
        let (s, v) = save(
            &svc,
            &userg,
            g,
            "plain use",
            json!({"nodes": [job_node("c", cmd, None)], "edges": []}),
        )
        .await;
        assert_eq!(s, StatusCode::CREATED, "{v}");
        app.close().await;
    });
}

/// Creates an API key for the user of `token` and answers it.
async fn api_key<S>(svc: &S, token: &str, name: &str) -> String
where
    S: Service<actix_http::Request, Response = ServiceResponse, Error = actix_web::Error>,
{
    let (s, v) = call(
        svc,
        Method::POST,
        "/v1/api-keys",
        token,
        Some(json!({"name": name, "expiresInDays": 366})),
    )
    .await;
    assert_eq!(s, StatusCode::CREATED, "{v}");
    v["key"].as_str().unwrap().to_string()
}

/// A password reset by an administrator ends the user's API keys as it ends their sessions;
/// the user's own change ends their other sessions and, when asked, their keys; the answers
/// say how many. A key cannot change a password or revoke keys.
#[test]
fn password_resets_end_api_keys_and_keys_do_not_touch_credentials() {
    run_paused(|| async {
        let dir = tempfile::tempdir().unwrap();
        let app = TestApp::start_in(dir.path(), T0, |c| {
            c.security.admin_password = ADMIN_PW.into()
        })
        .await;
        let (svc, admin) = center(&app).await;
        let g = app.group;
        let u = user(&svc, &admin, "keyuser", &[g]).await;
        let key = api_key(&svc, &u, "ci").await;
        let (_, users) = call(
            &svc,
            Method::GET,
            "/v1/users?username=keyuser",
            &admin,
            None,
        )
        .await;
        let uid = users["items"][0]["id"].as_i64().unwrap();

        // what a key may not do to its user's credentials
        let (s, v) = call(
            &svc,
            Method::POST,
            "/v1/auth/password",
            &key,
            Some(json!({"oldPassword": USER_PW, "password": "another-secret-9"})),
        )
        .await;
        assert_eq!(s, StatusCode::FORBIDDEN, "{v}");
        let (_, keys) = call(&svc, Method::GET, "/v1/api-keys", &u, None).await;
        let key_id = keys["items"][0]["id"].as_i64().unwrap();
        let (s, v) = call(
            &svc,
            Method::DELETE,
            &format!("/v1/api-keys/{key_id}"),
            &key,
            None,
        )
        .await;
        assert_eq!(s, StatusCode::FORBIDDEN, "{v}");

        // the user's own change keeps keys unless asked
        let (s, v) = call(
            &svc,
            Method::POST,
            "/v1/auth/password",
            &u,
            Some(json!({"oldPassword": USER_PW, "password": "another-secret-9"})),
        )
        .await;
        assert_eq!(s, StatusCode::OK, "{v}");
        assert_eq!(v, json!({"sessionsEnded": 0, "apiKeysEnded": 0}));
        let (s, _) = call(&svc, Method::GET, "/v1/jobs", &key, None).await;
        assert_eq!(s, StatusCode::OK, "the key was kept");
        let (s, v) = call(
            &svc,
            Method::POST,
            "/v1/auth/password",
            &u,
            Some(
                json!({"oldPassword": "another-secret-9", "password": USER_PW, "endApiKeys": true}),
            ),
        )
        .await;
        assert_eq!(s, StatusCode::OK, "{v}");
        assert_eq!(v, json!({"sessionsEnded": 0, "apiKeysEnded": 1}));
        let (s, _) = call(&svc, Method::GET, "/v1/jobs", &key, None).await;
        assert_eq!(s, StatusCode::UNAUTHORIZED, "the key was revoked");

        // an administrator's reset ends sessions and keys
        let key = api_key(&svc, &u, "ci-2").await;
        let (s, v) = call(
            &svc,
            Method::PUT,
            &format!("/v1/users/{uid}"),
            &admin,
            Some(json!({"username": "keyuser", "password": "reset-secret-1", "role": 0, "permission": [g]})),
        )
        .await;
        assert_eq!(s, StatusCode::OK, "{v}");
        assert_eq!(
            (&v["sessionsEnded"], &v["apiKeysEnded"]),
            (&json!(1), &json!(1))
        );
        for t in [&u, &key] {
            let (s, _) = call(&svc, Method::GET, "/v1/jobs", t, None).await;
            assert_eq!(s, StatusCode::UNAUTHORIZED);
        }
        let (s, v) = call(
            &svc,
            Method::POST,
            "/v1/jobs",
            &key,
            Some(
                json!({"jobGroup": g, "jobDesc": "x", "author": "u", "scheduleType": "NONE",
                        "executorHandler": "demoJobHandler"}),
            ),
        )
        .await;
        assert_eq!(s, StatusCode::UNAUTHORIZED, "{v}");
        // an administrator's key cannot reset a password either
        let admin_key = {
            let (s, v) = call(
                &svc,
                Method::POST,
                "/v1/api-keys",
                &admin,
                Some(json!({"name": "ops", "role": 1, "expiresInDays": 1})),
            )
            .await;
            assert_eq!(s, StatusCode::CREATED, "{v}");
            v["key"].as_str().unwrap().to_string()
        };
        let (s, v) = call(
            &svc,
            Method::PUT,
            &format!("/v1/users/{uid}"),
            &admin_key,
            Some(json!({"username": "keyuser", "password": "by-a-key-123", "role": 0, "permission": [g]})),
        )
        .await;
        assert_eq!(s, StatusCode::FORBIDDEN, "{v}");
        app.close().await;
    });
}

/// A client address that keeps sending wrong access tokens to the admin API is refused for a
/// while, whatever it sends; other addresses are not.
#[test]
fn wrong_tokens_on_the_admin_api_are_limited_per_client() {
    use actix_web::test::{TestRequest, call_service, read_body};
    run_paused(|| async {
        let dir = tempfile::tempdir().unwrap();
        let app = TestApp::start_in(dir.path(), T0, |_| {}).await;
        let console = Console::new(app.engine.clone());
        let svc = init_service(
            actix_web::App::new()
                .configure(xjob::routes::center(console, Some("tok-0123456789".into()))),
        )
        .await;
        let beat = |from: &str, token: &str| {
            TestRequest::post()
                .uri("/api/registry")
                .peer_addr(format!("{from}:4000").parse().unwrap())
                .insert_header(("XXL-JOB-ACCESS-TOKEN", token.to_string()))
                .set_json(
                    json!({"registryGroup": "EXECUTOR", "registryKey": "some-app",
                                 "registryValue": "http://127.0.0.1:9999/"}),
                )
                .to_request()
        };
        let msg = |v: &Value| v["msg"].as_str().unwrap_or_default().to_string();
        let send = async |req| {
            let res = call_service(&svc, req).await;
            serde_json::from_slice::<Value>(&read_body(res).await).unwrap()
        };
        let max = app.engine.config().security.login_max_failures_per_client;
        for _ in 0..max {
            let v = send(beat("10.0.0.1", "guess")).await;
            assert_eq!(v["code"], 500);
            assert!(!msg(&v).contains("too many"), "{v}");
        }
        let v = send(beat("10.0.0.1", "guess")).await;
        assert!(msg(&v).contains("too many"), "{v}");
        let v = send(beat("10.0.0.1", "tok-0123456789")).await;
        assert!(
            msg(&v).contains("too many"),
            "refused whatever it sends: {v}"
        );
        let v = send(beat("10.0.0.2", "tok-0123456789")).await;
        assert_eq!(v["code"], 200, "another address: {v}");
        // after the window
        app.advance(app.engine.config().security.login_window_secs as i64 * 1000 + 1000)
            .await;
        let v = send(beat("10.0.0.1", "tok-0123456789")).await;
        assert_eq!(v["code"], 200, "{v}");
        app.close().await;
    });
}

/// One request as a browser would send it: method, path, headers, body; answers the status
/// and the JSON answer.
async fn browser<S>(
    svc: &S,
    method: Method,
    path: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> (StatusCode, Value)
where
    S: Service<actix_http::Request, Response = ServiceResponse, Error = actix_web::Error>,
{
    use actix_web::test::{TestRequest, call_service, read_body};
    let mut req = TestRequest::default()
        .method(method)
        .uri(path)
        .peer_addr("127.0.0.1:40000".parse().unwrap())
        .insert_header(("Host", "127.0.0.1:8080"));
    for (k, v) in headers {
        req = req.insert_header((k.to_string(), v.to_string()));
    }
    let res = call_service(svc, req.set_payload(body.to_string()).to_request()).await;
    let status = res.status();
    let v = serde_json::from_slice(&read_body(res).await).unwrap_or(Value::Null);
    (status, v)
}

/// State changes only by POST (or the REST verbs), credentials never in a URL, and a change
/// authenticated by the login cookie alone only from the console's own origin; bearer tokens
/// are unaffected.
#[test]
fn cookie_authenticated_writes_come_only_from_the_console() {
    run_paused(|| async {
        let dir = tempfile::tempdir().unwrap();
        let app = TestApp::start_in(dir.path(), T0, |c| {
            c.security.admin_password = ADMIN_PW.into()
        })
        .await;
        let (svc, admin) = center(&app).await;
        let g = app.group;
        let job = app
            .job(JobSpec::cron(g, "keep me", "0 0 3 * * ?", "demoJobHandler"))
            .await;
        let cookie = format!("XXL_JOB_LOGIN_IDENTITY={admin}");
        let v1_cookie = format!("xjob_token={admin}");
        let exists = async || {
            call(&svc, Method::GET, &format!("/v1/jobs/{job}"), &admin, None)
                .await
                .0
                == StatusCode::OK
        };

        // a link removes nothing
        let (s, _) = browser(
            &svc,
            Method::GET,
            &format!("/xxl-job-admin/jobinfo/remove?id={job}"),
            &[("Cookie", &cookie)],
            "",
        )
        .await;
        assert_eq!(s, StatusCode::METHOD_NOT_ALLOWED);
        assert!(exists().await);
        // nor a form another site posts
        let (_, v) = browser(
            &svc,
            Method::POST,
            "/xxl-job-admin/jobinfo/remove",
            &[
                ("Cookie", &cookie),
                ("Origin", "http://127.0.0.1:9999"),
                ("Content-Type", "application/x-www-form-urlencoded"),
            ],
            &format!("id={job}"),
        )
        .await;
        assert_eq!(v["code"], 500, "{v}");
        assert!(exists().await);
        // reads still work by GET
        let (_, v) = browser(
            &svc,
            Method::GET,
            "/xxl-job-admin/jobinfo/pageList?jobGroup=0&triggerStatus=-1",
            &[("Cookie", &cookie)],
            "",
        )
        .await;
        assert_eq!(v["recordsTotal"], 1, "{v}");

        // a text/plain POST from a foreign origin with the cookie creates nothing
        let new_job =
            json!({"jobGroup": g, "jobDesc": "csrf", "author": "x", "scheduleType": "NONE",
                             "executorHandler": "demoJobHandler"})
            .to_string();
        for headers in [
            vec![("Origin", "https://evil.example")],
            vec![
                ("Sec-Fetch-Site", "cross-site"),
                ("Origin", "https://evil.example"),
            ],
            vec![
                ("Sec-Fetch-Site", "same-site"),
                ("Origin", "http://sibling.127.0.0.1:8080"),
            ],
        ] {
            let mut h = vec![
                ("Cookie", v1_cookie.as_str()),
                ("Content-Type", "text/plain"),
            ];
            h.extend(headers);
            let (s, v) = browser(&svc, Method::POST, "/v1/jobs", &h, &new_job).await;
            assert_eq!(s, StatusCode::FORBIDDEN, "{v}");
        }
        let (_, jobs) = call(&svc, Method::GET, "/v1/jobs", &admin, None).await;
        assert_eq!(jobs["total"], 1, "{jobs}");
        // the console's own pages, a bearer token, and a client that is no browser may
        for h in [
            vec![
                ("Cookie", v1_cookie.as_str()),
                ("Origin", "http://127.0.0.1:8080"),
            ],
            vec![
                ("Cookie", v1_cookie.as_str()),
                ("Sec-Fetch-Site", "same-origin"),
            ],
            vec![("Cookie", v1_cookie.as_str())],
        ] {
            let mut h = h.clone();
            h.push(("Content-Type", "application/json"));
            let (s, v) = browser(&svc, Method::POST, "/v1/jobs", &h, &new_job).await;
            assert_eq!(s, StatusCode::CREATED, "{v}");
        }
        let bearer = format!("Bearer {admin}");
        let (s, v) = browser(
            &svc,
            Method::POST,
            "/v1/jobs",
            &[
                ("Authorization", &bearer),
                ("Origin", "https://automation.example"),
                ("Content-Type", "application/json"),
            ],
            &new_job,
        )
        .await;
        assert_eq!(s, StatusCode::CREATED, "{v}");

        // no password in a URL, whatever the method
        for method in [Method::GET, Method::POST] {
            let (s, v) = browser(
                &svc,
                method.clone(),
                &format!("/xxl-job-admin/login?userName=admin&password={ADMIN_PW}"),
                &[],
                "",
            )
            .await;
            assert!(
                s == StatusCode::METHOD_NOT_ALLOWED || v["code"] == 500,
                "{method}: {s} {v}"
            );
        }
        let (_, v) = browser(
            &svc,
            Method::POST,
            "/xxl-job-admin/login",
            &[("Content-Type", "application/x-www-form-urlencoded")],
            &format!("userName=admin&password={ADMIN_PW}"),
        )
        .await;
        assert_eq!(v["code"], 200, "a form login still works: {v}");
        app.close().await;
    });
}
