//! [`Tx`] on the run-row writer's own SQLite connection (a SQLite file this node holds): the
//! same reads and writes as [`super::tx::SeaTx`], as cached prepared statements in one
//! transaction on the writer's thread. The rules are async (they are shared with the sea-orm
//! path); here no statement ever waits, so [`in_tx`] drives them to the end at once.

use std::collections::HashSet;
use std::sync::LazyLock;

use entity::xjob_workflow as wf;
use entity::xjob_workflow_node_run as nodes;
use entity::xjob_workflow_run as runs;
use parking_lot::Mutex;
use rusqlite::{Connection, OptionalExtension, params};

use super::status;
use super::tx::{Job, NodeUpdate, PendingRow, Tx};
use crate::error::Result;
use crate::model::{AlarmStatus, TriggerType, fire_state};
use crate::store::sqlite_sync::{self as sync, naive_text};

/// [`Tx`] on a rusqlite connection inside `BEGIN IMMEDIATE` (see [`in_tx`]). The connection
/// is behind a mutex only so the shared async rules may hold a reference to it: one thread
/// uses it, and no lock is held across an await.
pub(crate) struct SqliteTx<'c> {
    c: Mutex<&'c mut Connection>,
}

/// Runs `f` in one write transaction on `conn`: committed when it answers `Ok`, rolled back
/// otherwise.
pub(crate) fn in_tx<R>(
    conn: &mut Connection,
    f: impl AsyncFnOnce(&SqliteTx<'_>) -> Result<R>,
) -> Result<R> {
    conn.execute_batch("BEGIN IMMEDIATE")?;
    let tx = SqliteTx {
        c: Mutex::new(conn),
    };
    let out = futures::executor::block_on(f(&tx));
    let conn = tx.c.into_inner();
    match out {
        Ok(v) => {
            conn.execute_batch("COMMIT")?;
            Ok(v)
        }
        Err(e) => {
            if let Err(r) = conn.execute_batch("ROLLBACK") {
                tracing::error!(error = %r, "workflow transaction not rolled back");
            }
            Err(e)
        }
    }
}

const RUN_COLUMNS: &str = "id, workflow_id, version, job_group, status, trigger_type, params, \
    context, parent_node_run, depth, seq, start_time, end_time, message";

fn run(r: &rusqlite::Row<'_>) -> rusqlite::Result<runs::Model> {
    Ok(runs::Model {
        id: r.get(0)?,
        workflow_id: r.get(1)?,
        version: r.get(2)?,
        job_group: r.get(3)?,
        status: r.get(4)?,
        trigger_type: r.get(5)?,
        params: r.get(6)?,
        context: r.get(7)?,
        parent_node_run: r.get(8)?,
        depth: r.get(9)?,
        seq: r.get(10)?,
        start_time: r.get(11)?,
        end_time: r.get(12)?,
        message: r.get(13)?,
    })
}

const NODE_COLUMNS: &str = "id, run_id, node_key, attempt, max_attempts, state, decision, \
    shards_total, shards_done, shards_failed, child_run, start_time, end_time, message, cleared";

fn node(r: &rusqlite::Row<'_>) -> rusqlite::Result<nodes::Model> {
    Ok(nodes::Model {
        id: r.get(0)?,
        run_id: r.get(1)?,
        node_key: r.get(2)?,
        attempt: r.get(3)?,
        max_attempts: r.get(4)?,
        state: r.get(5)?,
        decision: r.get(6)?,
        shards_total: r.get(7)?,
        shards_done: r.get(8)?,
        shards_failed: r.get(9)?,
        child_run: r.get(10)?,
        start_time: r.get(11)?,
        end_time: r.get(12)?,
        message: r.get(13)?,
        cleared: r.get(14)?,
    })
}

const WORKFLOW_COLUMNS: &str = "id, job_group, name, description, author, version, definition, \
    created_at, updated_at, schedule_type, schedule_conf, misfire_strategy, trigger_status, \
    trigger_next_time, concurrency, max_queued";

fn workflow(r: &rusqlite::Row<'_>) -> rusqlite::Result<wf::Model> {
    Ok(wf::Model {
        id: r.get(0)?,
        job_group: r.get(1)?,
        name: r.get(2)?,
        description: r.get(3)?,
        author: r.get(4)?,
        version: r.get(5)?,
        definition: r.get(6)?,
        created_at: r.get(7)?,
        updated_at: r.get(8)?,
        schedule_type: r.get(9)?,
        schedule_conf: r.get(10)?,
        misfire_strategy: r.get(11)?,
        trigger_status: r.get(12)?,
        trigger_next_time: r.get(13)?,
        concurrency: r.get(14)?,
        max_queued: r.get(15)?,
    })
}

/// `INSERT INTO table (columns but the first, `id`) VALUES (?1, ?2, …)`.
fn insert_sql(table: &str, columns: &str) -> String {
    let cols = columns.trim_start_matches("id, ");
    let marks: Vec<String> = (1..=cols.split(',').count())
        .map(|i| format!("?{i}"))
        .collect();
    format!("INSERT INTO {table} ({cols}) VALUES ({})", marks.join(", "))
}

impl SqliteTx<'_> {
    fn with<R>(&self, f: impl FnOnce(&Connection) -> rusqlite::Result<R>) -> Result<R> {
        let c = self.c.lock();
        Ok(f(&c)?)
    }
}

impl Tx for SqliteTx<'_> {
    async fn workflow(&self, id: i32) -> Result<Option<wf::Model>> {
        static SQL: LazyLock<String> =
            LazyLock::new(|| format!("SELECT {WORKFLOW_COLUMNS} FROM xjob_workflow WHERE id = ?1"));
        self.with(|c| {
            c.prepare_cached(&SQL)?
                .query_row(params![id], workflow)
                .optional()
        })
    }

    async fn definition(&self, workflow_id: i32, version: i32) -> Result<Option<String>> {
        self.with(|c| {
            c.prepare_cached(
                "SELECT definition FROM xjob_workflow_version WHERE workflow_id = ?1 \
                 AND version = ?2",
            )?
            .query_row(params![workflow_id, version], |r| r.get(0))
            .optional()
        })
    }

    async fn job(&self, id: i32) -> Result<Option<Job>> {
        self.with(|c| Ok(sync::job_by_id(c, id)?.map(|(j, _)| j)))
    }

    async fn group_addresses(&self, group: i32) -> Result<Option<Option<String>>> {
        self.with(|c| {
            c.prepare_cached("SELECT address_list FROM xxl_job_group WHERE id = ?1")?
                .query_row(params![group], |r| r.get(0))
                .optional()
        })
    }

    async fn lock_workflow(&self, id: i32) -> Result<()> {
        // the transaction holds SQLite's write lock already: nothing else decides meanwhile
        let _ = id;
        Ok(())
    }

    async fn count_top_runs(&self, workflow_id: i32, st: &'static str) -> Result<u64> {
        self.with(|c| {
            // by status: the workflow's index would walk every run it ever had
            c.prepare_cached(
                "SELECT COUNT(*) FROM xjob_workflow_run INDEXED BY i_wf_run_status \
                 WHERE status = ?2 AND workflow_id = ?1 AND parent_node_run IS NULL",
            )?
            .query_row(params![workflow_id, st], |r| r.get::<_, i64>(0))
            .map(|n| n as u64)
        })
    }

    async fn oldest_queued(&self, workflow_id: i32) -> Result<Option<runs::Model>> {
        // by status, as above: it runs each time a run ends
        static SQL: LazyLock<String> = LazyLock::new(|| {
            format!(
                "SELECT {RUN_COLUMNS} FROM xjob_workflow_run INDEXED BY i_wf_run_status \
                 WHERE status = '{}' AND workflow_id = ?1 ORDER BY id LIMIT 1",
                status::QUEUED
            )
        });
        self.with(|c| {
            c.prepare_cached(&SQL)?
                .query_row(params![workflow_id], run)
                .optional()
        })
    }

    async fn promote_run(&self, id: i64, now: i64) -> Result<bool> {
        static SQL: LazyLock<String> = LazyLock::new(|| {
            format!(
                "UPDATE xjob_workflow_run SET status = '{}', start_time = ?2 \
                 WHERE id = ?1 AND status = '{}'",
                status::RUNNING,
                status::QUEUED
            )
        });
        self.with(|c| Ok(c.prepare_cached(&SQL)?.execute(params![id, now])? == 1))
    }

    async fn insert_run(&self, r: &runs::Model) -> Result<i64> {
        static SQL: LazyLock<String> =
            LazyLock::new(|| insert_sql("xjob_workflow_run", RUN_COLUMNS));
        self.with(|c| {
            c.prepare_cached(&SQL)?.execute(params![
                r.workflow_id,
                r.version,
                r.job_group,
                r.status,
                r.trigger_type,
                r.params,
                r.context,
                r.parent_node_run,
                r.depth,
                r.seq,
                r.start_time,
                r.end_time,
                r.message,
            ])?;
            Ok(c.last_insert_rowid())
        })
    }

    async fn run_context(&self, id: i64) -> Result<Option<(String, Option<i64>)>> {
        self.with(|c| {
            c.prepare_cached(
                "SELECT context, parent_node_run FROM xjob_workflow_run WHERE id = ?1",
            )?
            .query_row(params![id], |r| Ok((r.get(0)?, r.get(1)?)))
            .optional()
        })
    }

    async fn lock_run(&self, id: i64) -> Result<Option<runs::Model>> {
        static SQL: LazyLock<String> = LazyLock::new(|| {
            format!(
                "UPDATE xjob_workflow_run SET seq = seq + 1 WHERE id = ?1 AND status = '{}' \
                 RETURNING {RUN_COLUMNS}",
                status::RUNNING
            )
        });
        self.with(|c| {
            c.prepare_cached(&SQL)?
                .query_row(params![id], run)
                .optional()
        })
    }

    async fn end_run(
        &self,
        id: i64,
        st: &'static str,
        now: i64,
        message: Option<String>,
    ) -> Result<()> {
        static SQL: LazyLock<String> = LazyLock::new(|| {
            format!(
                "UPDATE xjob_workflow_run SET status = ?2, end_time = ?3, message = ?4 \
                 WHERE id = ?1 AND status = '{}'",
                status::RUNNING
            )
        });
        self.with(|c| {
            c.prepare_cached(&SQL)?
                .execute(params![id, st, now, message])
                .map(|_| ())
        })
    }

    async fn set_context(&self, id: i64, context: &str) -> Result<()> {
        self.with(|c| {
            c.prepare_cached("UPDATE xjob_workflow_run SET context = ?2 WHERE id = ?1")?
                .execute(params![id, context])
                .map(|_| ())
        })
    }

    async fn node_rows(&self, run_id: i64) -> Result<Vec<nodes::Model>> {
        static SQL: LazyLock<String> = LazyLock::new(|| {
            format!("SELECT {NODE_COLUMNS} FROM xjob_workflow_node_run WHERE run_id = ?1")
        });
        self.with(|c| {
            c.prepare_cached(&SQL)?
                .query_map(params![run_id], node)?
                .collect()
        })
    }

    async fn node(&self, id: i64) -> Result<Option<nodes::Model>> {
        static SQL: LazyLock<String> = LazyLock::new(|| {
            format!("SELECT {NODE_COLUMNS} FROM xjob_workflow_node_run WHERE id = ?1")
        });
        self.with(|c| {
            c.prepare_cached(&SQL)?
                .query_row(params![id], node)
                .optional()
        })
    }

    async fn insert_node(&self, n: &nodes::Model) -> Result<i64> {
        static SQL: LazyLock<String> =
            LazyLock::new(|| insert_sql("xjob_workflow_node_run", NODE_COLUMNS));
        self.with(|c| {
            c.prepare_cached(&SQL)?.execute(params![
                n.run_id,
                n.node_key,
                n.attempt,
                n.max_attempts,
                n.state,
                n.decision,
                n.shards_total,
                n.shards_done,
                n.shards_failed,
                n.child_run,
                n.start_time,
                n.end_time,
                n.message,
                n.cleared,
            ])?;
            Ok(c.last_insert_rowid())
        })
    }

    async fn update_node(&self, id: i64, u: &NodeUpdate) -> Result<()> {
        self.with(|c| {
            match u.end {
                Some((st, end)) => c
                    .prepare_cached(
                        "UPDATE xjob_workflow_node_run SET shards_done = ?2, \
                         shards_failed = ?3, message = ?4, state = ?5, end_time = ?6 \
                         WHERE id = ?1",
                    )?
                    .execute(params![
                        id,
                        u.shards_done,
                        u.shards_failed,
                        u.message,
                        st,
                        end
                    ])?,
                None => c
                    .prepare_cached(
                        "UPDATE xjob_workflow_node_run SET shards_done = ?2, \
                         shards_failed = ?3, message = ?4 WHERE id = ?1",
                    )?
                    .execute(params![id, u.shards_done, u.shards_failed, u.message])?,
            };
            Ok(())
        })
    }

    async fn set_child(&self, id: i64, child: i64, end: Option<(&'static str, i64)>) -> Result<()> {
        self.with(|c| {
            match end {
                Some((st, t)) => c
                    .prepare_cached(
                        "UPDATE xjob_workflow_node_run SET child_run = ?2, state = ?3, \
                         end_time = ?4 WHERE id = ?1",
                    )?
                    .execute(params![id, child, st, t])?,
                None => c
                    .prepare_cached(
                        "UPDATE xjob_workflow_node_run SET child_run = ?2 WHERE id = ?1",
                    )?
                    .execute(params![id, child])?,
            };
            Ok(())
        })
    }

    async fn end_node_if_running(&self, id: i64, st: &'static str, now: i64) -> Result<bool> {
        static SQL: LazyLock<String> = LazyLock::new(|| {
            format!(
                "UPDATE xjob_workflow_node_run SET state = ?2, end_time = ?3 \
                 WHERE id = ?1 AND state = '{}'",
                status::RUNNING
            )
        });
        self.with(|c| Ok(c.prepare_cached(&SQL)?.execute(params![id, st, now])? > 0))
    }

    async fn insert_pending(&self, row: &PendingRow<'_>) -> Result<i64> {
        static SQL: LazyLock<String> = LazyLock::new(|| {
            format!(
                "INSERT INTO xxl_job_log (job_group, job_id, trigger_time, trigger_code, \
                 handle_code, executor_param, executor_sharding_param, \
                 executor_fail_retry_count, alarm_status, fire_time, fire_state, trigger_type, \
                 chain_depth) VALUES (?1, ?2, ?3, 0, 0, ?4, ?5, 0, {}, NULL, {}, '{}', 0)",
                AlarmStatus::Unchecked.code(),
                fire_state::PENDING,
                TriggerType::Workflow.as_str()
            )
        });
        self.with(|c| {
            c.prepare_cached(&SQL)?.execute(params![
                row.job.job_group,
                row.job.id,
                naive_text(row.now),
                row.param,
                row.sharding,
            ])?;
            Ok(c.last_insert_rowid())
        })
    }

    async fn insert_link(
        &self,
        log_id: i64,
        node_run_id: i64,
        run_id: i64,
        shard: i32,
    ) -> Result<()> {
        self.with(|c| {
            c.prepare_cached(
                "INSERT INTO xjob_workflow_node_log (log_id, node_run_id, run_id, shard, done) \
                 VALUES (?1, ?2, ?3, ?4, 0)",
            )?
            .execute(params![log_id, node_run_id, run_id, shard])
            .map(|_| ())
        })
    }

    async fn open_links(&self, log_ids: &[i64]) -> Result<HashSet<i64>> {
        self.with(|c| {
            let mut s = c.prepare_cached(
                "SELECT 1 FROM xjob_workflow_node_log WHERE log_id = ?1 AND done = 0",
            )?;
            let mut out = HashSet::with_capacity(log_ids.len());
            for &id in log_ids {
                if s.exists(params![id])? {
                    out.insert(id);
                }
            }
            Ok(out)
        })
    }

    async fn close_links(&self, log_ids: &[i64]) -> Result<()> {
        self.with(|c| {
            let mut s =
                c.prepare_cached("UPDATE xjob_workflow_node_log SET done = 1 WHERE log_id = ?1")?;
            for &id in log_ids {
                s.execute(params![id])?;
            }
            Ok(())
        })
    }
}

/// Claims pending run rows `ids` (as [`crate::store::logs::claim`]); answers those claimed.
pub(crate) fn claim(c: &mut Connection, ids: &[i64]) -> Result<Vec<i64>> {
    let token: i64 = fire_state::new_claim();
    let tx = c.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
    let mut out = Vec::with_capacity(ids.len());
    {
        static SQL: LazyLock<String> = LazyLock::new(|| {
            format!(
                "UPDATE xxl_job_log SET fire_state = ?2 WHERE id = ?1 AND fire_state + 0 = {}",
                fire_state::PENDING
            )
        });
        let mut s = tx.prepare_cached(&SQL)?;
        for &id in ids {
            if s.execute(params![id, token])? == 1 {
                out.push(id);
            }
        }
    }
    tx.commit()?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::workflow_runs::{Finished, Runs, tx::SeaTx};
    use sea_orm::{ConnectionTrait, Statement, TransactionTrait};

    /// Open run rows of the runs (log id, run id, node key).
    async fn open_rows(db: &sea_orm::DatabaseConnection) -> Vec<(i64, i64, String)> {
        let rows = db
            .query_all_raw(Statement::from_string(
                db.get_database_backend(),
                "SELECT nl.log_id, nl.run_id, nr.node_key FROM xjob_workflow_node_log nl \
                 JOIN xjob_workflow_node_run nr ON nr.id = nl.node_run_id WHERE nl.done = 0 \
                 ORDER BY nl.log_id",
            ))
            .await
            .unwrap();
        rows.iter()
            .map(|r| {
                (
                    r.try_get("", "log_id").unwrap(),
                    r.try_get("", "run_id").unwrap(),
                    r.try_get("", "node_key").unwrap(),
                )
            })
            .collect()
    }

    /// What a run recorded, without ids: its status, context and message, each node run's
    /// key, attempt, state, decision, shards and message, and each run row's param.
    async fn recorded(db: &sea_orm::DatabaseConnection, run: i64) -> String {
        let r = crate::store::workflow_runs::get(db, run).await.unwrap();
        let mut out = format!("{} {} {:?}\n", r.status, r.context, r.message);
        let mut nodes = crate::store::workflow_runs::node_runs(db, run)
            .await
            .unwrap();
        nodes.sort_by(|a, b| (&a.0.node_key, a.0.attempt).cmp(&(&b.0.node_key, b.0.attempt)));
        for (n, logs) in nodes {
            out.push_str(&format!(
                "{} {}/{} {} {:?} {}/{}/{} {:?} {}",
                n.node_key,
                n.attempt,
                n.max_attempts,
                n.state,
                n.decision,
                n.shards_total,
                n.shards_done,
                n.shards_failed,
                n.message,
                n.cleared
            ));
            for id in logs {
                let l = crate::store::logs::get(db, id).await.unwrap();
                out.push_str(&format!(" [{:?} {}]", l.executor_param, l.fire_state));
            }
            out.push('\n');
        }
        out
    }

    /// One run moved on by sea-orm statements and one by the writer connection's statements,
    /// given the same results, record the same rows: decisions on the context, values passed
    /// downstream, a failure skipping what depends on it, the run's end.
    #[tokio::test]
    async fn both_kinds_of_transaction_record_the_same_runs() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("w.db");
        let db = crate::store::tests::file_db(&path).await;
        let t0 = 1_800_000_000_000;
        let now = crate::clock::ms_to_naive(t0);
        let g = crate::store::groups::insert(&db, "app", "App", 0, None, now)
            .await
            .unwrap();
        let spec = crate::JobSpec::cron(g, "j", "0 0 3 * * ?", "h")
            .validate(chrono_tz::UTC, now)
            .unwrap();
        let job = crate::store::jobs::insert(&db, spec).await.unwrap();
        let def = serde_json::json!({
            "nodes": [
                { "key": "a", "type": "JOB", "jobId": job },
                { "key": "b", "type": "JOB", "jobId": job, "param": "k=${k}" },
                { "key": "d", "type": "DECISION", "expression": "k == 1" },
                { "key": "c", "type": "JOB", "jobId": job },
                { "key": "bad", "type": "JOB", "jobId": job },
                { "key": "after", "type": "JOB", "jobId": job },
                { "key": "gone", "type": "JOB", "jobId": 999 }
            ],
            "edges": [
                { "from": "a", "to": "b" },
                { "from": "a", "to": "d" },
                { "from": "d", "to": "c", "condition": "TRUE" },
                { "from": "a", "to": "bad" },
                { "from": "bad", "to": "after" },
                { "from": "c", "to": "gone" }
            ]
        });
        let w = crate::store::workflows::insert(
            &db,
            entity::xjob_workflow::Model {
                id: 0,
                job_group: g,
                name: "w".into(),
                description: None,
                author: "t".into(),
                version: 1,
                definition: def.to_string(),
                created_at: t0,
                updated_at: t0,
                schedule_type: "NONE".into(),
                schedule_conf: None,
                misfire_strategy: "DO_NOTHING".into(),
                trigger_status: 0,
                trigger_next_time: 0,
                concurrency: "PARALLEL".into(),
                max_queued: 0,
            },
        )
        .await
        .unwrap();
        let runs = Runs::default();
        let mut conn = Connection::open(&path).unwrap();
        let ctx = || crate::store::workflow_runs::initial_context(Some(r#"{"p":1}"#)).unwrap();
        let txn = db.begin().await.unwrap();
        let (sea_run, _) = runs
            .start_tx(&SeaTx(&txn), w.id, TriggerType::Api, None, ctx(), t0)
            .await
            .unwrap();
        txn.commit().await.unwrap();
        let (file_run, _) = in_tx(&mut conn, async |tx| {
            runs.start_tx(tx, w.id, TriggerType::Api, None, ctx(), t0)
                .await
        })
        .unwrap();
        // results as an executor would send them: `a` puts k=1, `bad` fails
        for step in 1..10 {
            let open = open_rows(&db).await;
            if open.is_empty() {
                break;
            }
            for (log_id, _, key) in &open {
                let (code, msg) = match key.as_str() {
                    "a" => (200, "xjob.context={\"k\":1}\nfine"),
                    "bad" => (500, "broken"),
                    _ => (200, "fine"),
                };
                db.execute_raw(Statement::from_sql_and_values(
                    db.get_database_backend(),
                    "UPDATE xxl_job_log SET handle_code = ?, handle_msg = ?, fire_state = 0 \
                     WHERE id = ?",
                    [code.into(), msg.into(), (*log_id).into()],
                ))
                .await
                .unwrap();
            }
            let done = runs.finished(&db, 1000).await.unwrap();
            let (sea, file): (Vec<Finished>, Vec<Finished>) =
                done.into_iter().partition(|f| f.run_id == sea_run);
            let now = t0 + step * 1000;
            let txn = db.begin().await.unwrap();
            runs.apply_in(&SeaTx(&txn), sea, now).await.unwrap();
            txn.commit().await.unwrap();
            in_tx(&mut conn, async |tx| runs.apply_in(tx, file, now).await).unwrap();
        }
        let (sea, file) = (recorded(&db, sea_run).await, recorded(&db, file_run).await);
        assert_eq!(sea, file);
        // and what they recorded is the rules' answer
        assert!(sea.starts_with("FAILED {\"k\":1,\"p\":1}"), "{sea}");
        for line in [
            "b 1/1 SUCCEEDED None 1/1/0 None 0 [Some(\"k=1\") 0]",
            "d 1/1 SUCCEEDED Some(1)",
            "after 1/1 SKIPPED",
            "gone 1/1 FAILED None 0/0/0 Some(\"job 999 not found\")",
        ] {
            assert!(sea.contains(line), "{line} in {sea}");
        }
    }
}
