//! `xxl_job_info`: due-job reads, batched schedule updates, and job CRUD used by the library API.

use entity::xxl_job_info::{ActiveModel, Column, Entity, Model};
use sea_orm::sea_query::{CaseStatement, Expr, Query};
use sea_orm::{
    ActiveModelTrait, ColumnTrait, ConnectionTrait, EntityTrait, QueryFilter, QueryOrder,
    QuerySelect, Set,
};

use crate::error::{Error, Result};

/// The scan's read: running jobs due by `max_next`, by id, at most `limit`.
pub async fn due(c: &impl ConnectionTrait, max_next: i64, limit: u64) -> Result<Vec<Model>> {
    Ok(Entity::find()
        .filter(Column::TriggerStatus.eq(1))
        .filter(Column::TriggerNextTime.lte(max_next))
        .order_by_asc(Column::Id)
        .limit(limit)
        .all(c)
        .await?)
}

/// A job's new schedule state after a scan.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ScheduleUpdate {
    /// Job id.
    pub id: i32,
    /// New `trigger_last_time`.
    pub last: i64,
    /// New `trigger_next_time`.
    pub next: i64,
    /// New `trigger_status` (0 when the scan stopped the job).
    pub status: i16,
}

/// Writes many schedule updates in one statement per 500 jobs. Only rows still running are
/// touched, so a job stopped concurrently from the console is not re-enabled.
pub async fn update_schedules(c: &impl ConnectionTrait, updates: &[ScheduleUpdate]) -> Result<()> {
    for chunk in updates.chunks(500) {
        let case = |f: &dyn Fn(&ScheduleUpdate) -> Expr| {
            chunk
                .iter()
                .fold(CaseStatement::new(), |cs, u| {
                    cs.case(Column::Id.eq(u.id), f(u))
                })
                .finally(Expr::val(0))
        };
        let stmt = Query::update()
            .table(Entity)
            .value(Column::TriggerLastTime, case(&|u| Expr::val(u.last)))
            .value(Column::TriggerNextTime, case(&|u| Expr::val(u.next)))
            .value(Column::TriggerStatus, case(&|u| Expr::val(u.status)))
            .and_where(Column::Id.is_in(chunk.iter().map(|u| u.id)))
            .and_where(Column::TriggerStatus.eq(1))
            .to_owned();
        c.execute(&stmt).await?;
    }
    Ok(())
}

/// One job by id.
pub async fn get(c: &impl ConnectionTrait, id: i32) -> Result<Model> {
    Entity::find_by_id(id)
        .one(c)
        .await?
        .ok_or(Error::JobNotFound { job_id: id })
}

/// Jobs by id (missing ids are simply absent).
pub async fn get_many(c: &impl ConnectionTrait, ids: &[i32]) -> Result<Vec<Model>> {
    let mut out = Vec::with_capacity(ids.len());
    for chunk in ids.chunks(500) {
        out.extend(
            Entity::find()
                .filter(Column::Id.is_in(chunk.iter().copied()))
                .all(c)
                .await?,
        );
    }
    Ok(out)
}

/// Inserts a job (created stopped, as XXL-JOB does) and returns its id.
pub async fn insert(c: &impl ConnectionTrait, mut job: Model) -> Result<i32> {
    job.trigger_status = 0;
    job.trigger_last_time = 0;
    job.trigger_next_time = 0;
    let mut am: ActiveModel = job.into();
    am.id = sea_orm::ActiveValue::NotSet;
    Ok(am.insert(c).await?.id)
}

/// Marks a job running with its first fire time.
pub async fn set_running(c: &impl ConnectionTrait, id: i32, next: i64) -> Result<()> {
    let am = ActiveModel {
        id: Set(id),
        trigger_status: Set(1),
        trigger_last_time: Set(0),
        trigger_next_time: Set(next),
        ..Default::default()
    };
    am.update(c).await?;
    Ok(())
}

/// Stops a job (status 0, last 0, next 0).
pub async fn set_stopped(c: &impl ConnectionTrait, id: i32) -> Result<()> {
    let am = ActiveModel {
        id: Set(id),
        trigger_status: Set(0),
        trigger_last_time: Set(0),
        trigger_next_time: Set(0),
        ..Default::default()
    };
    am.update(c).await?;
    Ok(())
}
