//! The console's JSON REST API under `/v1` (protocol.md §9 as resources), one file per resource.
//!
//! Every handler is short: extract, call the [`Console`], map the result. Errors map in one
//! place (`ApiError`): 400 with the field named, 401, 403, 404, 409, 429, 503; anything
//! internal is logged and answered 500 without detail. Lists answer `{"total", "items"}`.
//! A request is authenticated by `Authorization: Bearer <token>` or the HttpOnly cookie
//! `xjob_token` set at login.

pub mod api_keys;
pub mod audit;
pub mod auth;
pub mod dashboard;
pub mod groups;
pub mod jobs;
pub mod logs;
pub mod users;
pub mod workflow_runs;
pub mod workflows;

use actix_web::dev::Payload;
use actix_web::http::StatusCode;
use actix_web::http::header::{self, HeaderValue};
use actix_web::{FromRequest, HttpRequest, HttpResponse, ResponseError, web};
use futures::future::LocalBoxFuture;
use serde::Serialize;

use crate::console::auth::COOKIE;
use crate::console::{Console, Principal};
use crate::error::Error;

/// Every `/v1` route: method, path, summary. All but the login need a token. The OpenAPI
/// document is built from this table, and a test checks each entry against the real app.
pub const ROUTES: &[(&str, &str, &str)] = &[
    (
        "get",
        "/v1/api-keys",
        "API keys (your own; administrators: every one), never the keys themselves",
    ),
    (
        "post",
        "/v1/api-keys",
        "Create an API key for a role, groups and an expiry within your rights; answers the key once",
    ),
    (
        "delete",
        "/v1/api-keys/{id}",
        "Revoke an API key (your own; administrators: any)",
    ),
    (
        "get",
        "/v1/audit",
        "The audit log, newest first (administrators)",
    ),
    (
        "post",
        "/v1/auth/login",
        "Sign in; answers a bearer token and sets the login cookie",
    ),
    ("post", "/v1/auth/logout", "End the current session"),
    ("post", "/v1/auth/password", "Change your own password"),
    ("get", "/v1/auth/me", "The signed-in user"),
    ("get", "/v1/groups", "List executor groups"),
    (
        "post",
        "/v1/groups",
        "Create an executor group (administrators)",
    ),
    (
        "get",
        "/v1/groups/{id}",
        "One executor group with its live registryList",
    ),
    (
        "put",
        "/v1/groups/{id}",
        "Edit an executor group (administrators)",
    ),
    (
        "delete",
        "/v1/groups/{id}",
        "Delete an executor group without jobs (administrators)",
    ),
    ("get", "/v1/jobs", "List jobs"),
    ("post", "/v1/jobs", "Create a job (stopped)"),
    (
        "get",
        "/v1/jobs/next-fire-times",
        "Preview the next fire times of a schedule",
    ),
    ("get", "/v1/jobs/{id}", "One job"),
    ("put", "/v1/jobs/{id}", "Edit a job"),
    (
        "delete",
        "/v1/jobs/{id}",
        "Delete a job, its logs and script history",
    ),
    ("post", "/v1/jobs/{id}/start", "Start a job"),
    ("post", "/v1/jobs/{id}/stop", "Stop a job"),
    (
        "post",
        "/v1/jobs/{id}/trigger",
        "Run a job once now (executorParam absent: the job's own param; addressList: administrators name any address, others only executors of the job's group)",
    ),
    (
        "get",
        "/v1/jobs/{id}/glue",
        "A script job's source and history",
    ),
    (
        "put",
        "/v1/jobs/{id}/glue",
        "Save a new version of a script job's source",
    ),
    ("get", "/v1/logs", "List runs"),
    (
        "post",
        "/v1/logs/clear",
        "Delete runs by one of the nine clear modes",
    ),
    ("get", "/v1/logs/{id}", "One run"),
    (
        "get",
        "/v1/logs/{id}/content",
        "A run's rolling log from its executor",
    ),
    ("post", "/v1/logs/{id}/kill", "Kill a running run"),
    ("get", "/v1/users", "List users (administrators)"),
    ("post", "/v1/users", "Create a user (administrators)"),
    ("put", "/v1/users/{id}", "Edit a user (administrators)"),
    ("delete", "/v1/users/{id}", "Delete a user (administrators)"),
    (
        "get",
        "/v1/dashboard",
        "Job, run, success and executor counts",
    ),
    ("get", "/v1/dashboard/chart", "Runs per day over a range"),
    (
        "get",
        "/v1/workflows",
        "List workflows (DAGs of jobs) of the groups you may see",
    ),
    (
        "post",
        "/v1/workflows",
        "Create a workflow (version 1); every problem of its DAG names its node",
    ),
    (
        "post",
        "/v1/workflows/validate",
        "Check a workflow without saving it: every problem, each naming its node",
    ),
    (
        "get",
        "/v1/workflows/{id}",
        "One workflow: its current version, or `version`",
    ),
    (
        "put",
        "/v1/workflows/{id}",
        "Save a new version of a workflow (`version`: the one the edit was made from)",
    ),
    (
        "delete",
        "/v1/workflows/{id}",
        "Delete a workflow and its versions (not while a run of it is running or queued)",
    ),
    (
        "post",
        "/v1/workflows/{id}/start",
        "Start a workflow's schedule (CRON or FIX_RATE)",
    ),
    (
        "post",
        "/v1/workflows/{id}/stop",
        "Stop a workflow's schedule",
    ),
    (
        "get",
        "/v1/workflow-runs",
        "List workflow runs (filters: workflowId, jobGroup, status), newest first",
    ),
    (
        "post",
        "/v1/workflow-runs",
        "Trigger a workflow: params (a JSON object, or text kept under `params`) are the run's first context",
    ),
    (
        "get",
        "/v1/workflow-runs/{id}",
        "One workflow run with every node run (each attempt: state, shards, log ids)",
    ),
    (
        "post",
        "/v1/workflow-runs/{id}/stop",
        "Stop a workflow run (or a queued one): node runs not yet sent are cancelled, running ones killed",
    ),
    (
        "post",
        "/v1/workflow-runs/{id}/rerun",
        "Run an ended run again: from its failed nodes, or `from` a node; upstream nodes keep their results",
    ),
    (
        "post",
        "/v1/workflow-runs/{id}/mark",
        "Mark a failed, stopped or skipped node succeeded: what is downstream of it runs",
    ),
];

/// Mounts `/v1` for `console`.
pub fn config(cfg: &mut web::ServiceConfig, console: Console) {
    cfg.app_data(web::Data::new(console)).service(
        web::scope("/v1")
            // a change authenticated by the login cookie alone must come from this console
            .wrap(actix_web::middleware::from_fn(same_site_writes))
            // set on the scope, so they govern only the console API
            .app_data(web::PayloadConfig::new(MAX_BODY))
            // every path parameter under /v1 is an `id`: one that is not a number is a 400
            // naming it, like every other validation error (actix answers 404 text by default)
            .app_data(web::PathConfig::default().error_handler(|e, _| {
                ApiError(Error::Invalid {
                    field: "id",
                    reason: format!("must be a number ({e})"),
                })
                .into()
            }))
            .app_data(web::QueryConfig::default().error_handler(|e, _| {
                let msg = e.to_string();
                ApiError(Error::Invalid {
                    field: field_in(&msg).unwrap_or("query"),
                    reason: msg,
                })
                .into()
            }))
            .configure(api_keys::config)
            .configure(audit::config)
            .configure(auth::config)
            .configure(groups::config)
            .configure(jobs::config)
            .configure(logs::config)
            .configure(users::config)
            .configure(workflows::config)
            .configure(workflow_runs::config)
            .configure(dashboard::config),
    );
}

/// Refuses a write that the login cookie (not a bearer token) would authenticate when another
/// site sent it ([`crate::routes::origin`]).
async fn same_site_writes<B: actix_web::body::MessageBody>(
    req: actix_web::dev::ServiceRequest,
    next: actix_web::middleware::Next<B>,
) -> Result<actix_web::dev::ServiceResponse<actix_web::body::EitherBody<B>>, actix_web::Error> {
    if !super::origin::has_bearer(req.request()) {
        let trusted = req
            .app_data::<web::Data<Console>>()
            .map(|c| c.engine().config().security.trusted_origins.clone())
            .unwrap_or_default();
        if let Some(reason) = super::origin::cross_site(req.request(), &trusted) {
            tracing::warn!(path = req.path(), %reason, "cross-site write refused");
            let res = ApiError(Error::Forbidden {
                field: None,
                reason,
            })
            .error_response();
            return Ok(req.into_response(res).map_into_right_body());
        }
    }
    Ok(next.call(req).await?.map_into_left_body())
}

/// Largest request body accepted (script sources are the big ones).
pub(crate) const MAX_BODY: usize = 4 << 20;

/// A JSON request body whose errors name the field that is wrong (`executorTimeout`, not
/// "line 1 column 178").
#[derive(Debug)]
pub(crate) struct Body<T>(pub T);

impl<T: serde::de::DeserializeOwned + 'static> FromRequest for Body<T> {
    type Error = ApiError;
    type Future = LocalBoxFuture<'static, Result<Self, ApiError>>;

    fn from_request(req: &HttpRequest, payload: &mut Payload) -> Self::Future {
        let bytes = web::Bytes::from_request(req, payload);
        Box::pin(async move {
            let b = bytes.await.map_err(|e| {
                // a body over the limit is 413, whatever route it came to
                if e.as_response_error().status_code() == StatusCode::PAYLOAD_TOO_LARGE {
                    return ApiError(Error::TooLarge { limit: MAX_BODY });
                }
                ApiError(Error::Invalid {
                    field: "body",
                    reason: e.to_string(),
                })
            })?;
            Ok(Body(parse_json(&b)?))
        })
    }
}

/// Parses a JSON object; an error names the field it concerns.
pub(crate) fn parse_json<T: serde::de::DeserializeOwned>(b: &[u8]) -> Result<T, Error> {
    let value: serde_json::Value = serde_json::from_slice(b).map_err(|e| Error::Invalid {
        field: "body",
        reason: format!("invalid JSON: {e}"),
    })?;
    // every /v1 body is an object (serde would also take a struct as an array of its fields)
    if !value.is_object() {
        return Err(Error::Invalid {
            field: "body",
            reason: "must be a JSON object".into(),
        });
    }
    from_value(value)
}

/// Reads a JSON object into `T`; an error names the field it concerns.
pub(crate) fn from_value<T: serde::de::DeserializeOwned>(
    mut value: serde_json::Value,
) -> Result<T, Error> {
    integral_floats_as_integers(&mut value);
    serde_path_to_error::deserialize(value).map_err(|e| {
        let path = e.path().to_string();
        let reason = e.inner().to_string();
        let top = path.split(['.', '[']).next().unwrap_or_default();
        let field = KNOWN_FIELDS
            .iter()
            .copied()
            .find(|f| *f == top)
            .or_else(|| field_in(&reason))
            .unwrap_or("body");
        Error::Invalid {
            field,
            reason: format!("invalid JSON: {reason}"),
        }
    })
}

/// JSON does not tell `8` from `8.0` (JSON Schema counts both as integers): a number with no
/// fraction becomes an integer, so integer fields accept it.
fn integral_floats_as_integers(v: &mut serde_json::Value) {
    use serde_json::Value;
    match v {
        Value::Number(n) if n.is_f64() => {
            if let Some(f) = n.as_f64()
                && f.fract() == 0.0
                && f.abs() < 9.0e15
            {
                *v = Value::from(f as i64);
            }
        }
        Value::Array(items) => items.iter_mut().for_each(integral_floats_as_integers),
        Value::Object(map) => map.values_mut().for_each(integral_floats_as_integers),
        _ => {}
    }
}

/// `name` as one of the input field names errors point at.
pub(crate) fn known_field(name: &str) -> Option<&'static str> {
    KNOWN_FIELDS.iter().copied().find(|f| *f == name)
}

/// Field names serde puts in backticks in its messages (`missing field `jobDesc``).
fn field_in(msg: &str) -> Option<&'static str> {
    let start = msg.find('`')? + 1;
    let len = msg[start..].find('`')?;
    let name = &msg[start..start + len];
    KNOWN_FIELDS.iter().copied().find(|f| *f == name)
}

/// Input field names an error may point at (serde's messages carry borrowed names).
const KNOWN_FIELDS: &[&str] = &[
    "username",
    "password",
    "oldPassword",
    "appName",
    "title",
    "addressType",
    "addressList",
    "jobGroup",
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
    "childJobId",
    "timeZone",
    "retryInterval",
    "alarmWebhook",
    "triggerStatus",
    "jobId",
    "status",
    "from",
    "to",
    "offset",
    "limit",
    "count",
    "type",
    "role",
    "permission",
    "fromLine",
    "name",
    "description",
    "definition",
    "version",
];

/// An [`Error`] answered over HTTP.
#[derive(Debug)]
pub(crate) struct ApiError(pub Error);

impl From<Error> for ApiError {
    fn from(e: Error) -> Self {
        ApiError(e)
    }
}

impl std::fmt::Display for ApiError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

/// The JSON body of every error.
#[derive(Serialize)]
struct ErrorBody<'a> {
    /// HTTP status code.
    status: u16,
    /// What went wrong, for a person.
    error: String,
    /// The input field concerned, when there is one.
    #[serde(skip_serializing_if = "Option::is_none")]
    field: Option<&'a str>,
}

impl ResponseError for ApiError {
    fn status_code(&self) -> StatusCode {
        match &self.0 {
            Error::Invalid { .. } | Error::InvalidSchedule { .. } => StatusCode::BAD_REQUEST,
            Error::Unauthenticated => StatusCode::UNAUTHORIZED,
            Error::Forbidden { .. } => StatusCode::FORBIDDEN,
            Error::JobNotFound { .. }
            | Error::GroupNotFound { .. }
            | Error::LogNotFound { .. }
            | Error::NotFound { .. } => StatusCode::NOT_FOUND,
            Error::Conflict { .. } => StatusCode::CONFLICT,
            Error::TooManyAttempts { .. } => StatusCode::TOO_MANY_REQUESTS,
            Error::TooLarge { .. } => StatusCode::PAYLOAD_TOO_LARGE,
            Error::Stopped(_) => StatusCode::SERVICE_UNAVAILABLE,
            _ => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    fn error_response(&self) -> HttpResponse {
        let status = self.status_code();
        let (error, field) = match &self.0 {
            Error::Invalid { field, .. }
            | Error::Forbidden {
                field: Some(field), ..
            } => (self.0.to_string(), Some(*field)),
            Error::InvalidSchedule { .. } => (self.0.to_string(), Some("scheduleConf")),
            _ if status == StatusCode::INTERNAL_SERVER_ERROR => {
                tracing::error!(error = %self.0, "console request failed");
                ("internal error; see the server log".to_string(), None)
            }
            _ => (self.0.to_string(), None),
        };
        let mut res = HttpResponse::build(status);
        match &self.0 {
            Error::Unauthenticated => {
                res.insert_header((header::WWW_AUTHENTICATE, "Bearer"));
            }
            Error::TooManyAttempts { retry_after_secs } => {
                res.insert_header((header::RETRY_AFTER, retry_after_secs.to_string()));
            }
            _ => {}
        }
        res.json(ErrorBody {
            status: status.as_u16(),
            error,
            field,
        })
    }
}

/// What a `/v1` handler answers.
pub(crate) type ApiResult = Result<HttpResponse, ApiError>;

/// 200 with `v` as JSON.
pub(crate) fn ok<T: Serialize>(v: T) -> ApiResult {
    Ok(HttpResponse::Ok().json(v))
}

/// The token a request carries: the bearer header first, then the login cookie.
pub(crate) fn request_token(req: &HttpRequest) -> Option<String> {
    request_token_in(req, &[COOKIE])
}

/// The token a request carries: the bearer header first, then the first of `cookies` it has.
pub(crate) fn request_token_in(req: &HttpRequest, cookies: &[&str]) -> Option<String> {
    if let Some(t) = req
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .map(str::trim)
        .filter(|t| !t.is_empty())
    {
        return Some(t.to_string());
    }
    req.headers()
        .get_all(header::COOKIE)
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|kv| kv.trim().split_once('='))
        .filter(|(k, v)| cookies.contains(k) && !v.is_empty())
        .min_by_key(|(k, _)| cookies.iter().position(|c| c == k))
        .map(|(_, v)| v.to_string())
}

/// The signed-in user of a request (401 without a valid token).
#[derive(Clone, Debug)]
pub(crate) struct Auth {
    /// Who.
    pub user: Principal,
    /// The token they presented.
    pub token: String,
}

impl FromRequest for Auth {
    type Error = ApiError;
    type Future = LocalBoxFuture<'static, Result<Self, ApiError>>;

    fn from_request(req: &HttpRequest, _: &mut Payload) -> Self::Future {
        let console = req.app_data::<web::Data<Console>>().cloned();
        let token = request_token(req);
        let client = req
            .peer_addr()
            .map(|a| a.ip().to_string())
            .unwrap_or_default();
        Box::pin(async move {
            let (Some(console), Some(token)) = (console, token) else {
                return Err(ApiError(Error::Unauthenticated));
            };
            let mut user = console.authenticate(&token).await?;
            user.client = client;
            Ok(Auth { user, token })
        })
    }
}

/// A `Set-Cookie` value for the login cookie (`max_age` 0 clears it).
pub(crate) fn login_cookie(token: &str, max_age_secs: i64, secure: bool) -> HeaderValue {
    session_cookie(COOKIE, token, Some(max_age_secs), secure)
}

/// A `Set-Cookie` value for a session cookie `name` (HttpOnly, SameSite=Strict, path `/`):
/// kept for `max_age` seconds (0 clears it), or until the browser closes when `None`.
pub(crate) fn session_cookie(
    name: &str,
    token: &str,
    max_age_secs: Option<i64>,
    secure: bool,
) -> HeaderValue {
    let secure = if secure { "; Secure" } else { "" };
    let age = max_age_secs
        .map(|s| format!("; Max-Age={s}"))
        .unwrap_or_default();
    let v = format!("{name}={token}; Path=/; HttpOnly; SameSite=Strict{age}{secure}");
    HeaderValue::from_str(&v).unwrap_or_else(|_| HeaderValue::from_static("xjob_token=; Max-Age=0"))
}
