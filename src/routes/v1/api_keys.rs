//! `/v1/api-keys`: API keys for automation (a user's own; administrators see every one).

use actix_web::{HttpResponse, web};

use super::{ApiResult, Auth, Body, ok};
use crate::console::Console;
use crate::console::api_keys::ApiKeyInput;

/// Mounts `/api-keys`.
pub fn config(cfg: &mut web::ServiceConfig) {
    cfg.service(
        web::resource("/api-keys")
            .route(web::get().to(list))
            .route(web::post().to(create)),
    )
    .service(web::resource("/api-keys/{id}").route(web::delete().to(delete)));
}

async fn list(c: web::Data<Console>, auth: Auth) -> ApiResult {
    let items = c.list_api_keys(&auth.user).await?;
    ok(serde_json::json!({ "total": items.len(), "items": items }))
}

async fn create(c: web::Data<Console>, auth: Auth, body: Body<ApiKeyInput>) -> ApiResult {
    let k = c.create_api_key(&auth.user, body.0).await?;
    Ok(HttpResponse::Created().json(k))
}

async fn delete(c: web::Data<Console>, auth: Auth, id: web::Path<i32>) -> ApiResult {
    c.delete_api_key(&auth.user, *id).await?;
    Ok(HttpResponse::NoContent().finish())
}
