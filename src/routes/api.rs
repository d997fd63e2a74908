//! The admin API executors call (protocol.md §3): `POST /api/registry`, `/api/registryRemove`,
//! `/api/callback`, also under the 2.x base path `/xxl-job-admin/api/…`; XXL-JOB 3.5's job API
//! (`/api/addJob`, …) goes to `routes::xxl::job_api`.
//!
//! Lenient where real clients need it: unknown keys (such as 2.2's `executeResult`), a
//! `handleMsg` that is null, a number or an object, the old token header. Always HTTP 200 with
//! the result in `code`.

use actix_web::{HttpRequest, HttpResponse, web};

use super::callback_body::{Callbacks, parse_callbacks};
use crate::actors::complete::RecordResults;
use crate::actors::registry::{Heartbeat, RemoveRegistration};
use crate::directory::GroupTokens;
use crate::engine::Engine;
use crate::executor::ExecutorKind;
use crate::metrics::SkipReason;
use crate::model::wire::{RegistryParam, ReturnT};
use crate::token::{OLD_TOKEN_HEADER, TOKEN_HEADER, WRONG_TOKEN, token_ok};

/// What the admin API needs.
#[derive(Clone)]
pub struct AdminApi {
    /// The engine to feed.
    pub engine: Engine,
    /// The token executors must send (none = no check).
    pub access_token: Option<String>,
}

/// Largest request body the admin API accepts: a callback batch of many results, each with a
/// message of up to 50,000 characters. Set on the routes themselves, so it holds however they
/// are mounted (a body over actix's default 256 KiB used to be refused with 413 outside
/// `xjob serve`, and executors re-sent it forever).
pub(crate) const ADMIN_MAX_BODY: usize = 32 << 20;

/// Mounts `/api/{uri}` and `/xxl-job-admin/api/{uri}`.
pub fn config(cfg: &mut web::ServiceConfig, api: AdminApi) {
    cfg.app_data(web::Data::new(api));
    for p in ["/api/{uri}", "/xxl-job-admin/api/{uri}"] {
        cfg.service(
            web::resource(p)
                .app_data(web::PayloadConfig::new(ADMIN_MAX_BODY))
                .route(web::route().to(handle)),
        );
    }
}

fn reply(r: ReturnT) -> HttpResponse {
    HttpResponse::Ok().json(r)
}

/// The access token headers a request carries (new name first).
fn presented(req: &HttpRequest) -> impl Iterator<Item = &[u8]> {
    [TOKEN_HEADER, OLD_TOKEN_HEADER]
        .into_iter()
        .filter_map(|h| req.headers().get(h).map(|v| v.as_bytes()))
}

/// Whether the request may be read at all: it carries the global token (or none is set) or the
/// own token of some group. Checked from the headers alone, before the body is read.
fn known_caller(req: &HttpRequest, global: Option<&str>, tokens: &GroupTokens) -> bool {
    token_ok(req, global) || presented(req).any(|t| tokens.is_some_groups(t))
}

/// Whether the request carries one of `accepted`.
fn has_one_of(req: &HttpRequest, accepted: &[&str]) -> bool {
    accepted.iter().any(|t| token_ok(req, Some(t)))
}

/// Reads the body, at most [`ADMIN_MAX_BODY`] bytes (room for a declared length is taken at
/// once, so a large body is not copied as its buffer grows).
async fn read_body(req: &HttpRequest, mut payload: web::Payload) -> Result<web::Bytes, String> {
    use futures::StreamExt;
    let declared = req
        .headers()
        .get(actix_web::http::header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<usize>().ok())
        .unwrap_or(0);
    if declared > ADMIN_MAX_BODY {
        return Err(format!(
            "the request body is larger than {} MiB",
            ADMIN_MAX_BODY >> 20
        ));
    }
    let mut body = web::BytesMut::with_capacity(declared);
    while let Some(chunk) = payload.next().await {
        let chunk = chunk.map_err(|e| format!("cannot read the request body: {e}"))?;
        if body.len() + chunk.len() > ADMIN_MAX_BODY {
            return Err(format!(
                "the request body is larger than {} MiB",
                ADMIN_MAX_BODY >> 20
            ));
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body.freeze())
}

async fn handle(
    req: HttpRequest,
    uri: web::Path<String>,
    payload: web::Payload,
    api: web::Data<AdminApi>,
) -> HttpResponse {
    if req.method() != actix_web::http::Method::POST {
        return reply(ReturnT::fail("invalid request, HttpMethod not support."));
    }
    let global = api.access_token.as_deref();
    let tokens = api.engine.directory().tokens();
    // a caller holding no token this node knows is refused before its body is read, and a
    // client address that keeps sending wrong tokens is refused without a check for a while
    let client = req
        .peer_addr()
        .map(|a| a.ip().to_string())
        .unwrap_or_default();
    let limiter = api.engine.token_failures();
    let now = api.engine.clock().now_ms();
    if let Some(secs) = limiter.refused(&client, now) {
        return reply(ReturnT::fail(format!(
            "too many requests with a wrong access token from this address; retry in {secs} s"
        )));
    }
    if !known_caller(&req, global, &tokens) {
        tracing::warn!(client, uri = %uri, "admin API call refused: wrong access token");
        limiter.failed(&client, now);
        return reply(ReturnT::fail(WRONG_TOKEN));
    }
    let body = match read_body(&req, payload).await {
        Ok(b) => b,
        Err(e) => return reply(ReturnT::fail(e)),
    };
    match uri.as_str() {
        "registry" | "registryRemove" => registry(&req, &uri, &body, &api, &tokens).await,
        "callback" => match parse_callbacks(&body) {
            Ok(c) => callback(&req, &api, &tokens, c).await,
            Err(e) => reply(ReturnT::fail(e)),
        },
        other if super::xxl::job_api::is_job_api(other) => {
            super::xxl::job_api::handle(&req, other, &body).await
        }
        other => reply(ReturnT::fail(format!(
            "invalid request, uri-mapping({other}) not found."
        ))),
    }
}

/// Longest registry fields (their columns): group, key (appName) and value (address).
const REGISTRY_LIMITS: [usize; 3] = [50, 255, 255];

async fn registry(
    req: &HttpRequest,
    uri: &str,
    body: &[u8],
    api: &AdminApi,
    tokens: &GroupTokens,
) -> HttpResponse {
    let global = api.access_token.as_deref();
    let Ok(p) = serde_json::from_slice::<RegistryParam>(body) else {
        return reply(ReturnT::fail("Illegal Argument."));
    };
    // a group with its own token takes only that one, and so does any name that differs from
    // it only in case (a case-insensitive database would take it for the same group)
    let ok = match tokens.for_app(p.registry_key.trim()) {
        Some(own) => has_one_of(req, &own),
        None => token_ok(req, global),
    };
    if !ok {
        let client = req
            .peer_addr()
            .map(|a| a.ip().to_string())
            .unwrap_or_default();
        api.engine
            .token_failures()
            .failed(&client, api.engine.clock().now_ms());
        return reply(ReturnT::fail(WRONG_TOKEN));
    }
    let fields = [&p.registry_group, &p.registry_key, &p.registry_value];
    if fields.iter().any(|s| s.trim().is_empty())
        || fields
            .iter()
            .zip(REGISTRY_LIMITS)
            .any(|(s, max)| s.chars().count() > max)
    {
        return reply(ReturnT::fail("Illegal Argument."));
    }
    if uri == "registry"
        && let Some(owner) =
            claimed_elsewhere(api, tokens, &p.registry_key, &p.registry_value).await
    {
        tracing::warn!(
            app = %p.registry_key,
            address = %p.registry_value,
            %owner,
            "registration refused: the address is another group's"
        );
        return reply(ReturnT::fail(format!(
            "the address {} belongs to {owner}, which has its own access token; it cannot be registered under {}",
            p.registry_value.trim(),
            p.registry_key.trim()
        )));
    }
    let reg = api.engine.registry();
    // an xjob executor is told which node of a cluster this is (it sends each run's result to
    // the node that dispatched it); other executors get the usual answer
    let node = (uri == "registry" && p.xjob_executor.is_some())
        .then(|| api.engine.cluster_node().map(str::to_string))
        .flatten();
    let res = if uri == "registry" {
        // what the executor speaks, from how it registered: dispatch then uses its path at once
        let kind = if p.xjob_executor.is_some() {
            ExecutorKind::Xjob
        } else if req
            .headers()
            .get(crate::token::APP_HEADER)
            .is_some_and(|v| !v.as_bytes().trim_ascii().is_empty())
        {
            ExecutorKind::Xxl35
        } else {
            ExecutorKind::Xxl
        };
        api.engine.learn_executor(p.registry_value.trim(), kind);
        reg.send(Heartbeat {
            app_name: p.registry_key,
            address: p.registry_value,
        })
        .await
    } else {
        reg.send(RemoveRegistration {
            app_name: p.registry_key,
            address: p.registry_value,
        })
        .await
    };
    match res {
        Ok(Ok(())) => reply(ReturnT {
            content: node,
            ..ReturnT::success()
        }),
        Ok(Err(e)) => reply(ReturnT::fail(e.to_string())),
        Err(e) => reply(ReturnT::fail(e.to_string())),
    }
}

/// The group (named for the answer) other than `app`'s that has its own access token and lists
/// `address` or has it registered: calls to that address carry that group's token, so no other
/// group may register it (its jobs would reach that group's executor).
async fn claimed_elsewhere(
    api: &AdminApi,
    tokens: &GroupTokens,
    app: &str,
    address: &str,
) -> Option<String> {
    let app = app.trim();
    if let Some((id, owner)) = tokens.claimed_elsewhere(app, address) {
        return Some(format!("executor group {owner} (id {id})"));
    }
    if tokens.is_empty() {
        return None;
    }
    match crate::store::registry::apps_at(api.engine.db(), address).await {
        Ok(apps) => apps
            .into_iter()
            .find(|a| a != app && tokens.by_app.contains_key(a))
            .map(|a| format!("executor group {a}")),
        Err(e) => {
            // refused rather than let through unchecked (the executor registers again)
            tracing::error!(error = %e, "cannot read the registrations of an address");
            Some("a group this node cannot check now (the registrations could not be read)".into())
        }
    }
}

/// Results of a batch skipped for one reason: how many, and the first few log ids (for the
/// log line).
#[derive(Default)]
struct Skipped {
    count: usize,
    some: Vec<i64>,
}

impl Skipped {
    fn add(&mut self, log_id: i64) {
        self.count += 1;
        if self.some.len() < 5 {
            self.some.push(log_id);
        }
    }
}

/// Writes the results the caller may write and skips the others (logged and counted), as
/// XXL-JOB does for a batch: a result of a run of a group with its own token needs that token,
/// of any other group the global one; a result of a run the center no longer knows, or an
/// invalid one, is skipped. The batch is answered 200 unless the write itself fails (then the
/// executor sends it again).
async fn callback(
    req: &HttpRequest,
    api: &AdminApi,
    tokens: &GroupTokens,
    c: Callbacks,
) -> HttpResponse {
    let metrics = api.engine.metrics();
    if !c.invalid.is_empty() {
        let some = &c.invalid[..c.invalid.len().min(5)];
        tracing::warn!(
            results = c.invalid.len(),
            log_ids = ?some,
            "callback results skipped: handleCode is not a 32-bit integer"
        );
        metrics.results_skipped(SkipReason::Invalid, c.invalid.len());
    }
    if c.unknown > 0 {
        tracing::warn!(
            results = c.unknown,
            "callback results skipped: no log id (no run has one)"
        );
        metrics.results_skipped(SkipReason::UnknownRun, c.unknown);
    }
    // a run takes one result: copies in one batch are dropped before any look-up (in place:
    // a batch is usually in log-id order already)
    let mut items = c.items;
    items.sort_unstable_by_key(|i| i.log_id);
    items.dedup_by_key(|i| i.log_id);
    if !tokens.is_empty() {
        let global = api.access_token.as_deref();
        let ids: Vec<i64> = items.iter().map(|i| i.log_id).collect();
        let groups = match crate::store::logs::groups_of(api.engine.db(), &ids).await {
            Ok(g) => g,
            Err(e) => {
                tracing::error!(error = %e, "cannot read the groups of called-back runs");
                return reply(ReturnT::fail(e.to_string()));
            }
        };
        // skipped results are logged once per batch (a few ids each), not one line per result
        let (mut unknown, mut foreign) = (Skipped::default(), Skipped::default());
        items.retain(|i| {
            let Some(group) = groups.get(&i.log_id) else {
                unknown.add(i.log_id);
                return false;
            };
            let needed = tokens.by_group.get(group).map(String::as_str).or(global);
            if token_ok(req, needed) {
                return true;
            }
            foreign.add(i.log_id);
            false
        });
        if unknown.count > 0 {
            tracing::warn!(results = unknown.count, log_ids = ?unknown.some, "callback results skipped: no such run");
            metrics.results_skipped(SkipReason::UnknownRun, unknown.count);
        }
        if foreign.count > 0 {
            tracing::warn!(results = foreign.count, log_ids = ?foreign.some, "callback results skipped: the caller's token is not their group's");
            metrics.results_skipped(SkipReason::Token, foreign.count);
        }
    } else if !token_ok(req, api.access_token.as_deref()) {
        // no group has a token of its own: the global one is the only one
        return reply(ReturnT::fail(WRONG_TOKEN));
    }
    if items.is_empty() {
        return reply(ReturnT::success());
    }
    match api.engine.complete().send(RecordResults(items)).await {
        Ok(Ok(())) => reply(ReturnT::success()),
        Ok(Err(e)) => reply(ReturnT::fail(e.to_string())),
        Err(e) => reply(ReturnT::fail(e.to_string())),
    }
}
