//! `/v1/workflows`: workflows (DAGs of jobs), each save a new version; validation without saving.

use actix_web::{HttpResponse, web};
use serde::Deserialize;

use super::{ApiResult, Auth, Body, ok};
use crate::console::Console;
use crate::console::workflows::{WorkflowInput, WorkflowQuery};

/// Mounts `/workflows` (the fixed `validate` path before `{id}`).
pub fn config(cfg: &mut web::ServiceConfig) {
    cfg.service(
        web::resource("/workflows")
            .route(web::get().to(list))
            .route(web::post().to(create)),
    )
    .service(web::resource("/workflows/validate").route(web::post().to(validate)))
    .service(
        web::resource("/workflows/{id}")
            .route(web::get().to(get))
            .route(web::put().to(update))
            .route(web::delete().to(delete)),
    )
    .service(web::resource("/workflows/{id}/start").route(web::post().to(start)))
    .service(web::resource("/workflows/{id}/stop").route(web::post().to(stop)));
}

async fn start(c: web::Data<Console>, auth: Auth, id: web::Path<i32>) -> ApiResult {
    ok(c.schedule_workflow(&auth.user, *id, true).await?)
}

async fn stop(c: web::Data<Console>, auth: Auth, id: web::Path<i32>) -> ApiResult {
    ok(c.schedule_workflow(&auth.user, *id, false).await?)
}

async fn list(c: web::Data<Console>, auth: Auth, q: web::Query<WorkflowQuery>) -> ApiResult {
    ok(c.list_workflows(&auth.user, &q).await?)
}

async fn create(c: web::Data<Console>, auth: Auth, body: Body<WorkflowInput>) -> ApiResult {
    let w = c.create_workflow(&auth.user, body.0).await?;
    Ok(HttpResponse::Created().json(w))
}

#[derive(Deserialize)]
struct VersionQuery {
    version: Option<i32>,
}

async fn get(
    c: web::Data<Console>,
    auth: Auth,
    id: web::Path<i32>,
    q: web::Query<VersionQuery>,
) -> ApiResult {
    ok(c.get_workflow(&auth.user, *id, q.version).await?)
}

async fn update(
    c: web::Data<Console>,
    auth: Auth,
    id: web::Path<i32>,
    body: Body<WorkflowInput>,
) -> ApiResult {
    ok(c.update_workflow(&auth.user, *id, body.0).await?)
}

async fn delete(c: web::Data<Console>, auth: Auth, id: web::Path<i32>) -> ApiResult {
    c.delete_workflow(&auth.user, *id).await?;
    Ok(HttpResponse::NoContent().finish())
}

async fn validate(c: web::Data<Console>, auth: Auth, body: Body<WorkflowInput>) -> ApiResult {
    ok(c.validate_workflow(&auth.user, None, &body.0).await?)
}
