//! HTTP scopes, one file per resource, each with a `config(cfg)` to mount in any actix-web `App`.

pub mod api;
mod callback_body;
pub mod health;
pub mod metrics;
pub mod openapi;
mod origin;
pub mod v1;
pub mod web;
pub mod xxl;

use crate::console::Console;
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
                    group: Some((
                        engine.directory().clone(),
                        engine.config().executor.app_name.trim().to_string(),
                    )),
                    app_name: None,
                    routes: None,
                },
            );
        }
    }
}

/// Mounts a whole scheduling center: [`node`] plus the console API (`/v1/...`), the web
/// console (`/`), XXL-JOB's console endpoints for its tools (`/jobinfo/…`, also under
/// `/xxl-job-admin`), `/openapi.json` and `/metrics`. This is what `xjob serve` runs.
pub fn center(
    console: Console,
    access_token: Option<String>,
) -> impl Fn(&mut actix_web::web::ServiceConfig) + Clone {
    let node = node(console.engine().clone(), access_token);
    // one rate limit for every worker
    let job_api = actix_web::web::Data::new(xxl::job_api::Limiter::new(
        console.engine().config().security.job_api_per_minute,
    ));
    move |cfg| {
        node(cfg);
        metrics::config(cfg);
        openapi::config(cfg);
        v1::config(cfg, console.clone());
        xxl::config(cfg, job_api.clone());
        web::config(cfg);
    }
}
