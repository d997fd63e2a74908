//! `xxl_job_log`: pending fires (recorded by a scan, claimed at dispatch), trigger results and
//! handle results.
//!
//! A scheduled fire's life: [`insert_pending`] in the scan's transaction (`fire_state = 1`,
//! unique on job and nominal time) → [`claim`] by exactly one node at dispatch (a random token)
//! → [`record_trigger`] (`fire_state = 0`) → [`record_handle`] (first result wins). On a SQLite
//! file (one node) the scan journals its fires instead and each run's row is inserted once by
//! the run-row writer (`store::writer::journal`); a restart turns journalled fires into pending
//! rows.

use crate::fire::cap_msg;
pub use crate::fire::{Fire, PendingFire, TriggerRecord};
use entity::xxl_job_log::{ActiveModel, Column, Entity, Model};
use sea_orm::Condition;
use sea_orm::sea_query::{ArrayType, Expr, ExprTrait, OnConflict, Query};
use sea_orm::{
    ActiveModelTrait, ColumnTrait, ConnectionTrait, DatabaseConnection, EntityTrait, QueryFilter,
    QueryOrder, QuerySelect, Set, TransactionTrait,
};

use crate::clock::ms_to_naive;
use crate::error::{Error, Result};
use crate::model::TriggerType;
use crate::model::wire::{FAIL_CODE, SUCCESS_CODE};
use crate::model::{AlarmStatus, fire_state};
use crate::store::port::{IN_CHUNK, Port, in_list};

/// Records pending fires (duplicates of an existing (job, nominal time) are ignored) and
/// returns how many rows were written.
pub async fn insert_pending(c: &impl ConnectionTrait, fires: &[PendingFire]) -> Result<u64> {
    let mut n = 0;
    for chunk in fires.chunks(1000) {
        let mut q = Query::insert();
        q.into_table(Entity).columns([
            Column::JobGroup,
            Column::JobId,
            Column::TriggerTime,
            Column::TriggerCode,
            Column::HandleCode,
            Column::ExecutorFailRetryCount,
            Column::AlarmStatus,
            Column::FireTime,
            Column::FireState,
            Column::TriggerType,
        ]);
        for f in chunk {
            q.values_panic([
                f.job_group.into(),
                f.job_id.into(),
                ms_to_naive(f.fire_time).into(),
                0.into(),
                0.into(),
                0.into(),
                0i16.into(),
                f.fire_time.into(),
                1i64.into(),
                f.trigger_type.as_str().into(),
            ]);
        }
        // MySQL has no DO NOTHING: sea-query writes the `id = id` no-op update there
        q.on_conflict(
            OnConflict::columns([Column::JobId, Column::FireTime])
                .do_nothing_on([Column::Id])
                .to_owned(),
        );
        n += c.execute(&q).await?.rows_affected();
    }
    Ok(n)
}

/// Records pending fires and answers them with their log ids (a fire already recorded for its
/// job and nominal time is not recorded again): on PostgreSQL one statement per 1,000 fires
/// (`INSERT … SELECT FROM unnest(…) … ON CONFLICT DO NOTHING RETURNING`, a binary array per
/// column), answering
/// only the fires this call recorded; elsewhere the insert, then a read of the rows back,
/// answering every one of them still pending (the scan asks only for fires it just planned,
/// which no pass recorded before).
pub(crate) async fn record_pending(
    c: &impl ConnectionTrait,
    fires: &[PendingFire],
) -> Result<Vec<Fire>> {
    use sea_orm::{DbBackend, Statement};
    if fires.is_empty() {
        return Ok(Vec::new());
    }
    match c.get_database_backend() {
        DbBackend::Postgres => {
            let mut out = Vec::with_capacity(fires.len());
            for chunk in fires.chunks(1000) {
                // one binary array per column (no JSON for the server to parse)
                let array = |t: ArrayType, v: Vec<sea_orm::Value>| {
                    sea_orm::Value::Array(t, Some(Box::new(v)))
                };
                let column = |f: &dyn Fn(&PendingFire) -> sea_orm::Value| {
                    chunk.iter().map(f).collect::<Vec<_>>()
                };
                let args = [
                    array(ArrayType::Int, column(&|f| f.job_group.into())),
                    array(ArrayType::Int, column(&|f| f.job_id.into())),
                    array(
                        ArrayType::ChronoDateTime,
                        column(&|f| ms_to_naive(f.fire_time).into()),
                    ),
                    array(ArrayType::BigInt, column(&|f| f.fire_time.into())),
                    array(
                        ArrayType::String,
                        column(&|f| f.trigger_type.as_str().into()),
                    ),
                ];
                let sql = format!(
                    "INSERT INTO xxl_job_log (job_group, job_id, trigger_time, trigger_code, \
                     handle_code, executor_fail_retry_count, alarm_status, fire_time, fire_state, \
                     trigger_type) SELECT v.g, v.j, v.t, 0, 0, 0, 0, v.f, {}, v.ty \
                     FROM unnest($1::int[], $2::int[], $3::timestamp[], $4::bigint[], $5::text[]) \
                     AS v(g, j, t, f, ty) \
                     ON CONFLICT (job_id, fire_time) DO NOTHING \
                     RETURNING id, job_id, fire_time, trigger_type",
                    fire_state::PENDING
                );
                let stmt = Statement::from_sql_and_values(DbBackend::Postgres, sql, args);
                for r in c.query_all_raw(stmt).await? {
                    out.push(to_fire((
                        r.try_get("", "id")?,
                        r.try_get("", "job_id")?,
                        r.try_get("", "fire_time")?,
                        r.try_get("", "trigger_type")?,
                    )));
                }
            }
            Ok(out)
        }
        _ => {
            insert_pending(c, fires).await?;
            let mut ids: Vec<i32> = fires.iter().map(|f| f.job_id).collect();
            ids.sort_unstable();
            ids.dedup();
            let lo = fires.iter().map(|p| p.fire_time).min().unwrap_or(0);
            let hi = fires.iter().map(|p| p.fire_time).max().unwrap_or(0);
            let wanted: std::collections::HashSet<(i32, i64)> =
                fires.iter().map(|p| (p.job_id, p.fire_time)).collect();
            Ok(pending_for_jobs(c, &ids, lo, hi)
                .await?
                .into_iter()
                .filter(|f| wanted.contains(&(f.job_id, f.fire_time)))
                .collect())
        }
    }
}

fn to_fire(m: (i64, i32, Option<i64>, Option<String>)) -> Fire {
    Fire {
        log_id: m.0,
        job_id: m.1,
        fire_time: m.2.unwrap_or_default(),
        trigger_type: m
            .3
            .and_then(|t| t.parse().ok())
            .unwrap_or(TriggerType::Cron),
        job: None,
        read_ms: 0,
        epoch: 0,
    }
}

fn pending_columns() -> sea_orm::Select<Entity> {
    Entity::find().select_only().columns([
        Column::Id,
        Column::JobId,
        Column::FireTime,
        Column::TriggerType,
    ])
}

/// The predicate of the partial index `i_fire_state` (fires not yet dispatched), written out:
/// SQLite uses a partial index only for a query naming its predicate (`fire_state = 1` does not
/// prove `fire_state <> 0` to it).
fn in_fire_state_index() -> sea_orm::sea_query::SimpleExpr {
    Expr::cust(format!("fire_state <> {}", fire_state::DISPATCHED))
}

/// Dispatched runs only (`fire_state = 0`), written out: the predicate of the console's
/// indexes on PostgreSQL (`I_trigger_time`, `I_jobgroup`: migration 000021), which a
/// prepared statement's generic plan uses only when the query names it as a literal.
pub(crate) fn dispatched() -> sea_orm::sea_query::SimpleExpr {
    Expr::cust(format!("fire_state = {}", fire_state::DISPATCHED))
}

/// The predicate of the partial index `i_alarm_fire` (dispatched runs whose alarm state is
/// unchecked; on SQLite and MySQL the index holds more), written out as
/// [`in_fire_state_index`]'s so that a generic plan uses it too.
fn in_alarm_index() -> sea_orm::sea_query::SimpleExpr {
    Expr::cust(format!(
        "alarm_status = {} AND fire_state = {}",
        AlarmStatus::Unchecked.code(),
        fire_state::DISPATCHED
    ))
}

/// Pending fires, read through i_fire_state.
fn pending_select() -> sea_orm::Select<Entity> {
    pending_columns()
        .filter(Column::FireState.eq(fire_state::PENDING))
        .filter(in_fire_state_index())
}

/// By (job, fire time) through the unique index on both (`uk_job_fire`; on SQLite
/// `uk_fire_job`, walking the window's fires, which lie ahead of the dispatched ones):
/// `fire_state + 0` keeps SQLite from walking every pending fire of the window through
/// i_fire_state once per chunk.
fn pending_of_jobs(job_ids: &[i32], from: i64, to: i64) -> sea_orm::Select<Entity> {
    pending_columns()
        .filter(Expr::col(Column::FireState).add(0).eq(fire_state::PENDING))
        .filter(Column::JobId.is_in(job_ids.iter().copied()))
        .filter(Column::FireTime.between(from, to))
        .order_by_asc(Column::FireTime)
}

/// Pending fires of these jobs with nominal times in `[from, to]`, oldest first.
pub(crate) async fn pending_for_jobs(
    c: &impl ConnectionTrait,
    job_ids: &[i32],
    from: i64,
    to: i64,
) -> Result<Vec<Fire>> {
    let mut out = Vec::new();
    for chunk in job_ids.chunks(500) {
        let rows: Vec<(i64, i32, Option<i64>, Option<String>)> =
            pending_of_jobs(chunk, from, to).into_tuple().all(c).await?;
        out.extend(rows.into_iter().map(to_fire));
    }
    Ok(out)
}

/// Pending fires whose nominal time is at or before `before` (their node should have dispatched
/// them by now), oldest first, at most `limit`.
pub(crate) async fn stale_pending(
    c: &impl ConnectionTrait,
    before: i64,
    limit: u64,
) -> Result<Vec<Fire>> {
    let rows: Vec<(i64, i32, Option<i64>, Option<String>)> = pending_select()
        .filter(Column::FireTime.lte(before))
        .order_by_asc(Column::FireTime)
        .limit(limit)
        .into_tuple()
        .all(c)
        .await?;
    Ok(rows.into_iter().map(to_fire).collect())
}

/// Pending fires with nominal times in `(after, until]`, oldest first (adoption at start-up).
pub(crate) async fn pending_between(
    c: &impl ConnectionTrait,
    after: i64,
    until: i64,
) -> Result<Vec<Fire>> {
    let rows: Vec<(i64, i32, Option<i64>, Option<String>)> = pending_select()
        .filter(Column::FireTime.gt(after))
        .filter(Column::FireTime.lte(until))
        .order_by_asc(Column::FireTime)
        .into_tuple()
        .all(c)
        .await?;
    Ok(rows.into_iter().map(to_fire).collect())
}

/// The pending fires of jobs in `buckets` (the lease table's buckets), oldest
/// first: what a node taking the buckets over finds of their previous holder's fires.
pub(crate) async fn pending_in_buckets(
    c: &impl ConnectionTrait,
    buckets: &[i32],
) -> Result<Vec<Fire>> {
    if buckets.is_empty() {
        return Ok(Vec::new());
    }
    let rows: Vec<(i64, i32, Option<i64>, Option<String>)> = pending_select()
        .filter(bucket_filter(c.get_database_backend(), "job_id", buckets))
        .order_by_asc(Column::FireTime)
        .into_tuple()
        .all(c)
        .await?;
    Ok(rows.into_iter().map(to_fire).collect())
}

/// The rows of jobs in `buckets` (the bucket of the job id in `column`; numbers only:
/// written into the SQL).
pub(crate) fn bucket_filter(
    backend: sea_orm::DbBackend,
    column: &str,
    buckets: &[i32],
) -> sea_orm::sea_query::SimpleExpr {
    let list = buckets
        .iter()
        .map(i32::to_string)
        .collect::<Vec<_>>()
        .join(", ");
    Expr::cust(format!(
        "{} IN ({list})",
        crate::store::leases::bucket_sql(backend, column)
    ))
}

/// Marks pending fires in doubt: their previous holder may have sent them (they are at or
/// before its last dispatch mark), so no node sends them on a guess; they are settled by asking
/// their executors ([`super::in_doubt`]).
pub(crate) async fn hand_over(c: &impl ConnectionTrait, ids: &[i64]) -> Result<u64> {
    let mut n = 0;
    for chunk in ids.chunks(500) {
        n += Entity::update_many()
            .col_expr(Column::FireState, Expr::val(fire_state::IN_DOUBT))
            .filter(Column::Id.is_in(chunk.iter().copied()))
            .filter(Column::FireState.eq(fire_state::PENDING))
            .exec(c)
            .await?
            .rows_affected;
    }
    Ok(n)
}

/// Every pending fire, oldest first (tests and tools).
pub async fn all_pending(c: &impl ConnectionTrait) -> Result<Vec<Fire>> {
    let rows: Vec<(i64, i32, Option<i64>, Option<String>)> = pending_select()
        .order_by_asc(Column::FireTime)
        .into_tuple()
        .all(c)
        .await?;
    Ok(rows.into_iter().map(to_fire).collect())
}

/// Claims pending fires for dispatch: exactly one caller, on any node, gets each id. Returns
/// the ids this call claimed.
///
/// The claim writes a random 63-bit token into `fire_state`; when the batch update took fewer
/// rows than asked, the token tells which rows are ours. One statement when nobody competes.
pub async fn claim(c: &sea_orm::DatabaseConnection, ids: &[i64]) -> Result<Vec<i64>> {
    claim_in(&Port::db(c), ids).await
}

/// The claim of the rows whose ids fill `marks` (`?, ?, …`), the token first.
fn claim_sql(marks: &str) -> String {
    // `fire_state + 0`: a bare column makes SQLite walk every pending fire through
    // i_fire_state instead of looking up the listed ids
    format!(
        "UPDATE xxl_job_log SET fire_state = ? WHERE id IN ({marks}) AND fire_state + 0 = {}",
        fire_state::PENDING
    )
}

/// [`claim`] on the store's transaction port (the run-row writer's connection on a SQLite file).
pub(crate) async fn claim_in(port: &Port<'_>, ids: &[i64]) -> Result<Vec<i64>> {
    let token: i64 = fire_state::new_claim();
    let mut claimed = Vec::with_capacity(ids.len());
    for chunk in ids.chunks(IN_CHUNK) {
        let (marks, list) = in_list(chunk);
        let mut args = vec![token.into()];
        args.extend(list);
        let n = port.execute(&claim_sql(&marks), &args).await? as usize;
        if n == chunk.len() {
            claimed.extend_from_slice(chunk);
        } else if n > 0 {
            let sql =
                format!("SELECT id FROM xxl_job_log WHERE id IN ({marks}) AND fire_state = ?");
            args.rotate_left(1);
            claimed.extend(port.rows::<i64>(&sql, &args).await?);
        }
    }
    Ok(claimed)
}

/// Deletes pending fires that the misfire policy skipped (no run happens for them).
pub(crate) async fn delete_pending(c: &impl ConnectionTrait, ids: &[i64]) -> Result<u64> {
    let mut n = 0;
    for chunk in ids.chunks(500) {
        n += Entity::delete_many()
            .filter(Column::Id.is_in(chunk.iter().copied()))
            .filter(Column::FireState.eq(fire_state::PENDING))
            .exec(c)
            .await?
            .rows_affected;
    }
    Ok(n)
}

/// Inserts a log row for an unscheduled trigger (manual, retry, child, extra shard).
pub async fn insert_run(
    c: &impl ConnectionTrait,
    job_group: i32,
    job_id: i32,
    trigger_ms: i64,
    trigger_type: TriggerType,
    chain_depth: i16,
) -> Result<i64> {
    let am = ActiveModel {
        job_group: Set(job_group),
        job_id: Set(job_id),
        trigger_time: Set(Some(ms_to_naive(trigger_ms))),
        trigger_code: Set(0),
        handle_code: Set(0),
        executor_fail_retry_count: Set(0),
        alarm_status: Set(AlarmStatus::Unchecked.code()),
        fire_state: Set(fire_state::DISPATCHED),
        trigger_type: Set(Some(trigger_type.as_str().into())),
        chain_depth: Set(chain_depth),
        ..Default::default()
    };
    Ok(am.insert(c).await?.id)
}

/// Writes a trigger's outcome onto its log row (the rule of [`super::run_rows`]).
pub async fn record_trigger(db: &DatabaseConnection, r: TriggerRecord) -> Result<()> {
    record_triggers(db, std::slice::from_ref(&r)).await
}

/// Writes trigger outcomes onto their log rows in one transaction.
pub(crate) async fn record_triggers(
    db: &DatabaseConnection,
    records: &[TriggerRecord],
) -> Result<()> {
    let records: Vec<TriggerRecord> = records
        .iter()
        .cloned()
        .map(TriggerRecord::bounded)
        .collect();
    let refs: Vec<&TriggerRecord> = records.iter().collect();
    let txn = db.begin().await?;
    super::run_rows::write(&Port::tx(&txn), &refs, &[]).await?;
    txn.commit().await?;
    Ok(())
}

/// Records a run's result unless one was already recorded (first result wins): the message is
/// appended to any the row already has (after `<br>`), capped at 15,000 characters. Answers
/// whether this call wrote its result (not when the log is unknown or finished).
pub async fn record_handle(
    db: &DatabaseConnection,
    log_id: i64,
    code: i32,
    msg: Option<&str>,
    now_ms: i64,
) -> Result<bool> {
    let item = crate::fire::HandleResult {
        log_id,
        code,
        msg: msg.map(str::to_string),
    };
    Ok(record_handles(db, &[item], now_ms)
        .await?
        .pop()
        .flatten()
        .is_some())
}

/// Records results received at `now_ms` in one transaction, as [`record_handle`] does each
/// (of several items for one run, the first counts). Answers, per item, its run when this
/// call wrote its result.
pub(crate) async fn record_handles(
    db: &DatabaseConnection,
    items: &[crate::fire::HandleResult],
    now_ms: i64,
) -> Result<Vec<Option<super::run_rows::Written>>> {
    let mut seen = std::collections::HashSet::new();
    let bounded: Vec<crate::fire::HandleResult> = items
        .iter()
        .filter(|i| seen.insert(i.log_id))
        .cloned()
        .map(crate::fire::HandleResult::bounded)
        .collect();
    let results: Vec<(&crate::fire::HandleResult, i64)> =
        bounded.iter().map(|i| (i, now_ms)).collect();
    let txn = db.begin().await?;
    let written = super::run_rows::write(&Port::tx(&txn), &[], &results).await?;
    txn.commit().await?;
    let mut by_run: std::collections::HashMap<i64, super::run_rows::Written> =
        written.into_iter().map(|w| (w.id, w)).collect();
    Ok(items.iter().map(|i| by_run.remove(&i.log_id)).collect())
}

/// Records a kill the center made (XXL-JOB's logKill) as the run's failed result, with the
/// center's message: on a run without a result, and over a failure recorded at or after
/// `since_ms` (when the kill was sent): the executor's own report of this kill, which can
/// arrive before the kill's answer. Whatever order the two come in, a killed run reads the
/// center's message; a result recorded before the kill stays.
pub(crate) async fn record_kill(
    c: &impl ConnectionTrait,
    log_id: i64,
    msg: &str,
    now_ms: i64,
    since_ms: i64,
) -> Result<()> {
    let since = crate::clock::ms_to_naive(since_ms);
    Entity::update_many()
        .col_expr(Column::HandleCode, Expr::val(FAIL_CODE))
        .col_expr(
            Column::HandleTime,
            Expr::val(crate::clock::ms_to_naive(now_ms)),
        )
        .col_expr(Column::HandleMsg, Expr::val(cap_msg(msg.to_string())))
        .filter(Column::Id.eq(log_id))
        .filter(
            Condition::any().add(Column::HandleCode.eq(0)).add(
                Condition::all()
                    .add(Column::HandleCode.ne(SUCCESS_CODE))
                    .add(Column::HandleTime.gte(since)),
            ),
        )
        .exec(c)
        .await?;
    Ok(())
}

/// Appends text to a finished run's handle message (child-job lines), keeping the cap.
pub(crate) async fn append_handle_msg(
    c: &impl ConnectionTrait,
    log_id: i64,
    extra: &str,
) -> Result<()> {
    let row = get(c, log_id).await?;
    let text = cap_msg(format!("{}{extra}", row.handle_msg.unwrap_or_default()));
    Entity::update_many()
        .col_expr(Column::HandleMsg, Expr::val(text))
        .filter(Column::Id.eq(log_id))
        .exec(c)
        .await?;
    Ok(())
}

/// Appends text to a run's trigger message (the fail-retry marker); the row then holds the
/// rendered text.
pub(crate) async fn append_trigger_msg(
    c: &impl ConnectionTrait,
    log_id: i64,
    extra: &str,
) -> Result<()> {
    let row = get(c, log_id).await?;
    let text = format!("{}{extra}", row.trigger_msg.unwrap_or_default());
    Entity::update_many()
        .col_expr(Column::TriggerMsg, Expr::val(text))
        .filter(Column::Id.eq(log_id))
        .exec(c)
        .await?;
    Ok(())
}

/// Runs dispatched to one of `addresses` that have no result yet.
pub(crate) async fn running_on(c: &impl ConnectionTrait, addresses: &[String]) -> Result<Vec<i64>> {
    if addresses.is_empty() {
        return Ok(vec![]);
    }
    Ok(Entity::find()
        .select_only()
        .column(Column::Id)
        .filter(Column::TriggerCode.eq(SUCCESS_CODE))
        .filter(Column::HandleCode.eq(0))
        // through i_alarm_fire: a run in flight has alarm_status 0 and fire_state 0
        .filter(Column::AlarmStatus.eq(AlarmStatus::Unchecked.code()))
        .filter(in_alarm_index())
        .filter(Column::FireState.eq(fire_state::DISPATCHED))
        .filter(Column::ExecutorAddress.is_in(addresses.iter().cloned()))
        .into_tuple()
        .all(c)
        .await?)
}

/// Runs without a result on one of `addresses` dispatched at or before `before`.
pub(crate) async fn running_on_before(
    c: &impl ConnectionTrait,
    addresses: &[String],
    before: chrono::NaiveDateTime,
) -> Result<Vec<i64>> {
    Ok(Entity::find()
        .select_only()
        .column(Column::Id)
        .filter(Column::TriggerCode.eq(SUCCESS_CODE))
        .filter(Column::HandleCode.eq(0))
        // through i_alarm_fire, like `running_on`
        .filter(Column::AlarmStatus.eq(AlarmStatus::Unchecked.code()))
        .filter(in_alarm_index())
        .filter(Column::FireState.eq(fire_state::DISPATCHED))
        .filter(Column::ExecutorAddress.is_in(addresses.iter().cloned()))
        .filter(Column::TriggerTime.lte(before))
        .into_tuple()
        .all(c)
        .await?)
}

/// Runs without a result dispatched at or before `before`, with their address, at most 1000.
pub(crate) async fn running_since(
    c: &impl ConnectionTrait,
    before: chrono::NaiveDateTime,
) -> Result<Vec<(i64, Option<String>)>> {
    Ok(running_since_query(before).into_tuple().all(c).await?)
}

/// Through i_alarm_fire (runs in flight and unhandled failures), not every old row.
fn running_since_query(before: chrono::NaiveDateTime) -> sea_orm::Select<Entity> {
    Entity::find()
        .select_only()
        .columns([Column::Id, Column::ExecutorAddress])
        .filter(Column::AlarmStatus.eq(AlarmStatus::Unchecked.code()))
        .filter(in_alarm_index())
        .filter(Column::FireState.eq(fire_state::DISPATCHED))
        .filter(Column::TriggerCode.eq(SUCCESS_CODE))
        .filter(Column::HandleCode.eq(0))
        .filter(Column::TriggerTime.lte(before))
        .order_by_asc(Column::Id)
        .limit(1000)
}

/// Failed runs not yet handled by the fail monitor (protocol.md §7.9), oldest first, at most `limit`.
pub(crate) async fn failed_unalarmed(c: &impl ConnectionTrait, limit: u64) -> Result<Vec<Model>> {
    Ok(shown(failed_unalarmed_query(limit).all(c).await?))
}

/// A run row as read: its trigger summary rendered ([`crate::trigger_msg`]).
pub(crate) fn shown_row(mut row: Model) -> Model {
    crate::trigger_msg::render_in_place(&mut row.trigger_msg);
    row
}

/// Run rows as read ([`shown_row`]).
pub(crate) fn shown(rows: Vec<Model>) -> Vec<Model> {
    rows.into_iter().map(shown_row).collect()
}

/// Through i_alarm_fire: rows still at `alarm_status = 0` are runs in flight and unhandled
/// failures (a success is written with 1), so the read does not grow with the log table.
fn failed_unalarmed_query(limit: u64) -> sea_orm::Select<Entity> {
    use sea_orm::Condition;
    let ok_trigger = Condition::any()
        .add(Column::TriggerCode.eq(0))
        .add(Column::TriggerCode.eq(SUCCESS_CODE));
    let running = Condition::all()
        .add(ok_trigger)
        .add(Column::HandleCode.eq(0));
    let fine = Condition::any()
        .add(running)
        .add(Column::HandleCode.eq(SUCCESS_CODE));
    Entity::find()
        .filter(Column::AlarmStatus.eq(AlarmStatus::Unchecked.code()))
        .filter(in_alarm_index())
        .filter(Column::FireState.eq(fire_state::DISPATCHED))
        .filter(fine.not())
        .order_by_asc(Column::Id)
        .limit(limit)
}

/// Takes a failed run for the fail monitor (`alarm_status` 0 → −1); false if another took it.
pub(crate) async fn lock_alarm(c: &impl ConnectionTrait, log_id: i64) -> Result<bool> {
    Ok(Entity::update_many()
        .col_expr(Column::AlarmStatus, Expr::val(AlarmStatus::Locked.code()))
        .filter(Column::Id.eq(log_id))
        .filter(Column::AlarmStatus.eq(AlarmStatus::Unchecked.code()))
        .exec(c)
        .await?
        .rows_affected
        == 1)
}

/// Sets a run's alarm status (1 no alarm needed, 2 sent, 3 failed).
pub(crate) async fn set_alarm_status(
    c: &impl ConnectionTrait,
    log_id: i64,
    status: i16,
) -> Result<()> {
    Entity::update_many()
        .col_expr(Column::AlarmStatus, Expr::val(status))
        .filter(Column::Id.eq(log_id))
        .exec(c)
        .await?;
    Ok(())
}

/// One log row.
pub async fn get(c: &impl ConnectionTrait, id: i64) -> Result<Model> {
    Entity::find_by_id(id)
        .one(c)
        .await?
        .map(shown_row)
        .ok_or(Error::LogNotFound { log_id: id })
}

/// Every log row of a job, oldest nominal time first (tests and tools).
pub async fn for_job(c: &impl ConnectionTrait, job_id: i32) -> Result<Vec<Model>> {
    Ok(shown(
        Entity::find()
            .filter(super::log_by_job::of_job(c.get_database_backend(), job_id))
            .order_by_asc(Column::FireTime)
            .order_by_asc(Column::Id)
            .all(c)
            .await?,
    ))
}

/// All log rows, by id (tests and tools).
pub async fn all(c: &impl ConnectionTrait) -> Result<Vec<Model>> {
    Ok(shown(Entity::find().order_by_asc(Column::Id).all(c).await?))
}

/// The group of each run in `ids` that exists.
pub(crate) async fn groups_of(
    c: &impl ConnectionTrait,
    ids: &[i64],
) -> Result<std::collections::HashMap<i64, i32>> {
    use sea_orm::QuerySelect;
    let mut out = std::collections::HashMap::new();
    for chunk in ids.chunks(500) {
        let rows: Vec<(i64, i32)> = Entity::find()
            .select_only()
            .column(Column::Id)
            .column(Column::JobGroup)
            .filter(Column::Id.is_in(chunk.iter().copied()))
            .into_tuple()
            .all(c)
            .await?;
        out.extend(rows);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::tests::{memory_db, plan};
    use sea_orm::{ConnectionTrait, DbBackend, QueryTrait, Statement};

    /// The statements run every second (or for every fire) must not grow with the log table:
    /// each goes through the index meant for it, never a scan of every row, pending fire or
    /// finished run.
    #[tokio::test]
    async fn hot_log_statements_use_their_indexes() {
        let db = memory_db().await;
        let (marks, mut args) = in_list(&[1i64, 2, 3]);
        args.insert(0, 7i64.into());
        let claim_st = crate::store::port::statement(DbBackend::Sqlite, &claim_sql(&marks), &args);
        let claim = plan(&db, claim_st).await;
        assert!(claim.contains("INTEGER PRIMARY KEY"), "{claim}");
        let of_jobs = plan(&db, pending_of_jobs(&[1, 2], 0, 9).build(DbBackend::Sqlite)).await;
        assert!(
            of_jobs.contains("uk_fire_job (fire_time>? AND fire_time<?)"),
            "{of_jobs}"
        );
        let alarms = plan(&db, failed_unalarmed_query(10).build(DbBackend::Sqlite)).await;
        assert!(alarms.contains("i_alarm_fire"), "{alarms}");
        let running = plan(
            &db,
            running_since_query(ms_to_naive(5)).build(DbBackend::Sqlite),
        )
        .await;
        assert!(running.contains("i_alarm_fire"), "{running}");
        let stale = plan(
            &db,
            pending_select()
                .filter(Column::FireTime.lte(5))
                .build(DbBackend::Sqlite),
        )
        .await;
        assert!(stale.contains("i_fire_state"), "{stale}");
        for p in [&claim, &of_jobs, &alarms, &stale, &running] {
            assert!(!p.contains("SCAN xxl_job_log"), "{p}");
        }
        db.close().await.unwrap();
    }

    /// On PostgreSQL the looks for failures and for runs in flight read i_alarm_fire in id
    /// order, not the whole table through its primary key (which the planner preferred for
    /// their `ORDER BY id LIMIT` while the index was keyed by alarm state: every row of a
    /// table of successes filtered, on every look).
    #[tokio::test]
    async fn looks_for_failures_on_postgres_read_only_the_rows_they_want() {
        for db in crate::store::tests::every_backend().await {
            if db.get_database_backend() != DbBackend::Postgres {
                continue;
            }
            // 20,000 successes, 500 runs in flight, 5,000 fires pending, no failure
            let rows = |n: i64, job: &str, handle: i32, alarm: i16, state: i64| {
                format!(
                    "INSERT INTO xxl_job_log (job_group, job_id, trigger_time, trigger_code, \
                     handle_code, executor_fail_retry_count, alarm_status, fire_time, \
                     fire_state) SELECT 1, {job}, now(), 200, {handle}, 0, {alarm}, g, \
                     {state} FROM generate_series(1, {n}) g"
                )
            };
            for sql in [
                rows(20_000, "g", 200, 1, 0),
                rows(500, "-g", 0, 0, 0),
                rows(5_000, "g + 100000", 0, 0, 1),
            ] {
                db.execute_unprepared(&sql).await.unwrap();
            }
            db.execute_unprepared("ANALYZE xxl_job_log").await.unwrap();
            let explain = |q: sea_orm::Select<Entity>| {
                let st = q.build(DbBackend::Postgres);
                let explain = Statement::from_sql_and_values(
                    DbBackend::Postgres,
                    format!("EXPLAIN {}", st.sql),
                    st.values.unwrap(),
                );
                let db = db.clone();
                async move {
                    db.query_all_raw(explain)
                        .await
                        .unwrap()
                        .iter()
                        .map(|r| r.try_get::<String>("", "QUERY PLAN").unwrap())
                        .collect::<Vec<_>>()
                        .join("; ")
                }
            };
            let now = ms_to_naive(4_000_000_000_000);
            for plan in [
                explain(failed_unalarmed_query(100)).await,
                explain(running_since_query(now)).await,
            ] {
                assert!(plan.contains("i_alarm_fire"), "{plan}");
                assert!(!plan.contains("pkey"), "{plan}");
            }
            let in_flight = running_since(&db, now).await.unwrap();
            assert_eq!(in_flight.len(), 500);
            assert!(failed_unalarmed(&db, 100).await.unwrap().is_empty());
            db.close().await.unwrap();
        }
    }
}

#[cfg(test)]
mod record_tests {
    use super::*;

    /// Pending fires are recorded once per job and nominal time on every backend: a second
    /// record of the same fires answers none; the schedule update leaves a stopped job alone.
    #[tokio::test]
    async fn pending_fires_are_recorded_once_and_schedules_move_on() {
        for db in crate::store::tests::every_backend().await {
            let backend = db.get_database_backend();
            let now = ms_to_naive(1_000);
            let g = crate::store::groups::insert(&db, "app", "App", 1, None, now)
                .await
                .unwrap();
            let mut jobs = vec![];
            for i in 0..2 {
                let spec = crate::JobSpec::cron(g, &format!("j{i}"), "* * * * * ?", "h");
                let id =
                    crate::store::jobs::insert(&db, spec.validate(chrono_tz::UTC, now).unwrap())
                        .await
                        .unwrap();
                crate::store::jobs::set_running(&db, id, 5_000)
                    .await
                    .unwrap();
                jobs.push(id);
            }
            let fire = |job_id: i32, t: i64| PendingFire {
                job_id,
                job_group: g,
                fire_time: t,
                trigger_type: TriggerType::Cron,
            };
            let fires = vec![
                fire(jobs[0], 5_000),
                fire(jobs[0], 6_000),
                fire(jobs[1], 5_000),
            ];
            let got = record_pending(&db, &fires).await.unwrap();
            let mut keys: Vec<(i32, i64)> = got.iter().map(|f| (f.job_id, f.fire_time)).collect();
            keys.sort();
            assert_eq!(
                keys,
                vec![(jobs[0], 5_000), (jobs[0], 6_000), (jobs[1], 5_000)],
                "{backend:?}"
            );
            assert!(got.iter().all(|f| f.log_id > 0));
            for f in &got {
                let row = get(&db, f.log_id).await.unwrap();
                assert_eq!(
                    (
                        row.job_group,
                        row.trigger_time.map(crate::clock::naive_to_ms),
                        row.fire_time,
                        row.fire_state,
                        row.trigger_type.as_deref()
                    ),
                    (
                        g,
                        Some(f.fire_time),
                        Some(f.fire_time),
                        fire_state::PENDING,
                        Some("CRON")
                    ),
                    "{backend:?}"
                );
            }
            let again = record_pending(&db, &fires[..2]).await.unwrap();
            if backend == sea_orm::DbBackend::Postgres {
                assert!(again.is_empty(), "{backend:?}: already recorded");
            }
            assert_eq!(all_pending(&db).await.unwrap().len(), 3);
            crate::store::jobs::set_stopped(&db, jobs[1]).await.unwrap();
            let update = |id| crate::store::jobs::ScheduleUpdate {
                id,
                last: 6_000,
                next: 7_000,
                status: crate::model::TriggerStatus::Running.code(),
            };
            crate::store::jobs::update_schedules(
                &crate::store::port::Port::db(&db),
                &[update(jobs[0]), update(jobs[1])],
            )
            .await
            .unwrap();
            let j0 = crate::store::jobs::get(&db, jobs[0]).await.unwrap();
            let j1 = crate::store::jobs::get(&db, jobs[1]).await.unwrap();
            assert_eq!((j0.trigger_last_time, j0.trigger_next_time), (6_000, 7_000));
            assert_eq!(
                (j1.trigger_status, j1.trigger_next_time),
                (0, 0),
                "{backend:?}: a stopped job stays stopped"
            );
            db.close().await.unwrap();
        }
    }
}

#[cfg(test)]
mod result_tests {
    use crate::fire::{HandleResult, TriggerRecord};
    use crate::model::TriggerType;
    use crate::store::logs::{self, record_handles};
    use crate::store::tests::every_backend;
    use sea_orm::DatabaseConnection;

    fn result(log_id: i64, code: i32, msg: &str) -> HandleResult {
        HandleResult {
            log_id,
            code,
            msg: Some(msg.into()),
        }
    }

    /// Each check on SQLite, and on PostgreSQL and MySQL/MariaDB when their URLs are set.
    async fn on_every_backend<F, Fut>(check: F)
    where
        F: Fn(DatabaseConnection) -> Fut,
        Fut: std::future::Future<Output = ()>,
    {
        for db in every_backend().await {
            check(db).await;
        }
    }

    /// Results keep first-result-wins (a later item for the same run too) and append
    /// messages, on every backend.
    #[tokio::test]
    async fn batched_results_keep_first_wins_and_append_messages() {
        on_every_backend(first_wins_and_appended_messages).await;
    }

    async fn first_wins_and_appended_messages(db: DatabaseConnection) {
        let backend = db.get_database_backend();
        let mut ids = vec![];
        for _ in 0..3 {
            ids.push(
                logs::insert_run(&db, 1, 7, 1_000, TriggerType::Manual, 0)
                    .await
                    .unwrap(),
            );
        }
        // run 2 already finished; run 3 has a message from earlier
        logs::record_handle(&db, ids[1], 500, Some("killed"), 1_500)
            .await
            .unwrap();
        logs::append_handle_msg(&db, ids[2], "earlier")
            .await
            .unwrap();
        let items = vec![
            result(ids[0], 200, "ok"),
            result(ids[0], 500, "a late duplicate"),
            result(ids[1], 200, "too late"),
            result(ids[2], 200, "done"),
            result(999_999, 200, "unknown"),
        ];
        let out = record_handles(&db, &items, 2_000).await.unwrap();
        let wrote: Vec<bool> = out.iter().map(Option::is_some).collect();
        assert_eq!(wrote, vec![true, false, false, true, false], "{backend:?}");
        let rows = logs::all(&db).await.unwrap();
        assert_eq!(rows[0].handle_code, 200);
        assert_eq!(rows[0].handle_msg.as_deref(), Some("ok"));
        assert_eq!(rows[1].handle_code, 500, "first result wins");
        // a success needs no alarm; a failure stays for the fail monitor
        assert_eq!((rows[0].alarm_status, rows[1].alarm_status), (1, 0));

        assert_eq!(rows[2].handle_msg.as_deref(), Some("earlier<br>done"));
        // written again: nothing changes
        let again = record_handles(&db, &items, 3_000).await.unwrap();
        assert!(again.iter().all(Option::is_none));
        assert_eq!(
            rows[0].handle_time.map(|t| t.and_utc().timestamp()),
            Some(2),
            "{backend:?}"
        );
        db.close().await.unwrap();
    }

    /// A result never moves an alarm state back: a run whose trigger failed and was already
    /// alarmed keeps its state when a late failure (or success) result arrives.
    #[tokio::test]
    async fn results_never_reset_an_alarm_state() {
        on_every_backend(alarm_states_stay).await;
    }

    async fn alarm_states_stay(db: DatabaseConnection) {
        let mut ids = vec![];
        for _ in 0..2 {
            let id = logs::insert_run(&db, 1, 7, 1_000, TriggerType::Manual, 0)
                .await
                .unwrap();
            logs::set_alarm_status(&db, id, 2).await.unwrap();
            ids.push(id);
        }
        let out = record_handles(
            &db,
            &[
                result(ids[0], 500, "late failure"),
                result(ids[1], 200, "late"),
            ],
            2_000,
        )
        .await
        .unwrap();
        assert!(out.iter().all(Option::is_some), "the results are recorded");
        let rows = logs::all(&db).await.unwrap();
        assert_eq!((rows[0].alarm_status, rows[1].alarm_status), (2, 2));
        db.close().await.unwrap();
    }

    /// A kill's message is the center's whichever comes first, the executor's report of the
    /// kill or the center's mark; a result recorded before the kill was sent stays.
    #[tokio::test]
    async fn a_kill_reads_the_centers_message_in_either_order() {
        on_every_backend(kill_either_order).await;
    }

    async fn kill_either_order(db: DatabaseConnection) {
        let mut ids = vec![];
        for _ in 0..4 {
            ids.push(
                logs::insert_run(&db, 1, 7, 1_000, TriggerType::Manual, 0)
                    .await
                    .unwrap(),
            );
        }
        const MARK: &str = "Manual operation, kill job:";
        const REPORT: &str = "scheduling center kill job. [job running, killed]";
        // 0: the executor's report lands first (after the kill was sent at 2,000)
        record_handles(&db, &[result(ids[0], 500, REPORT)], 2_100)
            .await
            .unwrap();
        logs::record_kill(&db, ids[0], MARK, 2_200, 2_000)
            .await
            .unwrap();
        // 1: the mark lands first, the report after it
        logs::record_kill(&db, ids[1], MARK, 2_200, 2_000)
            .await
            .unwrap();
        let late = record_handles(&db, &[result(ids[1], 500, REPORT)], 2_300)
            .await
            .unwrap();
        assert!(
            late[0].is_none(),
            "the report after the mark changes nothing"
        );
        // 2: a failure and 3: a success recorded before the kill was sent stay
        record_handles(
            &db,
            &[
                result(ids[2], 500, "failed earlier"),
                result(ids[3], 200, "done"),
            ],
            1_500,
        )
        .await
        .unwrap();
        for id in [ids[2], ids[3]] {
            logs::record_kill(&db, id, MARK, 2_200, 2_000)
                .await
                .unwrap();
        }
        let rows = logs::all(&db).await.unwrap();
        let got: Vec<(i32, Option<&str>)> = rows
            .iter()
            .map(|r| (r.handle_code, r.handle_msg.as_deref()))
            .collect();
        assert_eq!(
            got,
            vec![
                (500, Some(MARK)),
                (500, Some(MARK)),
                (500, Some("failed earlier")),
                (200, Some("done")),
            ]
        );
        db.close().await.unwrap();
    }

    /// Batched trigger outcomes land each on its own row, on every backend.
    #[tokio::test]
    async fn batched_trigger_outcomes_land_on_their_own_rows() {
        on_every_backend(outcomes_on_their_rows).await;
    }

    async fn outcomes_on_their_rows(db: DatabaseConnection) {
        let a = logs::insert_run(&db, 1, 7, 1_000, TriggerType::Manual, 0)
            .await
            .unwrap();
        let b = logs::insert_run(&db, 1, 8, 1_000, TriggerType::Manual, 0)
            .await
            .unwrap();
        let rec = |log_id: i64, code: i32, addr: Option<&str>| TriggerRecord {
            log_id,
            trigger_ms: 2_000,
            executor_address: addr.map(str::to_string),
            trigger_code: code,
            trigger_msg: format!("msg {log_id}"),
            trigger_type: TriggerType::Cron,
            ..Default::default()
        };
        logs::record_triggers(&db, &[rec(a, 200, Some("http://x/")), rec(b, 500, None)])
            .await
            .unwrap();
        let rows = logs::all(&db).await.unwrap();
        assert_eq!(
            (rows[0].trigger_code, rows[0].executor_address.as_deref()),
            (200, Some("http://x/"))
        );
        assert_eq!(
            (rows[1].trigger_code, rows[1].executor_address.as_deref()),
            (500, None)
        );
        assert_eq!(
            rows[1].trigger_msg.as_deref(),
            Some(format!("msg {b}").as_str())
        );
        assert_eq!(rows[1].trigger_type.as_deref(), Some("CRON"));
        db.close().await.unwrap();
    }
}
