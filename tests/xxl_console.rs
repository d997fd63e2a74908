//! XXL-JOB's console endpoints driven as its tools drive them (protocol.md §9, §10): form bodies,
//! the login cookie, and the answer shapes they parse — 2.x's `ReturnT` and DataTables pages,
//! 3.3's `Response` and `PageModel` — against the same `routes::center` `xjob serve` runs.
#![allow(clippy::unwrap_used)]

mod common;

use actix_web::dev::{Service, ServiceResponse};
use actix_web::http::{StatusCode, header};
use actix_web::test::{TestRequest, call_service, init_service, read_body};
use serde_json::Value;
use xjob::console::Console;

use common::{T0, TestApp, run_paused};

const ADMIN_PW: &str = "admin-secret-1";
const APP: &str = "xxl-job-executor-sample";

/// One answer: status, the cookie it set (name=value), the Location, and the JSON body.
struct Reply {
    status: StatusCode,
    cookie: Option<String>,
    location: Option<String>,
    json: Value,
}

/// POSTs a form as jQuery and the auto-register libraries do, with `cookie` if given.
async fn form<S>(svc: &S, path: &str, cookie: Option<&str>, body: &str) -> Reply
where
    S: Service<actix_http::Request, Response = ServiceResponse, Error = actix_web::Error>,
{
    let mut req = TestRequest::post()
        .uri(path)
        .peer_addr("127.0.0.1:40000".parse().unwrap())
        .insert_header((
            header::CONTENT_TYPE,
            "application/x-www-form-urlencoded; charset=UTF-8",
        ))
        .set_payload(body.to_string());
    if let Some(c) = cookie {
        req = req.insert_header((header::COOKIE, c.to_string()));
    }
    let res = call_service(svc, req.to_request()).await;
    let status = res.status();
    let cookie = res
        .headers()
        .get_all(header::SET_COOKIE)
        .filter_map(|v| v.to_str().ok())
        .find(|v| !v.contains("Max-Age=0"))
        .map(|v| v.split(';').next().unwrap().to_string());
    let location = res
        .headers()
        .get(header::LOCATION)
        .map(|v| v.to_str().unwrap().to_string());
    let bytes = read_body(res).await;
    let json = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
    Reply {
        status,
        cookie,
        location,
        json,
    }
}

/// A center whose in-process executor registers as [`APP`] before any group names it (as an
/// executor that starts before its auto-register tool has run).
async fn center(
    dir: &std::path::Path,
) -> (
    TestApp,
    impl Service<actix_http::Request, Response = ServiceResponse, Error = actix_web::Error>,
) {
    let app = TestApp::start_in(dir, T0, |c| {
        c.security.admin_password = ADMIN_PW.into();
        c.executor.app_name = APP.into();
    })
    .await;
    let console = Console::new(app.engine.clone());
    console.bootstrap_admin().await.unwrap();
    let svc = init_service(
        actix_web::App::new().configure(xjob::routes::center(console, Some("tok".into()))),
    )
    .await;
    (app, svc)
}

/// A client written to XXL-JOB 2.4's console contract (as xxl-job-auto-register is): logs in
/// with the form and keeps the `XXL_JOB_LOGIN_IDENTITY` cookie, registers its group, adds,
/// starts, triggers, stops and removes a job, and reads its runs and a run's log.
#[test]
fn a_2x_console_client_registers_a_group_and_drives_a_job() {
    run_paused(|| async {
        let dir = tempfile::tempdir().unwrap();
        let (app, svc) = center(dir.path()).await;
        let base = "/xxl-job-admin";

        // no session: sent to the login page, as XXL-JOB does
        let r = form(&svc, &format!("{base}/jobgroup/pageList"), None, "").await;
        assert_eq!(r.status, StatusCode::FOUND);
        assert_eq!(r.location.as_deref(), Some("/xxl-job-admin/toLogin"));

        let r = form(
            &svc,
            &format!("{base}/login"),
            None,
            &format!("userName=admin&password={ADMIN_PW}&ifRemember=on"),
        )
        .await;
        assert_eq!(
            (r.status, &r.json["code"]),
            (StatusCode::OK, &Value::from(200))
        );
        assert!(r.json.get("content").is_some(), "{}", r.json);
        let cookie = r.cookie.unwrap();
        assert!(cookie.starts_with("XXL_JOB_LOGIN_IDENTITY="), "{cookie}");
        let c = Some(cookie.as_str());

        // the group does not exist yet: the tool finds none, then saves it
        let group_page = format!("{base}/jobgroup/pageList");
        let page = |q: &'static str| form(&svc, &group_page, c, q);
        let r = page("appname=xxl-job-executor-sample&title=&start=0&length=10").await;
        assert_eq!(r.json["recordsTotal"], 0, "{}", r.json);
        let r = form(
            &svc,
            &format!("{base}/jobgroup/save"),
            c,
            "appname=xxl-job-executor-sample&title=Sample+executor&addressType=0&addressList=",
        )
        .await;
        assert_eq!(r.json["code"], 200, "{}", r.json);
        let r = page("appname=xxl-job-executor-sample&start=0&length=10").await;
        assert_eq!(r.json["recordsTotal"], 1, "{}", r.json);
        assert_eq!(r.json["recordsFiltered"], 1);
        let g = &r.json["data"][0];
        assert_eq!(g["appname"], APP, "XXL-JOB's field name: {g}");
        assert_eq!(g["title"], "Sample executor");
        let group = g["id"].as_i64().unwrap();
        // a second save of the same appname is refused, in the envelope
        let r = form(
            &svc,
            &format!("{base}/jobgroup/save"),
            c,
            "appname=xxl-job-executor-sample&title=Again&addressType=0",
        )
        .await;
        assert_eq!(r.status, StatusCode::OK);
        assert_eq!(r.json["code"], 500, "{}", r.json);
        assert!(
            r.json["msg"].as_str().unwrap().contains("exists"),
            "{}",
            r.json
        );
        let r = form(
            &svc,
            &format!("{base}/jobgroup/loadById"),
            c,
            &format!("id={group}"),
        )
        .await;
        assert_eq!(
            r.json["content"]["registryList"].as_array().unwrap().len(),
            1,
            "{}",
            r.json
        );

        // add: every XxlJobInfo form field, the new id as a string
        let add = format!(
            "jobGroup={group}&jobDesc=Nightly+report&author=ops&alarmEmail=&scheduleType=CRON\
             &scheduleConf=0+0+3+*+*+%3F&misfireStrategy=DO_NOTHING&executorRouteStrategy=FIRST\
             &executorHandler=demoJobHandler&executorParam=p1&executorBlockStrategy=SERIAL_EXECUTION\
             &executorTimeout=0&executorFailRetryCount=0&glueType=BEAN&glueSource=\
             &glueRemark=GLUE+init&childJobId="
        );
        let r = form(&svc, &format!("{base}/jobinfo/add"), c, &add).await;
        assert_eq!(r.json["code"], 200, "{}", r.json);
        let id: i64 = r.json["content"].as_str().unwrap().parse().unwrap();
        let r = form(
            &svc,
            &format!("{base}/jobinfo/pageList"),
            c,
            &format!(
                "jobGroup={group}&triggerStatus=-1&executorHandler=demoJobHandler&start=0&length=10"
            ),
        )
        .await;
        assert_eq!(r.json["recordsTotal"], 1, "{}", r.json);
        let job = &r.json["data"][0];
        assert_eq!(
            (job["id"].as_i64(), &job["triggerStatus"]),
            (Some(id), &Value::from(0))
        );
        assert_eq!(job["scheduleConf"], "0 0 3 * * ?");
        let added = job["addTime"].as_str().unwrap();
        assert!(
            chrono::NaiveDateTime::parse_from_str(added, "%Y-%m-%d %H:%M:%S").is_ok(),
            "XXL-JOB's time format: {added}"
        );

        // a bad form is refused with the field named, and changes nothing
        let r = form(
            &svc,
            &format!("{base}/jobinfo/update"),
            c,
            &format!("id={id}&scheduleType=CRON&scheduleConf=not+a+cron"),
        )
        .await;
        assert_eq!(r.json["code"], 500, "{}", r.json);
        assert!(
            r.json["msg"].as_str().unwrap().contains("not a cron"),
            "{}",
            r.json
        );
        // an edit with a partial form keeps the other fields
        let r = form(
            &svc,
            &format!("{base}/jobinfo/update"),
            c,
            &format!("id={id}&jobDesc=Nightly"),
        )
        .await;
        assert_eq!(r.json["code"], 200, "{}", r.json);

        let r = form(
            &svc,
            &format!("{base}/jobinfo/start"),
            c,
            &format!("id={id}"),
        )
        .await;
        assert_eq!(r.json["code"], 200, "{}", r.json);
        let r = form(
            &svc,
            &format!("{base}/jobinfo/trigger"),
            c,
            &format!("id={id}&executorParam=by-hand&addressList="),
        )
        .await;
        assert_eq!(r.json["code"], 200, "{}", r.json);
        app.advance(2_000).await;
        let r = form(
            &svc,
            &format!("{base}/jobinfo/stop"),
            c,
            &format!("id={id}"),
        )
        .await;
        assert_eq!(r.json["code"], 200, "{}", r.json);

        let r = form(
            &svc,
            &format!("{base}/joblog/pageList"),
            c,
            &format!("jobGroup={group}&jobId={id}&logStatus=1&filterTime=&start=0&length=10"),
        )
        .await;
        assert_eq!(r.json["recordsTotal"], 1, "{}", r.json);
        let run = &r.json["data"][0];
        assert_eq!(run["executorParam"], "by-hand");
        assert_eq!(run["handleCode"], 200);
        assert_eq!(run["jobDesc"], "Nightly");
        let log_id = run["id"].as_i64().unwrap();
        let r = form(
            &svc,
            &format!("{base}/joblog/logDetailCat"),
            c,
            &format!("logId={log_id}&fromLineNum=1"),
        )
        .await;
        assert_eq!(r.json["code"], 200, "{}", r.json);
        let log = &r.json["content"];
        assert!(
            log["logContent"].as_str().unwrap().contains("by-hand"),
            "{log}"
        );
        assert_eq!(log["fromLineNum"], 1);

        let r = form(
            &svc,
            &format!("{base}/jobinfo/remove"),
            c,
            &format!("id={id}"),
        )
        .await;
        assert_eq!(r.json["code"], 200, "{}", r.json);
        let r = form(
            &svc,
            &format!("{base}/jobinfo/pageList"),
            c,
            &format!("jobGroup={group}"),
        )
        .await;
        assert_eq!(r.json["recordsTotal"], 0, "{}", r.json);
        let r = form(
            &svc,
            &format!("{base}/jobgroup/remove"),
            c,
            &format!("id={group}"),
        )
        .await;
        assert_eq!(r.json["code"], 200, "{}", r.json);

        // every change went to the audit log under the user's name
        let entries = audit(&svc, &cookie).await;
        let actions: Vec<&str> = entries.iter().map(|(_, a)| a.as_str()).collect();
        for a in [
            "group.create",
            "job.create",
            "job.update",
            "job.start",
            "job.trigger",
            "job.stop",
            "job.delete",
            "group.delete",
        ] {
            assert!(actions.contains(&a), "{a} missing from {actions:?}");
        }

        // logout ends the session: the cookie no longer works
        let r = form(&svc, &format!("{base}/logout"), c, "").await;
        assert_eq!(r.json["code"], 200, "{}", r.json);
        let r = form(&svc, &format!("{base}/jobgroup/pageList"), c, "").await;
        assert_eq!(r.status, StatusCode::FOUND);
        app.close().await;
    });
}

/// The audit log's entries (user, action), newest first, as an administrator reads them.
async fn audit<S>(svc: &S, cookie: &str) -> Vec<(String, String)>
where
    S: Service<actix_http::Request, Response = ServiceResponse, Error = actix_web::Error>,
{
    let token = cookie.split_once('=').unwrap().1;
    let req = TestRequest::get()
        .uri("/v1/audit?limit=100")
        .insert_header((header::AUTHORIZATION, format!("Bearer {token}")));
    let res = call_service(svc, req.to_request()).await;
    assert_eq!(res.status(), StatusCode::OK);
    let v: Value = serde_json::from_slice(&read_body(res).await).unwrap();
    v["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            (
                e["username"].as_str().unwrap().to_string(),
                e["action"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

/// A 3.x client: `/auth/doLogin` with the `xxl_job_login_token` cookie, `insert`, `ids[]` lists,
/// and `offset`/`pagesize` pages answered as `{"code","msg","data":{…,"total"}}`; at `/`.
#[test]
fn a_3x_console_client_uses_the_new_forms_at_the_root() {
    run_paused(|| async {
        let dir = tempfile::tempdir().unwrap();
        let (app, svc) = center(dir.path()).await;
        let r = form(
            &svc,
            "/auth/doLogin",
            None,
            &format!("userName=admin&password={ADMIN_PW}"),
        )
        .await;
        assert_eq!(r.json["code"], 200, "{}", r.json);
        let cookie = r.cookie.unwrap();
        assert!(cookie.starts_with("xxl_job_login_token="), "{cookie}");
        let c = Some(cookie.as_str());

        let r = form(
            &svc,
            "/jobgroup/insert",
            c,
            "appname=xxl-job-executor-sample&title=Sample",
        )
        .await;
        assert_eq!(
            (&r.json["code"], &r.json["msg"]),
            (&Value::from(200), &Value::from("Success"))
        );
        let r = form(
            &svc,
            "/jobgroup/pageList",
            c,
            "appname=sample&offset=0&pagesize=5",
        )
        .await;
        assert_eq!(r.json["code"], 200, "{}", r.json);
        let page = &r.json["data"];
        assert_eq!(
            (page["total"].as_u64(), page["pagesize"].as_u64()),
            (Some(1), Some(5))
        );
        let group = page["data"][0]["id"].as_i64().unwrap();

        let mut ids = Vec::new();
        for desc in ["one", "two"] {
            let r = form(
                &svc,
                "/jobinfo/insert",
                c,
                &format!(
                    "jobGroup={group}&jobDesc={desc}&author=ops&scheduleType=FIX_RATE&scheduleConf=60\
                     &executorRouteStrategy=ROUND&executorHandler=demoJobHandler\
                     &executorBlockStrategy=SERIAL_EXECUTION&misfireStrategy=DO_NOTHING&glueType=BEAN"
                ),
            )
            .await;
            assert_eq!(r.json["code"], 200, "{}", r.json);
            ids.push(r.json["data"].as_str().unwrap().parse::<i64>().unwrap());
        }
        let list = format!("ids%5B%5D={}&ids%5B%5D={}", ids[0], ids[1]);
        let r = form(&svc, "/jobinfo/start", c, &list).await;
        assert_eq!(r.json["msg"], "Success", "{}", r.json);
        let r = form(
            &svc,
            "/jobinfo/pageList",
            c,
            &format!("jobGroup={group}&triggerStatus=1&offset=0&pagesize=10"),
        )
        .await;
        assert_eq!(r.json["data"]["total"], 2, "{}", r.json);
        let r = form(&svc, "/jobinfo/delete", c, &list).await;
        assert_eq!(r.json["code"], 200, "{}", r.json);
        let r = form(
            &svc,
            "/jobinfo/pageList",
            c,
            &format!("jobGroup={group}&offset=0&pagesize=10"),
        )
        .await;
        assert_eq!(r.json["data"]["total"], 0, "{}", r.json);

        // next fire times come in XXL-JOB's format, in both envelopes' keys
        let r = form(
            &svc,
            "/jobinfo/nextTriggerTime",
            c,
            "scheduleType=CRON&scheduleConf=0+0+3+*+*+%3F",
        )
        .await;
        let times = r.json["data"].as_array().unwrap();
        assert_eq!(times.len(), 5, "{}", r.json);
        assert_eq!(r.json["content"], r.json["data"]);
        assert!(
            times[0].as_str().unwrap().ends_with("03:00:00"),
            "{}",
            r.json
        );
        let r = form(
            &svc,
            "/jobinfo/nextTriggerTime",
            c,
            "scheduleType=CRON&scheduleConf=bad",
        )
        .await;
        assert_eq!(r.json["code"], 500, "{}", r.json);
        app.close().await;
    });
}

/// The rules are the console's: a normal user sees and changes only their groups, login
/// failures are counted by the same limiter, and a wrong password sets no cookie.
#[test]
fn the_consoles_rules_hold_on_the_xxl_endpoints() {
    run_paused(|| async {
        let dir = tempfile::tempdir().unwrap();
        let (app, svc) = center(dir.path()).await;
        let r = form(
            &svc,
            "/login",
            None,
            "userName=admin&password=wrong-password",
        )
        .await;
        assert_eq!(
            (r.status, &r.json["code"]),
            (StatusCode::OK, &Value::from(500))
        );
        assert!(r.cookie.is_none());
        let admin = form(
            &svc,
            "/login",
            None,
            &format!("userName=admin&password={ADMIN_PW}"),
        )
        .await;
        let a = admin.cookie.unwrap();
        // a user of the demo group only
        let console = Console::new(app.engine.clone());
        let root = xjob::console::Principal {
            id: 1,
            username: "admin".into(),
            role: 1,
            permission: vec![],
            client: String::new(),
            key: None,
        };
        console
            .create_user(
                &root,
                xjob::console::users::UserInput {
                    username: "alice".into(),
                    password: Some("alice-password-1".into()),
                    role: 0,
                    permission: vec![app.group],
                },
            )
            .await
            .unwrap();
        let r = form(
            &svc,
            "/jobgroup/save",
            Some(&a),
            "appname=other-app&title=Other",
        )
        .await;
        assert_eq!(r.json["code"], 200, "{}", r.json);
        let alice = form(
            &svc,
            "/login",
            None,
            "userName=alice&password=alice-password-1",
        )
        .await;
        let u = alice.cookie.unwrap();
        let r = form(&svc, "/jobgroup/pageList", Some(&u), "").await;
        assert_eq!(r.json["recordsTotal"], 1, "only the demo group: {}", r.json);
        let r = form(
            &svc,
            "/jobgroup/save",
            Some(&u),
            "appname=alice-app&title=Mine",
        )
        .await;
        assert_eq!(r.json["code"], 500, "administrators only: {}", r.json);
        let other = form(&svc, "/jobgroup/pageList", Some(&a), "appname=other-app").await;
        let other = other.json["data"][0]["id"].as_i64().unwrap();
        let r = form(
            &svc,
            "/jobinfo/add",
            Some(&u),
            &format!("jobGroup={other}&jobDesc=x&author=a&scheduleType=NONE&executorHandler=h&glueType=BEAN&executorRouteStrategy=FIRST&executorBlockStrategy=SERIAL_EXECUTION&misfireStrategy=DO_NOTHING"),
        )
        .await;
        assert_eq!(r.json["code"], 500, "{}", r.json);
        assert!(
            r.json["msg"].as_str().unwrap().contains("permission"),
            "{}",
            r.json
        );
        let (_, jobs) = (0, form(&svc, "/jobinfo/pageList", Some(&a), "").await);
        assert_eq!(
            jobs.json["recordsTotal"], 0,
            "nothing was created: {}",
            jobs.json
        );
        app.close().await;
    });
}

const GROUP_TOKEN: &str = "sample-group-token-0123456789";

/// A job API call (XXL-JOB 3.5's `/api/…`) with its two headers, as JSON.
async fn job_api<S>(svc: &S, path: &str, token: &str, app: &str, body: Value) -> Value
where
    S: Service<actix_http::Request, Response = ServiceResponse, Error = actix_web::Error>,
{
    let mut req = TestRequest::post()
        .uri(path)
        .peer_addr("127.0.0.1:40000".parse().unwrap())
        .set_json(body);
    if !token.is_empty() {
        req = req.insert_header(("XXL-JOB-ACCESS-TOKEN", token));
    }
    if !app.is_empty() {
        req = req.insert_header(("XXL-JOB-APPNAME", app));
    }
    let res = call_service(svc, req.to_request()).await;
    assert_eq!(res.status(), StatusCode::OK);
    serde_json::from_slice(&read_body(res).await).unwrap()
}

/// Gives the group of `app` its own access token, as an administrator does in the console.
async fn give_token<S>(svc: &S, cookie: &str, group: i64, app: &str, title: &str)
where
    S: Service<actix_http::Request, Response = ServiceResponse, Error = actix_web::Error>,
{
    let req = TestRequest::put()
        .uri(&format!("/v1/groups/{group}"))
        .insert_header((
            header::AUTHORIZATION,
            format!("Bearer {}", cookie.split_once('=').unwrap().1),
        ))
        .set_json(serde_json::json!({
            "appName": app, "title": title, "addressType": 0, "accessToken": GROUP_TOKEN
        }));
    let res = call_service(svc, req.to_request()).await;
    assert_eq!(res.status(), StatusCode::OK);
}

/// XXL-JOB 3.5's job API: a call acts for the group its app name names, with that group's own
/// token only, on that group's jobs only; it adds, edits, starts, triggers, stops and removes a
/// job, every change audited under `app:<appName>`.
#[test]
fn the_job_api_acts_for_one_group_with_its_own_token() {
    run_paused(|| async {
        let dir = tempfile::tempdir().unwrap();
        let (app, svc) = center(dir.path()).await;
        let login = form(
            &svc,
            "/login",
            None,
            &format!("userName=admin&password={ADMIN_PW}"),
        )
        .await;
        let admin = login.cookie.unwrap();
        let r = form(
            &svc,
            "/jobgroup/save",
            Some(&admin),
            &format!("appname={APP}&title=Sample"),
        )
        .await;
        assert_eq!(r.json["code"], 200, "{}", r.json);
        let r = form(
            &svc,
            "/jobgroup/pageList",
            Some(&admin),
            &format!("appname={APP}"),
        )
        .await;
        let group = r.json["data"][0]["id"].as_i64().unwrap();
        let job = serde_json::json!({
            "jobDesc": "from the API", "author": "ci", "scheduleType": "CRON",
            "scheduleConf": "0 0 3 * * ?", "executorHandler": "demoJobHandler",
            "executorRouteStrategy": "FIRST", "glueType": "BEAN"
        });

        // a group without its own token cannot use the API, not even with the global token
        let r = job_api(&svc, "/api/addJob", "tok", APP, job.clone()).await;
        assert_eq!(r["code"], 500, "{r}");
        assert!(r["msg"].as_str().unwrap().contains("invalid"), "{r}");
        give_token(&svc, &admin, group, APP, "Sample").await;
        for (token, name) in [
            ("", APP),
            (GROUP_TOKEN, ""),
            ("wrong-token-wrong-token", APP),
            (GROUP_TOKEN, "xjob-demo"),
        ] {
            let r = job_api(&svc, "/api/addJob", token, name, job.clone()).await;
            assert_eq!(r["code"], 500, "{token}/{name}: {r}");
        }

        let r = job_api(
            &svc,
            "/xxl-job-admin/api/addJob",
            GROUP_TOKEN,
            APP,
            job.clone(),
        )
        .await;
        assert_eq!(
            (&r["code"], &r["msg"]),
            (&Value::from(200), &Value::from("Success")),
            "{r}"
        );
        // upstream answers the new id as a string
        let id: i64 = r["data"].as_str().unwrap().parse().unwrap();
        // an update as upstream's request carries it: a field it carries and leaves out is
        // emptied (the description is required, so an update without it is refused)
        let r = job_api(
            &svc,
            "/api/updateJob",
            GROUP_TOKEN,
            APP,
            serde_json::json!({ "id": id, "author": "ci" }),
        )
        .await;
        assert_eq!(r["code"], 500, "{r}");
        let mut renamed = job.clone();
        renamed["id"] = id.into();
        renamed["name"] = "renamed".into();
        renamed.as_object_mut().unwrap().remove("jobDesc");
        let r = job_api(&svc, "/api/updateJob", GROUP_TOKEN, APP, renamed).await;
        assert_eq!(
            r,
            serde_json::json!({"code": 200, "msg": "Success"}),
            "no data: none sent"
        );
        let r = job_api(
            &svc,
            "/api/startJob",
            GROUP_TOKEN,
            APP,
            serde_json::json!({ "id": id }),
        )
        .await;
        assert_eq!(r["code"], 200, "{r}");
        let r = job_api(
            &svc,
            "/api/triggerJob",
            GROUP_TOKEN,
            APP,
            serde_json::json!({ "id": id, "executorParam": "api" }),
        )
        .await;
        assert_eq!(r["code"], 200, "{r}");
        app.advance(2_000).await;
        let r = job_api(
            &svc,
            "/api/stopJob",
            GROUP_TOKEN,
            APP,
            serde_json::json!({ "id": id }),
        )
        .await;
        assert_eq!(r["code"], 200, "{r}");
        // without executorParam a trigger runs with an empty one, as upstream's does
        let r = job_api(
            &svc,
            "/api/triggerJob",
            GROUP_TOKEN,
            APP,
            serde_json::json!({ "id": id }),
        )
        .await;
        assert_eq!(r["code"], 200, "{r}");
        app.advance(2_000).await;
        let r = form(
            &svc,
            "/joblog/pageList",
            Some(&admin),
            &format!("jobGroup={group}&jobId={id}&logStatus=1"),
        )
        .await;
        assert_eq!(r.json["recordsTotal"], 2, "{}", r.json);
        let mut params: Vec<String> = r.json["data"]
            .as_array()
            .unwrap()
            .iter()
            .map(|l| l["executorParam"].as_str().unwrap_or_default().to_string())
            .collect();
        params.sort();
        assert_eq!(params, vec!["".to_string(), "api".to_string()]);
        assert_eq!(r.json["data"][0]["jobDesc"], "renamed");
        // a blank body, and removing a job that does not exist, answer as upstream
        let res = call_service(
            &svc,
            TestRequest::post()
                .uri("/api/stopJob")
                .insert_header(("XXL-JOB-ACCESS-TOKEN", GROUP_TOKEN))
                .insert_header(("XXL-JOB-APPNAME", APP))
                .to_request(),
        )
        .await;
        let r: Value = serde_json::from_slice(&read_body(res).await).unwrap();
        assert_eq!(
            r,
            serde_json::json!({"code": 500, "msg": "invalid request, requestBody empty."})
        );
        let r = job_api(
            &svc,
            "/api/removeJob",
            GROUP_TOKEN,
            APP,
            serde_json::json!({ "id": 987_654 }),
        )
        .await;
        assert_eq!(r["code"], 200, "{r}");

        // another group's job, or a job put in another group, is out of reach
        let other = app
            .engine
            .add_job(xjob::prelude::JobSpec::cron(
                app.group,
                "demo",
                "0 0 3 * * ?",
                "demoJobHandler",
            ))
            .await
            .unwrap();
        for (path, body) in [
            ("/api/removeJob", serde_json::json!({ "id": other })),
            ("/api/triggerJob", serde_json::json!({ "id": other })),
            ("/api/addJob", {
                let mut j = job.clone();
                j["jobGroup"] = app.group.into();
                j
            }),
        ] {
            let r = job_api(&svc, path, GROUP_TOKEN, APP, body).await;
            assert_eq!(r["code"], 500, "{path}: {r}");
            assert!(
                r["msg"].as_str().unwrap().contains("permission"),
                "{path}: {r}"
            );
        }
        let r = job_api(
            &svc,
            "/api/removeJob",
            GROUP_TOKEN,
            APP,
            serde_json::json!({ "id": id }),
        )
        .await;
        assert_eq!(r["code"], 200, "{r}");
        let r = form(&svc, "/jobinfo/pageList", Some(&admin), "").await;
        assert_eq!(
            r.json["recordsTotal"], 1,
            "only the demo job is left: {}",
            r.json
        );

        let entries = audit(&svc, &admin).await;
        let by_app: Vec<&str> = entries
            .iter()
            .rev()
            .filter(|(u, _)| *u == format!("app:{APP}"))
            .map(|(_, a)| a.as_str())
            .collect();
        assert_eq!(
            by_app,
            [
                "job.create",
                "job.update",
                "job.start",
                "job.trigger",
                "job.stop",
                "job.trigger",
                "job.delete"
            ]
        );
        app.close().await;
    });
}

/// The job API is rate-limited per client: over `security.job_api_per_minute`, calls are refused
/// until the next minute.
#[test]
fn the_job_api_is_rate_limited() {
    run_paused(|| async {
        let dir = tempfile::tempdir().unwrap();
        let app = TestApp::start_in(dir.path(), T0, |c| {
            c.security.admin_password = ADMIN_PW.into();
            c.security.job_api_per_minute = 5;
        })
        .await;
        let console = Console::new(app.engine.clone());
        console.bootstrap_admin().await.unwrap();
        let svc = init_service(
            actix_web::App::new().configure(xjob::routes::center(console, Some("tok".into()))),
        )
        .await;
        let mut codes = Vec::new();
        for _ in 0..7 {
            let r = job_api(
                &svc,
                "/api/startJob",
                "tok",
                "y",
                serde_json::json!({ "id": 1 }),
            )
            .await;
            codes.push(
                r["msg"]
                    .as_str()
                    .unwrap_or_default()
                    .starts_with("too many requests")
                    && r["code"] == 429,
            );
        }
        assert_eq!(codes, [false, false, false, false, false, true, true]);
        app.advance(60_000).await;
        let r = job_api(
            &svc,
            "/api/startJob",
            "tok",
            "y",
            serde_json::json!({ "id": 1 }),
        )
        .await;
        assert!(
            !r["msg"].as_str().unwrap().starts_with("too many"),
            "a new minute: {r}"
        );
        app.close().await;
    });
}

/// `/joblog/logKill` stops a running run and `/joblog/clearLog` deletes runs by XXL-JOB's modes;
/// `/joblog/getJobsByGroup` lists a group's jobs for the run filter.
#[test]
fn runs_are_killed_and_cleared_through_the_2x_endpoints() {
    run_paused(|| async {
        let dir = tempfile::tempdir().unwrap();
        let (app, svc) = center(dir.path()).await;
        let login = form(
            &svc,
            "/xxl-job-admin/login",
            None,
            &format!("userName=admin&password={ADMIN_PW}"),
        )
        .await;
        let c = login.cookie.unwrap();
        let c = Some(c.as_str());
        form(
            &svc,
            "/xxl-job-admin/jobgroup/save",
            c,
            &format!("appname={APP}&title=Sample"),
        )
        .await;
        let r = form(
            &svc,
            "/xxl-job-admin/jobgroup/pageList",
            c,
            &format!("appname={APP}"),
        )
        .await;
        let group = r.json["data"][0]["id"].as_i64().unwrap();
        let add = format!(
            "jobGroup={group}&jobDesc=slow&author=ops&scheduleType=NONE&executorHandler=sleepJobHandler\
             &executorRouteStrategy=FIRST&executorBlockStrategy=SERIAL_EXECUTION&misfireStrategy=DO_NOTHING&glueType=BEAN"
        );
        let r = form(&svc, "/xxl-job-admin/jobinfo/add", c, &add).await;
        let id: i64 = r.json["content"].as_str().unwrap().parse().unwrap();
        let r = form(
            &svc,
            "/xxl-job-admin/joblog/getJobsByGroup",
            c,
            &format!("jobGroup={group}"),
        )
        .await;
        assert_eq!(r.json["content"][0]["id"], id, "{}", r.json);
        let r = form(
            &svc,
            "/xxl-job-admin/jobinfo/trigger",
            c,
            &format!("id={id}&executorParam=600"),
        )
        .await;
        assert_eq!(r.json["code"], 200, "{}", r.json);
        app.advance(1_000).await;
        let running = format!("jobGroup={group}&jobId={id}&logStatus=3&start=0&length=10");
        let r = form(&svc, "/xxl-job-admin/joblog/pageList", c, &running).await;
        assert_eq!(r.json["recordsTotal"], 1, "{}", r.json);
        let run = r.json["data"][0]["id"].as_i64().unwrap();
        let r = form(
            &svc,
            "/xxl-job-admin/joblog/logKill",
            c,
            &format!("id={run}"),
        )
        .await;
        assert_eq!(r.json["code"], 200, "{}", r.json);
        let r = form(&svc, "/xxl-job-admin/joblog/pageList", c, &running).await;
        assert_eq!(r.json["recordsTotal"], 0, "killed: {}", r.json);
        let r = form(
            &svc,
            "/xxl-job-admin/joblog/logKill",
            c,
            &format!("id={run}"),
        )
        .await;
        assert_eq!(r.json["code"], 500, "not running any more: {}", r.json);

        let r = form(
            &svc,
            "/xxl-job-admin/joblog/clearLog",
            c,
            &format!("jobGroup={group}&jobId={id}&type=9"),
        )
        .await;
        assert_eq!(r.json["code"], 200, "{}", r.json);
        assert_eq!(r.json["content"]["deleted"], 1, "{}", r.json);
        let r = form(
            &svc,
            "/xxl-job-admin/joblog/clearLog",
            c,
            &format!("jobGroup={group}&type=42"),
        )
        .await;
        assert_eq!(r.json["code"], 500, "an unknown mode: {}", r.json);
        let r = form(
            &svc,
            "/xxl-job-admin/joblog/pageList",
            c,
            &format!("jobGroup={group}&jobId={id}"),
        )
        .await;
        assert_eq!(r.json["recordsTotal"], 0, "{}", r.json);
        app.close().await;
    });
}

/// XXL-JOB 3.5's console fields: a group created or edited with `accessToken` has that token
/// (its executors and the job API need it; an empty one returns it to the global token); groups
/// and jobs list with 3.5's `name` beside `title` / `jobDesc`, and `name` filters both lists.
#[test]
fn the_3_5_console_fields_are_read_and_written() {
    run_paused(|| async {
        let dir = tempfile::tempdir().unwrap();
        let (app, svc) = center(dir.path()).await;
        let login = form(
            &svc,
            "/login",
            None,
            &format!("userName=admin&password={ADMIN_PW}"),
        )
        .await;
        let admin = login.cookie.unwrap();
        let token = "thirty-five-token-0123";
        let r = form(
            &svc,
            "/jobgroup/insert",
            Some(&admin),
            &format!("appname={APP}&title=Thirty-five&addressType=0&accessToken={token}"),
        )
        .await;
        assert_eq!(r.json["code"], 200, "{}", r.json);
        let r = form(
            &svc,
            "/jobgroup/pageList",
            Some(&admin),
            "offset=0&pagesize=10&name=Thirty",
        )
        .await;
        let groups = r.json["data"]["data"].as_array().unwrap().clone();
        assert_eq!(groups.len(), 1, "{}", r.json);
        assert_eq!(groups[0]["name"], "Thirty-five");
        assert_eq!(groups[0]["title"], "Thirty-five");
        let group = groups[0]["id"].as_i64().unwrap();
        // the token took: the job API acts for the group with it
        let job = serde_json::json!({
            "jobGroup": group, "name": "made by 3.5", "author": "ci", "scheduleType": "NONE",
            "executorHandler": "demoJobHandler", "executorRouteStrategy": "FIRST", "glueType": "BEAN"
        });
        let r = job_api(&svc, "/api/addJob", token, APP, job.clone()).await;
        assert_eq!(r["code"], 200, "{r}");
        let r = form(
            &svc,
            "/jobinfo/pageList",
            Some(&admin),
            &format!("offset=0&pagesize=10&jobGroup={group}&triggerStatus=-1&name=made"),
        )
        .await;
        let jobs = r.json["data"]["data"].as_array().unwrap().clone();
        assert_eq!(jobs.len(), 1, "{}", r.json);
        assert_eq!(
            (&jobs[0]["name"], &jobs[0]["jobDesc"]),
            (&"made by 3.5".into(), &"made by 3.5".into())
        );
        let r = form(
            &svc,
            "/jobinfo/pageList",
            Some(&admin),
            &format!("offset=0&pagesize=10&jobGroup={group}&triggerStatus=-1&name=nothing-like-it"),
        )
        .await;
        assert_eq!(r.json["data"]["total"], 0, "{}", r.json);
        // an empty token returns the group to the global one: the job API no longer acts for it
        let r = form(
            &svc,
            "/jobgroup/update",
            Some(&admin),
            &format!("id={group}&appname={APP}&title=Thirty-five&addressType=0&accessToken="),
        )
        .await;
        assert_eq!(r.json["code"], 200, "{}", r.json);
        let r = job_api(&svc, "/api/addJob", token, APP, job).await;
        assert_eq!(r["code"], 500, "{r}");
        app.close().await;
    });
}
