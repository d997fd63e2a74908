//! `xxl_job_logglue`: GLUE (script) source history, newest 30 versions per job (protocol.md §8).

use entity::xxl_job_logglue::{ActiveModel, Column, Entity, Model};
use sea_orm::{
    ActiveModelTrait, ColumnTrait, ConnectionTrait, EntityTrait, QueryFilter, QueryOrder,
    QuerySelect, Set,
};

use crate::error::Result;

/// Versions kept per job.
pub(crate) const KEEP: u64 = 30;

/// A job's history, newest first.
pub(crate) async fn history(c: &impl ConnectionTrait, job_id: i32) -> Result<Vec<Model>> {
    Ok(Entity::find()
        .filter(Column::JobId.eq(job_id))
        .order_by_desc(Column::UpdateTime)
        .order_by_desc(Column::Id)
        .limit(KEEP)
        .all(c)
        .await?)
}

/// Records a version and trims the job's history to the newest [`KEEP`].
pub(crate) async fn push(
    c: &impl ConnectionTrait,
    job_id: i32,
    glue_type: &str,
    source: &str,
    remark: &str,
    now: chrono::NaiveDateTime,
) -> Result<()> {
    ActiveModel {
        job_id: Set(job_id),
        glue_type: Set(Some(glue_type.into())),
        glue_source: Set(Some(source.into())),
        glue_remark: Set(remark.into()),
        add_time: Set(Some(now)),
        update_time: Set(Some(now)),
        ..Default::default()
    }
    .insert(c)
    .await?;
    let old: Vec<i32> = Entity::find()
        .select_only()
        .column(Column::Id)
        .filter(Column::JobId.eq(job_id))
        .order_by_desc(Column::UpdateTime)
        .order_by_desc(Column::Id)
        .offset(KEEP)
        .limit(1000)
        .into_tuple()
        .all(c)
        .await?;
    if !old.is_empty() {
        Entity::delete_many()
            .filter(Column::Id.is_in(old))
            .exec(c)
            .await?;
    }
    Ok(())
}

/// Deletes a job's history.
pub(crate) async fn delete_for_job(c: &impl ConnectionTrait, job_id: i32) -> Result<()> {
    Entity::delete_many()
        .filter(Column::JobId.eq(job_id))
        .exec(c)
        .await?;
    Ok(())
}
