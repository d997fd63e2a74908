//! `xxl_job_log_report` and log retention (protocol.md §7.11).

use chrono::NaiveDateTime;
use entity::xxl_job_log::{Column as L, Entity as Log};
use entity::xxl_job_log_report::{ActiveModel, Column, Entity, Model};
use sea_orm::sea_query::{Expr, Func};
use sea_orm::{
    ColumnTrait, Condition, ConnectionTrait, EntityTrait, QueryFilter, QueryOrder, QuerySelect, Set,
};

use crate::error::Result;

/// One day's counts.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct DayCounts {
    /// Runs without a result yet.
    pub running: i32,
    /// Runs that succeeded.
    pub suc: i32,
    /// The rest.
    pub fail: i32,
}

/// Counts runs triggered in `[from, to)`, in one pass over the day's rows (three counts in
/// one statement: the day can hold millions of rows, and this runs every minute).
pub(crate) async fn count_between(
    c: &impl ConnectionTrait,
    from: NaiveDateTime,
    to: NaiveDateTime,
) -> Result<DayCounts> {
    let row: Option<(i64, i64, i64)> = count_between_query(from, to).into_tuple().one(c).await?;
    let (total, running, suc) = row.unwrap_or_default();
    let n = |v: i64| i32::try_from(v).unwrap_or(i32::MAX);
    Ok(DayCounts {
        running: n(running),
        suc: n(suc),
        fail: n(total - running - suc),
    })
}

/// The statement of [`count_between`]: through `I_trigger_time`, dispatched runs only.
pub(crate) fn count_between_query(from: NaiveDateTime, to: NaiveDateTime) -> sea_orm::Select<Log> {
    let running = Condition::all()
        .add(
            Condition::any()
                .add(L::TriggerCode.eq(0))
                .add(L::TriggerCode.eq(200)),
        )
        .add(L::HandleCode.eq(0));
    // COUNT of a CASE without ELSE counts the rows matching (BIGINT on every backend)
    let count_if = |cond: Condition| Expr::from(Func::count(Expr::case(cond, 1)));
    Log::find()
        .select_only()
        .column_as(Expr::from(Func::count(Expr::col(L::Id))), "total")
        .column_as(count_if(running), "running")
        .column_as(count_if(Condition::all().add(L::HandleCode.eq(200))), "suc")
        .filter(L::TriggerTime.gte(from))
        .filter(L::TriggerTime.lt(to))
        .filter(crate::store::logs::dispatched())
}

/// Writes a day's counts (update, insert when the day has no row). Nodes of a cluster count
/// the same days: two may find a day without its row at once, and the second's insert then
/// updates the row the first inserted (`i_trigger_day` is unique) instead of failing.
pub(crate) async fn upsert_day(
    c: &impl ConnectionTrait,
    day: NaiveDateTime,
    n: DayCounts,
    now: NaiveDateTime,
) -> Result<()> {
    let res = Entity::update_many()
        .col_expr(Column::RunningCount, Expr::val(n.running))
        .col_expr(Column::SucCount, Expr::val(n.suc))
        .col_expr(Column::FailCount, Expr::val(n.fail))
        .col_expr(Column::UpdateTime, Expr::val(now))
        .filter(Column::TriggerDay.eq(day))
        .exec(c)
        .await?;
    if res.rows_affected == 0 {
        insert_day(c, day, n, now).await?;
    }
    Ok(())
}

/// Inserts a day's counts, or updates them where the day has its row already.
async fn insert_day(
    c: &impl ConnectionTrait,
    day: NaiveDateTime,
    n: DayCounts,
    now: NaiveDateTime,
) -> Result<()> {
    use sea_orm::sea_query::OnConflict;
    let row = ActiveModel {
        trigger_day: Set(Some(day)),
        running_count: Set(n.running),
        suc_count: Set(n.suc),
        fail_count: Set(n.fail),
        update_time: Set(Some(now)),
        ..Default::default()
    };
    let counts = [
        Column::RunningCount,
        Column::SucCount,
        Column::FailCount,
        Column::UpdateTime,
    ];
    Entity::insert(row)
        .on_conflict(
            OnConflict::column(Column::TriggerDay)
                .update_columns(counts)
                .to_owned(),
        )
        .exec_without_returning(c)
        .await?;
    Ok(())
}

/// Every report row (one per day), by day.
pub async fn all(c: &impl ConnectionTrait) -> Result<Vec<Model>> {
    Ok(Entity::find()
        .order_by_asc(Column::TriggerDay)
        .all(c)
        .await?)
}

/// Report rows in `[from, to]`, by day.
pub async fn between(
    c: &impl ConnectionTrait,
    from: NaiveDateTime,
    to: NaiveDateTime,
) -> Result<Vec<Model>> {
    Ok(Entity::find()
        .filter(Column::TriggerDay.between(from, to))
        .order_by_asc(Column::TriggerDay)
        .all(c)
        .await?)
}

/// Deletes runs triggered at or before `before`, 1000 ids at a time; returns how many.
pub(crate) async fn delete_logs_before(
    c: &impl ConnectionTrait,
    before: NaiveDateTime,
) -> Result<u64> {
    let mut total = 0;
    loop {
        let ids: Vec<i64> = Log::find()
            .select_only()
            .column(L::Id)
            .filter(L::TriggerTime.lte(before))
            .filter(crate::store::logs::dispatched())
            .limit(1000)
            .into_tuple()
            .all(c)
            .await?;
        if ids.is_empty() {
            return Ok(total);
        }
        total += Log::delete_many()
            .filter(L::Id.is_in(ids))
            .exec(c)
            .await?
            .rows_affected;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A day's row inserted by another node between this node's update (which found none) and
    /// its insert: the insert updates that row instead of failing, on every backend.
    #[tokio::test]
    async fn a_day_inserted_twice_keeps_one_row_with_the_last_counts() {
        for db in crate::store::tests::every_backend().await {
            let b = db.get_database_backend();
            let day = crate::clock::ms_to_naive(1_800_000_000_000)
                .date()
                .and_hms_opt(0, 0, 0);
            let (day, now) = (day.unwrap(), crate::clock::ms_to_naive(1_800_000_000_000));
            let counts = |k: i32| DayCounts {
                running: k,
                suc: 10 * k,
                fail: 100 * k,
            };
            insert_day(&db, day, counts(1), now).await.unwrap();
            insert_day(&db, day, counts(2), now).await.unwrap();
            upsert_day(&db, day, counts(3), now).await.unwrap();
            let rows = all(&db).await.unwrap();
            assert_eq!(rows.len(), 1, "{b:?}");
            let r = &rows[0];
            assert_eq!(
                (r.running_count, r.suc_count, r.fail_count),
                (3, 30, 300),
                "{b:?}"
            );
            insert_day(&db, day, counts(4), now).await.unwrap();
            let r = &all(&db).await.unwrap()[0];
            assert_eq!((r.running_count, r.suc_count), (4, 40), "{b:?}");
            db.close().await.unwrap();
        }
    }
}
