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
    /// A workflow node's row: the node's attempts left after this one (its message states
    /// them, as its first dispatch did).
    pub retries_left: Option<i32>,
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
    let workflow: Vec<i64> = rows
        .iter()
        .filter(|r| r.3.as_deref() == Some(TriggerType::Workflow.as_str()))
        .map(|r| r.0)
        .collect();
    let left = retries_left(c, &workflow).await?;
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
                retries_left: left.get(&id).copied(),
            },
        )
        .collect();
    Ok((token, doubts))
}

/// The attempts left of the workflow node runs whose rows are `log_ids`, by log id.
async fn retries_left(
    c: &impl ConnectionTrait,
    log_ids: &[i64],
) -> Result<std::collections::HashMap<i64, i32>> {
    use crate::store::port::{IN_CHUNK, in_list, statement};
    let mut left = std::collections::HashMap::with_capacity(log_ids.len());
    for chunk in log_ids.chunks(IN_CHUNK) {
        let (marks, args) = in_list(chunk);
        let sql = format!(
            "SELECT nl.log_id, nr.max_attempts, nr.attempt FROM xjob_workflow_node_log nl \
             JOIN xjob_workflow_node_run nr ON nr.id = nl.node_run_id WHERE nl.log_id IN ({marks})"
        );
        for r in c
            .query_all_raw(statement(c.get_database_backend(), &sql, &args))
            .await?
        {
            let (id, max, attempt): (i64, i32, i32) = (
                r.try_get_by_index(0)?,
                r.try_get_by_index(1)?,
                r.try_get_by_index(2)?,
            );
            left.insert(id, Ord::max(max - attempt, 0));
        }
    }
    Ok(left)
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

    /// A workflow node's row taken to settle carries the node's attempts left, which its
    /// re-sent message states (as its first dispatch did); a scheduled fire's carries none.
    #[tokio::test]
    async fn a_workflow_rows_doubt_carries_its_nodes_attempts_left() {
        let db = memory_db().await;
        let exec = |sql: &str| {
            let db = db.clone();
            let sql = sql.to_string();
            async move {
                db.execute_raw(sea_orm::Statement::from_string(DbBackend::Sqlite, sql))
                    .await
                    .unwrap();
            }
        };
        for (id, t) in [(1, "WORKFLOW"), (2, "CRON")] {
            exec(&format!(
                "INSERT INTO xxl_job_log (id, job_group, job_id, trigger_time, trigger_code, \
                 handle_code, executor_fail_retry_count, alarm_status, fire_time, fire_state, \
                 trigger_type, chain_depth) VALUES ({id}, 1, 1, '2026-12-02 10:00:00', 0, 0, \
                 0, 0, NULL, {}, '{t}', 0)",
                fire_state::IN_DOUBT
            ))
            .await;
        }
        exec(
            "INSERT INTO xjob_workflow_node_run (id, run_id, node_key, attempt, max_attempts, \
             state, shards_total, shards_done, shards_failed, start_time, cleared) \
             VALUES (7, 3, 'a', 2, 5, 'RUNNING', 1, 0, 0, 0, 0)",
        )
        .await;
        exec(
            "INSERT INTO xjob_workflow_node_log (log_id, node_run_id, run_id, shard, done) \
             VALUES (1, 7, 3, 0, 0)",
        )
        .await;
        let (_, doubts) = take(&db, 10).await.unwrap();
        let left: Vec<(i64, Option<i32>)> = doubts.iter().map(|d| (d.id, d.retries_left)).collect();
        assert_eq!(left, vec![(1, Some(3)), (2, None)]);
    }
}
