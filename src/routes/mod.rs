//! HTTP scopes, one file per resource, each with a `config(cfg)` to mount in any actix-web `App`.

pub mod api;
pub mod health;

use crate::engine::Engine;
use crate::executor::server::{self, ExecutorApi};

/// Mounts every route of a node: `/health`, the admin API for executors (`/api/*`), and, when
/// the node has an in-process executor, the executor protocol (`/run`, `/beat`, …) for it.
/// `access_token` is checked on both protocols (none = no check).
pub fn node(
    engine: Engine,
    access_token: Option<String>,
) -> impl Fn(&mut actix_web::web::ServiceConfig) + Clone {
    move |cfg| {
        cfg.app_data(actix_web::web::Data::new(engine.clone()));
        health::config(cfg);
        api::config(
            cfg,
            api::AdminApi {
                engine: engine.clone(),
                access_token: access_token.clone(),
            },
        );
        if let Some(backend) = engine.local_executor() {
            server::config(
                cfg,
                ExecutorApi {
                    backend,
                    access_token: access_token.clone(),
                },
            );
        }
    }
}
