//! `/v1/jobs`: jobs, start / stop / trigger, next fire times, GLUE source.

use actix_web::{HttpResponse, web};
use serde::Deserialize;
use serde_json::Value;

use super::{ApiResult, Auth, Body, from_value, ok};
use crate::console::jobs::{GlueInput, JobQuery};
use crate::console::{Console, Page};
use crate::error::Error;
use crate::jobs::JobSpec;
use crate::model::TriggerStatus;

/// Mounts `/jobs` (the fixed `next-fire-times` path before `{id}`).
pub fn config(cfg: &mut web::ServiceConfig) {
    cfg.service(
        web::resource("/jobs")
            .route(web::get().to(list))
            .route(web::post().to(create)),
    )
    .service(web::resource("/jobs/next-fire-times").route(web::get().to(next_fire_times)))
    .service(
        web::resource("/jobs/{id}")
            .route(web::get().to(get))
            .route(web::put().to(update))
            .route(web::delete().to(delete)),
    )
    .service(web::resource("/jobs/{id}/start").route(web::post().to(start)))
    .service(web::resource("/jobs/{id}/stop").route(web::post().to(stop)))
    .service(web::resource("/jobs/{id}/trigger").route(web::post().to(trigger)))
    .service(
        web::resource("/jobs/{id}/glue")
            .route(web::get().to(glue))
            .route(web::put().to(save_glue)),
    );
}

async fn list(c: web::Data<Console>, auth: Auth, q: web::Query<JobQuery>) -> ApiResult {
    ok(c.list_jobs(&auth.user, &q).await?)
}

/// `POST /jobs`: a job's fields, and optionally `triggerStatus` (0, the default: created
/// stopped; 1: created running).
async fn create(c: web::Data<Console>, auth: Auth, body: Body<Value>) -> ApiResult {
    let mut fields = body.0;
    let status = match fields
        .as_object_mut()
        .and_then(|o| o.remove("triggerStatus"))
    {
        None | Some(Value::Null) => TriggerStatus::Stopped,
        Some(v) => match from_value::<i16>(v) {
            Ok(0) => TriggerStatus::Stopped,
            Ok(1) => TriggerStatus::Running,
            _ => {
                return Err(Error::Invalid {
                    field: "triggerStatus",
                    reason: "must be 0 (created stopped) or 1 (created running)".into(),
                }
                .into());
            }
        },
    };
    let spec: JobSpec = from_value(fields)?;
    let job = c.create_job(&auth.user, spec, status).await?;
    Ok(HttpResponse::Created().json(job))
}

async fn get(c: web::Data<Console>, auth: Auth, id: web::Path<i32>) -> ApiResult {
    ok(c.get_job(&auth.user, *id).await?)
}

async fn update(
    c: web::Data<Console>,
    auth: Auth,
    id: web::Path<i32>,
    body: Body<JobSpec>,
) -> ApiResult {
    ok(c.update_job(&auth.user, *id, body.0).await?)
}

async fn delete(c: web::Data<Console>, auth: Auth, id: web::Path<i32>) -> ApiResult {
    c.delete_job(&auth.user, *id).await?;
    Ok(HttpResponse::NoContent().finish())
}

async fn start(c: web::Data<Console>, auth: Auth, id: web::Path<i32>) -> ApiResult {
    ok(c.start_job(&auth.user, *id).await?)
}

async fn stop(c: web::Data<Console>, auth: Auth, id: web::Path<i32>) -> ApiResult {
    ok(c.stop_job(&auth.user, *id).await?)
}

#[derive(Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
struct TriggerInput {
    executor_param: Option<String>,
    address_list: Option<String>,
}

async fn trigger(
    c: web::Data<Console>,
    auth: Auth,
    id: web::Path<i32>,
    body: web::Bytes,
) -> ApiResult {
    // the body is optional: an empty one triggers with the job's own param
    let input: TriggerInput = if body.iter().all(u8::is_ascii_whitespace) {
        TriggerInput::default()
    } else {
        super::parse_json(&body)?
    };
    c.trigger_job(&auth.user, *id, input.executor_param, input.address_list)
        .await?;
    ok(serde_json::json!({ "jobId": *id, "triggered": true }))
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct NextQuery {
    schedule_type: String,
    schedule_conf: Option<String>,
    time_zone: Option<String>,
    count: Option<usize>,
}

async fn next_fire_times(
    c: web::Data<Console>,
    _auth: Auth,
    q: web::Query<NextQuery>,
) -> ApiResult {
    let items = c.next_fire_times(
        &q.schedule_type,
        q.schedule_conf.as_deref(),
        q.time_zone.as_deref(),
        q.count.unwrap_or(5),
    )?;
    ok(Page {
        total: items.len() as u64,
        items,
    })
}

async fn glue(c: web::Data<Console>, auth: Auth, id: web::Path<i32>) -> ApiResult {
    ok(c.get_glue(&auth.user, *id).await?)
}

async fn save_glue(
    c: web::Data<Console>,
    auth: Auth,
    id: web::Path<i32>,
    body: Body<GlueInput>,
) -> ApiResult {
    ok(c.save_glue(&auth.user, *id, body.0).await?)
}
