//! Fires *in doubt*: run rows that may have been sent to an executor without their outcome
//! being recorded — claimed by a node that stopped mid-dispatch, pending at or before a
//! dispatch mark when a bucket changed hands, or dispatched by a SQLite node less than a
//! second before it stopped. They are never recorded failed on a guess, nor sent again under a
//! new log id: the settle actor ([`crate::actors::settle`]) asks their group's executors about
//! the log id and decides. Every statement of that rule is here, once, for every backend.
//!
//! A row in doubt has `fire_state` [`fire_state::IN_DOUBT`] and no outcome (`trigger_code` 0).
//! A node settling rows first takes them ([`take`]: `fire_state` moves to a claim token of its
//! own, so two nodes never settle one row), then records what it found: received
//! ([`received`]), not received (the row is then dispatched again, claimed, with the same log
//! id), or that nobody could be asked in time ([`failed`]); rows it cannot settle yet go back
//! ([`release`]). A node that stops while settling leaves claimed rows, in doubt again once
//! their claim is old ([`mark_orphaned`]).

use entity::xxl_job_log::{Column, Entity};
use sea_orm::sea_query::Expr;
use sea_orm::{ColumnTrait, ConnectionTrait, EntityTrait, QueryFilter, QueryOrder, QuerySelect};

use crate::clock::{ms_to_naive, naive_to_ms};
use crate::error::Result;
use crate::model::wire::{FAIL_CODE, SUCCESS_CODE};
use crate::model::{TriggerType, fire_state};

/// A row in doubt, as settling needs it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Doubt {
    /// Its log id.
    pub id: i64,
    /// Its job.
    pub job_id: i32,
    /// The job's group (whose executors are asked).
    pub job_group: i32,
    /// Why it fired.
    pub trigger_type: TriggerType,
    /// Its nominal time (scheduled fires), epoch ms.
    pub fire_time: Option<i64>,
    /// When it was recorded (a scheduled fire's nominal time, a workflow row's creation): about
    /// when it was sent, so the day under which an executor files its log.
    pub recorded_ms: i64,
    /// The param it carries (a workflow row's rendered one; `None`: the job's).
    pub param: Option<String>,
    /// Its shard (`i/n`) when it is one of a broadcast.
    pub sharding: Option<String>,
    /// A result already came for it: it was received.
    pub has_result: bool,
}

/// Rows claimed for dispatch but without an outcome since before `before` (epoch ms): their
/// claimant stopped mid-dispatch (or is stalled past its claim), so they are in doubt. Answers
/// how many.
///
/// Looks before it writes: on a SQLite file the node's run-row writer holds the write lock most
/// of the time, and a write through the pool (even one changing nothing) would make it wait.
pub(crate) async fn mark_orphaned(c: &impl ConnectionTrait, before: i64) -> Result<u64> {
    let ids: Vec<i64> = orphaned(before)
        .select_only()
        .column(Column::Id)
        .limit(1000)
        .into_tuple()
        .all(c)
        .await?;
    if ids.is_empty() {
        return Ok(0);
    }
    Ok(Entity::update_many()
        .col_expr(Column::FireState, Expr::val(fire_state::IN_DOUBT))
        .filter(Column::Id.is_in(ids))
        .filter(Column::FireState.gt(fire_state::IN_DOUBT))
        .filter(Column::TriggerCode.eq(0))
        .exec(c)
        .await?
        .rows_affected)
}

/// The claims without an outcome recorded at or before `before`.
fn orphaned(before: i64) -> sea_orm::Select<Entity> {
    Entity::find()
        // claim tokens are above IN_DOUBT: a range on i_fire_state over the claimed rows only
        .filter(Column::FireState.gt(fire_state::IN_DOUBT))
        .filter(Expr::cust(format!(
            "fire_state <> {}",
            fire_state::DISPATCHED
        )))
        .filter(Column::TriggerCode.eq(0))
        // a scheduled fire's row holds its nominal time here, a workflow row its creation
        .filter(Column::TriggerTime.lte(ms_to_naive(before)))
}

/// Takes up to `limit` rows in doubt for this caller to settle: answers the claim token and
/// the rows it got (none that another node took).
pub(crate) async fn take(c: &impl ConnectionTrait, limit: u64) -> Result<(i64, Vec<Doubt>)> {
    let token = fire_state::new_claim();
    let ids: Vec<i64> = in_doubt(limit).into_tuple().all(c).await?;
    if ids.is_empty() {
        return Ok((token, Vec::new()));
    }
    Entity::update_many()
        .col_expr(Column::FireState, Expr::val(token))
        .filter(Column::Id.is_in(ids.iter().copied()))
        .filter(Column::FireState.eq(fire_state::IN_DOUBT))
        .filter(Column::TriggerCode.eq(0))
        .exec(c)
        .await?;
    type Row = (
        i64,
        i32,
        i32,
        Option<String>,
        Option<i64>,
        Option<chrono::NaiveDateTime>,
        Option<String>,
        Option<String>,
        i32,
    );
    let rows: Vec<Row> = Entity::find()
        .select_only()
        .columns([
            Column::Id,
            Column::JobId,
            Column::JobGroup,
            Column::TriggerType,
            Column::FireTime,
            Column::TriggerTime,
            Column::ExecutorParam,
            Column::ExecutorShardingParam,
            Column::HandleCode,
        ])
        .filter(Column::Id.is_in(ids.iter().copied()))
        .filter(Column::FireState.eq(token))
        .into_tuple()
        .all(c)
        .await?;
    let doubts = rows
        .into_iter()
        .map(
            |(id, job_id, job_group, t, fire_time, trigger_time, param, sharding, handle)| Doubt {
                id,
                job_id,
                job_group,
                trigger_type: t
                    .as_deref()
                    .and_then(|t| t.parse().ok())
                    .unwrap_or(TriggerType::Cron),
                fire_time,
                recorded_ms: trigger_time.map(naive_to_ms).or(fire_time).unwrap_or(0),
                param,
                sharding,
                has_result: handle != 0,
            },
        )
        .collect();
    Ok((token, doubts))
}

/// The ids of up to `limit` rows in doubt, oldest first, read through the index of fires not
/// yet dispatched (its predicate spelled out: SQLite uses a partial index only for a query
/// that states it).
fn in_doubt(limit: u64) -> sea_orm::Select<Entity> {
    Entity::find()
        .select_only()
        .column(Column::Id)
        .filter(Column::FireState.eq(fire_state::IN_DOUBT))
        .filter(Expr::cust(format!(
            "fire_state <> {}",
            fire_state::DISPATCHED
        )))
        .filter(Column::TriggerCode.eq(0))
        .order_by_asc(Column::Id)
        .limit(limit)
}

/// Gives rows taken under `token` back to be settled later.
pub(crate) async fn release(c: &impl ConnectionTrait, ids: &[i64], token: i64) -> Result<()> {
    for chunk in ids.chunks(500) {
        Entity::update_many()
            .col_expr(Column::FireState, Expr::val(fire_state::IN_DOUBT))
            .filter(Column::Id.is_in(chunk.iter().copied()))
            .filter(Column::FireState.eq(token))
            .exec(c)
            .await?;
    }
    Ok(())
}

/// Records row `id` (taken under `token`) as received by an executor: a dispatched run whose
/// result is awaited (and, like any run, found lost if it never comes).
pub(crate) async fn received(
    c: &impl ConnectionTrait,
    id: i64,
    token: i64,
    address: Option<&str>,
    at_ms: i64,
    msg: &str,
) -> Result<bool> {
    let mut u = Entity::update_many()
        .col_expr(Column::FireState, Expr::val(fire_state::DISPATCHED))
        .col_expr(Column::TriggerCode, Expr::val(SUCCESS_CODE))
        .col_expr(Column::TriggerTime, Expr::val(ms_to_naive(at_ms)))
        .col_expr(Column::TriggerMsg, Expr::val(msg));
    if let Some(a) = address {
        u = u.col_expr(Column::ExecutorAddress, Expr::val(a));
    }
    Ok(u.filter(Column::Id.eq(id))
        .filter(Column::FireState.eq(token))
        .exec(c)
        .await?
        .rows_affected
        > 0)
}

/// Records row `id` (taken under `token`) as a failed trigger: nobody could say whether it was
/// received within the bound; the job's retry policy (or the workflow node's attempts) acts.
pub(crate) async fn failed(
    c: &impl ConnectionTrait,
    id: i64,
    token: i64,
    at_ms: i64,
    msg: &str,
) -> Result<bool> {
    Ok(Entity::update_many()
        .col_expr(Column::FireState, Expr::val(fire_state::DISPATCHED))
        .col_expr(Column::TriggerCode, Expr::val(FAIL_CODE))
        .col_expr(Column::TriggerTime, Expr::val(ms_to_naive(at_ms)))
        .col_expr(Column::TriggerMsg, Expr::val(msg))
        .filter(Column::Id.eq(id))
        .filter(Column::FireState.eq(token))
        .exec(c)
        .await?
        .rows_affected
        > 0)
}

/// Drops row `id` (taken under `token`): a scheduled fire no executor received, now later than
/// the misfire threshold, whose job's policy skips misfires.
pub(crate) async fn drop_misfired(c: &impl ConnectionTrait, id: i64, token: i64) -> Result<bool> {
    Ok(Entity::delete_many()
        .filter(Column::Id.eq(id))
        .filter(Column::FireState.eq(token))
        .exec(c)
        .await?
        .rows_affected
        > 0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::tests::{memory_db, plan};
    use sea_orm::{DbBackend, QueryTrait};

    /// The looks for orphaned claims and rows in doubt run every round on every node: they go
    /// through the index of fires not yet dispatched, never a scan of the log table.
    #[tokio::test]
    async fn the_looks_use_their_index() {
        let db = memory_db().await;
        let p = plan(
            &db,
            orphaned(5)
                .select_only()
                .column(Column::Id)
                .build(DbBackend::Sqlite),
        )
        .await;
        assert!(p.contains("i_fire_state (fire_state>?)"), "{p}");
        let p = plan(&db, in_doubt(5).build(DbBackend::Sqlite)).await;
        assert!(p.contains("i_fire_state (fire_state=?)"), "{p}");
    }
}
