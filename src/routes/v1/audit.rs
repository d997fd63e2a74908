//! `/v1/audit`: the audit log (administrators).

use actix_web::web;

use super::{ApiResult, Auth, ok};
use crate::console::Console;
use crate::console::audit::AuditQuery;

/// Mounts `/audit`.
pub fn config(cfg: &mut web::ServiceConfig) {
    cfg.service(web::resource("/audit").route(web::get().to(list)));
}

async fn list(c: web::Data<Console>, auth: Auth, q: web::Query<AuditQuery>) -> ApiResult {
    ok(c.list_audit(&auth.user, &q).await?)
}
