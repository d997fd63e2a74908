//! `GET /metrics`: the engine's metrics in the Prometheus text format (no authentication, as
//! scrapers expect; it holds counts only).

use actix_web::{HttpResponse, web};

use crate::engine::Engine;

/// Mounts `GET /metrics`.
pub fn config(cfg: &mut web::ServiceConfig) {
    cfg.route("/metrics", web::get().to(metrics));
}

async fn metrics(engine: web::Data<Engine>) -> HttpResponse {
    match engine.render_metrics().await {
        Ok(text) => HttpResponse::Ok()
            .content_type("text/plain; version=0.0.4; charset=utf-8")
            .body(text),
        Err(e) => {
            tracing::error!(error = %e, "cannot render metrics");
            HttpResponse::ServiceUnavailable().body("metrics unavailable\n")
        }
    }
}
