//! `/v1/groups`: executor groups.

use actix_web::{HttpResponse, web};
use serde::Deserialize;

use super::{ApiResult, Auth, Body, ok};
use crate::console::groups::GroupInput;
use crate::console::{Console, page_bounds};

/// Mounts `/groups`.
pub fn config(cfg: &mut web::ServiceConfig) {
    cfg.service(
        web::resource("/groups")
            .route(web::get().to(list))
            .route(web::post().to(create)),
    )
    .service(
        web::resource("/groups/{id}")
            .route(web::get().to(get))
            .route(web::put().to(update))
            .route(web::delete().to(delete)),
    );
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Query {
    app_name: Option<String>,
    title: Option<String>,
    offset: Option<u64>,
    limit: Option<u64>,
}

async fn list(c: web::Data<Console>, auth: Auth, q: web::Query<Query>) -> ApiResult {
    let (offset, limit) = page_bounds(q.offset, q.limit)?;
    ok(c.list_groups(
        &auth.user,
        q.app_name.as_deref(),
        q.title.as_deref(),
        offset,
        limit,
    )
    .await?)
}

async fn create(c: web::Data<Console>, auth: Auth, body: Body<GroupInput>) -> ApiResult {
    let g = c.create_group(&auth.user, body.0).await?;
    Ok(HttpResponse::Created().json(g))
}

async fn get(c: web::Data<Console>, auth: Auth, id: web::Path<i32>) -> ApiResult {
    ok(c.get_group(&auth.user, *id).await?)
}

async fn update(
    c: web::Data<Console>,
    auth: Auth,
    id: web::Path<i32>,
    body: Body<GroupInput>,
) -> ApiResult {
    ok(c.update_group(&auth.user, *id, body.0).await?)
}

async fn delete(c: web::Data<Console>, auth: Auth, id: web::Path<i32>) -> ApiResult {
    c.delete_group(&auth.user, *id).await?;
    Ok(HttpResponse::NoContent().finish())
}
