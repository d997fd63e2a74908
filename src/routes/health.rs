//! `GET /health`: liveness of the node and its database.

use actix_web::{HttpResponse, web};
use sea_orm::ConnectionTrait;

use crate::engine::Engine;

/// Mounts `GET /health`.
pub fn config(cfg: &mut web::ServiceConfig) {
    cfg.route("/health", web::get().to(health));
}

async fn health(engine: web::Data<Engine>) -> HttpResponse {
    let db = engine.db();
    let ok = db.execute_unprepared("SELECT 1").await.is_ok();
    if ok {
        HttpResponse::Ok().json(serde_json::json!({ "status": "ok" }))
    } else {
        HttpResponse::ServiceUnavailable()
            .json(serde_json::json!({ "status": "database unavailable" }))
    }
}
