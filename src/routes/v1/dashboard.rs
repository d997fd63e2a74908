//! `/v1/dashboard`: counts and the runs-per-day chart.

use actix_web::web;
use serde::Deserialize;

use super::{ApiResult, Auth, ok};
use crate::console::Console;

/// Mounts `/dashboard`.
pub fn config(cfg: &mut web::ServiceConfig) {
    cfg.service(web::resource("/dashboard").route(web::get().to(counts)))
        .service(web::resource("/dashboard/chart").route(web::get().to(chart)));
}

async fn counts(c: web::Data<Console>, auth: Auth) -> ApiResult {
    ok(c.dashboard(&auth.user).await?)
}

#[derive(Deserialize)]
struct Range {
    from: Option<String>,
    to: Option<String>,
}

async fn chart(c: web::Data<Console>, _auth: Auth, q: web::Query<Range>) -> ApiResult {
    ok(c.chart(q.from.as_deref(), q.to.as_deref()).await?)
}
