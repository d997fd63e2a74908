//! `/v1/workflow-runs`: trigger a workflow, list its runs, read one with its node runs, stop one.

use actix_web::{HttpResponse, web};

use super::{ApiResult, Auth, Body, ok};
use crate::console::Console;
use crate::console::workflow_runs::{MarkInput, RerunInput, RunInput, RunQuery};

/// Mounts `/workflow-runs`.
pub fn config(cfg: &mut web::ServiceConfig) {
    cfg.service(
        web::resource("/workflow-runs")
            .route(web::get().to(list))
            .route(web::post().to(trigger)),
    )
    .service(web::resource("/workflow-runs/{id}").route(web::get().to(get)))
    .service(web::resource("/workflow-runs/{id}/stop").route(web::post().to(stop)))
    .service(web::resource("/workflow-runs/{id}/rerun").route(web::post().to(rerun)))
    .service(web::resource("/workflow-runs/{id}/mark").route(web::post().to(mark)));
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

async fn rerun(
    c: web::Data<Console>,
    auth: Auth,
    id: web::Path<i64>,
    body: web::Bytes,
) -> ApiResult {
    // the body is optional: an empty one re-runs from the failed nodes
    let input: RerunInput = if body.iter().all(u8::is_ascii_whitespace) {
        RerunInput::default()
    } else {
        super::parse_json(&body)?
    };
    ok(c.rerun_workflow_run(&auth.user, *id, input).await?)
}

async fn mark(
    c: web::Data<Console>,
    auth: Auth,
    id: web::Path<i64>,
    body: Body<MarkInput>,
) -> ApiResult {
    ok(c.mark_workflow_node(&auth.user, *id, body.0).await?)
}
