//! The final writes of run rows on a pooled database (PostgreSQL, MySQL/MariaDB), as the pooled
//! run-row writer makes them, per batch one statement per kind:
//!
//! - a run whose outcome and result are both in the batch: one update writing both (the
//!   result only if the run had none: first result wins; else the outcome alone);
//! - an outcome alone; a result alone (first result wins).
//!
//! On PostgreSQL each is an `UPDATE … FROM json_to_recordset($1)` with constant SQL (prepared
//! once by the driver) and the batch's rows as one JSON parameter, `RETURNING` the runs it
//! wrote. On MySQL/MariaDB the batch's rows are read and locked first (one constant statement,
//! the ids as JSON), then written by `INSERT … ON DUPLICATE KEY UPDATE` with the rows as
//! parameters (every id exists, so nothing is inserted): measured on MariaDB, a multi-table
//! `UPDATE … JOIN JSON_TABLE(…)` materialises the JSON rows in an on-disk temporary table
//! (its text columns) on every statement.
//!
//! The outcome's and the result's assignments are [`super::rules`]' (the same on every
//! backend). An in-memory SQLite database (tests) goes through
//! [`super::log_batches`] instead.

use std::collections::{HashMap, HashSet};

use sea_orm::{ConnectionTrait, DbBackend, Statement};
use serde_json::{Map, Value as Json};

use super::log_batches;
use super::rules::{self, ResultSql};
use crate::error::Result;
use crate::fire::{HandleResult, TriggerRecord};

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

/// The columns of the JSON rows, by key: (name, PostgreSQL type).
const COLUMNS: [(&str, &str); 13] = [
    ("id", "bigint"),
    ("tt", "timestamp"),
    ("ea", "text"),
    ("eh", "text"),
    ("ep", "text"),
    ("es", "text"),
    ("rc", "int"),
    ("tc", "int"),
    ("tm", "text"),
    ("ty", "text"),
    ("hc", "int"),
    ("ht", "timestamp"),
    ("hm", "text"),
];

/// The table of JSON rows `v` with `keys`, as a FROM item.
fn rows_source(keys: &[&str]) -> String {
    format!(
        "json_to_recordset($1::json) AS v({})",
        COLUMNS
            .iter()
            .filter(|c| keys.contains(&c.0))
            .map(|(k, pg)| format!("{k} {pg}"))
            .collect::<Vec<_>>()
            .join(", ")
    )
}

/// `SET` assignments of the outcome columns (`store::rules`), from the JSON rows' keys.
fn outcome_set() -> String {
    const KEYS: [&str; 9] = ["tt", "ea", "eh", "ep", "es", "rc", "tc", "tm", "ty"];
    rules::outcome_assignments(|_, i| format!("v.{}", KEYS[i]))
}

/// `SET` assignments of the result columns (`store::rules`).
fn result_set() -> String {
    rules::result_assignments(
        DbBackend::Postgres,
        &ResultSql {
            row: "l.",
            code: "v.hc",
            time: "v.ht",
            msg: "v.hm",
        },
    )
}

/// `UPDATE xxl_job_log … FROM <rows> … SET <set> [AND <cond>] [RETURNING …]`.
fn update_sql(keys: &[&str], set: &str, cond: &str, returning: &str) -> String {
    let mut sql = format!(
        "UPDATE xxl_job_log AS l SET {set} FROM {} WHERE l.id = v.id",
        rows_source(keys)
    );
    if !cond.is_empty() {
        sql.push_str(&format!(" AND {cond}"));
    }
    if !returning.is_empty() {
        sql.push_str(&format!(" RETURNING {returning}"));
    }
    sql
}

fn json_param(rows: Vec<Json>) -> sea_orm::Value {
    Json::Array(rows).to_string().into()
}

/// A run's row as the MySQL path reads it before writing: its group, job, chain depth and
/// whether it has a result.
#[derive(Clone, Copy)]
struct Existing {
    group: i32,
    job_id: i32,
    chain_depth: i16,
    finished: bool,
}

/// The rows among `ids` (MySQL/MariaDB), locked until the transaction ends. One constant
/// statement per 1,000 ids (the ids a JSON parameter), prepared once per connection.
async fn existing(c: &impl ConnectionTrait, ids: &[i64]) -> Result<HashMap<i64, Existing>> {
    let mut out = HashMap::new();
    for chunk in ids.chunks(1000) {
        let rows = c
            .query_all_raw(Statement::from_sql_and_values(
                DbBackend::MySql,
                "SELECT l.id, l.job_group, l.job_id, l.chain_depth, l.handle_code \
                 FROM JSON_TABLE(?, '$[*]' COLUMNS(id BIGINT PATH '$')) AS v \
                 JOIN xxl_job_log AS l ON l.id = v.id FOR UPDATE",
                [Json::from(chunk).to_string().into()],
            ))
            .await?;
        for r in rows {
            out.insert(
                r.try_get::<i64>("", "id")?,
                Existing {
                    group: r.try_get("", "job_group")?,
                    job_id: r.try_get("", "job_id")?,
                    chain_depth: r.try_get("", "chain_depth")?,
                    finished: r.try_get::<i32>("", "handle_code")? != 0,
                },
            );
        }
    }
    Ok(out)
}

/// One MySQL/MariaDB upsert row: the key and required columns, then the kind's.
type UpsertRow = Vec<sea_orm::Value>;

/// `INSERT INTO xxl_job_log (…) VALUES … ON DUPLICATE KEY UPDATE …` of `rows` (every row's id
/// exists and is locked, so each row updates its run and none is inserted), 1,000 rows per
/// statement. A multi-table `UPDATE … JOIN JSON_TABLE(…)` would cost MariaDB an on-disk
/// temporary table per statement (the text columns) and a second pass over it.
async fn upsert(
    c: &impl ConnectionTrait,
    columns: &[&str],
    set: &str,
    rows: Vec<UpsertRow>,
) -> Result<()> {
    let mut rows = rows.into_iter().peekable();
    while rows.peek().is_some() {
        let chunk: Vec<UpsertRow> = rows.by_ref().take(1000).collect();
        let one = format!("({})", vec!["?"; columns.len()].join(", "));
        let sql = format!(
            "INSERT INTO xxl_job_log ({}) VALUES {} ON DUPLICATE KEY UPDATE {set}",
            columns.join(", "),
            vec![one.as_str(); chunk.len()].join(", ")
        );
        c.execute_raw(Statement::from_sql_and_values(
            DbBackend::MySql,
            sql,
            chunk.into_iter().flatten(),
        ))
        .await?;
    }
    Ok(())
}

/// The required columns of an upsert row (never written over: its run exists).
const UPSERT_KEY: [&str; 5] = ["id", "job_group", "job_id", "trigger_code", "handle_code"];
/// An outcome's columns after [`UPSERT_KEY`] (whose `trigger_code` it writes): the rule's
/// columns in their order, but that one.
fn upsert_outcome_columns() -> impl Iterator<Item = &'static str> {
    rules::OUTCOME_COLUMNS
        .into_iter()
        .filter(|c| *c != "trigger_code")
}
/// A result's columns, after [`UPSERT_KEY`] (whose `handle_code` it writes).
const UPSERT_RESULT: [&str; 2] = ["handle_time", "handle_msg"];

fn upsert_outcome_set() -> String {
    rules::outcome_assignments(|c, _| format!("VALUES({c})"))
}

/// The result's assignments (`store::rules`, which orders them for MySQL's left-to-right
/// assignment).
fn upsert_result_set() -> String {
    rules::result_assignments(
        DbBackend::MySql,
        &ResultSql {
            row: "",
            code: "VALUES(handle_code)",
            time: "VALUES(handle_time)",
            msg: "VALUES(handle_msg)",
        },
    )
}

fn key_values(id: i64, e: &Existing, trigger_code: i32, handle_code: i32) -> UpsertRow {
    vec![
        id.into(),
        e.group.into(),
        e.job_id.into(),
        trigger_code.into(),
        handle_code.into(),
    ]
}

fn outcome_values(r: &TriggerRecord, row: &mut UpsertRow) {
    row.extend([
        stamp(r.trigger_ms).into(),
        r.executor_address.clone().into(),
        r.executor_handler.clone().into(),
        r.executor_param.clone().into(),
        r.executor_sharding_param.clone().into(),
        r.executor_fail_retry_count.into(),
        r.trigger_msg.clone().into(),
        r.trigger_type.as_str().to_string().into(),
    ]);
}

fn result_values(item: &HandleResult, at_ms: i64, row: &mut UpsertRow) {
    row.extend([stamp(at_ms).into(), item.msg.clone().into()]);
}

/// [`write`] on MySQL/MariaDB (no `UPDATE … RETURNING`): the batch's rows read and locked
/// first, then one upsert per kind.
async fn write_mysql(
    c: &impl ConnectionTrait,
    outcomes: &[TriggerRecord],
    results: &[(HandleResult, i64)],
) -> Result<Vec<Written>> {
    let ids: Vec<i64> = outcomes
        .iter()
        .map(|r| r.log_id)
        .chain(results.iter().map(|(i, _)| i.log_id))
        .collect();
    let rows = existing(c, &ids).await?;
    let by_run: HashMap<i64, (&HandleResult, i64)> =
        results.iter().map(|(i, at)| (i.log_id, (i, *at))).collect();
    let mut written = Vec::new();
    let (mut paired, mut alone) = (Vec::new(), Vec::new());
    let mut paired_ids = HashSet::new();
    for r in outcomes {
        let Some(e) = rows.get(&r.log_id) else {
            continue; // its run is gone (a cleared log): nothing to write
        };
        match by_run.get(&r.log_id) {
            Some(&(item, at)) if !e.finished => {
                let mut row = key_values(r.log_id, e, r.trigger_code, item.code);
                outcome_values(r, &mut row);
                result_values(item, at, &mut row);
                paired.push(row);
                paired_ids.insert(r.log_id);
                written.push(Written {
                    id: r.log_id,
                    job_id: r.job_id,
                    chain_depth: r.chain_depth,
                    code: item.code,
                });
            }
            _ => {
                // (a run that already had a result, a kill, keeps it: its outcome goes alone)
                let mut row = key_values(r.log_id, e, r.trigger_code, 0);
                outcome_values(r, &mut row);
                alone.push(row);
                paired_ids.insert(r.log_id);
            }
        }
    }
    let mut lone = Vec::new();
    for (item, at) in results {
        if paired_ids.contains(&item.log_id) {
            continue;
        }
        let Some(e) = rows.get(&item.log_id).filter(|e| !e.finished) else {
            continue; // first result wins; a run that is gone takes none
        };
        let mut row = key_values(item.log_id, e, 0, item.code);
        result_values(item, *at, &mut row);
        lone.push(row);
        written.push(Written {
            id: item.log_id,
            job_id: e.job_id,
            chain_depth: e.chain_depth,
            code: item.code,
        });
    }
    let columns = |outcome: bool, result: bool| -> Vec<&'static str> {
        UPSERT_KEY
            .into_iter()
            .chain(upsert_outcome_columns().filter(|_| outcome))
            .chain(UPSERT_RESULT.into_iter().filter(|_| result))
            .collect()
    };
    if !paired.is_empty() {
        let set = format!("{}, {}", upsert_outcome_set(), upsert_result_set());
        upsert(c, &columns(true, true), &set, paired).await?;
    }
    if !alone.is_empty() {
        upsert(c, &columns(true, false), &upsert_outcome_set(), alone).await?;
    }
    if !lone.is_empty() {
        upsert(c, &columns(false, true), &upsert_result_set(), lone).await?;
    }
    Ok(written)
}

/// Writes `outcomes` and `results` (at most one result per run): paired runs in one update,
/// the others alone. Answers the runs whose result this call wrote.
pub(crate) async fn write(
    c: &impl ConnectionTrait,
    outcomes: &[TriggerRecord],
    results: &[(HandleResult, i64)],
) -> Result<Vec<Written>> {
    match c.get_database_backend() {
        DbBackend::Sqlite => write_sqlite(c, outcomes, results).await,
        DbBackend::MySql => write_mysql(c, outcomes, results).await,
        _ => write_postgres(c, outcomes, results).await,
    }
}

/// [`write`] on PostgreSQL: `UPDATE … FROM json_to_recordset(…) … RETURNING`, the paired runs
/// first (a run that already had a result keeps it: its outcome goes alone).
async fn write_postgres(
    c: &impl ConnectionTrait,
    outcomes: &[TriggerRecord],
    results: &[(HandleResult, i64)],
) -> Result<Vec<Written>> {
    let by_run: HashMap<i64, (&HandleResult, i64)> =
        results.iter().map(|(i, at)| (i.log_id, (i, *at))).collect();
    let (paired, mut outcome_alone): (Vec<&TriggerRecord>, Vec<&TriggerRecord>) = outcomes
        .iter()
        .partition(|r| by_run.contains_key(&r.log_id));
    let mut written = Vec::new();
    if !paired.is_empty() {
        let rows: Vec<Json> = paired
            .iter()
            .map(|r| {
                let mut m = Map::new();
                outcome_json(r, &mut m);
                let (item, at) = by_run[&r.log_id];
                result_json(item, at, &mut m);
                Json::Object(m)
            })
            .collect();
        let keys: Vec<&str> = COLUMNS.iter().map(|c| c.0).collect();
        let set = format!("{}, {}", outcome_set(), result_set());
        let sql = update_sql(&keys, &set, "l.handle_code = 0", "l.id");
        let done: HashSet<i64> = c
            .query_all_raw(Statement::from_sql_and_values(
                DbBackend::Postgres,
                sql,
                [json_param(rows)],
            ))
            .await?
            .iter()
            .map(|r| r.try_get::<i64>("", "id"))
            .collect::<std::result::Result<_, _>>()?;
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
        let sql = update_sql(&keys, &outcome_set(), "", "");
        c.execute_raw(Statement::from_sql_and_values(
            DbBackend::Postgres,
            sql,
            [json_param(rows)],
        ))
        .await?;
    }
    let paired_ids: HashSet<i64> = outcomes.iter().map(|r| r.log_id).collect();
    let lone: Vec<Json> = results
        .iter()
        .filter(|(i, _)| !paired_ids.contains(&i.log_id))
        .map(|(i, at)| {
            let mut m = Map::new();
            result_json(i, *at, &mut m);
            Json::Object(m)
        })
        .collect();
    if !lone.is_empty() {
        let sql = update_sql(
            &["id", "hc", "ht", "hm"],
            &result_set(),
            "l.handle_code = 0",
            "l.id, l.job_id, l.chain_depth",
        );
        for r in c
            .query_all_raw(Statement::from_sql_and_values(
                DbBackend::Postgres,
                sql,
                [json_param(lone)],
            ))
            .await?
        {
            let id: i64 = r.try_get("", "id")?;
            let (item, _) = by_run[&id];
            written.push(Written {
                id,
                job_id: r.try_get("", "job_id")?,
                chain_depth: r.try_get("", "chain_depth")?,
                code: item.code,
            });
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
    /// depth, a run nobody knows does not (and its outcome creates no row).
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
                record(888_888, "a cleared run"),
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
            assert_eq!(r0.fire_state, crate::model::fire_state::DISPATCHED);
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
            assert!(
                logs::get(&db, 888_888).await.is_err(),
                "{backend:?}: an outcome of a run that is gone creates no row"
            );
            // written again: nothing changes, nothing comes back
            let again = write(&db, &[], &results).await.unwrap();
            assert!(again.is_empty(), "{backend:?}");
            db.close().await.unwrap();
        }
    }
}
