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
    if !token_ok(&req, api.access_token.as_deref()) {
        return reply(ReturnT::fail(WRONG_TOKEN));
    }
    match uri.as_str() {
        "registry" | "registryRemove" => {
            let p: RegistryParam = match serde_json::from_slice(&body) {
                Ok(p) => p,
                Err(_) => return reply(ReturnT::fail("Illegal Argument.")),
            };
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
            Ok(items) => match api.engine.complete().send(RecordResults(items)).await {
                Ok(Ok(())) => reply(ReturnT::success()),
                Ok(Err(e)) => reply(ReturnT::fail(e.to_string())),
                Err(e) => reply(ReturnT::fail(e.to_string())),
            },
            Err(e) => reply(ReturnT::fail(e)),
        },
        other => reply(ReturnT::fail(format!(
            "invalid request, uri-mapping({other}) not found."
        ))),
    }
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
