//! `/v1/workflow-runs`: trigger a workflow, list its runs, read one with its node runs, stop one.

use actix_web::{HttpResponse, web};

use super::{ApiResult, Auth, Body, ok};
use crate::console::Console;
use crate::console::workflow_runs::{RunInput, RunQuery};

/// Mounts `/workflow-runs`.
pub fn config(cfg: &mut web::ServiceConfig) {
    cfg.service(
        web::resource("/workflow-runs")
            .route(web::get().to(list))
            .route(web::post().to(trigger)),
    )
    .service(web::resource("/workflow-runs/{id}").route(web::get().to(get)))
    .service(web::resource("/workflow-runs/{id}/stop").route(web::post().to(stop)));
}

async fn list(c: web::Data<Console>, auth: Auth, q: web::Query<RunQuery>) -> ApiResult {
    ok(c.list_workflow_runs(&auth.user, &q).await?)
}

async fn trigger(c: web::Data<Console>, auth: Auth, body: Body<RunInput>) -> ApiResult {
    let r = c.trigger_workflow(&auth.user, body.0).await?;
    Ok(HttpResponse::Created().json(r))
}

async fn get(c: web::Data<Console>, auth: Auth, id: web::Path<i64>) -> ApiResult {
    ok(c.get_workflow_run(&auth.user, *id).await?)
}

async fn stop(c: web::Data<Console>, auth: Auth, id: web::Path<i64>) -> ApiResult {
    ok(c.stop_workflow_run(&auth.user, *id).await?)
}
