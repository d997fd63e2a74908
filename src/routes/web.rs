//! The web console: one page and its script and style sheet, embedded in the binary
//! (`web/` at build time; no build step, no CDN), on top of the `/v1` API.
//!
//! Served with a strict Content-Security-Policy (only this origin's script and styles, no
//! inline code, no framing), `nosniff`, and `no-cache` so an upgraded binary's page is used.

use actix_web::http::header;
use actix_web::{HttpResponse, web};

const INDEX: &str = include_str!("../../web/index.html");
const APP_JS: &str = include_str!("../../web/app.js");
const APP_CSS: &str = include_str!("../../web/app.css");

/// The policy every console asset is served with.
pub(crate) const CSP: &str = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'";

/// Mounts `GET /` (also `/index.html`) and `/assets/app.js`, `/assets/app.css`.
pub fn config(cfg: &mut web::ServiceConfig) {
    cfg.route("/", web::get().to(index))
        .route("/index.html", web::get().to(index))
        .route("/assets/app.js", web::get().to(script))
        .route("/assets/app.css", web::get().to(style));
}

fn asset(content_type: &str, body: &'static str) -> HttpResponse {
    HttpResponse::Ok()
        .content_type(content_type)
        .insert_header((header::CONTENT_SECURITY_POLICY, CSP))
        .insert_header((header::X_CONTENT_TYPE_OPTIONS, "nosniff"))
        .insert_header((header::REFERRER_POLICY, "no-referrer"))
        .insert_header((header::CACHE_CONTROL, "no-cache"))
        .body(body)
}

async fn index() -> HttpResponse {
    asset("text/html; charset=utf-8", INDEX)
}

async fn script() -> HttpResponse {
    asset("text/javascript; charset=utf-8", APP_JS)
}

async fn style() -> HttpResponse {
    asset("text/css; charset=utf-8", APP_CSS)
}
