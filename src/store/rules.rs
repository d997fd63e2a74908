//! The rules of a run row's outcome and result, written once and rendered for each database
//! by [`super::run_rows`] (single-row statements on SQLite, `UPDATE … FROM json_to_recordset`
//! on PostgreSQL, `INSERT … ON DUPLICATE KEY UPDATE` on MySQL/MariaDB) and by the fire
//! journal's inserts on a SQLite file ([`super::writer::journal`]).
//!
//! - An outcome writes the trigger columns ([`OUTCOME_COLUMNS`]) and moves the row to
//!   dispatched ([`outcome_assignments`]).
//! - A result is written only to a run without one (first result wins: every writer adds
//!   `handle_code = 0` to its condition). Its message is appended after `<br>` to one the row
//!   already has and the whole cut to [`HANDLE_MSG_MAX`] characters; a result without a
//!   message keeps the row's ([`result_assignments`]). A success
//!   moves `alarm_status` from unchecked to not needed and never moves an alarm state the
//!   fail monitor already set.

use sea_orm::DbBackend;

use crate::fire::HANDLE_MSG_MAX;
use crate::model::wire::SUCCESS_CODE;
use crate::model::{AlarmStatus, fire_state};

/// The columns an outcome writes, in the order every writer binds them.
pub(crate) const OUTCOME_COLUMNS: [&str; 9] = [
    "trigger_time",
    "executor_address",
    "executor_handler",
    "executor_param",
    "executor_sharding_param",
    "executor_fail_retry_count",
    "trigger_code",
    "trigger_msg",
    "trigger_type",
];

/// `SET` assignments of an outcome: each of [`OUTCOME_COLUMNS`] from `value(column, index)`,
/// and the row moved to dispatched.
pub(crate) fn outcome_assignments(value: impl Fn(&str, usize) -> String) -> String {
    let mut out: Vec<String> = OUTCOME_COLUMNS
        .iter()
        .enumerate()
        .map(|(i, c)| format!("{c} = {}", value(c, i)))
        .collect();
    out.push(format!("fire_state = {}", fire_state::DISPATCHED));
    out.join(", ")
}

/// `a` and `b` joined by `<br>` and cut to [`HANDLE_MSG_MAX`] characters, in `b`'s SQL.
fn joined_sql(backend: DbBackend, a: &str, b: &str) -> String {
    match backend {
        DbBackend::MySql => format!("LEFT(CONCAT({a}, '<br>', {b}), {HANDLE_MSG_MAX})"),
        DbBackend::Postgres => format!("left({a} || '<br>' || {b}, {HANDLE_MSG_MAX})"),
        _ => format!("substr({a} || '<br>' || {b}, 1, {HANDLE_MSG_MAX})"),
    }
}

/// The row's existing columns (`row` is their prefix: `"l."`, or `""`) and a result's values
/// as SQL expressions.
pub(crate) struct ResultSql<'a> {
    pub(crate) row: &'a str,
    pub(crate) code: &'a str,
    pub(crate) time: &'a str,
    /// The result's message, already cut to [`HANDLE_MSG_MAX`] (NULL: none).
    pub(crate) msg: &'a str,
}

/// `SET` assignments of a result (the module's rule). The message and the alarm state come
/// before the code: MySQL assigns left to right and a later expression naming an assigned
/// column reads its new value.
pub(crate) fn result_assignments(backend: DbBackend, r: &ResultSql<'_>) -> String {
    let ResultSql {
        row,
        code,
        time,
        msg,
    } = *r;
    format!(
        "handle_msg = CASE WHEN {msg} IS NULL THEN {row}handle_msg \
                           WHEN {row}handle_msg IS NULL OR {row}handle_msg = '' THEN {msg} \
                           ELSE {} END, \
         alarm_status = {}, handle_code = {code}, handle_time = {time}",
        joined_sql(backend, &format!("{row}handle_msg"), msg),
        alarm_sql(&format!("{row}alarm_status"), code)
    )
}

/// The alarm state after a result with code `code` at a row whose state is `old`.
pub(crate) fn alarm_sql(old: &str, code: &str) -> String {
    format!(
        "CASE WHEN {old} = {} AND {code} = {SUCCESS_CODE} THEN {} ELSE {old} END",
        AlarmStatus::Unchecked.code(),
        AlarmStatus::NotNeeded.code()
    )
}

/// The alarm state of a row written with its result at once (no earlier state).
pub(crate) fn first_alarm_sql(code: &str) -> String {
    format!(
        "CASE WHEN {code} = {SUCCESS_CODE} THEN {} ELSE {} END",
        AlarmStatus::NotNeeded.code(),
        AlarmStatus::Unchecked.code()
    )
}
