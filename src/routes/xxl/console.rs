//! XXL-JOB's console endpoints as its tools call them (protocol.md §9, §10): login and logout (2.x's
//! `/login` with the `XXL_JOB_LOGIN_IDENTITY` cookie, 3.2's `/auth/doLogin` with
//! `xxl_job_login_token`), `/jobgroup/*`, `/jobinfo/*` and `/joblog/*` in their 2.x and 3.3
//! forms. Each maps its parameters onto a [`Console`] operation and its view onto XXL-JOB's
//! field names (`appname`, times as `yyyy-MM-dd HH:mm:ss` in the center's zone).
//!
//! Spring MVC maps these paths for any method; here the endpoints that only read are served for
//! GET and POST, and those that change state (or sign in) for POST only, with no password in
//! the URL, and a cookie-authenticated change only from the console's own origin
//! ([`crate::routes::origin`]).

use actix_web::http::header;
use actix_web::{HttpRequest, HttpResponse, web};
use serde_json::{Map, Value};

use super::{IDENTITY_COOKIE, Outcome, Params, Shape, TOKEN_COOKIE, answer, list, to_value};
use crate::console::groups::GroupInput;
use crate::console::jobs::JobQuery;
use crate::console::logs::{ClearInput, LogQuery};
use crate::console::{Console, Principal};
use crate::error::Error;
use crate::jobs::JobSpec;
use crate::model::TriggerStatus;
use crate::routes::v1::{MAX_BODY, from_value, known_field, request_token_in, session_cookie};

/// One endpoint.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Op {
    Login,
    DoLogin,
    Logout,
    ToLogin,
    GroupPage,
    GroupSave,
    GroupInsert,
    GroupUpdate,
    GroupRemove,
    GroupDelete,
    GroupLoad,
    JobPage,
    JobAdd,
    JobInsert,
    JobUpdate,
    JobRemove,
    JobDelete,
    JobStart,
    JobStop,
    JobTrigger,
    JobNextTimes,
    JobsByGroup,
    LogPage,
    LogCat,
    LogKill,
    LogClear,
}

/// Every endpoint, relative to a base path.
const ENDPOINTS: &[(&str, Op)] = &[
    ("/login", Op::Login),
    ("/logout", Op::Logout),
    ("/toLogin", Op::ToLogin),
    ("/auth/login", Op::ToLogin),
    ("/auth/doLogin", Op::DoLogin),
    ("/auth/logout", Op::Logout),
    ("/jobgroup/pageList", Op::GroupPage),
    ("/jobgroup/save", Op::GroupSave),
    ("/jobgroup/insert", Op::GroupInsert),
    ("/jobgroup/update", Op::GroupUpdate),
    ("/jobgroup/remove", Op::GroupRemove),
    ("/jobgroup/delete", Op::GroupDelete),
    ("/jobgroup/loadById", Op::GroupLoad),
    ("/jobinfo/pageList", Op::JobPage),
    ("/jobinfo/add", Op::JobAdd),
    ("/jobinfo/insert", Op::JobInsert),
    ("/jobinfo/update", Op::JobUpdate),
    ("/jobinfo/remove", Op::JobRemove),
    ("/jobinfo/delete", Op::JobDelete),
    ("/jobinfo/start", Op::JobStart),
    ("/jobinfo/stop", Op::JobStop),
    ("/jobinfo/trigger", Op::JobTrigger),
    ("/jobinfo/nextTriggerTime", Op::JobNextTimes),
    ("/joblog/getJobsByGroup", Op::JobsByGroup),
    ("/joblog/pageList", Op::LogPage),
    ("/joblog/logDetailCat", Op::LogCat),
    ("/joblog/logKill", Op::LogKill),
    ("/joblog/clearLog", Op::LogClear),
];

/// The paths (with their base) this module serves, for the tests and the README.
pub fn paths() -> Vec<String> {
    super::BASES
        .iter()
        .flat_map(|b| ENDPOINTS.iter().map(move |(p, _)| format!("{b}{p}")))
        .collect()
}

/// Mounts every endpoint under both bases, for GET and POST.
pub(super) fn config(cfg: &mut web::ServiceConfig) {
    for base in super::BASES {
        for (path, op) in ENDPOINTS {
            cfg.service(
                web::resource(format!("{base}{path}"))
                    .app_data(web::Data::new(*op))
                    .app_data(web::PayloadConfig::new(MAX_BODY))
                    .route(web::get().to(handle))
                    .route(web::post().to(handle)),
            );
        }
    }
}

/// Time fields of the views, shown in the center's zone.
const TIME_FIELDS: &[&str] = &[
    "addTime",
    "updateTime",
    "glueUpdatetime",
    "triggerTime",
    "handleTime",
];

impl Op {
    /// Whether the endpoint only reads (served for GET too, as Spring serves it); every other
    /// one changes state or signs in and takes POST only.
    fn reads(self) -> bool {
        matches!(
            self,
            Op::ToLogin
                | Op::GroupPage
                | Op::GroupLoad
                | Op::JobPage
                | Op::JobNextTimes
                | Op::JobsByGroup
                | Op::LogPage
                | Op::LogCat
        )
    }
}

async fn handle(
    c: web::Data<Console>,
    op: web::Data<Op>,
    req: HttpRequest,
    body: web::Bytes,
) -> HttpResponse {
    // state changes only by POST: a link or an image cannot remove a job with the cookie
    if req.method() != actix_web::http::Method::POST && !op.reads() {
        return HttpResponse::MethodNotAllowed()
            .insert_header((header::ALLOW, "POST"))
            .json(serde_json::json!({
                "code": 405,
                "msg": "this endpoint changes state and takes POST only",
            }));
    }
    // credentials never in a URL (proxies and access logs keep URLs)
    if matches!(**op, Op::Login | Op::DoLogin)
        && url::form_urlencoded::parse(req.query_string().as_bytes()).any(|(k, _)| k == "password")
    {
        return answer(
            Shape::Both,
            Err(Error::Invalid {
                field: "password",
                reason: "a password is not accepted in the URL; send it in the POST body".into(),
            }),
        );
    }
    if !crate::routes::origin::has_bearer(&req)
        && let Some(reason) =
            crate::routes::origin::cross_site(&req, &c.engine().config().security.trusted_origins)
    {
        tracing::warn!(path = req.path(), %reason, "cross-site write refused");
        return answer(
            Shape::Both,
            Err(Error::Forbidden {
                field: None,
                reason,
            }),
        );
    }
    let p = Params::of(&req, &body);
    match **op {
        Op::Login => login(&c, &req, &p, IDENTITY_COOKIE, Shape::V2).await,
        Op::DoLogin => login(&c, &req, &p, TOKEN_COOKIE, Shape::Both).await,
        Op::ToLogin => HttpResponse::Found()
            .insert_header((header::LOCATION, "/"))
            .finish(),
        Op::Logout => logout(&c, &req).await,
        op => {
            let Some((who, _)) = signed_in(&c, &req).await else {
                return super::to_login(&req);
            };
            operate(&c, &who, op, &p).await
        }
    }
}

/// The signed-in user of a request (by any of the console's cookies or a bearer token).
async fn signed_in(c: &Console, req: &HttpRequest) -> Option<(Principal, String)> {
    let token = request_token_in(req, super::COOKIES)?;
    let mut who = c.authenticate(&token).await.ok()?;
    who.client = client(req);
    Some((who, token))
}

fn client(req: &HttpRequest) -> String {
    req.peer_addr()
        .map(|a| a.ip().to_string())
        .unwrap_or_default()
}

async fn login(
    c: &Console,
    req: &HttpRequest,
    p: &Params,
    cookie: &str,
    shape: Shape,
) -> HttpResponse {
    let user = p.get("userName").or(p.get("username")).unwrap_or_default();
    let password = p.get("password").unwrap_or_default();
    let login = match c.login(user, password, &client(req)).await {
        Ok(l) => l,
        Err(Error::Unauthenticated) => {
            return answer(
                shape,
                Err(Error::Invalid {
                    field: "password",
                    reason: "the user name or password is wrong".into(),
                }),
            );
        }
        Err(e) => return answer(shape, Err(e)),
    };
    let sec = &c.engine().config().security;
    // "remember me": kept as long as the session lives; otherwise until the browser closes
    let remember = matches!(p.get("ifRemember"), Some("on" | "true" | "1"));
    let age = remember.then(|| sec.session_ttl_secs.max(60) as i64);
    let mut res = answer(shape, Ok(Value::Null));
    res.headers_mut().append(
        header::SET_COOKIE,
        session_cookie(cookie, &login.token, age, sec.secure_cookie),
    );
    res
}

async fn logout(c: &Console, req: &HttpRequest) -> HttpResponse {
    if let Some((who, token)) = signed_in(c, req).await
        && let Err(e) = c.logout(&who, &token).await
    {
        return answer(Shape::Both, Err(e));
    }
    let secure = c.engine().config().security.secure_cookie;
    let mut res = answer(Shape::Both, Ok(Value::Null));
    for name in [IDENTITY_COOKIE, TOKEN_COOKIE] {
        res.headers_mut().append(
            header::SET_COOKIE,
            session_cookie(name, "", Some(0), secure),
        );
    }
    res
}

async fn operate(c: &Console, who: &Principal, op: Op, p: &Params) -> HttpResponse {
    let tz = c.engine().config().time_zone();
    let v3 = if p.asks_v3() { Shape::V3 } else { Shape::V2 };
    match op {
        Op::GroupPage | Op::JobPage | Op::LogPage => {
            let paged = match super::paging(p) {
                Ok(paged) => paged,
                Err(e) => return list((0, 10, p.asks_v3()), Err(e)),
            };
            let r = match op {
                Op::GroupPage => group_page(c, who, p, paged).await,
                Op::JobPage => job_page(c, who, p, paged).await,
                _ => log_page(c, who, p, paged).await,
            };
            list(
                paged,
                r.map(|(total, mut items)| {
                    items.iter_mut().for_each(|v| view(v, tz));
                    (total, items)
                }),
            )
        }
        Op::GroupSave => answer(Shape::V2, group_save(c, who, p).await),
        Op::GroupInsert => answer(Shape::V3, group_save(c, who, p).await),
        Op::GroupUpdate => answer(Shape::Both, group_update(c, who, p).await),
        Op::GroupRemove => answer(Shape::V2, group_delete(c, who, p).await),
        Op::GroupDelete => answer(Shape::V3, group_delete(c, who, p).await),
        Op::GroupLoad => answer(Shape::Both, group_load(c, who, p, tz).await),
        Op::JobAdd => answer(Shape::V2, job_add(c, who, p).await),
        Op::JobInsert => answer(Shape::V3, job_add(c, who, p).await),
        Op::JobUpdate => answer(Shape::Both, job_update(c, who, p).await),
        Op::JobRemove => answer(Shape::V2, job_delete(c, who, p).await),
        Op::JobDelete => answer(Shape::V3, job_delete(c, who, p).await),
        Op::JobStart => answer(v3, job_switch(c, who, p, true).await),
        Op::JobStop => answer(v3, job_switch(c, who, p, false).await),
        Op::JobTrigger => answer(Shape::Both, job_trigger(c, who, p).await),
        Op::JobNextTimes => answer(Shape::Both, next_times(c, p, tz)),
        Op::JobsByGroup => answer(Shape::Both, jobs_by_group(c, who, p, tz).await),
        Op::LogCat => answer(Shape::Both, log_cat(c, who, p).await),
        Op::LogKill => answer(Shape::Both, log_kill(c, who, p).await),
        Op::LogClear => answer(Shape::Both, log_clear(c, who, p).await),
        Op::Login | Op::DoLogin | Op::Logout | Op::ToLogin => {
            answer(Shape::Both, Err(Error::Unauthenticated))
        }
    }
}

/// A console view with XXL-JOB's names: `appname` for a group's `appName`; a job's
/// description and a group's title also as XXL-JOB 3.5's `name`; local times.
fn view(v: &mut Value, tz: chrono_tz::Tz) {
    if let Some(o) = v.as_object_mut() {
        if let Some(name) = o.remove("appName") {
            o.insert("appname".into(), name);
        }
        let name = o.get("jobDesc").or_else(|| o.get("title")).cloned();
        if let Some(name) = name {
            o.entry("name").or_insert(name);
        }
    }
    super::local_times(v, TIME_FIELDS, tz);
}

fn viewed<T: serde::Serialize>(t: T, tz: chrono_tz::Tz) -> Value {
    let mut v = to_value(t);
    view(&mut v, tz);
    v
}

type Listed = Result<(u64, Vec<Value>), Error>;

async fn group_page(c: &Console, who: &Principal, p: &Params, paged: (u64, u64, bool)) -> Listed {
    // XXL-JOB 3.5 filters by `name`
    let title = p.text("title").or(p.text("name"));
    let page = c
        .list_groups(who, p.text("appname"), title, paged.0, paged.1)
        .await?;
    Ok((page.total, page.items.into_iter().map(to_value).collect()))
}

fn group_input(p: &Params) -> Result<GroupInput, Error> {
    Ok(GroupInput {
        app_name: p
            .get("appname")
            .or(p.get("appName"))
            .unwrap_or_default()
            .to_string(),
        // XXL-JOB's next version names the title `name`
        title: p
            .get("title")
            .or(p.get("name"))
            .unwrap_or_default()
            .to_string(),
        address_type: p.number("addressType", "addressType")?.unwrap_or(0),
        address_list: p.get("addressList").map(str::to_string),
        // XXL-JOB 3.5's `accessToken`; absent: an edit keeps the group's own token, and `""`
        // returns the group to the global token
        access_token: p.get("accessToken").map(|t| t.trim().to_string()),
    })
}

async fn group_save(c: &Console, who: &Principal, p: &Params) -> Outcome {
    let mut input = group_input(p)?;
    // a form's empty token field on a new group: no token of its own
    if input.access_token.as_deref() == Some("") {
        input.access_token = None;
    }
    c.create_group(who, input).await?;
    Ok(Value::Null)
}

async fn group_update(c: &Console, who: &Principal, p: &Params) -> Outcome {
    let id = p.required("id", "id")?;
    c.update_group(who, id, group_input(p)?).await?;
    Ok(Value::Null)
}

async fn group_delete(c: &Console, who: &Principal, p: &Params) -> Outcome {
    for id in p.ids()? {
        c.delete_group(who, id).await?;
    }
    Ok(Value::Null)
}

async fn group_load(c: &Console, who: &Principal, p: &Params, tz: chrono_tz::Tz) -> Outcome {
    let g = c.get_group(who, p.required("id", "id")?).await?;
    Ok(viewed(g, tz))
}

async fn job_page(c: &Console, who: &Principal, p: &Params, paged: (u64, u64, bool)) -> Listed {
    let q = JobQuery {
        job_group: p.number("jobGroup", "jobGroup")?,
        trigger_status: p.number("triggerStatus", "triggerStatus")?,
        // XXL-JOB 3.5 filters by `name`
        job_desc: p.text("jobDesc").or(p.text("name")).map(str::to_string),
        executor_handler: p.text("executorHandler").map(str::to_string),
        author: p.text("author").map(str::to_string),
        offset: Some(paged.0),
        limit: Some(paged.1),
    };
    let page = c.list_jobs(who, &q).await?;
    Ok((page.total, page.items.into_iter().map(to_value).collect()))
}

/// A job spec: `base` (a job's current fields, or none for a new one) with the form's fields
/// laid over it. A blank number keeps the base's value.
fn job_spec(base: Option<Value>, p: &Params) -> Result<JobSpec, Error> {
    let mut fields: Map<String, Value> = match base {
        Some(Value::Object(o)) => o.into_iter().filter(|(_, v)| !v.is_null()).collect(),
        _ => Map::new(),
    };
    // XXL-JOB's `XxlJobInfo` form fields are the job's input fields, plus xjob's own
    for (key, ty) in crate::routes::openapi::JOB_INPUT {
        // XXL-JOB's next version names the description `name`
        let value = p.get(key).or_else(|| match *key {
            "jobDesc" => p.get("name"),
            _ => None,
        });
        let Some(value) = value else { continue };
        if *ty == "integer" {
            let field = known_field(key).unwrap_or("body");
            if let Some(n) = p.number::<i64>(key, field)? {
                fields.insert((*key).to_string(), Value::from(n));
            }
        } else {
            fields.insert((*key).to_string(), Value::from(value));
        }
    }
    from_value(Value::Object(fields))
}

async fn job_add(c: &Console, who: &Principal, p: &Params) -> Outcome {
    let job = c
        .create_job(who, job_spec(None, p)?, TriggerStatus::Stopped)
        .await?;
    // XXL-JOB answers the new id as a string
    Ok(Value::from(job.id.to_string()))
}

async fn job_update(c: &Console, who: &Principal, p: &Params) -> Outcome {
    let id = p.required("id", "id")?;
    let current = c.get_job(who, id).await?;
    let spec = job_spec(Some(to_value(current)), p)?;
    c.update_job(who, id, spec).await?;
    Ok(Value::Null)
}

async fn job_delete(c: &Console, who: &Principal, p: &Params) -> Outcome {
    for id in p.ids()? {
        c.delete_job(who, id).await?;
    }
    Ok(Value::Null)
}

async fn job_switch(c: &Console, who: &Principal, p: &Params, start: bool) -> Outcome {
    for id in p.ids()? {
        if start {
            c.start_job(who, id).await?;
        } else {
            c.stop_job(who, id).await?;
        }
    }
    Ok(Value::Null)
}

async fn job_trigger(c: &Console, who: &Principal, p: &Params) -> Outcome {
    let id = p.required("id", "id")?;
    // sent but empty is an empty param, as XXL-JOB runs it; absent is the job's own
    let param = p.get("executorParam").map(str::to_string);
    let addresses = p.text("addressList").map(str::to_string);
    c.trigger_job(who, id, param, addresses).await?;
    Ok(Value::Null)
}

fn next_times(c: &Console, p: &Params, tz: chrono_tz::Tz) -> Outcome {
    let times = c.next_fire_times(
        p.get("scheduleType").unwrap_or("CRON"),
        p.get("scheduleConf"),
        p.text("timeZone"),
        5,
    )?;
    Ok(Value::from(
        times
            .iter()
            .filter_map(|t| super::local_time(t, tz))
            .collect::<Vec<_>>(),
    ))
}

async fn jobs_by_group(c: &Console, who: &Principal, p: &Params, tz: chrono_tz::Tz) -> Outcome {
    let q = JobQuery {
        job_group: Some(p.required("jobGroup", "jobGroup")?),
        limit: Some(crate::console::MAX_LIMIT),
        ..JobQuery::default()
    };
    let page = c.list_jobs(who, &q).await?;
    Ok(Value::from(
        page.items
            .into_iter()
            .map(|j| viewed(j, tz))
            .collect::<Vec<_>>(),
    ))
}

async fn log_page(c: &Console, who: &Principal, p: &Params, paged: (u64, u64, bool)) -> Listed {
    let (from, to) = match p.text("filterTime").and_then(|t| t.split_once(" - ")) {
        Some((a, b)) => (Some(a.trim().to_string()), Some(b.trim().to_string())),
        None => (None, None),
    };
    // XXL-JOB's logStatus: 1 success, 2 failed, 3 running, anything else all
    let status = match p.number::<i32>("logStatus", "logStatus")? {
        Some(1) => Some("success"),
        Some(2) => Some("failed"),
        Some(3) => Some("running"),
        _ => None,
    };
    let q = LogQuery {
        job_group: p.number("jobGroup", "jobGroup")?,
        job_id: p.number("jobId", "jobId")?,
        status: status.map(str::to_string),
        from,
        to,
        offset: Some(paged.0),
        limit: Some(paged.1),
    };
    let page = c.list_logs(who, &q).await?;
    Ok((page.total, page.items.into_iter().map(to_value).collect()))
}

async fn log_cat(c: &Console, who: &Principal, p: &Params) -> Outcome {
    let id = p.required("logId", "logId")?;
    let from = p.number("fromLineNum", "fromLine")?.unwrap_or(1);
    let log = c.log_content(who, id, from).await?;
    // XXL-JOB's console escapes the log for the page it inserts it into, and names the end
    // flag `end` (and the executor's `isEnd`)
    Ok(serde_json::json!({
        "fromLineNum": log.from_line,
        "toLineNum": log.to_line,
        "logContent": crate::alarm::html_escape(&log.content),
        "end": log.end,
        "isEnd": log.end,
    }))
}

async fn log_kill(c: &Console, who: &Principal, p: &Params) -> Outcome {
    c.kill_log(who, p.required("id", "id")?).await?;
    Ok(Value::Null)
}

async fn log_clear(c: &Console, who: &Principal, p: &Params) -> Outcome {
    let input = ClearInput {
        job_group: p.number("jobGroup", "jobGroup")?,
        job_id: p.number("jobId", "jobId")?,
        mode: p.required("type", "type")?,
    };
    let cleared = c.clear_logs(who, input).await?;
    Ok(to_value(cleared))
}
