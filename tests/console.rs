//! The console REST API (`/v1/...`, `/openapi.json`, `/metrics`) through `actix_web::test`
//! against the same `routes::center` configuration `xjob serve` runs, on paused time.
#![allow(clippy::unwrap_used)]

mod common;

use actix_web::dev::{Service, ServiceResponse};
use actix_web::http::{Method, StatusCode, header};
use actix_web::test::{TestRequest, call_service, init_service, read_body};
use serde_json::{Value, json};
use xjob::console::Console;
use xjob::prelude::*;

use common::{T0, TestApp, run_paused};

const ADMIN_PW: &str = "admin-secret-1";

/// A console over a fresh engine (admin created with [`ADMIN_PW`]).
async fn open_console(
    dir: &std::path::Path,
    tweak: impl FnOnce(&mut Config),
) -> (TestApp, Console) {
    let app = TestApp::start_in(dir, T0, |c| {
        c.security.admin_password = ADMIN_PW.into();
        tweak(c);
    })
    .await;
    let console = Console::new(app.engine.clone());
    assert_eq!(console.bootstrap_admin().await.unwrap(), None);
    (app, console)
}

async fn call<S>(
    svc: &S,
    method: Method,
    path: &str,
    token: Option<&str>,
    body: Option<Value>,
) -> (StatusCode, Value)
where
    S: Service<actix_http::Request, Response = ServiceResponse, Error = actix_web::Error>,
{
    let mut req = TestRequest::default()
        .method(method)
        .uri(path)
        .peer_addr("127.0.0.1:40000".parse().unwrap());
    if let Some(t) = token {
        req = req.insert_header((header::AUTHORIZATION, format!("Bearer {t}")));
    }
    if let Some(b) = body {
        req = req.set_json(b);
    }
    let res = call_service(svc, req.to_request()).await;
    let status = res.status();
    let bytes = read_body(res).await;
    let v = if bytes.is_empty() {
        Value::Null
    } else {
        serde_json::from_slice(&bytes)
            .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&bytes).into()))
    };
    (status, v)
}

async fn login<S>(svc: &S, user: &str, pw: &str) -> String
where
    S: Service<actix_http::Request, Response = ServiceResponse, Error = actix_web::Error>,
{
    let (s, v) = call(
        svc,
        Method::POST,
        "/v1/auth/login",
        None,
        Some(json!({ "username": user, "password": pw })),
    )
    .await;
    assert_eq!(s, StatusCode::OK, "{v}");
    v["token"].as_str().unwrap().to_string()
}

fn job_body(group: i64, desc: &str, handler: &str) -> Value {
    json!({
        "jobGroup": group, "jobDesc": desc, "author": "ops",
        "scheduleType": "CRON", "scheduleConf": "0/5 * * * * ?",
        "executorHandler": handler, "executorParam": "from-cron",
        "executorRouteStrategy": "FIRST", "executorBlockStrategy": "SERIAL_EXECUTION",
        "misfireStrategy": "DO_NOTHING", "glueType": "BEAN"
    })
}

/// The console app of a fresh engine with an admin session: each call answers (status, JSON).
struct Api<S> {
    svc: S,
    token: String,
}

impl<S> Api<S>
where
    S: Service<actix_http::Request, Response = ServiceResponse, Error = actix_web::Error>,
{
    async fn get(&self, path: &str) -> (StatusCode, Value) {
        call(&self.svc, Method::GET, path, Some(&self.token), None).await
    }
    async fn post(&self, path: &str, body: Option<Value>) -> (StatusCode, Value) {
        call(&self.svc, Method::POST, path, Some(&self.token), body).await
    }
    async fn put(&self, path: &str, body: Value) -> (StatusCode, Value) {
        call(&self.svc, Method::PUT, path, Some(&self.token), Some(body)).await
    }
    async fn delete(&self, path: &str) -> StatusCode {
        call(&self.svc, Method::DELETE, path, Some(&self.token), None)
            .await
            .0
    }
    /// `GET` with another session's token.
    async fn get_as(&self, token: &str, path: &str) -> (StatusCode, Value) {
        call(&self.svc, Method::GET, path, Some(token), None).await
    }
}

/// The console of a fresh engine in `dir`, signed in as the admin.
async fn admin_api(
    dir: &std::path::Path,
) -> (
    TestApp,
    Api<impl Service<actix_http::Request, Response = ServiceResponse, Error = actix_web::Error>>,
) {
    let (app, console) = open_console(dir, |_| {}).await;
    let svc = init_service(
        actix_web::App::new().configure(xjob::routes::center(console, Some("tok".into()))),
    )
    .await;
    let token = login(&svc, "admin", ADMIN_PW).await;
    (app, Api { svc, token })
}

/// A stopped job created through the API; answers its id.
async fn create_job<S>(api: &Api<S>, body: Value) -> i64
where
    S: Service<actix_http::Request, Response = ServiceResponse, Error = actix_web::Error>,
{
    let (s, job) = api.post("/v1/jobs", Some(body)).await;
    assert_eq!(s, StatusCode::CREATED, "{job}");
    job["id"].as_i64().unwrap()
}

/// `me` names the signed-in admin; a password change ends the user's other sessions; logout
/// ends this one and the new password signs in.
#[test]
fn auth_me_password_change_and_logout() {
    run_paused(|| async {
        let dir = tempfile::tempdir().unwrap();
        let (app, api) = admin_api(dir.path()).await;
        let (s, me) = api.get("/v1/auth/me").await;
        assert_eq!(
            (s, me["username"].as_str(), me["role"].as_i64()),
            (StatusCode::OK, Some("admin"), Some(1))
        );
        let other = login(&api.svc, "admin", ADMIN_PW).await;
        assert_eq!(api.get_as(&other, "/v1/auth/me").await.0, StatusCode::OK);
        let (s, v) = api
            .post(
                "/v1/auth/password",
                Some(json!({ "oldPassword": ADMIN_PW, "password": "a-new-secret-2" })),
            )
            .await;
        assert_eq!(s, StatusCode::OK, "{v}");
        assert_eq!(v, json!({"sessionsEnded": 1, "apiKeysEnded": 0}));
        let (s, _) = api.get_as(&other, "/v1/auth/me").await;
        assert_eq!(s, StatusCode::UNAUTHORIZED, "the other session ended");
        assert_eq!(
            api.post("/v1/auth/logout", None).await.0,
            StatusCode::NO_CONTENT
        );
        assert_eq!(api.get("/v1/auth/me").await.0, StatusCode::UNAUTHORIZED);
        login(&api.svc, "admin", "a-new-secret-2").await;
        app.close().await;
    });
}

/// The demo group is listed live (the in-process executor beats); a manual group is created
/// with its addresses, changed to automatic, read back and deleted.
#[test]
fn groups_are_listed_created_changed_and_deleted() {
    run_paused(|| async {
        let dir = tempfile::tempdir().unwrap();
        let (app, api) = admin_api(dir.path()).await;
        let (s, groups) = api.get("/v1/groups").await;
        assert_eq!(s, StatusCode::OK);
        assert_eq!(groups["total"], 1);
        assert_eq!(groups["items"][0]["appName"], "xjob-demo");
        assert_eq!(
            groups["items"][0]["registryList"].as_array().unwrap().len(),
            1
        );
        let (s, g) = api
            .post(
                "/v1/groups",
                Some(
                    json!({ "appName": "billing-exec", "title": "Billing", "addressType": 1,
                             "addressList": "http://10.0.0.1:9999/,http://10.0.0.2:9999/" }),
                ),
            )
            .await;
        assert_eq!(s, StatusCode::CREATED, "{g}");
        let billing = g["id"].as_i64().unwrap();
        assert_eq!(g["registryList"].as_array().unwrap().len(), 2);
        let (s, g) = api
            .put(
                &format!("/v1/groups/{billing}"),
                json!({ "appName": "billing-exec", "title": "Billing v2", "addressType": 0 }),
            )
            .await;
        assert_eq!(
            (s, g["title"].as_str()),
            (StatusCode::OK, Some("Billing v2"))
        );
        let (s, g) = api.get(&format!("/v1/groups/{billing}")).await;
        assert_eq!((s, g["addressType"].as_i64()), (StatusCode::OK, Some(0)));
        assert_eq!(
            api.delete(&format!("/v1/groups/{billing}")).await,
            StatusCode::NO_CONTENT
        );
        assert_eq!(
            api.get(&format!("/v1/groups/{billing}")).await.0,
            StatusCode::NOT_FOUND
        );
        app.close().await;
    });
}

/// A cron job: its next fire times previewed, created stopped, started, found by filters,
/// edited (the running job's next fire moves), triggered once with a param, deleted.
#[test]
fn jobs_are_previewed_created_started_edited_triggered_and_deleted() {
    run_paused(|| async {
        let dir = tempfile::tempdir().unwrap();
        let (app, api) = admin_api(dir.path()).await;
        let demo = app.group as i64;
        let (s, next) = api
            .get(
                "/v1/jobs/next-fire-times?scheduleType=CRON&scheduleConf=0/5%20*%20*%20*%20*%20%3F",
            )
            .await;
        assert_eq!(s, StatusCode::OK, "{next}");
        assert_eq!(next["total"], 5);
        assert_eq!(next["items"][0], "2026-11-21T14:00:05Z");
        assert_eq!(next["items"][4], "2026-11-21T14:00:25Z");
        let (s, job) = api
            .post("/v1/jobs", Some(job_body(demo, "hello", "demoJobHandler")))
            .await;
        assert_eq!(s, StatusCode::CREATED, "{job}");
        assert_eq!(job["triggerStatus"], 0);
        let id = job["id"].as_i64().unwrap();
        let (s, job) = api.post(&format!("/v1/jobs/{id}/start"), None).await;
        assert_eq!(
            (s, job["triggerStatus"].as_i64()),
            (StatusCode::OK, Some(1))
        );
        assert_eq!(job["triggerNextTime"], T0 + 5_000);
        let (s, jobs) = api
            .get(&format!(
                "/v1/jobs?jobGroup={demo}&triggerStatus=1&jobDesc=hel"
            ))
            .await;
        assert_eq!((s, jobs["total"].as_i64()), (StatusCode::OK, Some(1)));

        let mut edit = job_body(demo, "hello", "demoJobHandler");
        edit["scheduleConf"] = json!("0 0 * * * ?");
        let (s, job) = api.put(&format!("/v1/jobs/{id}"), edit).await;
        assert_eq!(s, StatusCode::OK, "{job}");
        assert_eq!(job["triggerNextTime"], T0 + 3_600_000);
        let (s, job) = api.get(&format!("/v1/jobs/{id}")).await;
        assert_eq!(
            (s, job["scheduleConf"].as_str()),
            (StatusCode::OK, Some("0 0 * * * ?"))
        );

        let (s, _) = api
            .post(
                &format!("/v1/jobs/{id}/trigger"),
                Some(json!({ "executorParam": "by-hand" })),
            )
            .await;
        assert_eq!(s, StatusCode::OK);
        app.advance(1_000).await;
        let (_, logs) = api.get(&format!("/v1/logs?jobId={id}")).await;
        assert_eq!(logs["items"][0]["executorParam"], "by-hand", "{logs}");
        assert_eq!(logs["items"][0]["triggerType"], "MANUAL");
        // no executorParam (or no body): the job's own param; "" an empty one
        for (body, want) in [
            (Some(json!({})), "from-cron"),
            (None, "from-cron"),
            (Some(json!({ "executorParam": null })), "from-cron"),
            (Some(json!({ "executorParam": "" })), ""),
        ] {
            let (s, v) = api
                .post(&format!("/v1/jobs/{id}/trigger"), body.clone())
                .await;
            assert_eq!(s, StatusCode::OK, "{v}");
            app.advance(1_000).await;
            let (_, logs) = api.get(&format!("/v1/logs?jobId={id}&limit=1")).await;
            assert_eq!(logs["items"][0]["executorParam"], want, "{body:?}: {logs}");
        }

        let (s, _) = api.post(&format!("/v1/jobs/{id}/stop"), None).await;
        assert_eq!(s, StatusCode::OK);
        assert_eq!(
            api.delete(&format!("/v1/jobs/{id}")).await,
            StatusCode::NO_CONTENT
        );
        assert_eq!(
            api.get(&format!("/v1/jobs/{id}")).await.0,
            StatusCode::NOT_FOUND
        );
        app.close().await;
    });
}

/// `triggerStatus: 1` creates a job running in one request: its first fire is what a start
/// gives, it fires, and it is audited as created and started. Any other value is refused with
/// nothing stored; 0 or null create it stopped.
#[test]
fn a_job_created_running_fires_like_one_created_and_started() {
    run_paused(|| async {
        use sea_orm::{ConnectionTrait, Statement};
        let dir = tempfile::tempdir().unwrap();
        let (app, api) = admin_api(dir.path()).await;
        let demo = app.group as i64;
        let jobs_total = |v: &Value| v["total"].as_i64();
        let (_, before) = api.get("/v1/jobs").await;
        for bad in [json!(2), json!(-1), json!("1"), json!(1.5), json!(true)] {
            let mut body = job_body(demo, "bad status", "demoJobHandler");
            body["triggerStatus"] = bad.clone();
            let (s, v) = api.post("/v1/jobs", Some(body)).await;
            assert_eq!(
                (s, v["field"].as_str()),
                (StatusCode::BAD_REQUEST, Some("triggerStatus")),
                "{bad}: {v}"
            );
        }
        let mut none = job_body(demo, "never fires", "demoJobHandler");
        none["scheduleType"] = json!("NONE");
        none["triggerStatus"] = json!(1);
        let (s, v) = api.post("/v1/jobs", Some(none)).await;
        assert_eq!(
            (s, v["field"].as_str()),
            (StatusCode::BAD_REQUEST, Some("scheduleType")),
            "{v}"
        );
        let (_, after) = api.get("/v1/jobs").await;
        assert_eq!(jobs_total(&after), jobs_total(&before), "nothing stored");

        for stopped in [json!(0), Value::Null] {
            let mut body = job_body(demo, "stopped", "demoJobHandler");
            body["triggerStatus"] = stopped;
            let (s, job) = api.post("/v1/jobs", Some(body)).await;
            assert_eq!(
                (s, job["triggerStatus"].as_i64()),
                (StatusCode::CREATED, Some(0))
            );
            assert_eq!(job["triggerNextTime"], 0);
        }

        let mut body = job_body(demo, "at once", "demoJobHandler");
        body["triggerStatus"] = json!(1);
        let (s, job) = api.post("/v1/jobs", Some(body)).await;
        assert_eq!(s, StatusCode::CREATED, "{job}");
        assert_eq!(job["triggerStatus"], 1);
        assert_eq!(job["triggerNextTime"], T0 + 5_000);
        let id = job["id"].as_i64().unwrap();
        // the same job created and then started gets the same first fire
        let twin = create_job(&api, job_body(demo, "twin", "demoJobHandler")).await;
        let (_, started) = api.post(&format!("/v1/jobs/{twin}/start"), None).await;
        assert_eq!(started["triggerNextTime"], job["triggerNextTime"]);
        let (_, twin_stored) = api.get(&format!("/v1/jobs/{twin}")).await;
        assert_eq!(started, twin_stored, "a start answers the job as stored");
        let (_, stored) = api.get(&format!("/v1/jobs/{id}")).await;
        assert_eq!(stored, job, "answered as stored");

        app.advance(6_000).await;
        let (_, logs) = api.get(&format!("/v1/logs?jobId={id}")).await;
        assert_eq!(logs["total"], 1, "{logs}");
        assert_eq!(logs["items"][0]["triggerType"], "CRON");
        assert_eq!(logs["items"][0]["executorParam"], "from-cron");

        // the audit page writes what is queued before it reads
        assert_eq!(api.get("/v1/audit?limit=1").await.0, StatusCode::OK);
        let db = app.engine.db();
        let rows = db
            .query_all_raw(Statement::from_string(
                db.get_database_backend(),
                format!("SELECT action FROM xjob_audit WHERE target_id = '{id}' ORDER BY id"),
            ))
            .await
            .unwrap();
        let actions: Vec<String> = rows
            .iter()
            .map(|r| r.try_get::<String>("", "action").unwrap())
            .collect();
        assert_eq!(actions, ["job.create", "job.start"]);
        app.close().await;
    });
}

/// Runs of a started job are listed by status, naming their job, with their rolling log; a
/// long run is killed (once: a second kill is a conflict); the dashboard counts them as they
/// finish (no minute's wait); a clear deletes them.
#[test]
fn runs_are_listed_read_killed_counted_and_cleared() {
    run_paused(|| async {
        let dir = tempfile::tempdir().unwrap();
        let (app, api) = admin_api(dir.path()).await;
        let demo = app.group as i64;
        let id = create_job(&api, job_body(demo, "hello", "demoJobHandler")).await;
        api.post(&format!("/v1/jobs/{id}/start"), None).await;
        app.advance(11_000).await;
        let (s, logs) = api
            .get(&format!("/v1/logs?jobId={id}&status=success"))
            .await;
        assert_eq!(s, StatusCode::OK, "{logs}");
        assert_eq!(logs["total"], 2, "{logs}");
        let log_id = logs["items"][0]["id"].as_i64().unwrap();
        assert_eq!(logs["items"][0]["status"], "success");
        assert_eq!(logs["items"][0]["jobDesc"], "hello", "runs name their job");
        let (s, one) = api.get(&format!("/v1/logs/{log_id}")).await;
        assert_eq!((s, one["handleCode"].as_i64()), (StatusCode::OK, Some(200)));
        assert_eq!(one["jobDesc"], "hello");
        let (s, content) = api
            .get(&format!("/v1/logs/{log_id}/content?fromLine=1"))
            .await;
        assert_eq!(s, StatusCode::OK, "{content}");
        assert!(
            content["content"]
                .as_str()
                .unwrap()
                .contains("param: from-cron"),
            "{content}"
        );
        let to = content["toLine"].as_i64().unwrap();
        let (_, rest) = api
            .get(&format!("/v1/logs/{log_id}/content?fromLine={}", to + 1))
            .await;
        assert_eq!(rest["end"], true, "{rest}");

        let mut long = job_body(demo, "long", "sleepJobHandler");
        long["scheduleType"] = json!("NONE");
        long["scheduleConf"] = json!(null);
        let long_id = create_job(&api, long).await;
        api.post(
            &format!("/v1/jobs/{long_id}/trigger"),
            Some(json!({ "executorParam": "600" })),
        )
        .await;
        app.advance(1_000).await;
        let (_, running) = api
            .get(&format!("/v1/logs?jobId={long_id}&status=running"))
            .await;
        assert_eq!(running["total"], 1, "{running}");
        let run = running["items"][0]["id"].as_i64().unwrap();
        let (s, killed) = api.post(&format!("/v1/logs/{run}/kill"), None).await;
        assert_eq!(s, StatusCode::OK, "{killed}");
        assert_eq!(killed["handleCode"], 500);
        assert_eq!(killed["status"], "failed");
        let (s, again) = api.post(&format!("/v1/logs/{run}/kill"), None).await;
        assert_eq!(s, StatusCode::CONFLICT, "{again}");

        // no count pass asked for: the dashboard counts today's runs as they finish
        let (s, d) = api.get("/v1/dashboard").await;
        assert_eq!(s, StatusCode::OK, "{d}");
        assert_eq!(d["jobInfoCount"], 2);
        assert_eq!(d["jobLogSuccessCount"], 2, "{d}");
        assert_eq!(d["jobLogFailCount"], 1, "{d}");
        assert_eq!(d["executorCount"], 1);
        let (s, chart) = api
            .get("/v1/dashboard/chart?from=2026-11-15&to=2026-11-22")
            .await;
        assert_eq!(s, StatusCode::OK, "{chart}");
        assert_eq!(chart["triggerDayList"].as_array().unwrap().len(), 7);
        assert_eq!(chart["triggerDayList"][6], "2026-11-21");
        assert_eq!(chart["triggerDayCountSucList"][6], 2);
        assert_eq!(chart["triggerCountFailTotal"], 1);

        let (s, c) = api
            .post(
                "/v1/logs/clear",
                Some(json!({ "jobGroup": demo, "jobId": id, "type": 9 })),
            )
            .await;
        assert_eq!(s, StatusCode::OK, "{c}");
        assert_eq!(c["deleted"], 2);
        let (_, logs) = api.get(&format!("/v1/logs?jobId={id}")).await;
        assert_eq!(logs["total"], 0);
        app.close().await;
    });
}

/// Users are created (no password in the answer), found, given more groups and deleted; a
/// session in use sees each change to its user at once (a single node caches sessions).
#[test]
fn users_are_managed_and_their_sessions_follow() {
    run_paused(|| async {
        let dir = tempfile::tempdir().unwrap();
        let (app, api) = admin_api(dir.path()).await;
        let demo = app.group as i64;
        let (_, g) = api
            .post(
                "/v1/groups",
                Some(json!({ "appName": "billing-exec", "title": "Billing", "addressType": 0 })),
            )
            .await;
        let billing = g["id"].as_i64().unwrap();
        let (s, u) = api
            .post(
                "/v1/users",
                Some(
                    json!({ "username": "alice", "password": "alice-pw-1", "role": 0,
                             "permission": [demo] }),
                ),
            )
            .await;
        assert_eq!(s, StatusCode::CREATED, "{u}");
        assert!(u.get("password").is_none());
        let uid = u["id"].as_i64().unwrap();
        let alice = login(&api.svc, "alice", "alice-pw-1").await;
        let (s, me) = api.get_as(&alice, "/v1/auth/me").await;
        assert_eq!(
            (s, me["permission"].as_array().map(Vec::len)),
            (StatusCode::OK, Some(1))
        );
        let (s, u) = api
            .put(
                &format!("/v1/users/{uid}"),
                json!({ "role": 0, "permission": [demo, billing] }),
            )
            .await;
        assert_eq!(
            (s, u["permission"].as_array().unwrap().len()),
            (StatusCode::OK, 2)
        );
        let (s, list) = api.get("/v1/users?username=ali").await;
        assert_eq!((s, list["total"].as_i64()), (StatusCode::OK, Some(1)));
        let (s, me) = api.get_as(&alice, "/v1/auth/me").await;
        assert_eq!(
            (s, me["permission"].as_array().map(Vec::len)),
            (StatusCode::OK, Some(2))
        );
        assert_eq!(api.get_as(&alice, "/v1/jobs").await.0, StatusCode::OK);
        // an administrator's password reset ends every session the user had
        let (s, u) = api
            .put(
                &format!("/v1/users/{uid}"),
                json!({ "role": 0, "permission": [demo, billing], "password": "alice-pw-2" }),
            )
            .await;
        assert_eq!(s, StatusCode::OK, "{u}");
        let (s, _) = api.get_as(&alice, "/v1/jobs").await;
        assert_eq!(
            s,
            StatusCode::UNAUTHORIZED,
            "the old session ends with the reset"
        );
        let alice = login(&api.svc, "alice", "alice-pw-2").await;
        assert_eq!(api.get_as(&alice, "/v1/jobs").await.0, StatusCode::OK);
        // an edit that keeps the password keeps the sessions
        let (s, _) = api
            .put(
                &format!("/v1/users/{uid}"),
                json!({ "role": 0, "permission": [demo] }),
            )
            .await;
        assert_eq!(s, StatusCode::OK);
        assert_eq!(api.get_as(&alice, "/v1/jobs").await.0, StatusCode::OK);
        assert_eq!(
            api.delete(&format!("/v1/users/{uid}")).await,
            StatusCode::NO_CONTENT
        );
        let (s, _) = api.get_as(&alice, "/v1/jobs").await;
        assert_eq!(s, StatusCode::UNAUTHORIZED, "a deleted user's session ends");
        app.close().await;
    });
}

/// Every console error answers the right status with JSON naming the field.
#[test]
fn errors_name_the_field_and_use_the_right_status() {
    run_paused(|| async {
        let dir = tempfile::tempdir().unwrap();
        let (app, console) = open_console(dir.path(), |_| {}).await;
        let svc = init_service(
            actix_web::App::new().configure(xjob::routes::center(console, Some("tok".into()))),
        )
        .await;
        let admin = login(&svc, "admin", ADMIN_PW).await;
        let t = Some(admin.as_str());
        let demo = app.group as i64;

        let bad = |patch: Value| {
            let mut b = job_body(demo, "d", "demoJobHandler");
            for (k, v) in patch.as_object().unwrap() {
                b[k] = v.clone();
            }
            b
        };
        for (patch, field) in [
            (json!({ "jobDesc": "" }), "jobDesc"),
            (json!({ "author": " " }), "author"),
            (json!({ "scheduleConf": "61 * * * * ?" }), "scheduleConf"),
            (
                json!({ "scheduleType": "FIX_RATE", "scheduleConf": "0" }),
                "scheduleConf",
            ),
            (json!({ "scheduleType": "SOMETIMES" }), "scheduleType"),
            (json!({ "executorHandler": "" }), "executorHandler"),
            (
                json!({ "executorRouteStrategy": "NEAREST" }),
                "executorRouteStrategy",
            ),
            (
                json!({ "executorBlockStrategy": "QUEUE" }),
                "executorBlockStrategy",
            ),
            (json!({ "misfireStrategy": "RETRY" }), "misfireStrategy"),
            (json!({ "childJobId": "12345" }), "childJobId"),
            (json!({ "jobGroup": 999 }), "jobGroup"),
            (json!({ "timeZone": "Mars/Base" }), "timeZone"),
            (json!({ "executorTimeout": "soon" }), "executorTimeout"),
            // every text within its column; a param within 16,000 characters
            (json!({ "jobDesc": "d".repeat(256) }), "jobDesc"),
            (json!({ "author": "a".repeat(65) }), "author"),
            (json!({ "alarmEmail": "e".repeat(256) }), "alarmEmail"),
            (
                json!({ "executorHandler": "h".repeat(256) }),
                "executorHandler",
            ),
            (
                json!({ "executorParam": "p".repeat(16_001) }),
                "executorParam",
            ),
            (
                json!({ "alarmWebhook": "http://hooks.example/x" }),
                "alarmWebhook",
            ),
        ] {
            let (s, v) = call(&svc, Method::POST, "/v1/jobs", t, Some(bad(patch.clone()))).await;
            assert_eq!(s, StatusCode::BAD_REQUEST, "{patch} → {v}");
            assert_eq!(v["field"], field, "{patch} → {v}");
            assert_eq!(v["status"], 400);
        }
        let (_, jobs) = call(&svc, Method::GET, "/v1/jobs", t, None).await;
        assert_eq!(jobs["total"], 0, "nothing half-written");
        // a manual trigger's param and addresses are bounded too (before anything is sent)
        let (s, job) = call(&svc, Method::POST, "/v1/jobs", t, Some(bad(json!({})))).await;
        assert_eq!(s, StatusCode::CREATED, "{job}");
        let trigger = format!("/v1/jobs/{}/trigger", job["id"]);
        for (body, field) in [
            (
                json!({ "executorParam": "p".repeat(16_001) }),
                "executorParam",
            ),
            (
                json!({ "addressList": format!("http://{}/", "h".repeat(300)) }),
                "addressList",
            ),
            (
                json!({ "addressList": "http://a/,".repeat(1_700) }),
                "addressList",
            ),
        ] {
            let (s, v) = call(&svc, Method::POST, &trigger, t, Some(body)).await;
            assert_eq!(
                (s, v["field"].as_str()),
                (StatusCode::BAD_REQUEST, Some(field)),
                "{v}"
            );
        }
        let (_, runs) = call(&svc, Method::GET, "/v1/logs", t, None).await;
        assert_eq!(runs["total"], 0, "nothing triggered");

        for (body, field) in [
            (json!({ "appName": "abc", "title": "t" }), "appName"),
            (json!({ "appName": "ab<cd", "title": "t" }), "appName"),
            (json!({ "appName": "good-app", "title": "" }), "title"),
            (
                json!({ "appName": "good-app", "title": "t", "addressType": 1, "addressList": "http://a/,," }),
                "addressList",
            ),
        ] {
            let (s, v) = call(&svc, Method::POST, "/v1/groups", t, Some(body)).await;
            assert_eq!(
                (s, v["field"].as_str()),
                (StatusCode::BAD_REQUEST, Some(field)),
                "{v}"
            );
        }
        // a path id that is not a number is a validation error naming `id`, not a 404
        for (m, path) in [
            (Method::GET, "/v1/jobs/abc"),
            (Method::POST, "/v1/jobs/abc/start"),
            (Method::GET, "/v1/groups/x1"),
            (Method::GET, "/v1/logs/1.5"),
            (Method::DELETE, "/v1/users/-"),
        ] {
            let (s, v) = call(&svc, m.clone(), path, t, None).await;
            assert_eq!(
                (s, v["field"].as_str()),
                (StatusCode::BAD_REQUEST, Some("id")),
                "{m} {path}: {v}"
            );
        }
        for (body, field) in [
            (
                json!({ "username": "bob", "password": "long-enough-1" }),
                "username",
            ),
            (
                json!({ "username": "bobby", "password": "short" }),
                "password",
            ),
            (
                json!({ "username": "bobby", "password": "long-enough-1", "role": 7 }),
                "role",
            ),
            (
                json!({ "username": "bobby", "password": "long-enough-1", "permission": [4242] }),
                "permission",
            ),
        ] {
            let (s, v) = call(&svc, Method::POST, "/v1/users", t, Some(body)).await;
            assert_eq!(
                (s, v["field"].as_str()),
                (StatusCode::BAD_REQUEST, Some(field)),
                "{v}"
            );
        }
        let (s, v) = call(
            &svc,
            Method::GET,
            "/v1/jobs/next-fire-times?scheduleType=CRON&scheduleConf=nope",
            t,
            None,
        )
        .await;
        assert_eq!(
            (s, v["field"].as_str()),
            (StatusCode::BAD_REQUEST, Some("scheduleConf"))
        );
        let (s, v) = call(&svc, Method::GET, "/v1/logs?status=maybe", t, None).await;
        assert_eq!(
            (s, v["field"].as_str()),
            (StatusCode::BAD_REQUEST, Some("status"))
        );
        let (s, v) = call(&svc, Method::GET, "/v1/logs?limit=abc", t, None).await;
        assert_eq!(
            (s, v["field"].as_str()),
            (StatusCode::BAD_REQUEST, Some("query")),
            "{v}"
        );
        let (s, v) = call(
            &svc,
            Method::POST,
            "/v1/logs/clear",
            t,
            Some(json!({ "type": 10 })),
        )
        .await;
        assert_eq!(
            (s, v["field"].as_str()),
            (StatusCode::BAD_REQUEST, Some("type"))
        );
        let (s, v) = call(
            &svc,
            Method::POST,
            "/v1/auth/password",
            t,
            Some(json!({ "oldPassword": "wrong-one", "password": "whatever-new" })),
        )
        .await;
        assert_eq!(
            (s, v["field"].as_str()),
            (StatusCode::BAD_REQUEST, Some("oldPassword"))
        );

        // 401
        let (s, _) = call(&svc, Method::GET, "/v1/jobs", None, None).await;
        assert_eq!(s, StatusCode::UNAUTHORIZED);
        let (s, _) = call(&svc, Method::GET, "/v1/jobs", Some("not-a-token"), None).await;
        assert_eq!(s, StatusCode::UNAUTHORIZED);
        // 404
        for path in ["/v1/jobs/4242", "/v1/groups/4242", "/v1/logs/4242"] {
            let (s, _) = call(&svc, Method::GET, path, t, None).await;
            assert_eq!(s, StatusCode::NOT_FOUND, "{path}");
        }
        let (s, _) = call(&svc, Method::DELETE, "/v1/users/4242", t, None).await;
        assert_eq!(s, StatusCode::NOT_FOUND);
        // 409
        let (s, _) = call(
            &svc,
            Method::POST,
            "/v1/groups",
            t,
            Some(json!({ "appName": "xjob-demo", "title": "dup" })),
        )
        .await;
        assert_eq!(s, StatusCode::CONFLICT);
        call(
            &svc,
            Method::POST,
            "/v1/jobs",
            t,
            Some(job_body(demo, "j", "demoJobHandler")),
        )
        .await;
        let (s, v) = call(&svc, Method::DELETE, &format!("/v1/groups/{demo}"), t, None).await;
        assert_eq!(s, StatusCode::CONFLICT, "a group with jobs: {v}");
        let (s, _) = call(
            &svc,
            Method::POST,
            "/v1/users",
            t,
            Some(json!({ "username": "admin", "password": "long-enough-1" })),
        )
        .await;
        assert_eq!(s, StatusCode::CONFLICT);
        let (_, me) = call(&svc, Method::GET, "/v1/auth/me", t, None).await;
        let my_id = me["id"].as_i64().unwrap();
        let (s, _) = call(&svc, Method::DELETE, &format!("/v1/users/{my_id}"), t, None).await;
        assert_eq!(s, StatusCode::CONFLICT, "cannot delete yourself");
        let (s, _) = call(
            &svc,
            Method::PUT,
            &format!("/v1/users/{my_id}"),
            t,
            Some(json!({ "role": 0 })),
        )
        .await;
        assert_eq!(s, StatusCode::CONFLICT, "cannot demote yourself");
        let (s, v) = call(&svc, Method::POST, "/v1/jobs/1/start", t, None).await;
        assert_eq!(s, StatusCode::OK, "{v}");

        // a trigger's address list must hold URLs
        let (s, v) = call(
            &svc,
            Method::POST,
            "/v1/jobs/1/trigger",
            t,
            Some(json!({ "addressList": "10.0.0.1:9999" })),
        )
        .await;
        assert_eq!(
            (s, v["field"].as_str()),
            (StatusCode::BAD_REQUEST, Some("addressList"))
        );

        // a NONE job cannot start
        let mut none = job_body(demo, "n", "demoJobHandler");
        none["scheduleType"] = json!("NONE");
        let (_, none) = call(&svc, Method::POST, "/v1/jobs", t, Some(none)).await;
        let (s, v) = call(
            &svc,
            Method::POST,
            &format!("/v1/jobs/{}/start", none["id"]),
            t,
            None,
        )
        .await;
        assert_eq!(
            (s, v["field"].as_str()),
            (StatusCode::BAD_REQUEST, Some("scheduleType"))
        );

        // 429 after five failed logins from one client for one user; others unaffected
        for _ in 0..5 {
            let (s, _) = call(
                &svc,
                Method::POST,
                "/v1/auth/login",
                None,
                Some(json!({ "username": "admin", "password": "guess" })),
            )
            .await;
            assert_eq!(s, StatusCode::UNAUTHORIZED);
        }
        let (s, v) = call(
            &svc,
            Method::POST,
            "/v1/auth/login",
            None,
            Some(json!({ "username": "admin", "password": ADMIN_PW })),
        )
        .await;
        assert_eq!(s, StatusCode::TOO_MANY_REQUESTS, "{v}");
        // a client trying many names is limited too (20 failures per client): new names from
        // the same address are refused, another address is not
        let attempt = |name: String, peer: &'static str| {
            let req = TestRequest::post()
                .uri("/v1/auth/login")
                .peer_addr(peer.parse().unwrap())
                .set_json(json!({ "username": name, "password": "guess" }))
                .to_request();
            async { call_service(&svc, req).await.status() }
        };
        let mut refused = 0;
        for i in 0..25 {
            if attempt(format!("user{i}"), "10.0.0.9:1000").await == StatusCode::TOO_MANY_REQUESTS {
                refused += 1;
            }
        }
        assert_eq!(
            refused, 5,
            "20 failures per client, then refused whatever the name"
        );
        assert_eq!(
            attempt("user0".into(), "10.0.0.10:1000").await,
            StatusCode::UNAUTHORIZED
        );
        // a name of any length is refused without being stored whole
        let long = "n".repeat(100_000);
        assert_eq!(
            attempt(long, "10.0.0.11:1000").await,
            StatusCode::UNAUTHORIZED
        );
        app.close().await;
    });
}

/// A normal user sees and changes only the jobs, runs and groups they are permitted.
#[test]
fn a_normal_user_is_confined_to_their_groups() {
    run_paused(|| async {
        let dir = tempfile::tempdir().unwrap();
        let (app, console) = open_console(dir.path(), |_| {}).await;
        let svc =
            init_service(actix_web::App::new().configure(xjob::routes::center(console, None)))
                .await;
        let admin = login(&svc, "admin", ADMIN_PW).await;
        let t = Some(admin.as_str());
        let mine = app.group as i64;
        let (_, other) = call(
            &svc,
            Method::POST,
            "/v1/groups",
            t,
            Some(json!({ "appName": "other-app", "title": "Other" })),
        )
        .await;
        let other = other["id"].as_i64().unwrap();
        let (_, a) = call(
            &svc,
            Method::POST,
            "/v1/jobs",
            t,
            Some(job_body(mine, "mine", "demoJobHandler")),
        )
        .await;
        let (_, b) = call(
            &svc,
            Method::POST,
            "/v1/jobs",
            t,
            Some(job_body(other, "theirs", "demoJobHandler")),
        )
        .await;
        let (a, b) = (a["id"].as_i64().unwrap(), b["id"].as_i64().unwrap());
        call(
            &svc,
            Method::POST,
            &format!("/v1/jobs/{a}/trigger"),
            t,
            None,
        )
        .await;
        app.advance(1_000).await;
        call(&svc, Method::POST, "/v1/users", t, Some(json!({ "username": "carol", "password": "carol-pw-1", "role": 0, "permission": [mine] }))).await;

        let c = login(&svc, "carol", "carol-pw-1").await;
        let c = Some(c.as_str());
        let (_, groups) = call(&svc, Method::GET, "/v1/groups", c, None).await;
        assert_eq!(groups["total"], 1);
        assert_eq!(groups["items"][0]["id"], mine);
        let (_, jobs) = call(&svc, Method::GET, "/v1/jobs", c, None).await;
        assert_eq!(jobs["total"], 1);
        assert_eq!(jobs["items"][0]["id"], a);
        let (_, logs) = call(&svc, Method::GET, "/v1/logs", c, None).await;
        assert_eq!(logs["total"], 1);
        let (s, _) = call(&svc, Method::GET, &format!("/v1/jobs/{a}"), c, None).await;
        assert_eq!(s, StatusCode::OK);

        for (m, path, body) in [
            (Method::GET, format!("/v1/jobs/{b}"), None),
            (Method::POST, format!("/v1/jobs/{b}/trigger"), None),
            (Method::POST, format!("/v1/jobs/{b}/start"), None),
            (Method::DELETE, format!("/v1/jobs/{b}"), None),
            (Method::GET, format!("/v1/groups/{other}"), None),
            (Method::GET, format!("/v1/jobs?jobGroup={other}"), None),
            (Method::GET, format!("/v1/logs?jobGroup={other}"), None),
            (
                Method::POST,
                "/v1/jobs".to_string(),
                Some(job_body(other, "sneaky", "demoJobHandler")),
            ),
            (
                Method::POST,
                "/v1/logs/clear".to_string(),
                Some(json!({ "jobGroup": other, "type": 9 })),
            ),
            (Method::GET, "/v1/users".to_string(), None),
            (
                Method::POST,
                "/v1/groups".to_string(),
                Some(json!({ "appName": "carol-app", "title": "C" })),
            ),
            (
                Method::PUT,
                format!("/v1/groups/{mine}"),
                Some(json!({ "appName": "xjob-demo", "title": "mine now" })),
            ),
        ] {
            let (s, v) = call(&svc, m.clone(), &path, c, body).await;
            assert_eq!(s, StatusCode::FORBIDDEN, "{m} {path}: {v}");
        }
        // a child job in another group is refused too
        let mut child = job_body(mine, "parent", "demoJobHandler");
        child["childJobId"] = json!(b.to_string());
        let (s, v) = call(&svc, Method::POST, "/v1/jobs", c, Some(child)).await;
        assert_eq!(
            (s, v["field"].as_str()),
            (StatusCode::FORBIDDEN, Some("childJobId"))
        );
        let (_, all) = call(&svc, Method::GET, "/v1/jobs", t, None).await;
        assert_eq!(
            all["total"], 2,
            "nothing was written by the refused requests"
        );
        app.close().await;
    });
}

/// GLUE script jobs are refused unless scripts are enabled and keep a history of versions.
#[test]
fn script_jobs_need_scripts_enabled_and_keep_a_history() {
    run_paused(|| async {
        let dir = tempfile::tempdir().unwrap();
        let (app, console) = open_console(dir.path(), |_| {}).await;
        let svc =
            init_service(actix_web::App::new().configure(xjob::routes::center(console, None)))
                .await;
        let admin = login(&svc, "admin", ADMIN_PW).await;
        let mut script = job_body(app.group as i64, "script", "");
        script["glueType"] = json!("GLUE_SHELL");
        script["glueSource"] = json!("#!/bin/sh\necho hi\n");
        let (s, v) = call(
            &svc,
            Method::POST,
            "/v1/jobs",
            Some(&admin),
            Some(script.clone()),
        )
        .await;
        assert_eq!(
            (s, v["field"].as_str()),
            (StatusCode::FORBIDDEN, Some("glueType")),
            "{v}"
        );
        app.close().await;

        let dir = tempfile::tempdir().unwrap();
        let (app, console) = open_console(dir.path(), |c| c.security.scripts_enabled = true).await;
        let svc =
            init_service(actix_web::App::new().configure(xjob::routes::center(console, None)))
                .await;
        let admin = login(&svc, "admin", ADMIN_PW).await;
        let t = Some(admin.as_str());
        let (s, job) = call(&svc, Method::POST, "/v1/jobs", t, Some(script)).await;
        assert_eq!(s, StatusCode::CREATED, "{job}");
        let id = job["id"].as_i64().unwrap();
        for i in 0..32 {
            let (s, v) = call(&svc, Method::PUT, &format!("/v1/jobs/{id}/glue"), t, Some(json!({ "glueSource": format!("echo {i}\r\n"), "glueRemark": format!("version {i}") }))).await;
            assert_eq!(s, StatusCode::OK, "{v}");
        }
        let (s, g) = call(&svc, Method::GET, &format!("/v1/jobs/{id}/glue"), t, None).await;
        assert_eq!(s, StatusCode::OK);
        assert_eq!(
            g["glueSource"], "echo 31\n",
            "carriage returns removed from shell source"
        );
        assert_eq!(g["history"].as_array().unwrap().len(), 30);
        assert_eq!(g["history"][0]["glueRemark"], "version 31");
        let (s, v) = call(
            &svc,
            Method::PUT,
            &format!("/v1/jobs/{id}/glue"),
            t,
            Some(json!({ "glueSource": "x", "glueRemark": "no" })),
        )
        .await;
        assert_eq!(
            (s, v["field"].as_str()),
            (StatusCode::BAD_REQUEST, Some("glueRemark"))
        );
        // a BEAN job has no script
        let (_, bean) = call(
            &svc,
            Method::POST,
            "/v1/jobs",
            t,
            Some(job_body(app.group as i64, "bean", "demoJobHandler")),
        )
        .await;
        let (s, _) = call(
            &svc,
            Method::GET,
            &format!("/v1/jobs/{}/glue", bean["id"]),
            t,
            None,
        )
        .await;
        assert_eq!(s, StatusCode::BAD_REQUEST);
        app.close().await;
    });
}

/// The first start creates `admin` once, with a generated or the configured password.
#[test]
fn first_start_creates_admin_once_with_a_generated_or_configured_password() {
    run_paused(|| async {
        let dir = tempfile::tempdir().unwrap();
        let app = TestApp::start_in(dir.path(), T0, |_| {}).await;
        let console = Console::new(app.engine.clone());
        let generated = console.bootstrap_admin().await.unwrap().expect("generated");
        assert!(generated.len() >= 16, "{generated}");
        assert_eq!(console.bootstrap_admin().await.unwrap(), None, "only once");
        console.login("admin", &generated, "c").await.unwrap();
        assert!(
            console.login("admin", "123456", "c").await.is_err(),
            "no default password"
        );
        let row = xjob::testing::store::users::by_name(app.engine.db(), "admin")
            .await
            .unwrap()
            .unwrap();
        assert!(row.password.starts_with("$argon2id$"), "stored hashed");
        app.close().await;

        let dir = tempfile::tempdir().unwrap();
        let app = TestApp::start_in(dir.path(), T0, |c| {
            c.security.admin_password = "short".into()
        })
        .await;
        let e = Console::new(app.engine.clone())
            .bootstrap_admin()
            .await
            .unwrap_err();
        assert!(e.to_string().contains("security.admin_password"), "{e}");
        app.close().await;
    });
}

/// Cookie login, the OpenAPI document (every route mounted), /metrics and /health.
#[test]
fn cookie_login_openapi_metrics_and_health() {
    run_paused(|| async {
        let dir = tempfile::tempdir().unwrap();
        let (app, console) = open_console(dir.path(), |_| {}).await;
        let svc =
            init_service(actix_web::App::new().configure(xjob::routes::center(console, None)))
                .await;
        let req = TestRequest::post()
            .uri("/v1/auth/login")
            .peer_addr("127.0.0.1:1".parse().unwrap())
            .set_json(json!({ "username": "admin", "password": ADMIN_PW }))
            .to_request();
        let res = call_service(&svc, req).await;
        let cookie = res
            .headers()
            .get(header::SET_COOKIE)
            .unwrap()
            .to_str()
            .unwrap()
            .to_string();
        assert!(
            cookie.contains("HttpOnly") && cookie.contains("SameSite=Strict"),
            "{cookie}"
        );
        let pair = cookie.split(';').next().unwrap().to_string();
        let req = TestRequest::get()
            .uri("/v1/auth/me")
            .insert_header((header::COOKIE, pair))
            .to_request();
        assert_eq!(call_service(&svc, req).await.status(), StatusCode::OK);

        // the document lists every route of the issue, and every listed route is mounted
        let (s, doc) = call(&svc, Method::GET, "/openapi.json", None, None).await;
        assert_eq!(s, StatusCode::OK);
        for (m, p) in [
            ("post", "/v1/auth/login"),
            ("post", "/v1/auth/logout"),
            ("post", "/v1/auth/password"),
            ("get", "/v1/groups"),
            ("post", "/v1/groups"),
            ("get", "/v1/groups/{id}"),
            ("put", "/v1/groups/{id}"),
            ("delete", "/v1/groups/{id}"),
            ("get", "/v1/jobs"),
            ("post", "/v1/jobs"),
            ("get", "/v1/jobs/{id}"),
            ("put", "/v1/jobs/{id}"),
            ("delete", "/v1/jobs/{id}"),
            ("post", "/v1/jobs/{id}/start"),
            ("post", "/v1/jobs/{id}/stop"),
            ("post", "/v1/jobs/{id}/trigger"),
            ("get", "/v1/jobs/next-fire-times"),
            ("get", "/v1/jobs/{id}/glue"),
            ("put", "/v1/jobs/{id}/glue"),
            ("get", "/v1/logs"),
            ("get", "/v1/logs/{id}"),
            ("get", "/v1/logs/{id}/content"),
            ("post", "/v1/logs/{id}/kill"),
            ("post", "/v1/logs/clear"),
            ("get", "/v1/users"),
            ("post", "/v1/users"),
            ("put", "/v1/users/{id}"),
            ("delete", "/v1/users/{id}"),
            ("get", "/v1/dashboard"),
            ("get", "/v1/dashboard/chart"),
        ] {
            assert!(
                doc["paths"][p][m].is_object(),
                "{m} {p} missing from /openapi.json"
            );
        }
        for (m, p, _) in xjob::routes::v1::ROUTES {
            let method: Method = m.to_uppercase().parse().unwrap();
            let path = p.replace("{id}", "1");
            let (s, v) = call(&svc, method, &path, None, None).await;
            let want = if *p == "/v1/auth/login" {
                StatusCode::BAD_REQUEST
            } else {
                StatusCode::UNAUTHORIZED
            };
            assert_eq!(s, want, "{m} {p} is not mounted as documented: {v}");
        }

        // metrics after a run
        app.engine.trigger_job(1, None, None).await.ok();
        let job = app
            .engine
            .add_job(JobSpec::cron(
                app.group,
                "m",
                "* * * * * ?",
                "demoJobHandler",
            ))
            .await
            .unwrap();
        app.engine.start_job(job).await.unwrap();
        app.advance(4_000).await;
        let res = call_service(&svc, TestRequest::get().uri("/metrics").to_request()).await;
        assert_eq!(res.status(), StatusCode::OK);
        let text = String::from_utf8(read_body(res).await.to_vec()).unwrap();
        for line in [
            "xjob_fires_recorded_total",
            "xjob_misfires_total 0",
            "xjob_fire_lateness_seconds_bucket{le=\"0.001\"}",
            "xjob_dispatch_duration_seconds_count",
            "xjob_lane_in_flight{lane=\"fast\"}",
            "xjob_lane_waiting{lane=\"slow\"} 0",
            "xjob_trigger_backlog 0",
            "xjob_live_executors 1",
            "xjob_callbacks_total",
            "xjob_ring_waiting",
        ] {
            assert!(text.contains(line), "{line} missing:\n{text}");
        }
        let scans: u64 = text
            .lines()
            .find_map(|l| l.strip_prefix("xjob_scan_duration_seconds_count "))
            .and_then(|v| v.parse().ok())
            .expect("scan duration histogram");
        assert!(
            scans >= 3,
            "four seconds hold at least three scan passes: {scans}"
        );
        let ok = text
            .lines()
            .find(|l| l.starts_with("xjob_triggers_total{result=\"success\"}"))
            .unwrap();
        let n: u64 = ok.rsplit(' ').next().unwrap().parse().unwrap();
        assert!(n >= 3, "{ok}");
        // the web console is served by the same app, locked down by its CSP
        let res = call_service(&svc, TestRequest::get().uri("/").to_request()).await;
        assert_eq!(res.status(), StatusCode::OK);
        let csp = res
            .headers()
            .get(header::CONTENT_SECURITY_POLICY)
            .unwrap()
            .to_str()
            .unwrap();
        assert!(
            csp.contains("script-src 'self'") && csp.contains("frame-ancestors 'none'"),
            "{csp}"
        );
        let page = String::from_utf8(read_body(res).await.to_vec()).unwrap();
        assert!(page.contains(r#"<script src="/assets/app.js""#), "{page}");
        for asset in ["/assets/app.js", "/assets/app.css"] {
            let res = call_service(&svc, TestRequest::get().uri(asset).to_request()).await;
            assert_eq!(res.status(), StatusCode::OK, "{asset}");
        }
        let (s, h) = call(&svc, Method::GET, "/health", None, None).await;
        assert_eq!((s, h["status"].as_str()), (StatusCode::OK, Some("ok")));
        app.close().await;
    });
}

/// What a schema-driven fuzzer (schemathesis, `.ci/fuzz-api.sh`) found, each fixed: an offset
/// past the databases' range answered a panic (now a 400 naming it), `8.0` for an integer field
/// was refused (JSON Schema counts it as an integer), an array was taken for an object body, a
/// method a path does not have answered 404 (now 405); and the document states the enums,
/// required fields and bounds the server enforces.
#[test]
fn the_documented_contract_holds_at_its_edges() {
    run_paused(|| async {
        let dir = tempfile::tempdir().unwrap();
        let (app, api) = admin_api(dir.path()).await;
        let (s, v) = api.get("/v1/jobs?offset=9223372036854775808").await;
        assert_eq!(
            (s, v["field"].as_str()),
            (StatusCode::BAD_REQUEST, Some("offset")),
            "{v}"
        );
        let (s, v) = api.get("/v1/jobs?offset=9223372036854775807").await;
        assert_eq!(s, StatusCode::OK, "{v}");

        let mut body = job_body(app.group as i64, "floats", "demoJobHandler");
        body["jobGroup"] = json!(app.group as f64);
        body["executorTimeout"] = json!(8.0);
        let (s, job) = api.post("/v1/jobs", Some(body)).await;
        assert_eq!(s, StatusCode::CREATED, "{job}");
        assert_eq!(job["executorTimeout"], 8);
        let mut body = job_body(app.group as i64, "fraction", "demoJobHandler");
        body["executorTimeout"] = json!(8.5);
        let (s, v) = api.post("/v1/jobs", Some(body)).await;
        assert_eq!(
            (s, v["field"].as_str()),
            (StatusCode::BAD_REQUEST, Some("executorTimeout"))
        );

        // serde would take a struct as an array of its fields: a body is an object
        let id = job["id"].as_i64().unwrap();
        let (s, v) = api
            .post(&format!("/v1/jobs/{id}/trigger"), Some(json!([null, null])))
            .await;
        assert_eq!(
            (s, v["field"].as_str()),
            (StatusCode::BAD_REQUEST, Some("body")),
            "{v}"
        );

        for (method, path) in [
            (Method::PATCH, "/v1/jobs"),
            (Method::GET, "/v1/auth/login"),
            (Method::TRACE, "/v1/dashboard"),
            (Method::GET, "/v1/logs/clear"),
        ] {
            let (s, _) = call(&api.svc, method.clone(), path, Some(&api.token), None).await;
            assert_eq!(s, StatusCode::METHOD_NOT_ALLOWED, "{method} {path}");
        }

        let (_, doc) = call(&api.svc, Method::GET, "/openapi.json", None, None).await;
        let job = &doc["components"]["schemas"]["JobInput"];
        assert_eq!(job["required"], json!(["jobGroup", "jobDesc", "author"]));
        assert_eq!(
            job["properties"]["executorRouteStrategy"]["enum"]
                .as_array()
                .map(Vec::len),
            Some(10)
        );
        assert_eq!(job["then"]["required"], json!(["executorHandler"]));
        let list = &doc["paths"]["/v1/jobs"]["get"]["parameters"];
        let limit = list
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["name"] == "limit")
            .unwrap();
        assert_eq!(limit["schema"]["maximum"], 1000);
        assert!(doc["paths"]["/v1/jobs"]["post"]["responses"]["201"].is_object());
        app.close().await;
    });
}

/// A job's creation and start are recorded in the audit log with the new job's id (on the
/// node's SQLite file the entries go with the writer's next batch, after the answer), and a
/// refused start records nothing.
#[test]
fn a_jobs_creation_and_start_are_stored_with_their_audit_entries() {
    run_paused(|| async {
        use sea_orm::{ConnectionTrait, Statement};
        let dir = tempfile::tempdir().unwrap();
        let (app, api) = admin_api(dir.path()).await;
        let job = create_job(
            &api,
            job_body(app.group as i64, "at once", "demoJobHandler"),
        )
        .await;
        assert_eq!(
            api.post(&format!("/v1/jobs/{job}/start"), None).await.0,
            StatusCode::OK
        );
        let (s, _) = api.post("/v1/jobs/999999/start", None).await;
        assert_eq!(s, StatusCode::NOT_FOUND);
        // the audit page writes what is queued before it reads
        assert_eq!(api.get("/v1/audit?limit=1").await.0, StatusCode::OK);
        let db = app.engine.db();
        let rows = db
            .query_all_raw(Statement::from_string(
                db.get_database_backend(),
                "SELECT action, target_id FROM xjob_audit WHERE target_type = 'job' ORDER BY id",
            ))
            .await
            .unwrap();
        let got: Vec<(String, String)> = rows
            .iter()
            .map(|r| {
                (
                    r.try_get::<String>("", "action").unwrap(),
                    r.try_get::<String>("", "target_id").unwrap(),
                )
            })
            .collect();
        let id = job.to_string();
        assert_eq!(
            got,
            [
                ("job.create".to_string(), id.clone()),
                ("job.start".to_string(), id)
            ]
        );
        app.close().await;
    });
}

/// Every change through the console is in the audit log with who, from where, what and a short
/// detail (never a password); administrators read it with filters and paging, others may not.
#[test]
fn every_console_change_is_audited() {
    run_paused(|| async {
        let dir = tempfile::tempdir().unwrap();
        let (app, api) = admin_api(dir.path()).await;
        let demo = app.group as i64;
        // a failed login (the name tried is recorded, the password never)
        let (s, _) = call(
            &api.svc,
            Method::POST,
            "/v1/auth/login",
            None,
            Some(json!({ "username": "admin", "password": "wrong-guess-77" })),
        )
        .await;
        assert_eq!(s, StatusCode::UNAUTHORIZED);
        let job = create_job(&api, job_body(demo, "audited", "demoJobHandler")).await;
        let mut edited = job_body(demo, "audited", "demoJobHandler");
        edited["scheduleConf"] = json!("0/7 * * * * ?");
        assert_eq!(
            api.put(&format!("/v1/jobs/{job}"), edited).await.0,
            StatusCode::OK
        );
        assert_eq!(
            api.post(&format!("/v1/jobs/{job}/start"), None).await.0,
            StatusCode::OK
        );
        assert_eq!(
            api.post(&format!("/v1/jobs/{job}/stop"), None).await.0,
            StatusCode::OK
        );
        let (s, _) = api
            .post(
                &format!("/v1/jobs/{job}/trigger"),
                Some(json!({ "executorParam": "p-42" })),
            )
            .await;
        assert_eq!(s, StatusCode::OK);
        let (_, g) = api
            .post(
                "/v1/groups",
                Some(json!({ "appName": "audit-exec", "title": "Audit", "addressType": 0 })),
            )
            .await;
        let gid = g["id"].as_i64().unwrap();
        let (s, _) = api
            .put(
                &format!("/v1/groups/{gid}"),
                json!({ "appName": "audit-exec", "title": "Audit 2", "addressType": 0 }),
            )
            .await;
        assert_eq!(s, StatusCode::OK);
        assert_eq!(
            api.delete(&format!("/v1/groups/{gid}")).await,
            StatusCode::NO_CONTENT
        );
        let (_, u) = api
            .post("/v1/users", Some(json!({ "username": "auditor", "password": "bob-secret-1", "role": 0, "permission": [demo] })))
            .await;
        let uid = u["id"].as_i64().unwrap();
        let (s, _) = api
            .put(
                &format!("/v1/users/{uid}"),
                json!({ "role": 0, "permission": [demo], "password": "bob-secret-2" }),
            )
            .await;
        assert_eq!(s, StatusCode::OK);
        let bob = login(&api.svc, "auditor", "bob-secret-2").await;
        let (s, _) = api.get_as(&bob, "/v1/audit").await;
        assert_eq!(s, StatusCode::FORBIDDEN, "administrators only");
        assert_eq!(
            api.delete(&format!("/v1/users/{uid}")).await,
            StatusCode::NO_CONTENT
        );
        let (s, _) = api.post("/v1/logs/clear", Some(json!({ "type": 9 }))).await;
        assert_eq!(s, StatusCode::OK);
        assert_eq!(
            api.delete(&format!("/v1/jobs/{job}")).await,
            StatusCode::NO_CONTENT
        );

        let (s, all) = api.get("/v1/audit?limit=100").await;
        assert_eq!(s, StatusCode::OK, "{all}");
        let items = all["items"].as_array().unwrap();
        let actions: Vec<&str> = items
            .iter()
            .rev()
            .map(|e| e["action"].as_str().unwrap())
            .collect();
        assert_eq!(
            actions,
            [
                "auth.login",
                "auth.login_failed",
                "job.create",
                "job.update",
                "job.start",
                "job.stop",
                "job.trigger",
                "group.create",
                "group.update",
                "group.delete",
                "user.create",
                "user.update",
                "auth.login",
                "user.delete",
                "log.clear",
                "job.delete",
            ],
            "{all}"
        );
        let text = all.to_string();
        for secret in [ADMIN_PW, "wrong-guess-77", "bob-secret-1", "bob-secret-2"] {
            assert!(
                !text.contains(secret),
                "no password in the audit log: {text}"
            );
        }
        let first = &items[items.len() - 1];
        assert_eq!(
            (
                first["username"].as_str(),
                first["clientIp"].as_str(),
                first["targetType"].as_str()
            ),
            (Some("admin"), Some("127.0.0.1"), Some("user"))
        );
        let by = |action: &str| {
            items
                .iter()
                .find(|e| e["action"] == action)
                .unwrap()
                .clone()
        };
        assert_eq!(by("auth.login_failed")["username"], "admin");
        assert!(
            by("job.update")["detail"]
                .as_str()
                .unwrap()
                .contains(r#"scheduleConf: "0/5 * * * * ?" → "0/7 * * * * ?""#)
        );
        assert_eq!(by("job.trigger")["targetId"], job.to_string());
        assert!(
            by("job.trigger")["detail"]
                .as_str()
                .unwrap()
                .contains("p-42")
        );
        assert!(
            by("group.update")["detail"]
                .as_str()
                .unwrap()
                .contains("Audit 2")
        );
        assert!(
            by("user.update")["detail"]
                .as_str()
                .unwrap()
                .contains("password changed")
        );

        // filters and paging
        let (_, jobs) = api
            .get(&format!("/v1/audit?targetType=job&targetId={job}&limit=2"))
            .await;
        assert_eq!(jobs["total"], 6);
        assert_eq!(jobs["items"].as_array().unwrap().len(), 2);
        assert_eq!(jobs["items"][0]["action"], "job.delete", "newest first");
        let (_, bobs) = api.get("/v1/audit?username=auditor").await;
        assert_eq!(bobs["total"], 1);
        let (_, none) = api.get("/v1/audit?action=job.trigger&to=2000-01-01").await;
        assert_eq!(none["total"], 0);
        let (s, e) = api.get("/v1/audit?from=yesterday").await;
        assert_eq!(
            (s, e["field"].as_str()),
            (StatusCode::BAD_REQUEST, Some("from"))
        );

        app.close().await;
    });
}

/// A group's own access token is set, shown to administrators only (others see that there is
/// one), checked for its form, rotated and removed through `/v1/groups`.
#[test]
fn a_group_access_token_is_for_administrators_eyes() {
    run_paused(|| async {
        let dir = tempfile::tempdir().unwrap();
        let (app, api) = admin_api(dir.path()).await;
        let demo = app.group as i64;
        let body = |token: Value| json!({ "appName": "token-exec", "title": "Tokened", "addressType": 0, "accessToken": token });
        let (s, e) = api.post("/v1/groups", Some(body(json!("too short")))).await;
        assert_eq!(
            (s, e["field"].as_str()),
            (StatusCode::BAD_REQUEST, Some("accessToken"))
        );
        let (s, g) = api
            .post("/v1/groups", Some(body(json!("first-token-0123456789"))))
            .await;
        assert_eq!(s, StatusCode::CREATED, "{g}");
        let id = g["id"].as_i64().unwrap();
        assert_eq!(g["accessToken"], "first-token-0123456789");
        let (s, _) = api
            .post(
                "/v1/users",
                Some(json!({ "username": "viewer", "password": "viewer-pw-1", "role": 0, "permission": [demo, id] })),
            )
            .await;
        assert_eq!(s, StatusCode::CREATED);
        let viewer = login(&api.svc, "viewer", "viewer-pw-1").await;
        let (_, seen) = api.get_as(&viewer, &format!("/v1/groups/{id}")).await;
        assert_eq!(
            (seen["hasAccessToken"].as_bool(), &seen["accessToken"]),
            (Some(true), &Value::Null)
        );
        let (_, list) = api.get_as(&viewer, "/v1/groups").await;
        assert!(!list.to_string().contains("first-token"), "{list}");
        // absent keeps it, a new value rotates it, "" removes it
        let (_, kept) = api
            .put(
                &format!("/v1/groups/{id}"),
                json!({ "appName": "token-exec", "title": "Renamed", "addressType": 0 }),
            )
            .await;
        assert_eq!(kept["accessToken"], "first-token-0123456789");
        let (_, rotated) = api
            .put(
                &format!("/v1/groups/{id}"),
                body(json!("second-token-0123456789")),
            )
            .await;
        assert_eq!(rotated["accessToken"], "second-token-0123456789");
        let (_, removed) = api.put(&format!("/v1/groups/{id}"), body(json!(""))).await;
        assert_eq!(
            (removed["hasAccessToken"].as_bool(), &removed["accessToken"]),
            (Some(false), &Value::Null)
        );
        let (_, audit) = api.get("/v1/audit?targetType=group").await;
        assert!(!audit.to_string().contains("-token-0123456789"), "{audit}");
        assert!(
            audit.to_string().contains("access token changed"),
            "{audit}"
        );
        app.close().await;
    });
}

/// API keys: a user's key acts within the key's groups and the user's rights, is listed without
/// the key, cannot make another key, is audited by name, and is refused as soon as it is revoked.
#[test]
fn api_keys_act_within_their_rights_and_are_revoked_at_once() {
    run_paused(|| async {
        let dir = tempfile::tempdir().unwrap();
        let (app, api) = admin_api(dir.path()).await;
        let demo = app.group as i64;
        let (_, g) = api
            .post(
                "/v1/groups",
                Some(json!({ "appName": "billing-exec", "title": "Billing", "addressType": 0 })),
            )
            .await;
        let billing = g["id"].as_i64().unwrap();
        create_job(&api, job_body(demo, "demo job", "demoJobHandler")).await;
        create_job(&api, job_body(billing, "billing job", "demoJobHandler")).await;
        let (s, u) = api
            .post(
                "/v1/users",
                Some(
                    json!({ "username": "alice", "password": "alice-pw-1", "role": 0,
                             "permission": [demo, billing] }),
                ),
            )
            .await;
        assert_eq!(s, StatusCode::CREATED, "{u}");
        let alice = Api {
            svc: &api.svc,
            token: login(&api.svc, "alice", "alice-pw-1").await,
        };

        // a normal user: no administrator key, no group outside her own
        let (s, e) = alice
            .post(
                "/v1/api-keys",
                Some(json!({ "name": "ci", "role": 1, "expiresInDays": 30 })),
            )
            .await;
        assert_eq!(s, StatusCode::FORBIDDEN, "{e}");
        let (s, e) = alice
            .post(
                "/v1/api-keys",
                Some(json!({ "name": "ci", "permission": [demo], "expiresInDays": 0 })),
            )
            .await;
        assert_eq!(
            (s, e["field"].as_str()),
            (StatusCode::BAD_REQUEST, Some("expiresInDays"))
        );
        let (s, k) = alice
            .post(
                "/v1/api-keys",
                Some(json!({ "name": "ci deploy", "permission": [demo], "expiresInDays": 30 })),
            )
            .await;
        assert_eq!(s, StatusCode::CREATED, "{k}");
        let key = k["key"].as_str().unwrap().to_string();
        assert!(key.starts_with("xjk_") && key.starts_with(k["prefix"].as_str().unwrap()));
        let id = k["id"].as_i64().unwrap();

        // the key sees the demo group's jobs only, and may not make keys or groups
        let bot = Api {
            svc: &api.svc,
            token: key.clone(),
        };
        let (s, jobs) = bot.get("/v1/jobs").await;
        assert_eq!(s, StatusCode::OK, "{jobs}");
        assert_eq!(jobs["total"], 1, "{jobs}");
        assert_eq!(jobs["items"][0]["jobDesc"], "demo job");
        let (s, _) = bot
            .post(
                "/v1/api-keys",
                Some(json!({ "name": "again", "permission": [demo], "expiresInDays": 1 })),
            )
            .await;
        assert_eq!(s, StatusCode::FORBIDDEN);
        let (s, _) = bot
            .post("/v1/jobs", Some(job_body(billing, "x", "demoJobHandler")))
            .await;
        assert_eq!(s, StatusCode::FORBIDDEN, "outside the key's groups");
        let made = create_job(&bot, job_body(demo, "made by a key", "demoJobHandler")).await;

        // listed without the key; the administrator sees every key, another user's are hidden
        let (_, mine) = alice.get("/v1/api-keys").await;
        assert_eq!(mine["total"], 1, "{mine}");
        assert!(mine["items"][0].get("key").is_none(), "{mine}");
        let (_, all) = api.get("/v1/api-keys").await;
        assert_eq!(all["total"], 1);
        let (_, audit) = api.get("/v1/audit?action=job.create").await;
        let by_key = audit["items"]
            .as_array()
            .unwrap()
            .iter()
            .find(|e| e["targetId"].as_str() == Some(made.to_string().as_str()))
            .cloned()
            .unwrap_or_default();
        assert_eq!(by_key["username"], "alice", "{audit}");
        assert!(
            by_key["detail"]
                .as_str()
                .unwrap_or("")
                .contains("[key ci deploy]"),
            "{by_key}"
        );

        // revoked: refused at once
        assert_eq!(
            alice.delete(&format!("/v1/api-keys/{id}")).await,
            StatusCode::NO_CONTENT
        );
        assert_eq!(bot.get("/v1/jobs").await.0, StatusCode::UNAUTHORIZED);
        assert_eq!(bot.get("/v1/auth/me").await.0, StatusCode::UNAUTHORIZED);
        app.close().await;
    });
}
