//! The final writes of run rows, written once on the store's port ([`super::port`]) for every
//! connection: a run whose outcome and result are both in a batch gets one update writing both
//! (the result only if the run had none: first result wins; else the outcome alone); an
//! outcome alone and a result alone get theirs. The assignments are [`super::rules`]'. Used by
//! the run-row writer on either connection ([`super::writer`]), by the lost-result check and
//! by one-row writes of the console.
//!
//! How a batch's rows travel is the one thing that differs by database, not by connection
//! ([`Dialect`], chosen from [`Port::backend`]):
//! - **SQLite** (the writer's file, or a database in memory): cached single-row statements,
//!   each prepared once per batch ([`Port::execute_each`]); on one local connection a row
//!   costs no round trip, and an `UPDATE … FROM` of JSON rows would keep a statement journal.
//! - **PostgreSQL**: per kind one `UPDATE … FROM unnest($1, $2, …)` with constant SQL
//!   (prepared once by the driver) and the batch's rows as one array parameter per column
//!   (sent binary: no JSON for the server to parse, which was 12 % of its CPU at 1,000 fires/s),
//!   `RETURNING` the runs it wrote.
//! - **MySQL/MariaDB**: the batch's rows read and locked first (one constant statement, the
//!   ids as JSON), then written by `INSERT … ON DUPLICATE KEY UPDATE` with the rows as
//!   parameters (every id exists, so nothing is inserted): a multi-table
//!   `UPDATE … JOIN JSON_TABLE(…)` materialises the JSON rows in an on-disk temporary table
//!   (its text columns) on every statement on MariaDB.

use foldhash::{HashMap, HashSet};
use std::sync::LazyLock;

use sea_orm::DbBackend;
use serde_json::Value as Json;

use super::pg_columns::{self, Col, Columns, Elem, col, nullable};
use super::port::{Arg, Port, Value};
use super::rules::{self, ResultSql};
use crate::error::Result;
use crate::fire::{HandleResult, TriggerRecord};
use crate::model::wire::SUCCESS_CODE;

/// A run whose result a write stored (first result wins), with what its child jobs need.
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

impl Written {
    /// Run `r`, whose result with `code` was stored.
    pub(crate) fn of(r: &TriggerRecord, code: i32) -> Written {
        Written {
            id: r.log_id,
            job_id: r.job_id,
            chain_depth: r.chain_depth,
            code,
        }
    }
}

/// Writes `outcomes` and `results` (at most one result per run) in the port's transaction:
/// paired runs in one update, the others alone; an outcome or result of a run that has no row
/// (a cleared log) writes nothing. Answers the runs whose result this call stored.
pub(crate) async fn write(
    p: &Port<'_>,
    outcomes: &[&TriggerRecord],
    results: &[(&HandleResult, i64)],
) -> Result<Vec<Written>> {
    let d = Dialect::of(p, outcomes, results).await?;
    let by_run: HashMap<i64, (&HandleResult, i64)> =
        results.iter().map(|&(i, at)| (i.log_id, (i, at))).collect();
    // in id order: rows near each other are written together
    let mut in_order = outcomes.to_vec();
    in_order.sort_by_key(|r| r.log_id);
    let (paired, mut alone): (Vec<&TriggerRecord>, Vec<&TriggerRecord>) = in_order
        .into_iter()
        .partition(|r| by_run.contains_key(&r.log_id));
    let mut written = Vec::new();
    if !paired.is_empty() {
        let rows: Vec<Paired<'_>> = paired.iter().map(|r| (*r, by_run[&r.log_id])).collect();
        let done = d.paired(p, &rows).await?;
        for r in paired {
            if done.contains(&r.log_id) {
                written.push(Written::of(r, by_run[&r.log_id].0.code));
            } else {
                // the run already had a result (a kill): its outcome still counts
                alone.push(r);
            }
        }
    }
    if !alone.is_empty() {
        d.outcomes(p, &alone).await?;
    }
    let with_outcome: HashSet<i64> = outcomes.iter().map(|r| r.log_id).collect();
    let lone: Vec<(&HandleResult, i64)> = results
        .iter()
        .copied()
        .filter(|(i, _)| !with_outcome.contains(&i.log_id))
        .collect();
    if !lone.is_empty() {
        written.extend(d.results(p, &lone).await?);
    }
    Ok(written)
}

/// An outcome with the result it pairs with (received at, epoch ms).
type Paired<'a> = (&'a TriggerRecord, (&'a HandleResult, i64));

/// How a database takes a batch's rows (see the module docs).
enum Dialect {
    Sqlite,
    Postgres,
    /// With the batch's rows as read (and locked) before writing.
    MySql(HashMap<i64, Existing>),
}

impl Dialect {
    async fn of(
        p: &Port<'_>,
        outcomes: &[&TriggerRecord],
        results: &[(&HandleResult, i64)],
    ) -> Result<Dialect> {
        Ok(match p.backend() {
            DbBackend::Postgres => Dialect::Postgres,
            DbBackend::MySql => {
                let ids: Vec<i64> = outcomes
                    .iter()
                    .map(|r| r.log_id)
                    .chain(results.iter().map(|(i, _)| i.log_id))
                    .collect();
                Dialect::MySql(existing(p, &ids).await?)
            }
            _ => Dialect::Sqlite,
        })
    }

    /// Writes each outcome with its result where the run has no result yet; answers those
    /// runs.
    async fn paired(&self, p: &Port<'_>, rows: &[Paired<'_>]) -> Result<HashSet<i64>> {
        match self {
            Dialect::Sqlite => {
                let changed = p
                    .execute_each(&LITE.paired, rows, |(r, (item, at)), args| {
                        outcome_args(r, args);
                        result_args(item, *at, args);
                    })
                    .await?;
                Ok(rows
                    .iter()
                    .zip(changed)
                    .filter(|(_, n)| *n == 1)
                    .map(|((r, _), _)| r.log_id)
                    .collect())
            }
            Dialect::Postgres => {
                let mut cols = Columns::new(&PAIRED_COLS);
                for (r, (item, at)) in rows {
                    push_outcome(&mut cols, r)?;
                    push_result(&mut cols, item, *at)?;
                }
                Ok(p.rows::<i64>(&PG_PAIRED, &with_count(cols))
                    .await?
                    .into_iter()
                    .collect())
            }
            Dialect::MySql(existing) => {
                let mut done = HashSet::default();
                let mut upserts = Vec::new();
                for (r, (item, at)) in rows {
                    if let Some(e) = existing.get(&r.log_id).filter(|e| !e.finished) {
                        let mut row = key_values(r.log_id, e, r.trigger_code, item.code);
                        upsert_outcome_values(r, &mut row);
                        upsert_result_values(item, *at, &mut row);
                        upserts.push(row);
                        done.insert(r.log_id);
                    }
                }
                let set = format!("{}, {}", upsert_outcome_set(), upsert_result_set());
                upsert(p, &upsert_columns(true, true), &set, upserts).await?;
                Ok(done)
            }
        }
    }

    /// Writes outcomes alone.
    async fn outcomes(&self, p: &Port<'_>, rows: &[&TriggerRecord]) -> Result<()> {
        match self {
            Dialect::Sqlite => {
                p.execute_each(&LITE.outcome, rows, |r, args| outcome_args(r, args))
                    .await?;
            }
            Dialect::Postgres => {
                let mut cols = Columns::new(outcome_cols());
                for r in rows {
                    push_outcome(&mut cols, r)?;
                }
                p.execute(&PG_OUTCOME, &with_count(cols)).await?;
            }
            Dialect::MySql(existing) => {
                let upserts = rows
                    .iter()
                    .filter_map(|r| {
                        let e = existing.get(&r.log_id)?;
                        let mut row = key_values(r.log_id, e, r.trigger_code, 0);
                        upsert_outcome_values(r, &mut row);
                        Some(row)
                    })
                    .collect();
                upsert(
                    p,
                    &upsert_columns(true, false),
                    &upsert_outcome_set(),
                    upserts,
                )
                .await?;
            }
        }
        Ok(())
    }

    /// Writes results alone where the run has none yet; answers those runs.
    async fn results(&self, p: &Port<'_>, rows: &[(&HandleResult, i64)]) -> Result<Vec<Written>> {
        let mut written = Vec::new();
        match self {
            Dialect::Sqlite => {
                let changed = p
                    .execute_each(&LITE.result, rows, |(item, at), args| {
                        args.push(Arg::Int(item.log_id));
                        result_args(item, *at, args);
                    })
                    .await?;
                for ((item, _), n) in rows.iter().zip(changed) {
                    // the run's job and depth read back by id: cheaper on SQLite than a
                    // `RETURNING` clause, which builds an ephemeral table per statement
                    let run = if n == 1 {
                        p.row::<(i32, i16)>(
                            "SELECT job_id, chain_depth FROM xxl_job_log WHERE id = ?",
                            &[item.log_id.into()],
                        )
                        .await?
                    } else {
                        None
                    };
                    if let Some((job_id, chain_depth)) = run {
                        written.push(Written {
                            id: item.log_id,
                            job_id,
                            chain_depth,
                            code: item.code,
                        });
                    }
                }
            }
            Dialect::Postgres => {
                let codes: HashMap<i64, i32> =
                    rows.iter().map(|(i, _)| (i.log_id, i.code)).collect();
                let mut cols = Columns::new(&RESULT_COLS);
                for (item, at) in rows {
                    cols.row();
                    cols.push(item.log_id)?;
                    push_result(&mut cols, item, *at)?;
                }
                for (id, job_id, chain_depth) in p
                    .rows::<(i64, i32, i16)>(&PG_RESULT, &with_count(cols))
                    .await?
                {
                    written.push(Written {
                        id,
                        job_id,
                        chain_depth,
                        code: codes[&id],
                    });
                }
            }
            Dialect::MySql(existing) => {
                let mut upserts = Vec::new();
                for (item, at) in rows {
                    // first result wins; a run that is gone takes none
                    let Some(e) = existing.get(&item.log_id).filter(|e| !e.finished) else {
                        continue;
                    };
                    let mut row = key_values(item.log_id, e, 0, item.code);
                    upsert_result_values(item, *at, &mut row);
                    upserts.push(row);
                    written.push(Written {
                        id: item.log_id,
                        job_id: e.job_id,
                        chain_depth: e.chain_depth,
                        code: item.code,
                    });
                }
                upsert(
                    p,
                    &upsert_columns(false, true),
                    &upsert_result_set(),
                    upserts,
                )
                .await?;
            }
        }
        Ok(written)
    }
}

/// Appends `[id, the outcome's columns]` ([`rules::OUTCOME_COLUMNS`] order).
pub(crate) fn outcome_args<'a>(r: &'a TriggerRecord, v: &mut Vec<Arg<'a>>) {
    v.extend([
        Arg::Int(r.log_id),
        Arg::Time(r.trigger_ms),
        Arg::Text(r.executor_address.as_deref()),
        Arg::Text(r.executor_handler.as_deref()),
        Arg::Text(r.executor_param.as_deref()),
        Arg::Text(r.executor_sharding_param.as_deref()),
        Arg::Int(r.executor_fail_retry_count.into()),
        Arg::Int(r.trigger_code.into()),
        Arg::Text(Some(&r.trigger_msg)),
        Arg::Text(Some(r.trigger_type.as_str())),
    ]);
}

/// Appends a result's columns: code, time, message.
pub(crate) fn result_args<'a>(item: &'a HandleResult, at_ms: i64, v: &mut Vec<Arg<'a>>) {
    v.extend([
        Arg::Int(item.code.into()),
        Arg::Time(at_ms),
        Arg::Text(item.msg.as_deref()),
    ]);
}

/// The single-row statements of SQLite (parameters: the id `?1`, the outcome `?2`–`?10`, the
/// result after them).
struct Lite {
    paired: String,
    outcome: String,
    result: String,
}

static LITE: LazyLock<Lite> = LazyLock::new(|| {
    let outcome = rules::outcome_assignments(|_, i| format!("?{}", i + 2));
    let result = |first: usize| {
        rules::result_assignments(
            DbBackend::Sqlite,
            &ResultSql {
                row: "",
                code: &format!("?{first}"),
                time: &format!("?{}", first + 1),
                msg: &format!("?{}", first + 2),
            },
        )
    };
    Lite {
        paired: format!(
            "UPDATE OR IGNORE xxl_job_log SET {outcome}, {} WHERE id = ?1 AND handle_code = 0",
            result(11)
        ),
        outcome: format!("UPDATE OR IGNORE xxl_job_log SET {outcome} WHERE id = ?1"),
        result: format!(
            "UPDATE OR IGNORE xxl_job_log SET {} WHERE id = ?1 AND handle_code = 0",
            result(2)
        ),
    }
});

/// The columns of a PostgreSQL final write's rows, each bound as one array ([`pg_columns`]):
/// an outcome's, then a result's (a paired write has both).
const PAIRED_COLS: [Col; 13] = [
    col("id", Elem::BigInt),
    col("tt", Elem::Time),
    nullable("ea", Elem::Text),
    nullable("eh", Elem::Text),
    nullable("ep", Elem::Text),
    nullable("es", Elem::Text),
    col("rc", Elem::Int),
    col("tc", Elem::Int),
    col("tm", Elem::Text),
    col("ty", Elem::Text),
    col("hc", Elem::Int),
    col("ht", Elem::Time),
    nullable("hm", Elem::Text),
];

/// An outcome's columns alone (the first ten of [`PAIRED_COLS`]).
fn outcome_cols() -> &'static [Col] {
    &PAIRED_COLS[..10]
}

/// A result's columns alone.
const RESULT_COLS: [Col; 4] = [
    col("id", Elem::BigInt),
    col("hc", Elem::Int),
    col("ht", Elem::Time),
    nullable("hm", Elem::Text),
];

/// Pushes an outcome's row (id, then [`rules::OUTCOME_COLUMNS`] order).
fn push_outcome(c: &mut Columns<'_>, r: &TriggerRecord) -> Result<()> {
    c.row();
    c.push(r.log_id)?;
    c.push(crate::clock::ms_to_naive(r.trigger_ms))?;
    c.push(r.executor_address.clone())?;
    c.push(r.executor_handler.clone())?;
    c.push(r.executor_param.clone())?;
    c.push(r.executor_sharding_param.clone())?;
    c.push(r.executor_fail_retry_count)?;
    c.push(r.trigger_code)?;
    c.push(r.trigger_msg.clone())?;
    c.push(r.trigger_type.as_str())
}

/// Pushes a result's columns (after its outcome's in a paired row).
fn push_result(c: &mut Columns<'_>, item: &HandleResult, at_ms: i64) -> Result<()> {
    c.push(item.code)?;
    c.push(crate::clock::ms_to_naive(at_ms))?;
    c.push(item.msg.clone())
}

/// A batch's parameters: its columns' arrays (and NULL mask), then its rows' count.
fn with_count(c: Columns<'_>) -> Vec<Value> {
    let n = c.len() as i64;
    let mut args = c.args();
    args.push(n.into());
    args
}

/// `SET` assignments of the outcome columns (`store::rules`), from the rows' keys.
fn outcome_set() -> String {
    rules::outcome_assignments(|_, i| format!("v.{}", PAIRED_COLS[i + 1].name))
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

/// PostgreSQL: a run's outcome and result in one update (the result only where the run has
/// none), answering the runs written.
static PG_PAIRED: LazyLock<String> = LazyLock::new(|| {
    let set = format!("{}, {}", outcome_set(), result_set());
    update_sql(&PAIRED_COLS, &set, "l.handle_code = 0", "l.id")
});

/// PostgreSQL: outcomes alone.
static PG_OUTCOME: LazyLock<String> =
    LazyLock::new(|| update_sql(outcome_cols(), &outcome_set(), "", ""));

/// PostgreSQL: results alone where the run has none, answering the runs written.
static PG_RESULT: LazyLock<String> = LazyLock::new(|| {
    update_sql(
        &RESULT_COLS,
        &result_set(),
        "l.handle_code = 0",
        "l.id, l.job_id, l.chain_depth",
    )
});

/// `UPDATE xxl_job_log … FROM (<rows of cols> LIMIT <count>) … SET <set> [AND <cond>]
/// [RETURNING …]`, the rows' columns one array parameter each ([`pg_columns::select`]), then
/// the rows' count.
fn update_sql(cols: &[Col], set: &str, cond: &str, returning: &str) -> String {
    let rows = pg_columns::select(cols, "u", |i| format!("${}", i + 1));
    let count = pg_columns::params(cols) + 1;
    // the rows' count as a LIMIT: PostgreSQL takes a set-returning function's rows for 100
    // (10 in a generic plan) and, its statistics saying few runs lack a result
    // (`handle_code = 0`), read a log table of 2,000–25,000 rows whole and hash-joined it
    // (measured 1–5 ms a write of one row at 10,000 rows, against 0.05 by primary key). Under
    // a LIMIT it takes the rows for the count, or for 10 in a generic plan, and looks each up
    // by id. (An `id = ANY(ids)` index condition instead was planned as a sequential scan
    // filtering every row through the array when the batch was large: 100 ms for 500 rows.)
    let mut sql = format!(
        "UPDATE xxl_job_log AS l SET {set} FROM ({rows} LIMIT ${count}) AS v WHERE l.id = v.id"
    );
    if !cond.is_empty() {
        sql.push_str(&format!(" AND {cond}"));
    }
    if !returning.is_empty() {
        sql.push_str(&format!(" RETURNING {returning}"));
    }
    sql
}

/// A run's row as the MySQL path reads it before writing: its group, job, chain depth and
/// whether it has a result.
#[derive(Clone, Copy)]
struct Existing {
    id: i64,
    group: i32,
    job_id: i32,
    chain_depth: i16,
    finished: bool,
}

impl super::port::FromRow for Existing {
    fn from_row(r: &super::port::Row<'_>) -> Result<Self> {
        Ok(Existing {
            id: r.get(0)?,
            group: r.get(1)?,
            job_id: r.get(2)?,
            chain_depth: r.get(3)?,
            finished: r.get::<i32>(4)? != 0,
        })
    }
}

/// The rows among `ids` (MySQL/MariaDB), locked until the transaction ends. One constant
/// statement per 1,000 ids (the ids a JSON parameter), prepared once per connection.
async fn existing(p: &Port<'_>, ids: &[i64]) -> Result<HashMap<i64, Existing>> {
    let mut out = HashMap::default();
    for chunk in ids.chunks(1000) {
        let rows = p
            .rows::<Existing>(
                "SELECT l.id, l.job_group, l.job_id, l.chain_depth, l.handle_code \
                 FROM JSON_TABLE(?, '$[*]' COLUMNS(id BIGINT PATH '$')) AS v \
                 JOIN xxl_job_log AS l ON l.id = v.id FOR UPDATE",
                &[Json::from(chunk).to_string().into()],
            )
            .await?;
        out.extend(rows.into_iter().map(|e| (e.id, e)));
    }
    Ok(out)
}

/// `INSERT INTO xxl_job_log (…) VALUES … ON DUPLICATE KEY UPDATE …` of `rows` (every row's id
/// exists and is locked, so each row updates its run and none is inserted), 1,000 rows per
/// statement.
async fn upsert(p: &Port<'_>, columns: &[&str], set: &str, rows: Vec<Vec<Value>>) -> Result<()> {
    let one = format!("({})", vec!["?"; columns.len()].join(", "));
    for chunk in rows.chunks(1000) {
        let sql = format!(
            "INSERT INTO xxl_job_log ({}) VALUES {} ON DUPLICATE KEY UPDATE {set}",
            columns.join(", "),
            vec![one.as_str(); chunk.len()].join(", ")
        );
        p.execute(&sql, &chunk.concat()).await?;
    }
    Ok(())
}

/// The columns of an upsert row: the key and required ones (never written over: the run
/// exists), then the outcome's (but `trigger_code`, a key column), then the result's (but
/// `handle_code`).
fn upsert_columns(outcome: bool, result: bool) -> Vec<&'static str> {
    ["id", "job_group", "job_id", "trigger_code", "handle_code"]
        .into_iter()
        .chain(
            rules::OUTCOME_COLUMNS
                .into_iter()
                .filter(|c| outcome && *c != "trigger_code"),
        )
        .chain(["handle_time", "handle_msg"].into_iter().filter(|_| result))
        .collect()
}

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

fn key_values(id: i64, e: &Existing, trigger_code: i32, handle_code: i32) -> Vec<Value> {
    vec![
        id.into(),
        e.group.into(),
        e.job_id.into(),
        trigger_code.into(),
        handle_code.into(),
    ]
}

fn upsert_outcome_values(r: &TriggerRecord, row: &mut Vec<Value>) {
    row.extend([
        crate::clock::ms_to_naive(r.trigger_ms).into(),
        r.executor_address.clone().into(),
        r.executor_handler.clone().into(),
        r.executor_param.clone().into(),
        r.executor_sharding_param.clone().into(),
        r.executor_fail_retry_count.into(),
        r.trigger_msg.clone().into(),
        r.trigger_type.as_str().to_string().into(),
    ]);
}

fn upsert_result_values(item: &HandleResult, at_ms: i64, row: &mut Vec<Value>) {
    row.extend([
        crate::clock::ms_to_naive(at_ms).into(),
        item.msg.clone().into(),
    ]);
}

/// The successful runs among `written` whose job has child jobs, as the completion actor takes
/// them: each job's list as dispatched (`known`, from the outcomes a writer saw), else read.
pub(crate) async fn finished(
    p: &Port<'_>,
    written: &[Written],
    known: &mut Children,
) -> Result<Vec<crate::store::writer::FinishedRun>> {
    let ok: Vec<&Written> = written.iter().filter(|w| w.code == SUCCESS_CODE).collect();
    let unknown: Vec<i32> = ok
        .iter()
        .map(|w| w.job_id)
        .filter(|j| !known.0.contains_key(j))
        .collect::<HashSet<_>>()
        .into_iter()
        .collect();
    for chunk in unknown.chunks(super::port::IN_CHUNK) {
        let (marks, args) = super::port::in_list(chunk);
        let sql = format!("SELECT id, child_jobid FROM xxl_job_info WHERE id IN ({marks})");
        let read: HashMap<i32, Option<String>> = p.rows(&sql, &args).await?.into_iter().collect();
        for j in chunk {
            let list = read.get(j).cloned().flatten();
            known.note(*j, list.map(Into::into));
        }
    }
    Ok(ok
        .into_iter()
        .filter_map(|w| {
            let list = known.0.get(&w.job_id)?.as_deref()?;
            (!list.trim().is_empty()).then(|| crate::store::writer::FinishedRun {
                id: w.id,
                job_id: w.job_id,
                chain_depth: w.chain_depth,
                children: list.to_string(),
            })
        })
        .collect())
}

/// The child job lists of jobs, as their runs were dispatched (or read), by job id.
#[derive(Default)]
pub(crate) struct Children(HashMap<i32, Option<std::sync::Arc<str>>>);

impl Children {
    /// Remembers job `job_id`'s list.
    pub(crate) fn note(&mut self, job_id: i32, list: Option<std::sync::Arc<str>>) {
        if self.0.len() > 100_000 {
            self.0.clear();
        }
        self.0.insert(job_id, list);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::TriggerType;
    use crate::store::logs;
    use sea_orm::{ConnectionTrait, DatabaseConnection, TransactionTrait};

    fn record(log_id: i64, msg: &str) -> TriggerRecord {
        TriggerRecord {
            log_id,
            job_id: 7,
            chain_depth: 2,
            trigger_ms: 3_000,
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

    /// On PostgreSQL the final writes look their runs up by primary key once the log table
    /// has statistics in which few runs lack a result: as a generic plan (what a prepared
    /// statement keeps) each of the three reads no row it does not write. Without the ids'
    /// array the planner read the whole table (`Seq Scan on xxl_job_log`) and hash-joined it.
    #[tokio::test]
    async fn final_writes_on_postgres_look_runs_up_by_id() {
        for db in crate::store::tests::every_backend().await {
            if db.get_database_backend() != DbBackend::Postgres {
                continue;
            }
            // 10,000 finished runs, 20 in flight
            db.execute_unprepared(
                "INSERT INTO xxl_job_log (job_group, job_id, trigger_time, trigger_code, \
                 handle_code, executor_fail_retry_count, alarm_status, fire_time, fire_state) \
                 SELECT 1, g, now(), 200, CASE WHEN g <= 20 THEN 0 ELSE 200 END, 0, 0, g, 0 \
                 FROM generate_series(1, 10020) g; ANALYZE xxl_job_log",
            )
            .await
            .unwrap();
            for (name, sql) in [
                ("paired", &*PG_PAIRED),
                ("outcome", &*PG_OUTCOME),
                ("result", &*PG_RESULT),
            ] {
                let txn = db.begin().await.unwrap();
                txn.execute_unprepared("SET LOCAL plan_cache_mode = force_generic_plan")
                    .await
                    .unwrap();
                // (a prepared statement outlives the transaction: one name per statement;
                // its parameters' types are the casts of its arrays)
                txn.execute_unprepared(&format!("PREPARE w_{name} AS {sql}"))
                    .await
                    .unwrap();
                // one row: run 5, each column an array of one value, the mask and the count
                let cols: &[Col] = match name {
                    "paired" => &PAIRED_COLS,
                    "outcome" => outcome_cols(),
                    _ => &RESULT_COLS,
                };
                let mut args: Vec<&str> = cols
                    .iter()
                    .map(|c| match c.elem {
                        Elem::BigInt => "'{5}'",
                        Elem::Int | Elem::SmallInt => "'{200}'",
                        Elem::Time => "'{\"2026-12-03 00:00:00\"}'",
                        Elem::Text => "'{x}'",
                    })
                    .collect();
                args.extend(["'{0}'", "1"]);
                let plan: Vec<String> = txn
                    .query_all_raw(sea_orm::Statement::from_string(
                        DbBackend::Postgres,
                        format!("EXPLAIN EXECUTE w_{name}({})", args.join(", ")),
                    ))
                    .await
                    .unwrap()
                    .iter()
                    .map(|r| r.try_get::<String>("", "QUERY PLAN").unwrap())
                    .collect();
                let plan = plan.join("; ");
                assert!(plan.contains("xxl_job_log_pkey"), "{name}: {plan}");
                assert!(!plan.contains("Seq Scan on xxl_job_log"), "{name}: {plan}");
                txn.rollback().await.unwrap();
            }
            db.close().await.unwrap();
        }
    }

    /// The final writes keep the stored-result rules on every backend and either connection:
    /// a run with both gets both in one statement, first result wins (a killed run keeps its
    /// result but gets its outcome), messages append after `<br>`, a success needs no alarm
    /// and an alarm state already set stays; the runs whose result was written come back with
    /// their job and depth, a run nobody knows does not (and its outcome creates no row).
    #[tokio::test]
    async fn final_writes_keep_the_result_rules() {
        for db in crate::store::tests::every_backend().await {
            rules_hold(&db, async |o, r| {
                let txn = db.begin().await.unwrap();
                let w = write(&Port::tx(&txn), o, r).await.unwrap();
                txn.commit().await.unwrap();
                w
            })
            .await;
            db.close().await.unwrap();
        }
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("rows.db");
        let db = crate::store::tests::file_db(&path).await;
        let conn = std::cell::RefCell::new(rusqlite::Connection::open(&path).unwrap());
        rules_hold(&db, async |o, r| {
            let mut c = conn.borrow_mut();
            crate::store::port::file_tx(&mut c, async |p| write(p, o, r).await).unwrap()
        })
        .await;
    }

    async fn rules_hold(
        db: &DatabaseConnection,
        write: impl AsyncFn(&[&TriggerRecord], &[(&HandleResult, i64)]) -> Vec<Written>,
    ) {
        let backend = db.get_database_backend();
        let mut ids = vec![];
        for _ in 0..6 {
            ids.push(
                logs::insert_run(db, 1, 7, 1_000, TriggerType::Cron, 2)
                    .await
                    .unwrap(),
            );
        }
        // run 1 was killed (a result already), run 2 has a message, run 4 was alarmed
        logs::record_handle(db, ids[1], 500, Some("killed"), 1_200)
            .await
            .unwrap();
        logs::append_handle_msg(db, ids[2], "earlier")
            .await
            .unwrap();
        logs::set_alarm_status(db, ids[4], 2).await.unwrap();
        // run 5's message is five characters short of the longest a message may be
        let long = "x".repeat(crate::fire::HANDLE_MSG_MAX - 5);
        logs::append_handle_msg(db, ids[5], &long).await.unwrap();
        // run 3's parameter is empty, not absent
        let mut empty_param = record(ids[3], "t3");
        empty_param.executor_param = Some(String::new());
        let outcomes = [
            record(ids[0], "t0"),
            record(ids[1], "t1"),
            empty_param,
            record(888_888, "a cleared run"),
        ];
        let results = [
            result(ids[0], 200, Some("ok")),
            result(ids[1], 200, Some("too late")),
            result(ids[2], 200, Some("done")),
            result(ids[4], 200, None),
            result(999_999, 200, Some("unknown")),
            result(ids[5], 500, Some("tail")),
        ];
        let o: Vec<&TriggerRecord> = outcomes.iter().collect();
        let r: Vec<(&HandleResult, i64)> = results.iter().map(|(i, at)| (i, *at)).collect();
        let written = write(&o, &r).await;
        let mut got: Vec<(i64, i32, i16)> = written
            .iter()
            .map(|w| (w.id, w.job_id, w.chain_depth))
            .collect();
        got.sort();
        assert_eq!(
            got,
            vec![
                (ids[0], 7, 2),
                (ids[2], 7, 2),
                (ids[4], 7, 2),
                (ids[5], 7, 2)
            ],
            "{backend:?}"
        );
        let row = |k: usize| logs::get(db, ids[k]);
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
        assert_eq!(r0.executor_param.as_deref(), Some("p"));
        // absent columns are NULL (on PostgreSQL a NULL travels as '' and a bit of the mask)
        assert_eq!(
            (
                r0.executor_address.as_deref(),
                r0.executor_handler.as_deref(),
                r0.executor_sharding_param.as_deref()
            ),
            (Some("http://e:1/"), None, None),
            "{backend:?}"
        );
        assert_eq!(
            r0.trigger_time.map(crate::clock::naive_to_ms),
            Some(3_000),
            "{backend:?}"
        );
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
        assert_eq!(r3.executor_param.as_deref(), Some(""), "{backend:?}");
        let r4 = row(4).await.unwrap();
        assert_eq!((r4.handle_code, r4.alarm_status), (200, 2), "{backend:?}");
        assert_eq!(
            r4.handle_msg, None,
            "{backend:?}: a result without a message"
        );
        let m5 = row(5).await.unwrap().handle_msg.unwrap_or_default();
        assert_eq!(
            m5.chars().count(),
            crate::fire::HANDLE_MSG_MAX,
            "{backend:?}: an appended message is capped"
        );
        assert!(m5.ends_with("x<br>t"), "{backend:?}");
        assert!(
            logs::get(db, 888_888).await.is_err(),
            "{backend:?}: an outcome of a run that is gone creates no row"
        );
        // written again: nothing changes, nothing comes back
        let again = write(&[], &r).await;
        assert!(again.is_empty(), "{backend:?}");
    }
}
