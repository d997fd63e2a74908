//! Batched writes of the hot path: many runs' trigger outcomes or results in one statement
//! (a multi-row `UPDATE … SET col = CASE id WHEN … END`, portable across SQLite, PostgreSQL
//! and MySQL). Called by the run-row writer's pool backend ([`super::writer`]), so a batch is
//! whatever arrived while the previous write ran.

use entity::xxl_job_info::{Column as J, Entity as Job};
use entity::xxl_job_log::{Column, Entity, Model};
use sea_orm::sea_query::{CaseStatement, Expr, Query};
use sea_orm::{ColumnTrait, ConnectionTrait, EntityTrait, QueryFilter, QuerySelect};

use super::logs::{TriggerRecord, cap_msg};
use crate::clock::ms_to_naive;
use crate::error::Result;

/// Rows per statement (each row binds two parameters per column).
const CHUNK: usize = 256;

/// `rows` padded to the next power of two by repeating the last one (repeats change nothing:
/// the first matching CASE branch wins and `IN` ignores duplicates). A batch then has one of
/// only nine shapes, so its SQL text repeats and the driver's prepared-statement cache skips
/// parsing and planning, which otherwise costs more than the write for a large CASE.
fn padded<T: Clone>(rows: &[T]) -> std::borrow::Cow<'_, [T]> {
    let n = rows.len().next_power_of_two();
    match rows.last() {
        Some(last) if n > rows.len() => {
            let mut v = rows.to_vec();
            v.resize(n, last.clone());
            std::borrow::Cow::Owned(v)
        }
        _ => std::borrow::Cow::Borrowed(rows),
    }
}

fn case<T>(rows: &[T], id: impl Fn(&T) -> i64, v: impl Fn(&T) -> Expr) -> Expr {
    rows.iter()
        .fold(CaseStatement::new(), |cs, r| {
            cs.case(Column::Id.eq(id(r)), v(r))
        })
        .into()
}

/// Writes many trigger outcomes (as [`super::logs::record_trigger`] does for one).
pub async fn record_triggers(c: &impl ConnectionTrait, records: &[TriggerRecord]) -> Result<()> {
    for chunk in records.chunks(CHUNK) {
        let chunk = &*padded(chunk);
        let id = |r: &TriggerRecord| r.log_id;
        let stmt = Query::update()
            .table(Entity)
            .value(
                Column::TriggerTime,
                case(chunk, id, |r| Expr::val(ms_to_naive(r.trigger_ms))),
            )
            .value(
                Column::ExecutorAddress,
                case(chunk, id, |r| Expr::val(r.executor_address.clone())),
            )
            .value(
                Column::ExecutorHandler,
                case(chunk, id, |r| Expr::val(r.executor_handler.clone())),
            )
            .value(
                Column::ExecutorParam,
                case(chunk, id, |r| Expr::val(r.executor_param.clone())),
            )
            .value(
                Column::ExecutorShardingParam,
                case(chunk, id, |r| Expr::val(r.executor_sharding_param.clone())),
            )
            .value(
                Column::ExecutorFailRetryCount,
                case(chunk, id, |r| Expr::val(r.executor_fail_retry_count)),
            )
            .value(
                Column::TriggerCode,
                case(chunk, id, |r| Expr::val(r.trigger_code)),
            )
            .value(
                Column::TriggerMsg,
                case(chunk, id, |r| Expr::val(r.trigger_msg.clone())),
            )
            .value(
                Column::TriggerType,
                case(chunk, id, |r| Expr::val(r.trigger_type.as_str())),
            )
            .value(Column::FireState, Expr::val(0i64))
            .and_where(Column::Id.is_in(chunk.iter().map(id)))
            .to_owned();
        c.execute(&stmt).await?;
    }
    Ok(())
}

/// One run's result as an executor reported it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HandleResult {
    /// Log id.
    pub log_id: i64,
    /// 200 success, else failure.
    pub code: i32,
    /// The executor's message.
    pub msg: Option<String>,
}

/// A run whose result this node recorded: what the result path needs next (child jobs).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Finished {
    /// Log id.
    pub id: i64,
    /// The job.
    pub job_id: i32,
    /// Parents above this run.
    pub chain_depth: i16,
}

/// The columns a result write reads: not the whole row (its trigger message is the largest
/// part, and reading it for every result cost CPU and, under load, memory).
#[derive(Clone, Debug, sea_orm::FromQueryResult)]
struct Unfinished {
    id: i64,
    job_id: i32,
    chain_depth: i16,
    handle_msg: Option<String>,
}

/// Records many results, first result wins per run (as [`super::logs::record_handle`] does for
/// one): answers, per item, the run when this call wrote its result, `None` when the log is
/// unknown, already finished, or repeated within the batch.
pub async fn record_handles(
    c: &impl ConnectionTrait,
    items: &[HandleResult],
    now_ms: i64,
) -> Result<Vec<Option<Finished>>> {
    let mut out: Vec<Option<Finished>> = vec![None; items.len()];
    for (base, chunk) in items.chunks(CHUNK).enumerate().map(|(i, c)| (i * CHUNK, c)) {
        let ids: Vec<i64> = padded(chunk).iter().map(|i| i.log_id).collect();
        let rows: std::collections::HashMap<i64, Unfinished> = Entity::find()
            .select_only()
            .columns([
                Column::Id,
                Column::JobId,
                Column::ChainDepth,
                Column::HandleMsg,
            ])
            .filter(Column::Id.is_in(ids.iter().copied()))
            .filter(Column::HandleCode.eq(0))
            .into_model::<Unfinished>()
            .all(c)
            .await?
            .into_iter()
            .map(|r| (r.id, r))
            .collect();
        let finished = |r: &Unfinished| Finished {
            id: r.id,
            job_id: r.job_id,
            chain_depth: r.chain_depth,
        };
        // (position in `items`, row, new message); a log id repeated in the batch: first wins
        let mut seen = std::collections::HashSet::new();
        let mut writes: Vec<(usize, &Unfinished, Option<String>)> = Vec::new();
        for (k, item) in chunk.iter().enumerate() {
            let Some(row) = rows.get(&item.log_id) else {
                continue;
            };
            if !seen.insert(item.log_id) {
                continue;
            }
            let text = match (
                row.handle_msg.as_deref().filter(|m| !m.is_empty()),
                item.msg.as_deref(),
            ) {
                (Some(old), Some(new)) => Some(format!("{old}<br>{new}")),
                (Some(old), None) => Some(old.to_string()),
                (None, new) => new.map(str::to_string),
            };
            writes.push((base + k, row, text.map(cap_msg)));
        }
        if writes.is_empty() {
            continue;
        }
        let id = |w: &(usize, &Unfinished, Option<String>)| w.1.id;
        let shaped = padded(&writes);
        let stmt = Query::update()
            .table(Entity)
            .value(
                Column::HandleCode,
                case(&shaped, id, |w| Expr::val(items[w.0].code)),
            )
            .value(
                Column::HandleMsg,
                case(&shaped, id, |w| Expr::val(w.2.clone())),
            )
            // a success needs no alarm (XXL-JOB's 1): the fail monitor's index then holds only
            // runs in flight and unhandled failures. An alarm state the fail monitor already
            // set (locked, sent, failed) never moves back.
            .value(
                Column::AlarmStatus,
                case(&shaped, id, |w| {
                    if items[w.0].code == crate::model::wire::SUCCESS_CODE {
                        Expr::case(Column::AlarmStatus.eq(0), 1)
                            .finally(Expr::col(Column::AlarmStatus))
                            .into()
                    } else {
                        Expr::col(Column::AlarmStatus)
                    }
                }),
            )
            .value(Column::HandleTime, Expr::val(ms_to_naive(now_ms)))
            .and_where(Column::Id.is_in(shaped.iter().map(id)))
            .and_where(Column::HandleCode.eq(0))
            .to_owned();
        let affected = c.execute(&stmt).await?.rows_affected();
        if affected as usize == writes.len() {
            for (k, row, _) in writes {
                out[k] = Some(finished(row));
            }
            continue;
        }
        // another writer finished some of these runs between the read and the write: the rows
        // now holding exactly what this call wrote are this call's
        let after: std::collections::HashMap<i64, Model> = Entity::find()
            .filter(Column::Id.is_in(writes.iter().map(id)))
            .all(c)
            .await?
            .into_iter()
            .map(|r| (r.id, r))
            .collect();
        // (seconds: MySQL's DATETIME keeps no milliseconds)
        let secs = |t: Option<chrono::NaiveDateTime>| t.map(|t| t.and_utc().timestamp());
        let when = secs(Some(ms_to_naive(now_ms)));
        for (k, row, text) in writes {
            if let Some(a) = after.get(&row.id)
                && a.handle_code == items[k].code
                && a.handle_msg == text
                && secs(a.handle_time) == when
            {
                out[k] = Some(finished(row));
            }
        }
    }
    Ok(out)
}

/// The child job list (`child_jobid`) of each job id (None when the job is gone).
pub async fn child_lists(c: &impl ConnectionTrait, ids: &[i32]) -> Result<Vec<Option<String>>> {
    let mut found = std::collections::HashMap::new();
    for chunk in ids.chunks(CHUNK) {
        let chunk = &*padded(chunk);
        let rows: Vec<(i32, Option<String>)> = Job::find()
            .select_only()
            .columns([J::Id, J::ChildJobid])
            .filter(J::Id.is_in(chunk.iter().copied()))
            .into_tuple()
            .all(c)
            .await?;
        found.extend(rows);
    }
    Ok(ids
        .iter()
        .map(|id| found.get(id).map(|c| c.clone().unwrap_or_default()))
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::TriggerType;
    use crate::store::logs;
    use crate::store::tests::memory_db as db;

    fn result(log_id: i64, code: i32, msg: &str) -> HandleResult {
        HandleResult {
            log_id,
            code,
            msg: Some(msg.into()),
        }
    }

    #[tokio::test]
    async fn batched_results_keep_first_wins_and_append_messages() {
        let db = db().await;
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
        assert_eq!(wrote, vec![true, false, false, true, false]);
        let rows = logs::all(&db).await.unwrap();
        assert_eq!(rows[0].handle_code, 200);
        assert_eq!(rows[0].handle_msg.as_deref(), Some("ok"));
        assert_eq!(rows[1].handle_code, 500, "first result wins");
        // a success needs no alarm; a failure stays for the fail monitor
        assert_eq!((rows[0].alarm_status, rows[1].alarm_status), (1, 0));

        assert_eq!(rows[2].handle_msg.as_deref(), Some("earlier<br>done"));
        // the batch is padded to 4 and 8 rows: the repeats change nothing
        let again = record_handles(&db, &items, 3_000).await.unwrap();
        assert!(again.iter().all(Option::is_none));
        db.close().await.unwrap();
    }

    /// A result never moves an alarm state back: a run whose trigger failed and was already
    /// alarmed keeps its state when a late failure (or success) result arrives.
    #[tokio::test]
    async fn results_never_reset_an_alarm_state() {
        let db = db().await;
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

    #[tokio::test]
    async fn batched_trigger_outcomes_land_on_their_own_rows() {
        let db = db().await;
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
        record_triggers(&db, &[rec(a, 200, Some("http://x/")), rec(b, 500, None)])
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
