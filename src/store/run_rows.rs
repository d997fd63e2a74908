//! The final writes of run rows on a pooled database (PostgreSQL, MySQL/MariaDB), as the pooled
//! run-row writer makes them: per batch one statement per kind, with constant SQL (prepared
//! once by the driver) and the batch's rows as one JSON parameter expanded by the database
//! (`json_to_recordset` on PostgreSQL, `JSON_TABLE` on MySQL and MariaDB):
//!
//! - a run whose outcome and result are both in the batch: one update writing both (the
//!   result only if the run had none: first result wins; else the outcome alone);
//! - an outcome alone; a result alone (first result wins).
//!
//! The rule of a stored result is the same as on SQLite ([`super::writer`]): the message is
//! appended after `<br>` to one the row already has and capped at [`HANDLE_MSG_MAX`]
//! characters; a success moves `alarm_status` from unchecked to not needed and never moves an
//! alarm state the fail monitor already set. An in-memory SQLite database (tests) goes through
//! [`super::log_batches`] instead.

use std::collections::{HashMap, HashSet};

use sea_orm::{ConnectionTrait, DbBackend, Statement};
use serde_json::{Map, Value as Json};

use super::log_batches::{self, HANDLE_MSG_MAX, HandleResult, TriggerRecord};
use crate::error::Result;
use crate::model::wire::SUCCESS_CODE;
use crate::model::{AlarmStatus, fire_state};

/// A run whose result this batch wrote (first result wins), with what its child jobs need.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Written {
    /// Log id.
    pub id: i64,
    /// The run's job.
    pub job_id: i32,
    /// Parents above the run.
    pub chain_depth: i16,
    /// The result's code.
    pub code: i32,
}

/// `YYYY-MM-DD HH:MM:SS.fff` of epoch ms (UTC), as DATETIME / TIMESTAMP columns take it.
fn stamp(ms: i64) -> String {
    crate::clock::ms_to_naive(ms)
        .format("%Y-%m-%d %H:%M:%S%.3f")
        .to_string()
}

fn put(m: &mut Map<String, Json>, key: &str, v: Option<&str>) {
    if let Some(v) = v {
        m.insert(key.into(), Json::String(v.into()));
    }
}

/// An outcome's columns (keys `tt`…`ty`).
fn outcome_json(r: &TriggerRecord, m: &mut Map<String, Json>) {
    m.insert("id".into(), r.log_id.into());
    m.insert("tt".into(), stamp(r.trigger_ms).into());
    put(m, "ea", r.executor_address.as_deref());
    put(m, "eh", r.executor_handler.as_deref());
    put(m, "ep", r.executor_param.as_deref());
    put(m, "es", r.executor_sharding_param.as_deref());
    m.insert("rc".into(), r.executor_fail_retry_count.into());
    m.insert("tc".into(), r.trigger_code.into());
    m.insert("tm".into(), r.trigger_msg.clone().into());
    m.insert("ty".into(), r.trigger_type.as_str().into());
}

/// A result's columns (keys `hc`, `ht`, `hm`).
fn result_json(item: &HandleResult, at_ms: i64, m: &mut Map<String, Json>) {
    m.insert("id".into(), item.log_id.into());
    m.insert("hc".into(), item.code.into());
    m.insert("ht".into(), stamp(at_ms).into());
    put(m, "hm", item.msg.as_deref());
}

/// The columns of the JSON rows, by key: (name, PostgreSQL type, MySQL type).
const COLUMNS: [(&str, &str, &str); 13] = [
    ("id", "bigint", "BIGINT"),
    ("tt", "timestamp", "DATETIME(3)"),
    ("ea", "text", "VARCHAR(255)"),
    ("eh", "text", "VARCHAR(255)"),
    ("ep", "text", "LONGTEXT"),
    ("es", "text", "VARCHAR(20)"),
    ("rc", "int", "INT"),
    ("tc", "int", "INT"),
    ("tm", "text", "LONGTEXT"),
    ("ty", "text", "VARCHAR(16)"),
    ("hc", "int", "INT"),
    ("ht", "timestamp", "DATETIME(3)"),
    ("hm", "text", "LONGTEXT"),
];

/// The table of JSON rows `v` with `keys`, as a FROM item (PostgreSQL) or a JOIN source
/// (MySQL).
fn rows_source(backend: DbBackend, keys: &[&str]) -> String {
    let cols: Vec<&(&str, &str, &str)> = COLUMNS.iter().filter(|c| keys.contains(&c.0)).collect();
    match backend {
        DbBackend::Postgres => format!(
            "json_to_recordset($1::json) AS v({})",
            cols.iter()
                .map(|(k, pg, _)| format!("{k} {pg}"))
                .collect::<Vec<_>>()
                .join(", ")
        ),
        _ => format!(
            "JSON_TABLE(?, '$[*]' COLUMNS({})) AS v",
            cols.iter()
                .map(|(k, _, my)| format!("{k} {my} PATH '$.{k}'"))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}

/// `SET` assignments of the outcome columns.
fn outcome_set() -> String {
    format!(
        "trigger_time = v.tt, executor_address = v.ea, executor_handler = v.eh, \
         executor_param = v.ep, executor_sharding_param = v.es, executor_fail_retry_count = v.rc, \
         trigger_code = v.tc, trigger_msg = v.tm, trigger_type = v.ty, fire_state = {}",
        fire_state::DISPATCHED
    )
}

/// `SET` assignments of the result columns (see the module's rule).
fn result_set(backend: DbBackend) -> String {
    let appended = match backend {
        DbBackend::Postgres => format!("left(l.handle_msg || '<br>' || v.hm, {HANDLE_MSG_MAX})"),
        _ => format!("LEFT(CONCAT(l.handle_msg, '<br>', v.hm), {HANDLE_MSG_MAX})"),
    };
    format!(
        "handle_code = v.hc, handle_time = v.ht, \
         handle_msg = CASE WHEN v.hm IS NULL THEN l.handle_msg \
                           WHEN l.handle_msg IS NULL OR l.handle_msg = '' THEN v.hm \
                           ELSE {appended} END, \
         alarm_status = CASE WHEN l.alarm_status = {} AND v.hc = {SUCCESS_CODE} THEN {} \
                             ELSE l.alarm_status END",
        AlarmStatus::Unchecked.code(),
        AlarmStatus::NotNeeded.code()
    )
}

/// `UPDATE xxl_job_log … FROM/JOIN <rows> … SET <set> [AND <cond>]`, with `returning` on
/// PostgreSQL.
fn update_sql(backend: DbBackend, keys: &[&str], set: &str, cond: &str, returning: &str) -> String {
    let source = rows_source(backend, keys);
    match backend {
        DbBackend::Postgres => {
            let mut sql =
                format!("UPDATE xxl_job_log AS l SET {set} FROM {source} WHERE l.id = v.id");
            if !cond.is_empty() {
                sql.push_str(&format!(" AND {cond}"));
            }
            if !returning.is_empty() {
                sql.push_str(&format!(" RETURNING {returning}"));
            }
            sql
        }
        _ => {
            // (the assigned columns are the log table's only: `v`'s are short keys)
            let mut sql = format!("UPDATE xxl_job_log AS l JOIN {source} ON l.id = v.id SET {set}");
            if !cond.is_empty() {
                sql.push_str(&format!(" WHERE {cond}"));
            }
            sql
        }
    }
}

fn json_param(rows: Vec<Json>) -> sea_orm::Value {
    Json::Array(rows).to_string().into()
}

/// The runs among `ids` still without a result (MySQL, which has no `UPDATE … RETURNING`):
/// id → (job, chain depth), their rows locked until the transaction ends. One constant
/// statement per 1,000 ids (the ids a JSON parameter), prepared once per connection.
async fn unfinished(c: &impl ConnectionTrait, ids: &[i64]) -> Result<HashMap<i64, (i32, i16)>> {
    let mut out = HashMap::new();
    for chunk in ids.chunks(1000) {
        let rows = c
            .query_all_raw(Statement::from_sql_and_values(
                DbBackend::MySql,
                "SELECT l.id, l.job_id, l.chain_depth FROM JSON_TABLE(?, '$[*]' \
                 COLUMNS(id BIGINT PATH '$')) AS v JOIN xxl_job_log AS l ON l.id = v.id \
                 WHERE l.handle_code = 0 FOR UPDATE",
                [Json::from(chunk).to_string().into()],
            ))
            .await?;
        for r in rows {
            out.insert(
                r.try_get::<i64>("", "id")?,
                (r.try_get("", "job_id")?, r.try_get("", "chain_depth")?),
            );
        }
    }
    Ok(out)
}

/// Writes `outcomes` and `results` (at most one result per run): paired runs in one update,
/// the others alone. Answers the runs whose result this call wrote.
pub(crate) async fn write(
    c: &impl ConnectionTrait,
    outcomes: &[TriggerRecord],
    results: &[(HandleResult, i64)],
) -> Result<Vec<Written>> {
    let backend = c.get_database_backend();
    if backend == DbBackend::Sqlite {
        return write_sqlite(c, outcomes, results).await;
    }
    let by_run: HashMap<i64, (&HandleResult, i64)> =
        results.iter().map(|(i, at)| (i.log_id, (i, *at))).collect();
    let (paired, alone): (Vec<&TriggerRecord>, Vec<&TriggerRecord>) = outcomes
        .iter()
        .partition(|r| by_run.contains_key(&r.log_id));
    let mut written = Vec::new();
    let mut outcome_alone: Vec<&TriggerRecord> = alone;
    if !paired.is_empty() {
        // a run that already had a result (a kill) keeps it: its outcome goes alone
        let open: HashSet<i64> = match backend {
            DbBackend::Postgres => HashSet::new(),
            _ => unfinished(c, &paired.iter().map(|r| r.log_id).collect::<Vec<_>>())
                .await?
                .into_keys()
                .collect(),
        };
        let rows: Vec<Json> = paired
            .iter()
            .filter(|r| backend == DbBackend::Postgres || open.contains(&r.log_id))
            .map(|r| {
                let mut m = Map::new();
                outcome_json(r, &mut m);
                let (item, at) = by_run[&r.log_id];
                result_json(item, at, &mut m);
                Json::Object(m)
            })
            .collect();
        let keys: Vec<&str> = COLUMNS.iter().map(|c| c.0).collect();
        let set = format!("{}, {}", outcome_set(), result_set(backend));
        let sql = update_sql(backend, &keys, &set, "l.handle_code = 0", "l.id");
        let done: HashSet<i64> = if rows.is_empty() {
            HashSet::new()
        } else if backend == DbBackend::Postgres {
            c.query_all_raw(Statement::from_sql_and_values(
                backend,
                sql,
                [json_param(rows)],
            ))
            .await?
            .iter()
            .map(|r| r.try_get::<i64>("", "id"))
            .collect::<std::result::Result<_, _>>()?
        } else {
            c.execute_raw(Statement::from_sql_and_values(
                backend,
                sql,
                [json_param(rows)],
            ))
            .await?;
            open
        };
        for r in paired {
            if done.contains(&r.log_id) {
                let (item, _) = by_run[&r.log_id];
                written.push(Written {
                    id: r.log_id,
                    job_id: r.job_id,
                    chain_depth: r.chain_depth,
                    code: item.code,
                });
            } else {
                outcome_alone.push(r);
            }
        }
    }
    if !outcome_alone.is_empty() {
        let rows: Vec<Json> = outcome_alone
            .iter()
            .map(|r| {
                let mut m = Map::new();
                outcome_json(r, &mut m);
                Json::Object(m)
            })
            .collect();
        let keys = ["id", "tt", "ea", "eh", "ep", "es", "rc", "tc", "tm", "ty"];
        let sql = update_sql(backend, &keys, &outcome_set(), "", "");
        c.execute_raw(Statement::from_sql_and_values(
            backend,
            sql,
            [json_param(rows)],
        ))
        .await?;
    }
    let paired_ids: HashSet<i64> = outcomes.iter().map(|r| r.log_id).collect();
    let lone: Vec<&(HandleResult, i64)> = results
        .iter()
        .filter(|(i, _)| !paired_ids.contains(&i.log_id))
        .collect();
    if !lone.is_empty() {
        let keys = ["id", "hc", "ht", "hm"];
        let set = result_set(backend);
        let runs: HashMap<i64, (i32, i16)> = if backend == DbBackend::Postgres {
            let rows: Vec<Json> = lone
                .iter()
                .map(|(i, at)| {
                    let mut m = Map::new();
                    result_json(i, *at, &mut m);
                    Json::Object(m)
                })
                .collect();
            let sql = update_sql(
                backend,
                &keys,
                &set,
                "l.handle_code = 0",
                "l.id, l.job_id, l.chain_depth",
            );
            let mut out = HashMap::new();
            for r in c
                .query_all_raw(Statement::from_sql_and_values(
                    backend,
                    sql,
                    [json_param(rows)],
                ))
                .await?
            {
                out.insert(
                    r.try_get::<i64>("", "id")?,
                    (r.try_get("", "job_id")?, r.try_get("", "chain_depth")?),
                );
            }
            out
        } else {
            let open =
                unfinished(c, &lone.iter().map(|(i, _)| i.log_id).collect::<Vec<_>>()).await?;
            let rows: Vec<Json> = lone
                .iter()
                .filter(|(i, _)| open.contains_key(&i.log_id))
                .map(|(i, at)| {
                    let mut m = Map::new();
                    result_json(i, *at, &mut m);
                    Json::Object(m)
                })
                .collect();
            if !rows.is_empty() {
                let sql = update_sql(backend, &keys, &set, "l.handle_code = 0", "");
                c.execute_raw(Statement::from_sql_and_values(
                    backend,
                    sql,
                    [json_param(rows)],
                ))
                .await?;
            }
            open
        };
        for (i, _) in lone {
            if let Some(&(job_id, chain_depth)) = runs.get(&i.log_id) {
                written.push(Written {
                    id: i.log_id,
                    job_id,
                    chain_depth,
                    code: i.code,
                });
            }
        }
    }
    Ok(written)
}

/// In-memory SQLite (tests): outcomes, then results, through the batched statements of
/// [`log_batches`].
async fn write_sqlite(
    c: &impl ConnectionTrait,
    outcomes: &[TriggerRecord],
    results: &[(HandleResult, i64)],
) -> Result<Vec<Written>> {
    log_batches::record_triggers(c, outcomes).await?;
    let items: Vec<HandleResult> = results.iter().map(|(i, _)| i.clone()).collect();
    let at = results.iter().map(|(_, at)| *at).max().unwrap_or(0);
    let done = log_batches::record_handles(c, &items, at).await?;
    Ok(done
        .into_iter()
        .zip(&items)
        .filter_map(|(f, i)| {
            f.map(|f| Written {
                id: f.id,
                job_id: f.job_id,
                chain_depth: f.chain_depth,
                code: i.code,
            })
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::TriggerType;
    use crate::store::logs;

    fn record(log_id: i64, msg: &str) -> TriggerRecord {
        TriggerRecord {
            log_id,
            job_id: 7,
            chain_depth: 2,
            trigger_ms: 1_500,
            executor_address: Some("http://e:1/".into()),
            executor_param: Some("p".into()),
            trigger_code: 200,
            trigger_msg: msg.into(),
            trigger_type: TriggerType::Cron,
            ..Default::default()
        }
    }

    fn result(log_id: i64, code: i32, msg: Option<&str>) -> (HandleResult, i64) {
        (
            HandleResult {
                log_id,
                code,
                msg: msg.map(Into::into),
            },
            2_000,
        )
    }

    /// The pooled final writes keep the stored-result rules on every backend: a run with both
    /// gets both in one statement, first result wins (a killed run keeps its result but gets
    /// its outcome), messages append after `<br>`, a success needs no alarm and an alarm state
    /// already set stays; the runs whose result was written come back with their job and
    /// depth, a run nobody knows does not.
    #[tokio::test]
    async fn final_writes_keep_the_result_rules() {
        for db in crate::store::tests::every_backend().await {
            let backend = db.get_database_backend();
            let mut ids = vec![];
            for _ in 0..5 {
                ids.push(
                    logs::insert_run(&db, 1, 7, 1_000, TriggerType::Cron, 2)
                        .await
                        .unwrap(),
                );
            }
            // run 1 was killed (a result already), run 2 has a message, run 4 was alarmed
            logs::record_handle(&db, ids[1], 500, Some("killed"), 1_200)
                .await
                .unwrap();
            logs::append_handle_msg(&db, ids[2], "earlier")
                .await
                .unwrap();
            logs::set_alarm_status(&db, ids[4], 2).await.unwrap();
            let outcomes = vec![
                record(ids[0], "t0"),
                record(ids[1], "t1"),
                record(ids[3], "t3"),
            ];
            let results = vec![
                result(ids[0], 200, Some("ok")),
                result(ids[1], 200, Some("too late")),
                result(ids[2], 200, Some("done")),
                result(ids[4], 200, None),
                result(999_999, 200, Some("unknown")),
            ];
            let written = write(&db, &outcomes, &results).await.unwrap();
            let mut got: Vec<(i64, i32, i16)> = written
                .iter()
                .map(|w| (w.id, w.job_id, w.chain_depth))
                .collect();
            got.sort();
            assert_eq!(
                got,
                vec![(ids[0], 7, 2), (ids[2], 7, 2), (ids[4], 7, 2)],
                "{backend:?}"
            );
            let row = |k: usize| logs::get(&db, ids[k]);
            let r0 = row(0).await.unwrap();
            assert_eq!(
                (
                    r0.trigger_code,
                    r0.handle_code,
                    r0.handle_msg.as_deref(),
                    r0.alarm_status
                ),
                (200, 200, Some("ok"), 1),
                "{backend:?}"
            );
            assert_eq!(r0.fire_state, fire_state::DISPATCHED);
            assert_eq!(r0.trigger_msg.as_deref(), Some("t0"));
            let r1 = row(1).await.unwrap();
            assert_eq!(
                (r1.trigger_code, r1.handle_code, r1.handle_msg.as_deref()),
                (200, 500, Some("killed")),
                "{backend:?}: the kill's result stays, the outcome is written"
            );
            let r2 = row(2).await.unwrap();
            assert_eq!(
                r2.handle_msg.as_deref(),
                Some("earlier<br>done"),
                "{backend:?}"
            );
            let r3 = row(3).await.unwrap();
            assert_eq!((r3.trigger_code, r3.handle_code), (200, 0), "{backend:?}");
            let r4 = row(4).await.unwrap();
            assert_eq!((r4.handle_code, r4.alarm_status), (200, 2), "{backend:?}");
            // written again: nothing changes, nothing comes back
            let again = write(&db, &[], &results).await.unwrap();
            assert!(again.is_empty(), "{backend:?}");
            db.close().await.unwrap();
        }
    }
}
