//! `xjob_workflow` and `xjob_workflow_version`: workflows and every saved version of their DAG.

use entity::xjob_workflow::{ActiveModel, Column, Entity, Model};
use entity::xjob_workflow_version as versions;
use sea_orm::{
    ActiveModelTrait, ActiveValue, ColumnTrait, ConnectionTrait, EntityTrait, PaginatorTrait,
    QueryFilter, QueryOrder, QuerySelect,
};

use crate::error::{Error, Result};

fn not_found(id: i32) -> Error {
    Error::NotFound {
        what: "workflow",
        id: id.into(),
    }
}

/// Stores a new workflow (version 1) and its first version row; answers it as stored.
pub(crate) async fn insert(c: &impl ConnectionTrait, w: Model) -> Result<Model> {
    let mut am: ActiveModel = w.into();
    am.id = ActiveValue::NotSet;
    let w = am.insert(c).await?;
    add_version(c, &w).await?;
    Ok(w)
}

async fn add_version(c: &impl ConnectionTrait, w: &Model) -> Result<()> {
    versions::ActiveModel {
        id: ActiveValue::NotSet,
        workflow_id: ActiveValue::Set(w.id),
        version: ActiveValue::Set(w.version),
        definition: ActiveValue::Set(w.definition.clone()),
        author: ActiveValue::Set(w.author.clone()),
        created_at: ActiveValue::Set(w.updated_at),
    }
    .insert(c)
    .await?;
    Ok(())
}

/// Saves `w` as the next version of its workflow if its current version is still
/// `expected_version` (else a conflict: someone saved in between); answers it as stored.
pub(crate) async fn update(
    c: &impl ConnectionTrait,
    mut w: Model,
    expected_version: i32,
) -> Result<Model> {
    w.version = expected_version + 1;
    let r = Entity::update_many()
        .col_expr(Column::Name, w.name.clone().into())
        .col_expr(Column::Description, w.description.clone().into())
        .col_expr(Column::Author, w.author.clone().into())
        .col_expr(Column::Version, w.version.into())
        .col_expr(Column::Definition, w.definition.clone().into())
        .col_expr(Column::UpdatedAt, w.updated_at.into())
        .col_expr(Column::ScheduleType, w.schedule_type.clone().into())
        .col_expr(Column::ScheduleConf, w.schedule_conf.clone().into())
        .col_expr(Column::MisfireStrategy, w.misfire_strategy.clone().into())
        .col_expr(Column::TriggerStatus, w.trigger_status.into())
        .col_expr(Column::TriggerNextTime, w.trigger_next_time.into())
        .col_expr(Column::Concurrency, w.concurrency.clone().into())
        .col_expr(Column::MaxQueued, w.max_queued.into())
        .filter(Column::Id.eq(w.id))
        .filter(Column::Version.eq(expected_version))
        .exec(c)
        .await?;
    if r.rows_affected == 0 {
        get(c, w.id).await?;
        return Err(Error::Conflict {
            reason: format!(
                "workflow {} was saved by someone else since version {expected_version}",
                w.id
            ),
        });
    }
    add_version(c, &w).await?;
    Ok(w)
}

/// Sets whether a workflow's schedule runs and its next fire.
pub(crate) async fn set_schedule(
    c: &impl ConnectionTrait,
    id: i32,
    status: i16,
    next: i64,
) -> Result<()> {
    // (MySQL counts only rows it changed: the caller has read the workflow)
    Entity::update_many()
        .col_expr(Column::TriggerStatus, status.into())
        .col_expr(Column::TriggerNextTime, next.into())
        .filter(Column::Id.eq(id))
        .exec(c)
        .await?;
    Ok(())
}

/// One workflow.
pub(crate) async fn get(c: &impl ConnectionTrait, id: i32) -> Result<Model> {
    Entity::find_by_id(id)
        .one(c)
        .await?
        .ok_or_else(|| not_found(id))
}

/// Of `ids`, the workflows that exist: (id, group, current version), without their DAGs.
pub(crate) async fn heads(c: &impl ConnectionTrait, ids: &[i32]) -> Result<Vec<(i32, i32, i32)>> {
    let mut out = Vec::with_capacity(ids.len());
    for chunk in ids.chunks(1000) {
        let rows: Vec<(i32, i32, i32)> = Entity::find()
            .select_only()
            .columns([Column::Id, Column::JobGroup, Column::Version])
            .filter(Column::Id.is_in(chunk.iter().copied()))
            .into_tuple()
            .all(c)
            .await?;
        out.extend(rows);
    }
    Ok(out)
}

/// Of `ids`, the workflows that exist: id → name.
pub(crate) async fn names(
    c: &impl ConnectionTrait,
    ids: &[i32],
) -> Result<std::collections::HashMap<i32, String>> {
    let mut out = std::collections::HashMap::with_capacity(ids.len());
    for chunk in ids.chunks(1000) {
        let rows: Vec<(i32, String)> = Entity::find()
            .select_only()
            .columns([Column::Id, Column::Name])
            .filter(Column::Id.is_in(chunk.iter().copied()))
            .into_tuple()
            .all(c)
            .await?;
        out.extend(rows);
    }
    Ok(out)
}

/// Of `ids`, the workflows that exist, whole.
pub(crate) async fn many(c: &impl ConnectionTrait, ids: &[i32]) -> Result<Vec<Model>> {
    let mut out = Vec::with_capacity(ids.len());
    for chunk in ids.chunks(100) {
        out.extend(
            Entity::find()
                .filter(Column::Id.is_in(chunk.iter().copied()))
                .all(c)
                .await?,
        );
    }
    Ok(out)
}

/// A page of workflows in `groups` (None: all), newest first, whose name contains `name`.
pub(crate) async fn page(
    c: &impl ConnectionTrait,
    groups: Option<&[i32]>,
    name: Option<&str>,
    offset: u64,
    limit: u64,
) -> Result<(u64, Vec<Model>)> {
    let mut q = Entity::find();
    if let Some(g) = groups {
        q = q.filter(Column::JobGroup.is_in(g.iter().copied()));
    }
    if let Some(n) = name.filter(|n| !n.is_empty()) {
        q = q.filter(Column::Name.contains(n));
    }
    let total = q.clone().count(c).await?;
    let rows = q
        .order_by_desc(Column::Id)
        .offset(offset)
        .limit(limit)
        .all(c)
        .await?;
    Ok((total, rows))
}

/// One saved version of a workflow.
pub(crate) async fn version(
    c: &impl ConnectionTrait,
    id: i32,
    version: i32,
) -> Result<versions::Model> {
    versions::Entity::find()
        .filter(versions::Column::WorkflowId.eq(id))
        .filter(versions::Column::Version.eq(version))
        .one(c)
        .await?
        .ok_or(Error::NotFound {
            what: "workflow version",
            id: version.into(),
        })
}

/// Deletes a workflow and its versions.
pub(crate) async fn delete(c: &impl ConnectionTrait, id: i32) -> Result<()> {
    let r = Entity::delete_by_id(id).exec(c).await?;
    if r.rows_affected == 0 {
        return Err(not_found(id));
    }
    versions::Entity::delete_many()
        .filter(versions::Column::WorkflowId.eq(id))
        .exec(c)
        .await?;
    Ok(())
}

/// The ids of workflows whose current DAG has a node `runs` accepts; `hint` is text every
/// such DAG's JSON holds (the database narrows the rows by it, the DAG decides).
async fn running(
    c: &impl ConnectionTrait,
    hint: String,
    runs: impl Fn(&crate::workflow::NodeKind) -> bool,
) -> Result<Vec<i32>> {
    let rows = Entity::find()
        .filter(Column::Definition.contains(hint))
        .all(c)
        .await?;
    Ok(rows
        .into_iter()
        .filter(|w| {
            serde_json::from_str::<crate::workflow::Definition>(&w.definition)
                .is_ok_and(|d| d.nodes.iter().any(|n| runs(&n.kind)))
        })
        .map(|w| w.id)
        .collect())
}

/// The ids of workflows (of any group) whose current DAG runs job `job_id` (a job in use
/// cannot be deleted).
pub(crate) async fn using_job(c: &impl ConnectionTrait, job_id: i32) -> Result<Vec<i32>> {
    use crate::workflow::NodeKind;
    running(
        c,
        format!("\"jobId\":{job_id}"),
        |k| matches!(k, NodeKind::Job { job_id: j } if *j == job_id),
    )
    .await
}

/// The ids of workflows whose current DAG runs workflow `id` as a node (it cannot be deleted
/// while they do).
pub(crate) async fn nesting(c: &impl ConnectionTrait, id: i32) -> Result<Vec<i32>> {
    use crate::workflow::NodeKind;
    running(
        c,
        format!("\"workflowId\":{id}"),
        |k| matches!(k, NodeKind::Workflow { workflow_id } if *workflow_id == id),
    )
    .await
}
