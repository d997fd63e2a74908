//! The admin API executors call (spec §4): `POST /api/registry`, `/api/registryRemove`,
//! `/api/callback`, also under the 2.x base path `/xxl-job-admin/api/…`.
//!
//! Lenient where real clients need it: unknown keys (such as 2.2's `executeResult`), a
//! `handleMsg` that is null, a number or an object, the old token header. Always HTTP 200 with
//! the result in `code`.

use actix_web::{HttpRequest, HttpResponse, web};
use serde_json::Value;

use crate::actors::complete::RecordResults;
use crate::actors::registry::{Heartbeat, RemoveRegistration};
use crate::directory::GroupTokens;
use crate::engine::Engine;
use crate::model::wire::{HandleCallbackParam, RegistryParam, ReturnT};
use crate::token::{WRONG_TOKEN, token_ok};

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

/// `handleMsg` as text, whatever JSON type the client sent.
fn text_of(v: Option<&Value>) -> Option<String> {
    match v {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => Some(s.clone()),
        Some(other) => Some(other.to_string()),
    }
}

/// Parses a callback body leniently: an array of results (or one object).
pub(crate) fn parse_callbacks(body: &[u8]) -> Result<Vec<HandleCallbackParam>, String> {
    let v: Value =
        serde_json::from_slice(body).map_err(|e| format!("invalid callback body: {e}"))?;
    let items = match v {
        Value::Array(a) => a,
        Value::Object(_) => vec![v],
        _ => return Err("invalid callback body: expected a JSON array".into()),
    };
    let num = |o: &Value, k: &str| o.get(k).and_then(Value::as_i64).unwrap_or_default();
    Ok(items
        .iter()
        .map(|o| {
            // 2.2 clients put the result in executeResult{code,msg}
            let legacy = o.get("executeResult");
            let code = o
                .get("handleCode")
                .and_then(Value::as_i64)
                .or_else(|| legacy.and_then(|r| r.get("code")).and_then(Value::as_i64))
                .unwrap_or_default();
            let msg =
                text_of(o.get("handleMsg")).or_else(|| text_of(legacy.and_then(|r| r.get("msg"))));
            HandleCallbackParam {
                log_id: num(o, "logId"),
                log_date_tim: num(o, "logDateTim"),
                handle_code: code as i32,
                handle_msg: msg,
            }
        })
        .collect())
}

async fn handle(
    req: HttpRequest,
    uri: web::Path<String>,
    body: web::Bytes,
    api: web::Data<AdminApi>,
) -> HttpResponse {
    if req.method() != actix_web::http::Method::POST {
        return reply(ReturnT::fail("invalid request, HttpMethod not support."));
    }
    let global = api.access_token.as_deref();
    let tokens = api.engine.directory().tokens();
    // without group tokens every call is checked against the global one first (XXL-JOB's order)
    if tokens.is_empty() && !token_ok(&req, global) {
        return reply(ReturnT::fail(WRONG_TOKEN));
    }
    match uri.as_str() {
        "registry" | "registryRemove" => {
            let p: RegistryParam = match serde_json::from_slice(&body) {
                Ok(p) => p,
                Err(_) if !token_ok(&req, global) => return reply(ReturnT::fail(WRONG_TOKEN)),
                Err(_) => return reply(ReturnT::fail("Illegal Argument.")),
            };
            // a group with its own token takes only that one
            let expected = tokens.by_app.get(p.registry_key.trim()).map(String::as_str);
            if !token_ok(&req, expected.or(global)) {
                return reply(ReturnT::fail(WRONG_TOKEN));
            }
            if [&p.registry_group, &p.registry_key, &p.registry_value]
                .iter()
                .any(|s| s.trim().is_empty())
            {
                return reply(ReturnT::fail("Illegal Argument."));
            }
            let reg = api.engine.registry();
            let res = if uri.as_str() == "registry" {
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
                Ok(Ok(())) => reply(ReturnT::success()),
                Ok(Err(e)) => reply(ReturnT::fail(e.to_string())),
                Err(e) => reply(ReturnT::fail(e.to_string())),
            }
        }
        "callback" => match parse_callbacks(&body) {
            Ok(items)
                if !tokens.is_empty() && !callback_token_ok(&req, &api, &tokens, &items).await =>
            {
                reply(ReturnT::fail(WRONG_TOKEN))
            }
            Ok(items) => match api.engine.complete().send(RecordResults(items)).await {
                Ok(Ok(())) => reply(ReturnT::success()),
                Ok(Err(e)) => reply(ReturnT::fail(e.to_string())),
                Err(e) => reply(ReturnT::fail(e.to_string())),
            },
            Err(e) => reply(ReturnT::fail(e)),
        },
        _ if !token_ok(&req, global) => reply(ReturnT::fail(WRONG_TOKEN)),
        other => reply(ReturnT::fail(format!(
            "invalid request, uri-mapping({other}) not found."
        ))),
    }
}

/// Whether every result of a callback comes with its run's group token (the global one for
/// runs of groups without their own, and for unknown runs).
async fn callback_token_ok(
    req: &HttpRequest,
    api: &AdminApi,
    tokens: &GroupTokens,
    items: &[HandleCallbackParam],
) -> bool {
    let global = api.access_token.as_deref();
    let ids: Vec<i64> = items.iter().map(|i| i.log_id).collect();
    let groups = match crate::store::logs::groups_of(api.engine.db(), &ids).await {
        Ok(g) => g,
        Err(e) => {
            tracing::error!(error = %e, "cannot read the groups of called-back runs");
            return false;
        }
    };
    let mut needed: Vec<Option<&str>> = ids
        .iter()
        .map(|id| {
            groups
                .get(id)
                .and_then(|g| tokens.by_group.get(g))
                .map(String::as_str)
                .or(global)
        })
        .collect();
    needed.dedup();
    needed.iter().all(|t| token_ok(req, *t))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `/api/callback` bodies parse from every shape XXL-JOB versions send.
    #[test]
    fn callbacks_parse_leniently() {
        let items = parse_callbacks(
            br#"[{"logId":1,"logDateTim":5,"handleCode":200,"handleMsg":null},
                 {"logId":2,"handleCode":500,"handleMsg":{"a":1},"extra":true},
                 {"logId":3,"handleCode":500,"handleMsg":42},
                 {"logId":4,"executeResult":{"code":500,"msg":"old"}}]"#,
        )
        .unwrap();
        assert_eq!(items[0].handle_msg, None);
        assert_eq!(items[0].log_date_tim, 5);
        assert_eq!(items[1].handle_msg.as_deref(), Some(r#"{"a":1}"#));
        assert_eq!(items[2].handle_msg.as_deref(), Some("42"));
        assert_eq!(
            (items[3].handle_code, items[3].handle_msg.as_deref()),
            (500, Some("old"))
        );
        assert!(parse_callbacks(b"nope").is_err());
    }
}
