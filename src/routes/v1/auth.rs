//! `/v1/auth`: login (rate limited), logout, change own password, who am I.

use actix_web::http::header;
use actix_web::{HttpRequest, HttpResponse, web};
use serde::Deserialize;

use super::{ApiResult, Auth, Body, login_cookie, ok};
use crate::console::Console;

/// Mounts `/auth/*`.
pub fn config(cfg: &mut web::ServiceConfig) {
    cfg.service(web::resource("/auth/login").route(web::post().to(login)))
        .service(web::resource("/auth/logout").route(web::post().to(logout)))
        .service(web::resource("/auth/password").route(web::post().to(password)))
        .service(web::resource("/auth/me").route(web::get().to(me)));
}

#[derive(Deserialize)]
struct LoginInput {
    username: String,
    password: String,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct PasswordInput {
    old_password: String,
    password: String,
    /// Also revoke every API key of the user (kept by default).
    #[serde(default)]
    end_api_keys: bool,
}

async fn login(c: web::Data<Console>, req: HttpRequest, body: Body<LoginInput>) -> ApiResult {
    let peer = req
        .peer_addr()
        .map(|a| a.ip().to_string())
        .unwrap_or_default();
    let login = c.login(&body.0.username, &body.0.password, &peer).await?;
    let sec = &c.engine().config().security;
    let cookie = login_cookie(
        &login.token,
        sec.session_ttl_secs.max(60) as i64,
        sec.secure_cookie,
    );
    Ok(HttpResponse::Ok()
        .insert_header((header::SET_COOKIE, cookie))
        .insert_header((header::CACHE_CONTROL, "no-store"))
        .json(login))
}

async fn logout(c: web::Data<Console>, auth: Auth) -> ApiResult {
    c.logout(&auth.user, &auth.token).await?;
    let secure = c.engine().config().security.secure_cookie;
    Ok(HttpResponse::NoContent()
        .insert_header((header::SET_COOKIE, login_cookie("", 0, secure)))
        .finish())
}

async fn password(c: web::Data<Console>, auth: Auth, body: Body<PasswordInput>) -> ApiResult {
    ok(c.change_password(
        &auth.user,
        &auth.token,
        &body.0.old_password,
        &body.0.password,
        body.0.end_api_keys,
    )
    .await?)
}

async fn me(c: web::Data<Console>, auth: Auth) -> ApiResult {
    let u = auth.user;
    ok(serde_json::json!({
        "id": u.id,
        "username": u.username,
        "role": u.role,
        "permission": u.permission,
        "scriptsEnabled": c.engine().config().security.scripts_enabled,
    }))
}
