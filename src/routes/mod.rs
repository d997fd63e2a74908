//! HTTP scopes, one file per resource, each with a `config(cfg)` to mount in any actix-web `App`.

pub mod health;

/// Mounts every route this crate serves.
pub fn config(cfg: &mut actix_web::web::ServiceConfig) {
    health::config(cfg);
}
