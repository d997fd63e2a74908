//! `/v1/users`: console users (administrators only).

use actix_web::{HttpResponse, web};
use serde::Deserialize;

use super::{ApiResult, Auth, Body, ok};
use crate::console::users::UserInput;
use crate::console::{Console, page_bounds};

/// Mounts `/users`.
pub fn config(cfg: &mut web::ServiceConfig) {
    cfg.service(
        web::resource("/users")
            .route(web::get().to(list))
            .route(web::post().to(create)),
    )
    .service(
        web::resource("/users/{id}")
            .route(web::put().to(update))
            .route(web::delete().to(delete)),
    );
}

#[derive(Deserialize)]
struct Query {
    username: Option<String>,
    role: Option<i16>,
    offset: Option<u64>,
    limit: Option<u64>,
}

async fn list(c: web::Data<Console>, auth: Auth, q: web::Query<Query>) -> ApiResult {
    let (offset, limit) = page_bounds(q.offset, q.limit)?;
    let role = q.role.filter(|r| *r >= 0);
    ok(
        c.list_users(&auth.user, q.username.as_deref(), role, offset, limit)
            .await?,
    )
}

async fn create(c: web::Data<Console>, auth: Auth, body: Body<UserInput>) -> ApiResult {
    let u = c.create_user(&auth.user, body.0).await?;
    Ok(HttpResponse::Created().json(u))
}

async fn update(
    c: web::Data<Console>,
    auth: Auth,
    id: web::Path<i32>,
    body: Body<UserInput>,
) -> ApiResult {
    ok(c.update_user(&auth.user, *id, body.0).await?)
}

async fn delete(c: web::Data<Console>, auth: Auth, id: web::Path<i32>) -> ApiResult {
    c.delete_user(&auth.user, *id).await?;
    Ok(HttpResponse::NoContent().finish())
}
