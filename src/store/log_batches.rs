//! Batched writes of the hot path: many runs' trigger outcomes or results in one statement
//! that joins the log table with a table of per-row values, so a batch costs O(rows) on every
//! backend ([`values_update`]: `WITH v(…) AS (VALUES …) UPDATE … FROM v` on PostgreSQL and
//! SQLite, `UPDATE … JOIN (SELECT … UNION ALL …) v` on MySQL/MariaDB). Called by the run-row
//! writer's pool backend ([`super::writer`]), so a batch is whatever arrived while the previous
//! write ran.

use entity::xxl_job_info::{Column as J, Entity as Job};
use entity::xxl_job_log::{Column, Entity, Model};
use sea_orm::{
    ColumnTrait, ConnectionTrait, DbBackend, EntityTrait, QueryFilter, QuerySelect, Statement,
    Value,
};

use crate::clock::ms_to_naive;
use crate::error::Result;
use crate::fire::{HandleResult, TriggerRecord};

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

/// `UPDATE xxl_job_log SET <set> … WHERE xxl_job_log.id = v.v_id AND <and_where>`, where `v`
/// is a table of `rows` rows with the columns `cols` (named `v_<name>`, the first being the
/// log id) holding `values` row by row. `set` lists `(column, expression)`; expressions refer to
/// `v.v_<name>` and to the row as `xxl_job_log.<column>`. PostgreSQL gets each value cast to
/// its column's type (`cols`' second part), as `VALUES` alone gives it no types.
fn values_update(
    backend: DbBackend,
    cols: &[(&str, &str)],
    rows: usize,
    set: &[(&str, String)],
    and_where: &str,
    values: Vec<Value>,
) -> Statement {
    use std::fmt::Write as _;
    debug_assert_eq!(values.len(), cols.len() * rows);
    let mut n = 0;
    let mut param = |sql: &mut String, ty: &str| {
        n += 1;
        match backend {
            DbBackend::Postgres => {
                let _ = write!(sql, "CAST(${n} AS {ty})");
            }
            _ => sql.push('?'),
        }
    };
    let names: Vec<String> = cols.iter().map(|(c, _)| format!("v_{c}")).collect();
    let assignments = set
        .iter()
        .map(|(c, e)| format!("{c} = {e}"))
        .collect::<Vec<_>>()
        .join(", ");
    let mut sql = String::with_capacity(64 + rows * cols.len() * 16);
    match backend {
        DbBackend::MySql => {
            sql.push_str("UPDATE xxl_job_log JOIN (");
            for r in 0..rows {
                sql.push_str(if r == 0 {
                    "SELECT "
                } else {
                    " UNION ALL SELECT "
                });
                for (k, (_, ty)) in cols.iter().enumerate() {
                    if k > 0 {
                        sql.push_str(", ");
                    }
                    param(&mut sql, ty);
                    if r == 0 {
                        let _ = write!(sql, " AS {}", names[k]);
                    }
                }
            }
            let _ = write!(sql, ") v ON xxl_job_log.id = v.v_id SET {assignments}");
            if !and_where.is_empty() {
                let _ = write!(sql, " WHERE {and_where}");
            }
        }
        _ => {
            let _ = write!(sql, "WITH v({}) AS (VALUES ", names.join(", "));
            for r in 0..rows {
                sql.push_str(if r == 0 { "(" } else { ", (" });
                for (k, (_, ty)) in cols.iter().enumerate() {
                    if k > 0 {
                        sql.push_str(", ");
                    }
                    param(&mut sql, ty);
                }
                sql.push(')');
            }
            let _ = write!(
                sql,
                ") UPDATE xxl_job_log SET {assignments} FROM v WHERE xxl_job_log.id = v.v_id"
            );
            if !and_where.is_empty() {
                let _ = write!(sql, " AND {and_where}");
            }
        }
    }
    Statement::from_sql_and_values(backend, sql, values)
}

/// The columns of a trigger-outcome batch (name, PostgreSQL type).
const OUTCOME_COLS: &[(&str, &str)] = &[
    ("id", "BIGINT"),
    ("trigger_time", "TIMESTAMP"),
    ("executor_address", "TEXT"),
    ("executor_handler", "TEXT"),
    ("executor_param", "TEXT"),
    ("executor_sharding_param", "TEXT"),
    ("executor_fail_retry_count", "INTEGER"),
    ("trigger_code", "INTEGER"),
    ("trigger_msg", "TEXT"),
    ("trigger_type", "TEXT"),
];

/// Writes many trigger outcomes (as [`super::logs::record_trigger`] does for one).
pub(crate) async fn record_triggers(
    c: &impl ConnectionTrait,
    records: &[TriggerRecord],
) -> Result<()> {
    let backend = c.get_database_backend();
    let mut set: Vec<(&str, String)> = OUTCOME_COLS[1..]
        .iter()
        .map(|(name, _)| (*name, format!("v.v_{name}")))
        .collect();
    set.push((
        "fire_state",
        crate::model::fire_state::DISPATCHED.to_string(),
    ));
    for chunk in records.chunks(CHUNK) {
        let chunk = &*padded(chunk);
        let mut values: Vec<Value> = Vec::with_capacity(chunk.len() * OUTCOME_COLS.len());
        for r in chunk {
            values.extend([
                r.log_id.into(),
                ms_to_naive(r.trigger_ms).into(),
                r.executor_address.clone().into(),
                r.executor_handler.clone().into(),
                r.executor_param.clone().into(),
                r.executor_sharding_param.clone().into(),
                r.executor_fail_retry_count.into(),
                r.trigger_code.into(),
                r.trigger_msg.clone().into(),
                r.trigger_type.as_str().into(),
            ]);
        }
        let stmt = values_update(backend, OUTCOME_COLS, chunk.len(), &set, "", values);
        c.execute_raw(stmt).await?;
    }
    Ok(())
}

/// The columns of a result batch (name, PostgreSQL type).
const RESULT_COLS: &[(&str, &str)] = &[
    ("id", "BIGINT"),
    ("handle_code", "INTEGER"),
    ("handle_msg", "TEXT"),
    ("handle_time", "TIMESTAMP"),
];

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
pub(crate) async fn record_handles(
    c: &impl ConnectionTrait,
    items: &[HandleResult],
    now_ms: i64,
) -> Result<Vec<Option<Finished>>> {
    let mut out: Vec<Option<Finished>> = vec![None; items.len()];
    let handle_time = ms_to_naive(now_ms);
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
            let text = super::rules::merged_msg(row.handle_msg.as_deref(), item.msg.as_deref());
            writes.push((base + k, row, text));
        }
        if writes.is_empty() {
            continue;
        }
        let id = |w: &(usize, &Unfinished, Option<String>)| w.1.id;
        let shaped = padded(&writes);
        let mut values: Vec<Value> = Vec::with_capacity(shaped.len() * RESULT_COLS.len());
        for w in shaped.iter() {
            values.extend([
                w.1.id.into(),
                items[w.0].code.into(),
                w.2.clone().into(),
                handle_time.into(),
            ]);
        }
        // a success needs no alarm (XXL-JOB's 1): the fail monitor's index then holds only
        // runs in flight and unhandled failures. An alarm state the fail monitor already set
        // (locked, sent, failed) never moves back.
        let set = [
            ("handle_code", "v.v_handle_code".to_string()),
            ("handle_msg", "v.v_handle_msg".to_string()),
            (
                "alarm_status",
                super::rules::alarm_sql("xxl_job_log.alarm_status", "v.v_handle_code"),
            ),
            ("handle_time", "v.v_handle_time".to_string()),
        ];
        let stmt = values_update(
            c.get_database_backend(),
            RESULT_COLS,
            shaped.len(),
            &set,
            "xxl_job_log.handle_code = 0",
            values,
        );
        let affected = c.execute_raw(stmt).await?.rows_affected();
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
pub(crate) async fn child_lists(
    c: &impl ConnectionTrait,
    ids: &[i32],
) -> Result<Vec<Option<String>>> {
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

    /// Batched results keep first-result-wins and append messages, on every backend.
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
        // the batch is padded to 4 and 8 rows: the repeats change nothing
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
