//! `/v1/logs`: runs, their rolling logs, kill, clear.

use actix_web::web;
use serde::Deserialize;

use super::{ApiResult, Auth, Body, ok};
use crate::console::Console;
use crate::console::logs::{ClearInput, LogQuery};

/// Mounts `/logs` (the fixed `clear` path before `{id}`).
pub fn config(cfg: &mut web::ServiceConfig) {
    cfg.service(web::resource("/logs").route(web::get().to(list)))
        .service(web::resource("/logs/clear").route(web::post().to(clear)))
        .service(web::resource("/logs/{id}").route(web::get().to(get)))
        .service(web::resource("/logs/{id}/content").route(web::get().to(content)))
        .service(web::resource("/logs/{id}/kill").route(web::post().to(kill)));
}

async fn list(c: web::Data<Console>, auth: Auth, q: web::Query<LogQuery>) -> ApiResult {
    ok(c.list_logs(&auth.user, &q).await?)
}

async fn get(c: web::Data<Console>, auth: Auth, id: web::Path<i64>) -> ApiResult {
    ok(c.get_log(&auth.user, *id).await?)
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ContentQuery {
    from_line: Option<i32>,
}

async fn content(
    c: web::Data<Console>,
    auth: Auth,
    id: web::Path<i64>,
    q: web::Query<ContentQuery>,
) -> ApiResult {
    ok(c.log_content(&auth.user, *id, q.from_line.unwrap_or(1))
        .await?)
}

async fn kill(c: web::Data<Console>, auth: Auth, id: web::Path<i64>) -> ApiResult {
    ok(c.kill_log(&auth.user, *id).await?)
}

async fn clear(c: web::Data<Console>, auth: Auth, body: Body<ClearInput>) -> ApiResult {
    ok(c.clear_logs(&auth.user, body.0).await?)
}
