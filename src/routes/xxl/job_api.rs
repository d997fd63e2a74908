//! XXL-JOB's next job API (upstream master, 3.5; protocol.md §10), done safely: `POST /api/addJob`,
//! `/api/updateJob`, `/api/removeJob`, `/api/startJob`, `/api/stopJob`, `/api/triggerJob` with
//! the headers `XXL-JOB-ACCESS-TOKEN` and `XXL-JOB-APPNAME`, answering
//! `{"code","msg","data"}` (`data` = the new id for `addJob`).
//!
//! Upstream runs these as an administrator on any job. Here a call acts for the executor group
//! its app name names, only with that group's own access token (a group without one cannot use
//! the API: the global token is shared by every such group's executors), and only on that
//! group's jobs — through the console's operations as a user whose sole permission is that
//! group, so validation, script rules and audit entries (user `app:<appName>`) are the
//! console's. Calls are rate-limited per client address (`security.job_api_per_minute`).
//!
//! Bodies are JSON objects with the job's XXL-JOB field names (`jobDesc`, or 3.5's `name`);
//! `id` (or `jobId`) names the job of the other calls; `triggerJob` takes `executorParam` and
//! `addressList`.

use std::collections::HashMap;

use actix_web::{HttpRequest, HttpResponse, web};
use parking_lot::Mutex;
use serde_json::{Map, Value};

use super::Outcome;
use crate::console::{Console, Principal};
use crate::error::Error;
use crate::model::TriggerStatus;
use crate::token::{APP_HEADER, TOKEN_HEADER, constant_time_eq};

/// The job API's paths under `/api/`.
pub(crate) const PATHS: [&str; 6] = [
    "addJob",
    "updateJob",
    "removeJob",
    "startJob",
    "stopJob",
    "triggerJob",
];

/// Clients remembered by the rate limit before the table is cleared (bounds its memory).
const MAX_CLIENTS: usize = 10_000;

/// Calls per client address per minute (a fixed window).
pub(crate) struct Limiter {
    per_minute: u32,
    windows: Mutex<HashMap<String, (i64, u32)>>,
}

impl Limiter {
    /// A limit of `per_minute` calls per client.
    pub(crate) fn new(per_minute: u32) -> Self {
        Limiter {
            per_minute: per_minute.max(1),
            windows: Mutex::default(),
        }
    }

    /// Counts a call of `client` at `now_ms`; `Err(seconds to wait)` over the limit.
    fn allow(&self, client: &str, now_ms: i64) -> Result<(), u64> {
        let minute = now_ms.div_euclid(60_000);
        let mut w = self.windows.lock();
        if w.len() >= MAX_CLIENTS && !w.contains_key(client) {
            w.retain(|_, (m, _)| *m == minute);
            if w.len() >= MAX_CLIENTS {
                w.clear();
            }
        }
        let e = w.entry(client.to_string()).or_insert((minute, 0));
        if e.0 != minute {
            *e = (minute, 0);
        }
        if e.1 >= self.per_minute {
            let wait = 60_000 - now_ms.rem_euclid(60_000);
            return Err((wait as u64).div_ceil(1000));
        }
        e.1 += 1;
        Ok(())
    }
}

/// Whether `uri` (under `/api/`) is a job API call.
pub(crate) fn is_job_api(uri: &str) -> bool {
    PATHS.contains(&uri)
}

/// Answers a job API call (the body already read). Called by the admin API's `/api/{uri}`
/// route; without a console (a node that serves none) the paths are not mapped.
pub(crate) async fn handle(req: &HttpRequest, uri: &str, body: &[u8]) -> HttpResponse {
    let (Some(console), Some(limiter)) = (
        req.app_data::<web::Data<Console>>(),
        req.app_data::<web::Data<Limiter>>(),
    ) else {
        return reply(Err(Error::Invalid {
            field: "uri",
            reason: format!("invalid request, uri-mapping({uri}) not found."),
        }));
    };
    let client = req
        .peer_addr()
        .map(|a| a.ip().to_string())
        .unwrap_or_default();
    let now = console.engine().clock().now_ms();
    if let Err(wait) = limiter.allow(&client, now) {
        return HttpResponse::Ok()
            .insert_header((actix_web::http::header::RETRY_AFTER, wait.to_string()))
            .json(serde_json::json!({
                "code": 429,
                "msg": format!("too many requests; retry in {wait} s"),
                "data": null,
            }));
    }
    // upstream refuses a blank body before anything else
    if body.trim_ascii().is_empty() {
        return HttpResponse::Ok().json(serde_json::json!({
            "code": 500,
            "msg": "invalid request, requestBody empty.",
        }));
    }
    let r = match caller(console, req, client).await {
        Ok(who) => call(console, &who, uri, body).await,
        Err(e) => Err(e),
    };
    reply(r)
}

/// An answer as upstream's job API writes it: `code`, `msg` (`"Success"` on success) and
/// `data` only when there is one (its JSON leaves out what is null).
fn reply(r: Outcome) -> HttpResponse {
    let body = match r {
        Ok(Value::Null) => serde_json::json!({ "code": 200, "msg": "Success" }),
        Ok(data) => serde_json::json!({ "code": 200, "msg": "Success", "data": data }),
        Err(e) => serde_json::json!({ "code": 500, "msg": super::message(&e) }),
    };
    HttpResponse::Ok()
        .insert_header((actix_web::http::header::CACHE_CONTROL, "no-store"))
        .json(body)
}

/// The group the call acts for, as a console user confined to it: the app name must name a
/// group with its own token, and the call must carry that token.
async fn caller(c: &Console, req: &HttpRequest, client: String) -> Result<Principal, Error> {
    let header = |name: &str| {
        req.headers()
            .get(name)
            .map(|v| v.as_bytes().to_vec())
            .filter(|v| !v.trim_ascii().is_empty())
    };
    let refused = || Error::Forbidden {
        field: None,
        reason: "invalid request, accessToken or appname is invalid.".into(),
    };
    let (Some(app), Some(token)) = (header(APP_HEADER), header(TOKEN_HEADER)) else {
        return Err(Error::Forbidden {
            field: None,
            reason: "invalid request, accessToken or appname is empty.".into(),
        });
    };
    let app = String::from_utf8(app).map_err(|_| refused())?;
    let own = c.engine().directory().tokens().by_app.get(&app).cloned();
    let Some(own) = own else {
        // no such group, or one without its own token (the global one is every such group's)
        return Err(refused());
    };
    if !constant_time_eq(own.as_bytes(), &token) {
        return Err(refused());
    }
    let group = crate::store::groups::by_app_name(c.engine().db(), &app)
        .await?
        .ok_or_else(refused)?;
    Ok(Principal {
        id: 0,
        username: format!("app:{app}"),
        role: 0,
        permission: vec![group.id],
        client,
        key: None,
    })
}

/// The body as an object (empty: none).
fn object(body: &[u8]) -> Result<Map<String, Value>, Error> {
    if body.trim_ascii().is_empty() {
        return Ok(Map::new());
    }
    match serde_json::from_slice(body) {
        Ok(Value::Object(o)) => Ok(o),
        Ok(_) => Err(Error::Invalid {
            field: "body",
            reason: "must be a JSON object".into(),
        }),
        Err(e) => Err(Error::Invalid {
            field: "body",
            reason: format!("invalid JSON: {e}"),
        }),
    }
}

/// The job a call names (`id`, or `jobId`).
fn job_id(o: &Map<String, Value>) -> Result<i32, Error> {
    let v = o.get("id").or_else(|| o.get("jobId"));
    let n = match v {
        Some(Value::Number(n)) => n.as_i64(),
        Some(Value::String(s)) => s.trim().parse().ok(),
        _ => None,
    };
    n.and_then(|n| i32::try_from(n).ok()).ok_or(Error::Invalid {
        field: "id",
        reason: "a job id is required".into(),
    })
}

/// The fields upstream's `JobUpdateRequest` carries (its description as `name`, or
/// `jobDesc`): upstream's update sets every one, an absent one to empty text or 0.
const UPDATE_FIELDS: [&str; 15] = [
    "jobDesc",
    "author",
    "alarmEmail",
    "scheduleType",
    "scheduleConf",
    "misfireStrategy",
    "executorRouteStrategy",
    "executorHandler",
    "executorParam",
    "executorBlockStrategy",
    "executorTimeout",
    "executorFailRetryCount",
    "glueType",
    "glueSource",
    "glueRemark",
];

/// The job fields of `o` laid over `base`, in the group the call acts for (a `jobGroup` that
/// names another one is refused by the console's permission check). On an update (`base`
/// given), a field upstream's update request carries takes the body's value, and its absence
/// what upstream's update leaves (empty text, 0); fields it does not carry keep the job's.
fn spec(
    base: Option<Value>,
    o: &Map<String, Value>,
    group: i32,
) -> Result<crate::jobs::JobSpec, Error> {
    let update = base.is_some();
    let mut fields: Map<String, Value> = match base {
        Some(Value::Object(b)) => b.into_iter().filter(|(_, v)| !v.is_null()).collect(),
        _ => Map::new(),
    };
    if update {
        for k in UPDATE_FIELDS {
            fields.remove(k);
        }
    } else {
        fields.insert("jobGroup".into(), Value::from(group));
    }
    for (k, v) in o {
        match k.as_str() {
            "id" | "jobId" => {}
            // an update moves no job to another group (upstream's request has no jobGroup)
            "jobGroup" if update => {}
            // XXL-JOB 3.5 names the description `name`
            "name" if !o.contains_key("jobDesc") => {
                fields.insert("jobDesc".into(), v.clone());
            }
            _ => {
                fields.insert(k.clone(), v.clone());
            }
        }
    }
    fields.retain(|_, v| !v.is_null());
    crate::routes::v1::from_value(Value::Object(fields))
}

async fn call(c: &Console, who: &Principal, uri: &str, body: &[u8]) -> Outcome {
    let o = object(body)?;
    let group = who.permission.first().copied().unwrap_or_default();
    match uri {
        "addJob" => {
            let job = c
                .create_job(who, spec(None, &o, group)?, TriggerStatus::Stopped)
                .await?;
            // upstream answers the new id as a string
            Ok(Value::from(job.id.to_string()))
        }
        "updateJob" => {
            let id = job_id(&o)?;
            let current = c.get_job(who, id).await?;
            let s = spec(Some(super::to_value(current)), &o, group)?;
            c.update_job(who, id, s).await?;
            Ok(Value::Null)
        }
        "removeJob" => match c.delete_job(who, job_id(&o)?).await {
            // removing a job that does not exist succeeds, as upstream answers
            Ok(()) | Err(Error::JobNotFound { .. }) => Ok(Value::Null),
            Err(e) => Err(e),
        },
        "startJob" => {
            c.start_job(who, job_id(&o)?).await?;
            Ok(Value::Null)
        }
        "stopJob" => {
            c.stop_job(who, job_id(&o)?).await?;
            Ok(Value::Null)
        }
        "triggerJob" => {
            let text = |k: &str| o.get(k).and_then(Value::as_str).map(str::to_string);
            // upstream runs a trigger without `executorParam` with an empty one (`/v1` runs
            // the job's own)
            let param = Some(text("executorParam").unwrap_or_default());
            c.trigger_job(who, job_id(&o)?, param, text("addressList"))
                .await?;
            Ok(Value::Null)
        }
        other => Err(Error::Invalid {
            field: "uri",
            reason: format!("invalid request, uri-mapping({other}) not found."),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A client gets its calls per minute, then waits for the next minute; clients are
    /// counted apart.
    #[test]
    fn calls_are_limited_per_client_and_minute() {
        let l = Limiter::new(3);
        for _ in 0..3 {
            assert!(l.allow("a", 60_000).is_ok());
        }
        assert_eq!(l.allow("a", 60_500), Err(60));
        assert!(l.allow("b", 60_500).is_ok());
        assert!(l.allow("a", 120_000).is_ok(), "a new minute");
    }

    /// The body's job fields go over the base in the caller's group; `name` is the
    /// description when `jobDesc` is absent.
    #[test]
    fn a_body_is_read_as_a_job() {
        let o = object(br#"{"name":"n","author":"a","jobGroup":99,"scheduleType":"NONE","executorHandler":"h"}"#).unwrap();
        let s = spec(None, &o, 4).unwrap();
        assert_eq!(
            (s.job_desc.as_str(), s.job_group),
            ("n", 99),
            "the caller's jobGroup is kept for the permission check"
        );
        let o = object(br#"{"jobDesc":"d","author":"a"}"#).unwrap();
        assert_eq!(spec(None, &o, 4).unwrap().job_group, 4);
        // an update: the request's fields replace (absent ones become empty), the others stay
        let base = serde_json::json!({"jobGroup": 4, "jobDesc": "old", "author": "a",
            "alarmEmail": "ops@example.com", "scheduleType": "NONE", "executorHandler": "h",
            "executorParam": "p", "timeZone": "Asia/Shanghai", "retryInterval": 30});
        let o = object(br#"{"id":1,"name":"new","author":"b","scheduleType":"NONE","jobGroup":9}"#)
            .unwrap();
        let s = spec(Some(base), &o, 7).unwrap();
        assert_eq!((s.job_desc.as_str(), s.author.as_str()), ("new", "b"));
        assert_eq!(s.job_group, 4, "an update moves no job");
        assert_eq!(
            s.alarm_email, None,
            "absent from the request: emptied, as upstream"
        );
        assert_eq!(s.executor_param, None);
        assert_eq!(
            s.time_zone.as_deref(),
            Some("Asia/Shanghai"),
            "not the request's: kept"
        );
        assert_eq!(s.retry_interval, 30);
        assert!(object(b"[1]").is_err());
        assert_eq!(job_id(&object(br#"{"jobId":"7"}"#).unwrap()).unwrap(), 7);
        assert!(job_id(&Map::new()).is_err());
    }
}
