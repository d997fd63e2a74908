//! The executor side of the XXL-JOB 2.4 protocol (protocol.md §2) as an actix-web service mountable in
//! any app: `POST /beat`, `/idleBeat`, `/run`, `/kill`, `/log`, answered by an
//! [`ExecutorClient`] backend (the in-process executor). XXL-JOB 3.5's admins are served too:
//! `/trigger` is `/run`, a log request may name `logDateTime`, and an `XXL-JOB-APPNAME` header,
//! when sent, must name this executor's app.
//!
//! Beside the protocol, `POST /runBatch` ([`RUN_BATCH`]) takes many `/run` bodies in one request
//! (a JSON array) and answers each in a `ReturnT` whose content is the array of their answers,
//! in order: what an xjob admin sends an xjob executor a dispatch batch as (an XXL-JOB executor
//! answers the path unknown, and the admin falls back to `/run` per call).
//!
//! Always HTTP 200 with the result in `code`; rejections in XXL-JOB's order and words: method,
//! token, app name, path; a malformed body is a 500 in the body, never a panic.

use std::sync::Arc;

use actix_web::{HttpRequest, HttpResponse, web};
use serde::Serialize;

use super::ExecutorClient;
use crate::model::wire::{JobIdParam, LogParam, ReturnT, TriggerParam};
use crate::token::{APP_HEADER, WRONG_TOKEN, token_ok};

/// What the executor endpoints need.
#[derive(Clone)]
pub(crate) struct ExecutorApi {
    /// Runs the calls.
    pub backend: Arc<dyn ExecutorClient>,
    /// The token callers must send (none = no check).
    pub access_token: Option<String>,
    /// The node's own executor group (directory, appName): when it has its own access token,
    /// callers must send that one instead.
    pub group: Option<(crate::directory::Directory, String)>,
    /// This executor's app name (a standalone executor's; the node's comes with `group`).
    pub app_name: Option<String>,
    /// Where a standalone executor notes the node that sent each run (its result goes there).
    pub routes: Option<super::AdminRoutes>,
}

impl ExecutorApi {
    /// Notes the node that sent `p` (see [`super::AdminRoutes`]).
    fn note(&self, p: &TriggerParam) {
        if let (Some(routes), Some(node)) = (&self.routes, &p.xjob_node) {
            routes.dispatched(p.log_id, node);
        }
    }

    /// Forgets run `log_id` when `answer` refused it (no result will come).
    fn refused(&self, log_id: i64, answer: &ReturnT) {
        if let Some(routes) = &self.routes
            && !answer.is_success()
        {
            routes.take(log_id);
        }
    }

    /// The token a caller must send now.
    fn expected(&self) -> Option<String> {
        if let Some((dir, app)) = &self.group
            && let Some(t) = dir.tokens().by_app.get(app)
        {
            return Some(t.clone());
        }
        self.access_token.clone()
    }

    /// The app name callers that name one must name.
    fn app(&self) -> Option<&str> {
        self.group
            .as_ref()
            .map(|(_, app)| app.as_str())
            .or(self.app_name.as_deref())
            .filter(|a| !a.is_empty())
    }
}

/// XXL-JOB 3.5's answer to a request whose token or app name is wrong.
const WRONG_APP: &str = "invalid request, accessToken or appname is invalid.";

/// xjob's extension: many `/run` bodies in one request (see the module docs).
pub(crate) const RUN_BATCH: &str = "runBatch";

/// Most triggers one `/runBatch` request may carry.
pub(crate) const RUN_BATCH_MAX: usize = 4_096;

/// The executor paths.
pub(crate) const PATHS: [&str; 7] = [
    "/beat",
    "/idleBeat",
    "/run",
    "/trigger",
    "/kill",
    "/log",
    "/runBatch",
];

fn reply<T: Serialize>(r: &ReturnT<T>) -> HttpResponse {
    HttpResponse::Ok()
        .content_type("text/html;charset=UTF-8")
        .json(r)
}

/// Largest request body the executor endpoints accept (a `/run` carries the GLUE source):
/// more than XXL-JOB's 5 MiB, set on each path so it holds however the routes are mounted.
pub(crate) const EXECUTOR_MAX_BODY: usize = 8 << 20;

/// Mounts the five executor paths (every method, so a wrong one gets XXL-JOB's answer).
pub(crate) fn config(cfg: &mut web::ServiceConfig, api: ExecutorApi) {
    cfg.app_data(web::Data::new(api));
    for p in PATHS {
        cfg.service(
            web::resource(p)
                .app_data(web::PayloadConfig::new(EXECUTOR_MAX_BODY))
                .route(web::route().to(handle)),
        );
    }
}

fn parse<T: serde::de::DeserializeOwned + Default>(body: &[u8]) -> Result<T, String> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Ok(T::default());
    }
    serde_json::from_slice(body).map_err(|e| format!("request error:{e}"))
}

async fn handle(req: HttpRequest, body: web::Bytes, api: web::Data<ExecutorApi>) -> HttpResponse {
    if req.method() != actix_web::http::Method::POST {
        return reply(&ReturnT::<String>::fail(
            "invalid request, HttpMethod not support.",
        ));
    }
    if !token_ok(&req, api.expected().as_deref()) {
        return reply(&ReturnT::<String>::fail(WRONG_TOKEN));
    }
    // 2.x–3.4 admins send no app name; one that does must mean this executor
    let sent = req
        .headers()
        .get(APP_HEADER)
        .filter(|v| !v.as_bytes().trim_ascii().is_empty());
    if let (Some(sent), Some(own)) = (sent, api.app())
        && sent.as_bytes() != own.as_bytes()
    {
        return reply(&ReturnT::<String>::fail(WRONG_APP));
    }
    let backend = &api.backend;
    match req.path() {
        "/beat" => reply(&backend.beat("").await),
        "/idleBeat" => match parse::<JobIdParam>(&body) {
            Ok(p) => reply(&backend.idle_beat("", p.job_id).await),
            Err(e) => reply(&ReturnT::<String>::fail(e)),
        },
        "/run" | "/trigger" => match parse::<TriggerParam>(&body) {
            Ok(p) => {
                api.note(&p);
                let id = p.log_id;
                let r = backend.run("", p).await;
                api.refused(id, &r);
                reply(&r)
            }
            Err(e) => reply(&ReturnT::<String>::fail(e)),
        },
        "/runBatch" => match parse::<Batch>(&body) {
            Ok(Batch(calls)) => {
                calls.iter().for_each(|p| api.note(p));
                let ids: Vec<i64> = calls.iter().map(|p| p.log_id).collect();
                let r = run_batch(backend.as_ref(), calls).await;
                for (id, a) in ids.iter().zip(r.content.iter().flatten()) {
                    api.refused(*id, a);
                }
                reply(&r)
            }
            Err(e) => reply(&ReturnT::<String>::fail(e)),
        },
        "/kill" => match parse::<JobIdParam>(&body) {
            Ok(p) => reply(&backend.kill("", p.job_id).await),
            Err(e) => reply(&ReturnT::<String>::fail(e)),
        },
        "/log" => match parse::<LogParam>(&body) {
            Ok(p) => {
                // 3.3+ admins read `data`: answer with both keys
                let r = backend.log("", p).await;
                let mut v = serde_json::to_value(&r).unwrap_or_default();
                if let Some(c) = v.get("content").cloned() {
                    v["data"] = c;
                }
                HttpResponse::Ok()
                    .content_type("text/html;charset=UTF-8")
                    .json(v)
            }
            Err(e) => reply(&ReturnT::<String>::fail(e)),
        },
        other => reply(&ReturnT::<String>::fail(format!(
            "invalid request, uri-mapping({other}) not found."
        ))),
    }
}

/// A `/runBatch` body: at most [`RUN_BATCH_MAX`] triggers, counted as they are read (a larger
/// batch is refused at the first trigger past the limit, before the rest is read).
#[derive(Default)]
struct Batch(Vec<TriggerParam>);

impl<'de> serde::Deserialize<'de> for Batch {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = Batch;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a JSON array of triggers")
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut a: A) -> Result<Batch, A::Error> {
                let mut calls = Vec::with_capacity(a.size_hint().unwrap_or(0).min(64));
                while let Some(p) = a.next_element::<TriggerParam>()? {
                    if calls.len() == RUN_BATCH_MAX {
                        return Err(serde::de::Error::custom(format!(
                            "a batch of more than {RUN_BATCH_MAX} triggers, at most {RUN_BATCH_MAX} allowed"
                        )));
                    }
                    calls.push(p);
                }
                Ok(Batch(calls))
            }
        }
        d.deserialize_seq(V)
    }
}

/// Runs a `/runBatch` request's triggers as one batch of the backend; answers every trigger's
/// answer in the order sent.
async fn run_batch(
    backend: &dyn ExecutorClient,
    calls: Vec<TriggerParam>,
) -> ReturnT<Vec<ReturnT>> {
    use futures::StreamExt;
    let n = calls.len();
    let mut answers: Vec<Option<ReturnT>> = vec![None; n];
    let mut stream = backend.run_each(calls.into_iter().map(|p| (String::new(), p)).collect());
    while let Some(group) = stream.next().await {
        for (i, r) in group {
            if let Some(slot) = answers.get_mut(i) {
                *slot = Some(r);
            }
        }
    }
    let answers = answers
        .into_iter()
        .map(|a| a.unwrap_or_else(|| ReturnT::fail("the executor gave no answer for this trigger")))
        .collect();
    ReturnT {
        code: crate::model::wire::SUCCESS_CODE,
        msg: None,
        content: Some(answers),
    }
}
