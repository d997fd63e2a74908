//! XXL-JOB's own admin endpoints, for the tools written against them (protocol.md §9, §10): the
//! console's form endpoints of 2.x and 3.x ([`console`]), under the 2.x base path
//! `/xxl-job-admin` and at `/` (3.4.1's default), and the job API of its next version
//! (`job_api`: `/api/addJob`, …, for one group with its own token).
//!
//! A thin translation: each endpoint reads Spring MVC style parameters (query string and form
//! body, `ids[]` lists), calls the same [`Console`](crate::console::Console) operation as `/v1`
//! (same users, permissions, validation, audit entries and login limits) and answers in the
//! envelope its caller parses: 2.x's `{"code","msg","content"}` (or DataTables'
//! `{"recordsTotal","recordsFiltered","data"}` for a list asked by `start`/`length`), 3.3's
//! `{"code","msg","data"}` (a list asked by `offset`/`pagesize` answers
//! `{"offset","pagesize","data","total"}` in `data`). Always HTTP 200 with the outcome in `code`,
//! as XXL-JOB does, except that a request without a valid session is sent to the login page
//! (302), as XXL-JOB does.

pub mod console;
pub(crate) mod job_api;

use actix_web::http::header;
use actix_web::{HttpRequest, HttpResponse, web};
use chrono::DateTime;
use serde_json::{Value, json};

use crate::error::Error;

/// The base paths the endpoints are served under: XXL-JOB 2.x's context path and 3.4.1's `/`.
pub(crate) const BASES: [&str; 2] = ["", "/xxl-job-admin"];

/// XXL-JOB 2.x's login cookie (its value here is a console session token, never user data).
pub(crate) const IDENTITY_COOKIE: &str = "XXL_JOB_LOGIN_IDENTITY";
/// XXL-JOB 3.2+'s login cookie.
pub(crate) const TOKEN_COOKIE: &str = "xxl_job_login_token";
/// The cookies a session token is read from (besides `Authorization: Bearer`).
const COOKIES: &[&str] = &[IDENTITY_COOKIE, TOKEN_COOKIE, crate::console::auth::COOKIE];

/// Mounts XXL-JOB's console endpoints under both [`BASES`], and gives the job API (served by
/// the admin API's `/api/{uri}` route) its rate limit, `limiter` (one per app, made once).
pub(crate) fn config(cfg: &mut web::ServiceConfig, limiter: web::Data<job_api::Limiter>) {
    cfg.app_data(limiter);
    console::config(cfg);
}

/// A request's parameters as Spring MVC sees them: the query string's, then a form body's
/// (`application/x-www-form-urlencoded`, or a body without a content type).
#[derive(Debug, Default)]
pub(crate) struct Params(Vec<(String, String)>);

impl Params {
    /// The parameters of `req` with body `body`.
    pub(crate) fn of(req: &HttpRequest, body: &[u8]) -> Self {
        let mut all: Vec<(String, String)> =
            url::form_urlencoded::parse(req.query_string().as_bytes())
                .into_owned()
                .collect();
        let form = match req.headers().get(header::CONTENT_TYPE) {
            None => true,
            Some(v) => v
                .to_str()
                .map(|v| {
                    v.trim_start()
                        .to_ascii_lowercase()
                        .starts_with("application/x-www-form-urlencoded")
                })
                .unwrap_or(false),
        };
        if form && !body.is_empty() {
            all.extend(url::form_urlencoded::parse(body).into_owned());
        }
        Params(all)
    }

    /// The first value of `key` (as Spring's `getParameter`).
    pub(crate) fn get(&self, key: &str) -> Option<&str> {
        self.0
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    /// The first value of `key`, unless blank.
    pub(crate) fn text(&self, key: &str) -> Option<&str> {
        self.get(key).filter(|v| !v.trim().is_empty())
    }

    /// Whether `key` was sent at all.
    pub(crate) fn has(&self, key: &str) -> bool {
        self.0.iter().any(|(k, _)| k == key)
    }

    /// `key` as a number (absent or blank: `None`; anything else that is not one: an error
    /// naming `field`).
    pub(crate) fn number<T: std::str::FromStr>(
        &self,
        key: &str,
        field: &'static str,
    ) -> Result<Option<T>, Error> {
        match self.text(key) {
            None => Ok(None),
            Some(v) => v.trim().parse().map(Some).map_err(|_| Error::Invalid {
                field,
                reason: format!("`{v}` is not a number"),
            }),
        }
    }

    /// `key` as a number, required.
    pub(crate) fn required<T: std::str::FromStr>(
        &self,
        key: &str,
        field: &'static str,
    ) -> Result<T, Error> {
        self.number(key, field)?.ok_or(Error::Invalid {
            field,
            reason: "is required".into(),
        })
    }

    /// The ids of a 3.x list parameter (`ids[]=1&ids[]=2`, `ids=1,2`), or 2.x's single `id`.
    pub(crate) fn ids(&self) -> Result<Vec<i32>, Error> {
        let mut out = Vec::new();
        for (k, v) in &self.0 {
            if k == "ids[]" || k == "ids" {
                for part in v.split(',').map(str::trim).filter(|p| !p.is_empty()) {
                    out.push(part.parse().map_err(|_| Error::Invalid {
                        field: "ids",
                        reason: format!("`{part}` is not a number"),
                    })?);
                }
            }
        }
        if out.is_empty() {
            out.push(self.required("id", "id")?);
        }
        Ok(out)
    }

    /// Whether the caller speaks 3.3's forms (an `ids[]` list or `offset`/`pagesize` paging).
    pub(crate) fn asks_v3(&self) -> bool {
        ["ids[]", "ids", "offset", "pagesize"]
            .iter()
            .any(|k| self.has(k))
    }
}

/// The envelope an answer goes out in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Shape {
    /// 2.x's `ReturnT`: `code`, `msg` (null on success), `content`.
    V2,
    /// 3.3's `Response`: `code`, `msg` (`"Success"` on success), `data`.
    V3,
    /// An endpoint both generations call the same way: `code`, `msg`, and the payload under
    /// both `content` and `data` (each parser reads its own key and ignores the other).
    Both,
}

/// What an operation answers.
pub(crate) type Outcome = Result<Value, Error>;

/// An error as the `msg` of a failure (internal ones are logged and not shown).
pub(crate) fn message(e: &Error) -> String {
    match e {
        Error::Db(_) | Error::Io(_) | Error::Sqlite(_) => {
            tracing::error!(error = %e, "XXL-JOB console request failed");
            "internal error; see the server log".into()
        }
        other => other.to_string(),
    }
}

/// `r` in `shape`'s envelope, HTTP 200.
pub(crate) fn answer(shape: Shape, r: Outcome) -> HttpResponse {
    let (code, msg, payload) = match r {
        Ok(v) => (
            200,
            match shape {
                Shape::V3 => Value::from("Success"),
                Shape::V2 | Shape::Both => Value::Null,
            },
            v,
        ),
        Err(e) => (500, Value::from(message(&e)), Value::Null),
    };
    let body = match shape {
        Shape::V2 => json!({ "code": code, "msg": msg, "content": payload }),
        Shape::V3 => json!({ "code": code, "msg": msg, "data": payload }),
        Shape::Both => json!({ "code": code, "msg": msg, "content": payload, "data": payload }),
    };
    HttpResponse::Ok()
        .insert_header((header::CACHE_CONTROL, "no-store"))
        .json(body)
}

/// The page a list request asks for: `(offset, limit, 3.x?)` from 3.3's `offset`/`pagesize`
/// or 2.x's `start`/`length` (10 items by default, at most [`crate::console::MAX_LIMIT`]).
pub(crate) fn paging(p: &Params) -> Result<(u64, u64, bool), Error> {
    let v3 = p.has("offset") || p.has("pagesize");
    let (o, l) = if v3 {
        ("offset", "pagesize")
    } else {
        ("start", "length")
    };
    let offset: i64 = p.number(o, "offset")?.unwrap_or(0);
    let limit: i64 = p.number(l, "limit")?.unwrap_or(10);
    let limit = limit.clamp(1, crate::console::MAX_LIMIT as i64) as u64;
    Ok((offset.max(0) as u64, limit, v3))
}

/// A list answer: DataTables' shape for 2.x, 3.3's page in `data` for 3.x. A failure keeps
/// both shapes' keys (an empty list with `code` 500 and the reason in `msg`).
pub(crate) fn list(paged: (u64, u64, bool), r: Result<(u64, Vec<Value>), Error>) -> HttpResponse {
    let (offset, limit, v3) = paged;
    let body = match (r, v3) {
        (Ok((total, items)), false) => {
            json!({ "recordsTotal": total, "recordsFiltered": total, "data": items })
        }
        (Ok((total, items)), true) => json!({
            "code": 200, "msg": "Success",
            "data": { "offset": offset, "pagesize": limit, "data": items, "total": total }
        }),
        (Err(e), _) => json!({
            "code": 500, "msg": message(&e),
            "recordsTotal": 0, "recordsFiltered": 0, "data": [],
        }),
    };
    HttpResponse::Ok()
        .insert_header((header::CACHE_CONTROL, "no-store"))
        .json(body)
}

/// An RFC 3339 time as XXL-JOB shows it: `yyyy-MM-dd HH:mm:ss` in the center's zone.
pub(crate) fn local_time(rfc3339: &str, tz: chrono_tz::Tz) -> Option<String> {
    let t = DateTime::parse_from_rfc3339(rfc3339).ok()?;
    Some(t.with_timezone(&tz).format("%Y-%m-%d %H:%M:%S").to_string())
}

/// Rewrites the RFC 3339 times of `keys` in a view object with [`local_time`].
pub(crate) fn local_times(v: &mut Value, keys: &[&str], tz: chrono_tz::Tz) {
    let Some(o) = v.as_object_mut() else { return };
    for k in keys {
        if let Some(t) = o
            .get(*k)
            .and_then(Value::as_str)
            .and_then(|s| local_time(s, tz))
        {
            o.insert((*k).to_string(), Value::from(t));
        }
    }
}

/// `v` serialised (views never fail to).
pub(crate) fn to_value<T: serde::Serialize>(v: T) -> Value {
    serde_json::to_value(v).unwrap_or(Value::Null)
}

/// The 302 to the login page XXL-JOB answers a request without a valid session.
pub(crate) fn to_login(req: &HttpRequest) -> HttpResponse {
    let base = if req.path().starts_with("/xxl-job-admin/") {
        "/xxl-job-admin"
    } else {
        ""
    };
    HttpResponse::Found()
        .insert_header((header::LOCATION, format!("{base}/toLogin")))
        .finish()
}

#[cfg(test)]
mod tests {
    use super::*;
    use actix_web::test::TestRequest;

    /// Query and form parameters merge (query first), `ids[]` lists and comma lists both read,
    /// blanks are absent, and a non-number names its field.
    #[test]
    fn parameters_read_as_spring_reads_them() {
        let req = TestRequest::post()
            .uri("/jobinfo/delete?ids%5B%5D=3&id=9")
            .insert_header((header::CONTENT_TYPE, "application/x-www-form-urlencoded"))
            .to_http_request();
        let p = Params::of(&req, b"ids%5B%5D=4&ids=5,6&jobDesc=a+b&length=&id=1");
        assert_eq!(p.ids().unwrap(), vec![3, 4, 5, 6]);
        assert_eq!(p.get("jobDesc"), Some("a b"));
        assert_eq!(
            p.get("id"),
            Some("9"),
            "the query string's value comes first"
        );
        assert_eq!(p.number::<i64>("length", "limit").unwrap(), None);
        assert!(p.asks_v3());
        let e = Params::of(&req, b"jobGroup=x")
            .number::<i32>("jobGroup", "jobGroup")
            .unwrap_err();
        assert!(e.to_string().contains("jobGroup"), "{e}");

        // a JSON body is not form parameters (Spring ignores it too)
        let json = TestRequest::post()
            .uri("/jobinfo/start")
            .insert_header((header::CONTENT_TYPE, "application/json"))
            .to_http_request();
        let p = Params::of(&json, b"id=7");
        assert!(p.ids().is_err());
        assert!(!p.asks_v3());
    }

    /// Paging: 2.x `start`/`length`, 3.x `offset`/`pagesize`, bounded.
    #[test]
    fn paging_follows_the_callers_generation() {
        let req = TestRequest::post().uri("/x").to_http_request();
        let v2 = Params::of(&req, b"start=20&length=5000");
        assert_eq!(paging(&v2).unwrap(), (20, 1000, false));
        let v3 = Params::of(&req, b"offset=-3&pagesize=0");
        assert_eq!(paging(&v3).unwrap(), (0, 1, true));
        assert_eq!(paging(&Params::default()).unwrap(), (0, 10, false));
    }

    /// Times show in the center's zone as XXL-JOB writes them.
    #[test]
    fn times_show_in_the_centers_zone() {
        let mut v = json!({ "addTime": "2026-11-21T14:00:00Z", "other": "2026-11-21T14:00:00Z" });
        local_times(&mut v, &["addTime", "missing"], chrono_tz::Asia::Shanghai);
        assert_eq!(v["addTime"], "2026-11-21 22:00:00");
        assert_eq!(v["other"], "2026-11-21T14:00:00Z");
    }
}
