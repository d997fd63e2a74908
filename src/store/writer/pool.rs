//! The pool backend of the run-row writer (PostgreSQL, MySQL, in-memory SQLite): a task writing
//! each batch through sea-orm with the batched statements of [`super::super::log_batches`], one
//! transaction per batch.
//!
//! One bad row never costs the others: texts are bounded to their columns when they are queued,
//! and when the database still refuses a batch (an error it reports about the data, not a lost
//! connection) the batch is split in halves until the offending row is alone; that row is then
//! written in a reduced form that says why, and every other row lands. A batch that fails for
//! any other reason (the database is down) is retried whole a few times, then given up.

use std::collections::HashSet;

use futures::FutureExt;
use futures::future::BoxFuture;

use super::*;
use crate::store::audit::Entry;

/// One row a batch writes.
#[derive(Clone, Debug)]
enum Row {
    Outcome(TriggerRecord),
    /// A result, received at (epoch ms).
    Result(HandleResult, i64),
    Audit(Entry),
}

impl Row {
    /// This row cut down to what any database stores (the texts that may carry what a column
    /// refused replaced by the reason), or `None` when it is already reduced.
    fn reduced(&self, why: &str) -> Option<Row> {
        let note = |what: &str| {
            crate::bounded::cut_bytes(
                &format!("[xjob] {what} could not be stored as it was: {why}"),
                1000,
            )
            .into_owned()
        };
        match self {
            Row::Outcome(r) => {
                let reduced = TriggerRecord {
                    executor_address: r
                        .executor_address
                        .clone()
                        .filter(|a| a.is_ascii() && a.len() <= 255),
                    executor_handler: None,
                    executor_param: None,
                    executor_sharding_param: None,
                    trigger_msg: note("the trigger outcome"),
                    ..r.clone()
                };
                (reduced.trigger_msg != r.trigger_msg).then_some(Row::Outcome(reduced))
            }
            Row::Result(h, at) => {
                let msg = Some(note("the result message"));
                (h.msg != msg).then(|| Row::Result(HandleResult { msg, ..h.clone() }, *at))
            }
            Row::Audit(e) => {
                let detail = note("the entry");
                (e.detail != detail).then(|| {
                    Row::Audit(Entry {
                        username: e
                            .username
                            .chars()
                            .filter(char::is_ascii_alphanumeric)
                            .collect(),
                        client_ip: String::new(),
                        target_id: String::new(),
                        detail,
                        ..e.clone()
                    })
                })
            }
        }
    }
}

/// The rows of a batch: every outcome and audit entry, and the first result per run.
fn rows_of(ops: &[Queued]) -> Vec<Row> {
    let (outcomes, order, results) = split(ops);
    let mut rows: Vec<Row> = audits(ops).into_iter().cloned().map(Row::Audit).collect();
    rows.extend(outcomes.into_iter().cloned().map(Row::Outcome));
    rows.extend(order.iter().map(|id| {
        let (item, at) = results[id];
        Row::Result(item.clone(), at)
    }));
    rows
}

/// What writing some rows came to.
#[derive(Default)]
struct Written {
    finished: Vec<FinishedRun>,
    /// Runs whose result was given up.
    lost_results: HashSet<i64>,
    /// Whether any row was given up.
    lost_any: bool,
}

impl Written {
    fn lost(rows: &[Row]) -> Self {
        Written {
            finished: Vec::new(),
            lost_results: rows
                .iter()
                .filter_map(|r| match r {
                    Row::Result(h, _) => Some(h.log_id),
                    _ => None,
                })
                .collect(),
            lost_any: !rows.is_empty(),
        }
    }

    fn merge(mut self, other: Written) -> Self {
        self.finished.extend(other.finished);
        self.lost_results.extend(other.lost_results);
        self.lost_any |= other.lost_any;
        self
    }
}

pub(super) async fn run(
    db: DatabaseConnection,
    mut rx: mpsc::Receiver<Queued>,
    sink: FinishedSink,
) {
    while let Some(first) = rx.recv().await {
        let ops = fill(first, &mut rx);
        let rows = rows_of(&ops);
        let written = if rows.is_empty() {
            Written::default()
        } else {
            write_all(&db, rows, false).await
        };
        if !written.finished.is_empty() {
            sink(RunsFinished(written.finished));
        }
        for q in ops {
            match q.op {
                Op::Results {
                    items,
                    ack: Some(a),
                    ..
                } if items
                    .iter()
                    .any(|i| written.lost_results.contains(&i.log_id)) =>
                {
                    a.failed()
                }
                Op::Flush(a) => {
                    let _ = a.send(!written.lost_any);
                }
                _ => {}
            }
        }
    }
}

/// Whether `e` is the database refusing the data of a statement (a value too long for its
/// column, a character it cannot store, a constraint), or a bug in a batch: splitting the batch
/// finds the row. Anything else (no connection, a timeout) is the same for every row.
fn refused_data(e: &Error) -> bool {
    use sea_orm::{DbErr, RuntimeErr, sqlx};
    match e {
        Error::Db(
            DbErr::Exec(RuntimeErr::SqlxError(s)) | DbErr::Query(RuntimeErr::SqlxError(s)),
        ) => {
            matches!(**s, sqlx::Error::Database(_) | sqlx::Error::Encode(_))
        }
        Error::Stopped(_) => true,
        _ => false,
    }
}

/// Writes `rows` in one transaction, retrying whole on failures that are not about the data;
/// a batch whose data the database refuses is split ([`split_and_write`]). `reduced`: these
/// rows are already in their reduced form.
fn write_all(db: &DatabaseConnection, rows: Vec<Row>, reduced: bool) -> BoxFuture<'_, Written> {
    async move {
        let mut attempt = 0;
        loop {
            attempt += 1;
            match write_once(db, &rows).await {
                Ok(finished) => {
                    return Written {
                        finished,
                        ..Default::default()
                    };
                }
                Err(e) if refused_data(&e) && !reduced => {
                    return split_and_write(db, rows, e).await;
                }
                Err(e) if attempt < ATTEMPTS && !refused_data(&e) => {
                    tracing::warn!(attempt, error = %e, "run-row batch failed; retrying");
                    tokio::time::sleep(Duration::from_millis(100 << attempt)).await;
                }
                Err(e) => {
                    tracing::error!(rows = rows.len(), error = %e, "run-row batch given up");
                    return Written::lost(&rows);
                }
            }
        }
    }
    .boxed()
}

/// Writes the halves of a refused batch apart; a row refused alone is written reduced, with
/// the database's reason in place of its texts.
async fn split_and_write(db: &DatabaseConnection, mut rows: Vec<Row>, e: Error) -> Written {
    if rows.len() > 1 {
        let second = rows.split_off(rows.len() / 2);
        let first = write_all(db, rows, false).await;
        return first.merge(write_all(db, second, false).await);
    }
    let why = e.to_string();
    match rows.first().and_then(|r| r.reduced(&why)) {
        Some(reduced) => {
            tracing::error!(row = ?short(&rows[0]), error = %why, "a run row was refused; stored reduced");
            write_all(db, vec![reduced], true).await
        }
        None => {
            tracing::error!(row = ?short(&rows[0]), error = %why, "a run row was refused; given up");
            Written::lost(&rows)
        }
    }
}

/// What a log line says of a row: its kind and run (never its texts).
fn short(row: &Row) -> (&'static str, i64) {
    match row {
        Row::Outcome(r) => ("outcome", r.log_id),
        Row::Result(h, _) => ("result", h.log_id),
        Row::Audit(_) => ("audit entry", 0),
    }
}

/// One transaction writing `rows`; a panic while writing is the batch's failure, not the
/// writer's end.
async fn write_once(db: &DatabaseConnection, rows: &[Row]) -> Result<Vec<FinishedRun>> {
    let txn = db.begin().await?;
    match std::panic::AssertUnwindSafe(write(&txn, rows))
        .catch_unwind()
        .await
    {
        Ok(Ok(f)) => {
            txn.commit().await?;
            Ok(f)
        }
        Ok(Err(e)) => Err(e),
        Err(_) => Err(Error::Stopped("a run-row batch panicked")),
    }
}

async fn write(db: &impl ConnectionTrait, rows: &[Row]) -> Result<Vec<FinishedRun>> {
    let mut entries = Vec::new();
    let mut outcomes = Vec::new();
    let mut items = Vec::new();
    let mut at = 0;
    for r in rows {
        match r {
            Row::Audit(e) => entries.push(e.clone()),
            Row::Outcome(o) => outcomes.push(o.clone()),
            Row::Result(h, t) => {
                items.push(h.clone());
                at = at.max(*t);
            }
        }
    }
    crate::store::audit::record_many(db, entries).await?;
    log_batches::record_triggers(db, &outcomes).await?;
    let written = log_batches::record_handles(db, &items, at).await?;
    let ok: Vec<log_batches::Finished> = written
        .into_iter()
        .zip(&items)
        .filter(|(_, i)| i.code == SUCCESS_CODE)
        .filter_map(|(f, _)| f)
        .collect();
    if ok.is_empty() {
        return Ok(Vec::new());
    }
    let lists =
        log_batches::child_lists(db, &ok.iter().map(|f| f.job_id).collect::<Vec<_>>()).await?;
    Ok(ok
        .into_iter()
        .zip(lists)
        .filter_map(|(f, l)| {
            l.filter(|c| !c.trim().is_empty())
                .map(|children| FinishedRun {
                    id: f.id,
                    job_id: f.job_id,
                    chain_depth: f.chain_depth,
                    children,
                })
        })
        .collect())
}
