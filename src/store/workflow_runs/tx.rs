//! What a workflow transaction reads and writes, written once as statements on the store's
//! transaction port ([`Port`]): a sea-orm transaction (PostgreSQL, MySQL/MariaDB, and SQLite
//! where the run-row writer does not hold the file), or the run-row writer's own SQLite
//! connection, where a transition costs no thread hop per statement. The rules that decide a
//! run ([`super::Runs`]) are written against the [`Tx`] trait, which names each read and write.

use std::collections::HashSet;
use std::future::Future;

use entity::xjob_workflow as wf;
use entity::xjob_workflow_node_run as nodes;
use entity::xjob_workflow_run as runs;
use sea_orm::DbBackend;
use std::sync::LazyLock;

use super::status;
use crate::clock::ms_to_naive;
use crate::error::{Error, Result};
use crate::model::{AlarmStatus, TriggerType, fire_state};
use crate::store::port::{FromRow, IN_CHUNK, Port, Row, Value, in_list};

pub(crate) type Job = entity::xxl_job_info::Model;

/// A node run's counters after a result (and its end, when it completed).
#[derive(Clone, Debug)]
pub(crate) struct NodeUpdate {
    pub(crate) shards_done: i32,
    pub(crate) shards_failed: i32,
    pub(crate) message: Option<String>,
    /// `(state, end time)` when the node run ended.
    pub(crate) end: Option<(&'static str, i64)>,
}

/// A run row of a job node to dispatch (trigger type WORKFLOW, no fire time), with its link.
#[derive(Clone, Debug)]
pub(crate) struct PendingRow<'a> {
    pub(crate) job: &'a Job,
    pub(crate) param: Option<&'a str>,
    pub(crate) sharding: Option<&'a str>,
    pub(crate) now: i64,
    /// The node run it is a shard of…
    pub(crate) node_run_id: i64,
    /// …in this run…
    pub(crate) run_id: i64,
    /// …as this shard.
    pub(crate) shard: i32,
}

/// The reads and writes of a workflow transaction (see the module docs). Every method runs in
/// the transaction the implementation holds; none commits.
pub(crate) trait Tx: Sync {
    /// Readies a pass over results of `runs`' rows `log_ids`: an implementation that keeps
    /// rows ([`super::pass::Pass`]) takes the runs' locks, closes the rows' links and reads the
    /// runs' node rows here, for the whole pass at once. The others do each as it comes.
    fn prepare(&self, runs: &[i64], log_ids: &[i64]) -> impl Future<Output = Result<()>> + Send {
        let _ = (runs, log_ids);
        async { Ok(()) }
    }
    /// A workflow.
    fn workflow(&self, id: i32) -> impl Future<Output = Result<Option<wf::Model>>> + Send;
    /// A workflow version's definition (its JSON).
    fn definition(
        &self,
        workflow_id: i32,
        version: i32,
    ) -> impl Future<Output = Result<Option<String>>> + Send;
    /// A job.
    fn job(&self, id: i32) -> impl Future<Output = Result<Option<Job>>> + Send;
    /// A group's address list (`None`: no such group).
    fn group_addresses(
        &self,
        group: i32,
    ) -> impl Future<Output = Result<Option<Option<String>>>> + Send;
    /// Takes workflow `id`'s row lock (two starts of one workflow decide one at a time).
    fn lock_workflow(&self, id: i32) -> impl Future<Output = Result<()>> + Send;
    /// How many top-level runs of `workflow_id` have `status`.
    fn count_top_runs(
        &self,
        workflow_id: i32,
        status: &'static str,
    ) -> impl Future<Output = Result<u64>> + Send;
    /// The oldest queued run of `workflow_id`.
    fn oldest_queued(
        &self,
        workflow_id: i32,
    ) -> impl Future<Output = Result<Option<runs::Model>>> + Send;
    /// Moves queued run `id` to RUNNING, started at `now`; answers whether it was queued.
    fn promote_run(&self, id: i64, now: i64) -> impl Future<Output = Result<bool>> + Send;
    /// Inserts a run (its `id` ignored); answers its id.
    fn insert_run(&self, r: &runs::Model) -> impl Future<Output = Result<i64>> + Send;
    /// Run `id`'s own context and its parent node run (a nested run's), without a lock.
    fn run_context(
        &self,
        id: i64,
    ) -> impl Future<Output = Result<Option<(String, Option<i64>)>>> + Send;
    /// Takes run `id`'s row lock (bumps its `seq`) if it is running; answers the run.
    fn lock_run(&self, id: i64) -> impl Future<Output = Result<Option<runs::Model>>> + Send;
    /// Ends running run `id`.
    fn end_run(
        &self,
        id: i64,
        status: &'static str,
        now: i64,
        message: Option<String>,
    ) -> impl Future<Output = Result<()>> + Send;
    /// Stores run `id`'s context.
    fn set_context(&self, id: i64, context: &str) -> impl Future<Output = Result<()>> + Send;
    /// Every node row of run `run_id`.
    fn node_rows(&self, run_id: i64) -> impl Future<Output = Result<Vec<nodes::Model>>> + Send;
    /// One node row.
    fn node(&self, id: i64) -> impl Future<Output = Result<Option<nodes::Model>>> + Send;
    /// Inserts a node row (its `id` ignored); answers its id.
    fn insert_node(&self, n: &nodes::Model) -> impl Future<Output = Result<i64>> + Send;
    /// Records a result's effect on node run `id`.
    fn update_node(&self, id: i64, u: &NodeUpdate) -> impl Future<Output = Result<()>> + Send;
    /// Records node run `id`'s nested run, and its end when it ended at once.
    fn set_child(
        &self,
        id: i64,
        child: i64,
        end: Option<(&'static str, i64)>,
    ) -> impl Future<Output = Result<()>> + Send;
    /// Ends node run `id` if it is running; answers whether it was.
    fn end_node_if_running(
        &self,
        id: i64,
        state: &'static str,
        now: i64,
    ) -> impl Future<Output = Result<bool>> + Send;
    /// Inserts a run row claimed by this node for dispatch and its link to its node run;
    /// answers the row's id.
    fn insert_pending(&self, row: &PendingRow<'_>) -> impl Future<Output = Result<i64>> + Send;
    /// Closes those of `log_ids`' links still open; answers which were.
    fn close_links(&self, log_ids: &[i64]) -> impl Future<Output = Result<HashSet<i64>>> + Send;
}

pub(crate) const RUN_COLUMNS: &str = "id, workflow_id, version, job_group, status, trigger_type, params, \
    context, parent_node_run, depth, seq, start_time, end_time, message";

impl FromRow for runs::Model {
    fn from_row(r: &Row<'_>) -> Result<Self> {
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
}

pub(crate) const NODE_COLUMNS: &str = "id, run_id, node_key, attempt, max_attempts, state, decision, \
    shards_total, shards_done, shards_failed, child_run, start_time, end_time, message, cleared";

impl FromRow for nodes::Model {
    fn from_row(r: &Row<'_>) -> Result<Self> {
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
}

/// A run's values of [`RUN_COLUMNS`], in their order.
pub(crate) fn run_values(r: &runs::Model) -> [Value; 14] {
    [
        r.id.into(),
        r.workflow_id.into(),
        r.version.into(),
        r.job_group.into(),
        r.status.clone().into(),
        r.trigger_type.clone().into(),
        r.params.clone().into(),
        r.context.clone().into(),
        r.parent_node_run.into(),
        r.depth.into(),
        r.seq.into(),
        r.start_time.into(),
        r.end_time.into(),
        r.message.clone().into(),
    ]
}

/// A node row's values of [`NODE_COLUMNS`], in their order.
pub(crate) fn node_values(n: &nodes::Model) -> [Value; 15] {
    [
        n.id.into(),
        n.run_id.into(),
        n.node_key.clone().into(),
        n.attempt.into(),
        n.max_attempts.into(),
        n.state.clone().into(),
        n.decision.into(),
        n.shards_total.into(),
        n.shards_done.into(),
        n.shards_failed.into(),
        n.child_run.into(),
        n.start_time.into(),
        n.end_time.into(),
        n.message.clone().into(),
        n.cleared.into(),
    ]
}

const WORKFLOW_COLUMNS: &str = "id, job_group, name, description, author, version, definition, \
    created_at, updated_at, schedule_type, schedule_conf, misfire_strategy, trigger_status, \
    trigger_next_time, concurrency, max_queued";

impl FromRow for wf::Model {
    fn from_row(r: &Row<'_>) -> Result<Self> {
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
}

/// `INSERT INTO table (columns but the first, `id`) VALUES (?, ?, …)`.
fn insert_sql(table: &str, columns: &str) -> String {
    let cols = columns.trim_start_matches("id, ");
    let marks = vec!["?"; cols.split(',').count()].join(", ");
    format!("INSERT INTO {table} ({cols}) VALUES ({marks})")
}

/// The columns of a job node's run row as a workflow records it (one row of them:
/// [`PENDING_ROW`]).
pub(crate) const PENDING_COLUMNS: &str = "job_group, job_id, trigger_time, trigger_code, \
    handle_code, executor_param, executor_sharding_param, executor_fail_retry_count, \
    alarm_status, fire_time, fire_state, trigger_type, chain_depth";

/// One row of [`PENDING_COLUMNS`]: group, job, trigger time, param, sharding and claim token
/// bound ([`pending_args`]), the rest as a pending row starts.
pub(crate) static PENDING_ROW: LazyLock<String> = LazyLock::new(|| {
    format!(
        "(?, ?, ?, 0, 0, ?, ?, 0, {}, NULL, ?, '{}', 0)",
        AlarmStatus::Unchecked.code(),
        TriggerType::Workflow.as_str()
    )
});

/// The bound values of a [`PENDING_ROW`]: claimed by this node (`claim`) as it is recorded
/// (see `Runs::transact`).
pub(crate) fn pending_args(
    group: i32,
    job_id: i32,
    now: i64,
    param: Option<&str>,
    sharding: Option<&str>,
    claim: i64,
) -> [Value; 6] {
    [
        group.into(),
        job_id.into(),
        ms_to_naive(now).into(),
        param.map(str::to_string).into(),
        sharding.map(str::to_string).into(),
        claim.into(),
    ]
}

/// The links' table and the columns a link is inserted with.
pub(crate) const LINKS: &str = "xjob_workflow_node_log (log_id, node_run_id, run_id, shard, done)";

/// A job node's run row, claimed for dispatch ([`pending_args`]).
static PENDING: LazyLock<String> = LazyLock::new(|| {
    format!(
        "INSERT INTO xxl_job_log ({PENDING_COLUMNS}) VALUES {}",
        *PENDING_ROW
    )
});

/// [`PENDING`] and its link (node run, run, shard) in one PostgreSQL statement.
static PENDING_LINKED: LazyLock<String> = LazyLock::new(|| {
    format!(
        "WITH l AS ({} RETURNING id) INSERT INTO xjob_workflow_node_log \
         (log_id, node_run_id, run_id, shard, done) SELECT id, ?, ?, ?, 0 FROM l \
         RETURNING log_id",
        *PENDING
    )
});

/// One statement text per backend, rendered once.
macro_rules! sql {
    ($($arg:tt)*) => {{
        static SQL: LazyLock<String> = LazyLock::new(|| format!($($arg)*));
        SQL.as_str()
    }};
}

impl Tx for Port<'_> {
    async fn workflow(&self, id: i32) -> Result<Option<wf::Model>> {
        let sql = sql!("SELECT {WORKFLOW_COLUMNS} FROM xjob_workflow WHERE id = ?");
        self.row(sql, &[id.into()]).await
    }

    async fn definition(&self, workflow_id: i32, version: i32) -> Result<Option<String>> {
        let sql = "SELECT definition FROM xjob_workflow_version WHERE workflow_id = ? \
                   AND version = ?";
        self.row(sql, &[workflow_id.into(), version.into()]).await
    }

    async fn job(&self, id: i32) -> Result<Option<Job>> {
        crate::store::jobs::by_id(self, id).await
    }

    async fn group_addresses(&self, group: i32) -> Result<Option<Option<String>>> {
        let sql = "SELECT address_list FROM xxl_job_group WHERE id = ?";
        self.row(sql, &[group.into()]).await
    }

    async fn lock_workflow(&self, id: i32) -> Result<()> {
        // a write transaction on SQLite holds the database's write lock already
        if self.backend() != DbBackend::Sqlite {
            let sql = "UPDATE xjob_workflow SET max_queued = max_queued WHERE id = ?";
            self.execute(sql, &[id.into()]).await?;
        }
        Ok(())
    }

    async fn count_top_runs(&self, workflow_id: i32, st: &'static str) -> Result<u64> {
        // by status on SQLite: the workflow's index would walk every run it ever had
        let sql = if self.backend() == DbBackend::Sqlite {
            "SELECT COUNT(*) FROM xjob_workflow_run INDEXED BY i_wf_run_status \
             WHERE status = ? AND workflow_id = ? AND parent_node_run IS NULL"
        } else {
            "SELECT COUNT(*) FROM xjob_workflow_run \
             WHERE status = ? AND workflow_id = ? AND parent_node_run IS NULL"
        };
        let n: Option<i64> = self.row(sql, &[st.into(), workflow_id.into()]).await?;
        Ok(n.unwrap_or(0) as u64)
    }

    async fn oldest_queued(&self, workflow_id: i32) -> Result<Option<runs::Model>> {
        // by status, as above: it runs each time a run ends
        let sql = if self.backend() == DbBackend::Sqlite {
            sql!(
                "SELECT {RUN_COLUMNS} FROM xjob_workflow_run INDEXED BY i_wf_run_status \
                 WHERE status = '{}' AND workflow_id = ? ORDER BY id LIMIT 1",
                status::QUEUED
            )
        } else {
            sql!(
                "SELECT {RUN_COLUMNS} FROM xjob_workflow_run \
                 WHERE status = '{}' AND workflow_id = ? ORDER BY id LIMIT 1",
                status::QUEUED
            )
        };
        self.row(sql, &[workflow_id.into()]).await
    }

    async fn promote_run(&self, id: i64, now: i64) -> Result<bool> {
        let sql = sql!(
            "UPDATE xjob_workflow_run SET status = '{}', start_time = ? \
             WHERE id = ? AND status = '{}'",
            status::RUNNING,
            status::QUEUED
        );
        Ok(self.execute(sql, &[now.into(), id.into()]).await? == 1)
    }

    async fn insert_run(&self, r: &runs::Model) -> Result<i64> {
        let sql = sql!("{}", insert_sql("xjob_workflow_run", RUN_COLUMNS));
        self.insert(sql, &run_values(r)[1..]).await
    }

    async fn run_context(&self, id: i64) -> Result<Option<(String, Option<i64>)>> {
        let sql = "SELECT context, parent_node_run FROM xjob_workflow_run WHERE id = ?";
        self.row(sql, &[id.into()]).await
    }

    async fn lock_run(&self, id: i64) -> Result<Option<runs::Model>> {
        let update = sql!(
            "UPDATE xjob_workflow_run SET seq = seq + 1 WHERE id = ? AND status = '{}'",
            status::RUNNING
        );
        // one statement where UPDATE … RETURNING exists (not MySQL/MariaDB)
        if self.backend() != DbBackend::MySql {
            let sql = sql!(
                "UPDATE xjob_workflow_run SET seq = seq + 1 WHERE id = ? AND status = '{}' \
                 RETURNING {RUN_COLUMNS}",
                status::RUNNING
            );
            return self.row(sql, &[id.into()]).await;
        }
        if self.execute(update, &[id.into()]).await? == 0 {
            return Ok(None);
        }
        let sql = sql!("SELECT {RUN_COLUMNS} FROM xjob_workflow_run WHERE id = ?");
        self.row(sql, &[id.into()]).await
    }

    async fn end_run(
        &self,
        id: i64,
        st: &'static str,
        now: i64,
        message: Option<String>,
    ) -> Result<()> {
        let sql = sql!(
            "UPDATE xjob_workflow_run SET status = ?, end_time = ?, message = ? \
             WHERE id = ? AND status = '{}'",
            status::RUNNING
        );
        let args = [st.into(), now.into(), message.into(), id.into()];
        self.execute(sql, &args).await.map(drop)
    }

    async fn set_context(&self, id: i64, context: &str) -> Result<()> {
        let sql = "UPDATE xjob_workflow_run SET context = ? WHERE id = ?";
        self.execute(sql, &[context.into(), id.into()])
            .await
            .map(drop)
    }

    async fn node_rows(&self, run_id: i64) -> Result<Vec<nodes::Model>> {
        let sql = sql!("SELECT {NODE_COLUMNS} FROM xjob_workflow_node_run WHERE run_id = ?");
        self.rows(sql, &[run_id.into()]).await
    }

    async fn node(&self, id: i64) -> Result<Option<nodes::Model>> {
        let sql = sql!("SELECT {NODE_COLUMNS} FROM xjob_workflow_node_run WHERE id = ?");
        self.row(sql, &[id.into()]).await
    }

    async fn insert_node(&self, n: &nodes::Model) -> Result<i64> {
        let sql = sql!("{}", insert_sql("xjob_workflow_node_run", NODE_COLUMNS));
        self.insert(sql, &node_values(n)[1..]).await
    }

    async fn update_node(&self, id: i64, u: &NodeUpdate) -> Result<()> {
        let mut args: Vec<Value> = vec![
            u.shards_done.into(),
            u.shards_failed.into(),
            u.message.clone().into(),
        ];
        let sql = match u.end {
            Some((st, end)) => {
                args.extend([st.into(), end.into()]);
                "UPDATE xjob_workflow_node_run SET shards_done = ?, shards_failed = ?, \
                 message = ?, state = ?, end_time = ? WHERE id = ?"
            }
            None => {
                "UPDATE xjob_workflow_node_run SET shards_done = ?, shards_failed = ?, \
                 message = ? WHERE id = ?"
            }
        };
        args.push(id.into());
        self.execute(sql, &args).await.map(drop)
    }

    async fn set_child(&self, id: i64, child: i64, end: Option<(&'static str, i64)>) -> Result<()> {
        match end {
            Some((st, t)) => {
                let sql = "UPDATE xjob_workflow_node_run SET child_run = ?, state = ?, \
                           end_time = ? WHERE id = ?";
                self.execute(sql, &[child.into(), st.into(), t.into(), id.into()])
                    .await
            }
            None => {
                let sql = "UPDATE xjob_workflow_node_run SET child_run = ? WHERE id = ?";
                self.execute(sql, &[child.into(), id.into()]).await
            }
        }
        .map(drop)
    }

    async fn end_node_if_running(&self, id: i64, st: &'static str, now: i64) -> Result<bool> {
        let sql = sql!(
            "UPDATE xjob_workflow_node_run SET state = ?, end_time = ? \
             WHERE id = ? AND state = '{}'",
            status::RUNNING
        );
        Ok(self
            .execute(sql, &[st.into(), now.into(), id.into()])
            .await?
            > 0)
    }

    async fn insert_pending(&self, row: &PendingRow<'_>) -> Result<i64> {
        let mut args: Vec<Value> = pending_args(
            row.job.job_group,
            row.job.id,
            row.now,
            row.param,
            row.sharding,
            fire_state::new_claim(),
        )
        .into();
        let link = [row.node_run_id.into(), row.run_id.into(), row.shard.into()];
        if self.backend() == DbBackend::Postgres {
            // the row and its link in one round trip
            args.extend(link);
            return self
                .row(&PENDING_LINKED, &args)
                .await?
                .ok_or_else(|| sea_orm::DbErr::RecordNotInserted.into());
        }
        let log_id = self.insert(&PENDING, &args).await?;
        let sql = sql!("INSERT INTO {LINKS} VALUES (?, ?, ?, ?, 0)");
        let mut args = vec![log_id.into()];
        args.extend(link);
        self.execute(sql, &args).await?;
        Ok(log_id)
    }

    async fn close_links(&self, log_ids: &[i64]) -> Result<HashSet<i64>> {
        let mut open = HashSet::with_capacity(log_ids.len());
        for chunk in log_ids.chunks(IN_CHUNK) {
            let (marks, args) = in_list(chunk);
            let mysql = self.backend() == DbBackend::MySql;
            // on MySQL by the primary key: through `(done, log_id)` InnoDB would lock that
            // index's gaps too, where starts insert their open links
            let hint = if mysql { " FORCE INDEX (PRIMARY)" } else { "" };
            let close = format!(
                "UPDATE xjob_workflow_node_log{hint} SET done = 1 WHERE log_id IN ({marks}) \
                 AND done = 0"
            );
            // one statement where UPDATE … RETURNING exists (not MySQL/MariaDB; there the
            // caller's run lock keeps the links as read until the update)
            if !mysql {
                open.extend(
                    self.rows::<i64>(&format!("{close} RETURNING log_id"), &args)
                        .await?,
                );
                continue;
            }
            let sql = format!(
                "SELECT log_id FROM xjob_workflow_node_log WHERE log_id IN ({marks}) AND done = 0"
            );
            open.extend(self.rows::<i64>(&sql, &args).await?);
            self.execute(&close, &args).await?;
        }
        Ok(open)
    }
}

/// Workflow `id`, or the error a missing one is.
pub(crate) async fn workflow_of(tx: &impl Tx, id: i32) -> Result<wf::Model> {
    tx.workflow(id).await?.ok_or(Error::NotFound {
        what: "workflow",
        id: id.into(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::port::file_tx;
    use crate::store::workflow_runs::{Finished, Runs};
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

    /// Writes a result for every open run row, as an executor would send it: `a` puts k=1
    /// into the context, `bad` fails, the others succeed. Answers whether there was one.
    async fn answer_open_rows(db: &sea_orm::DatabaseConnection) -> bool {
        let open = open_rows(db).await;
        for (log_id, _, key) in &open {
            let (code, msg) = match key.as_str() {
                "a" => (200, "xjob.context={\"k\":1}\nfine"),
                "bad" => (500, "broken"),
                _ => (200, "fine"),
            };
            let sql = "UPDATE xxl_job_log SET handle_code = ?, handle_msg = ?, fire_state = 0 \
                       WHERE id = ?";
            Port::db(db)
                .execute(sql, &[code.into(), msg.into(), (*log_id).into()])
                .await
                .unwrap();
        }
        !open.is_empty()
    }

    /// What a run recorded, without ids: its status, context and message, each node run's
    /// key, attempt, state, decision, shards and message, and each run row's param.
    async fn recorded(db: &sea_orm::DatabaseConnection, run: i64) -> String {
        let r = crate::store::workflow_runs::get(db, run).await.unwrap();
        let mut out = format!(
            "{} {} {:?} @{}-{:?}\n",
            r.status, r.context, r.message, r.start_time, r.end_time
        );
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
            out.push_str(&format!(
                " @{}-{:?} {:?}\n",
                n.start_time,
                n.end_time,
                n.child_run.is_some()
            ));
        }
        out
    }

    /// A group and a job of it (`j`), made at `t0` (ms): their ids.
    async fn group_and_job(db: &sea_orm::DatabaseConnection, t0: i64) -> (i32, i32) {
        let now = crate::clock::ms_to_naive(t0);
        let g = crate::store::groups::insert(db, "app", "App", 0, None, now)
            .await
            .unwrap();
        let spec = crate::JobSpec::cron(g, "j", "0 0 3 * * ?", "h")
            .validate(chrono_tz::UTC, now)
            .unwrap();
        (g, crate::store::jobs::insert(db, spec).await.unwrap())
    }

    /// A workflow of group `g` with definition `def` and `concurrency`, made at `at` (ms).
    fn workflow_row(
        g: i32,
        name: &str,
        def: &serde_json::Value,
        concurrency: &str,
        at: i64,
    ) -> wf::Model {
        wf::Model {
            id: 0,
            job_group: g,
            name: name.into(),
            description: None,
            author: "t".into(),
            version: 1,
            definition: def.to_string(),
            created_at: at,
            updated_at: at,
            schedule_type: "NONE".into(),
            schedule_conf: None,
            misfire_strategy: "DO_NOTHING".into(),
            trigger_status: 0,
            trigger_next_time: 0,
            concurrency: concurrency.into(),
            max_queued: 0,
        }
    }

    /// The models' column lists are the entities' own order, so a row sea-query selects reads
    /// as one the rules' statements select.
    #[test]
    fn column_lists_follow_the_entities() {
        use sea_orm::{EntityTrait, QueryTrait};
        fn columns<E: EntityTrait>() -> String {
            let sql = E::find().build(DbBackend::Sqlite).sql;
            let cols = &sql["SELECT ".len()..sql.find(" FROM ").unwrap()];
            cols.split(", ")
                .map(|c| c.rsplit('.').next().unwrap().trim_matches('"'))
                .collect::<Vec<_>>()
                .join(", ")
        }
        let squash = |s: &str| s.split_whitespace().collect::<Vec<_>>().join(" ");
        assert_eq!(columns::<runs::Entity>(), squash(RUN_COLUMNS));
        assert_eq!(columns::<nodes::Entity>(), squash(NODE_COLUMNS));
        assert_eq!(columns::<wf::Entity>(), squash(WORKFLOW_COLUMNS));
        assert_eq!(
            columns::<entity::xxl_job_info::Entity>(),
            squash(crate::store::jobs::JOB_COLUMNS)
        );
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
        let (g, job) = group_and_job(&db, t0).await;
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
        let w = crate::store::workflows::insert(&db, workflow_row(g, "w", &def, "PARALLEL", t0))
            .await
            .unwrap();
        let runs = Runs::default();
        let mut conn = rusqlite::Connection::open(&path).unwrap();
        let ctx = || crate::store::workflow_runs::initial_context(Some(r#"{"p":1}"#)).unwrap();
        let txn = db.begin().await.unwrap();
        let (sea_run, _) = runs
            .start_tx(&Port::tx(&txn), w.id, TriggerType::Api, None, ctx(), t0)
            .await
            .unwrap();
        txn.commit().await.unwrap();
        let (file_run, _) = file_tx(&mut conn, async |tx| {
            runs.start_tx(tx, w.id, TriggerType::Api, None, ctx(), t0)
                .await
        })
        .unwrap();
        // results as an executor would send them: `a` puts k=1, `bad` fails
        for step in 1..10 {
            if !answer_open_rows(&db).await {
                break;
            }
            let done = runs.finished(&db, 1000).await.unwrap();
            let (sea, file): (Vec<Finished>, Vec<Finished>) =
                done.into_iter().partition(|f| f.run_id == sea_run);
            let now = t0 + step * 1000;
            let txn = db.begin().await.unwrap();
            runs.apply_in(&Port::tx(&txn), sea, now).await.unwrap();
            txn.commit().await.unwrap();
            file_tx(&mut conn, async |tx| runs.apply_in(tx, file, now).await).unwrap();
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
    /// The top-level run `run` belongs to (itself, or the run of its parent node's run, up).
    async fn top_of(db: &sea_orm::DatabaseConnection, mut run: i64) -> i64 {
        loop {
            let r = crate::store::workflow_runs::get(db, run).await.unwrap();
            let Some(node) = r.parent_node_run else {
                return run;
            };
            let n: Option<i64> = Port::db(db)
                .row(
                    "SELECT run_id FROM xjob_workflow_node_run WHERE id = ?",
                    &[node.into()],
                )
                .await
                .unwrap();
            run = n.unwrap();
        }
    }

    /// A run moved on row by row and one moved on by a [`super::super::pass::Pass`] (rows kept,
    /// written at the end; on PostgreSQL new rows take reserved ids), given the same results,
    /// record the same rows on every backend: decisions, values passed downstream, a failed
    /// node's next attempt, a nested run, a missing job, the runs' ends.
    #[tokio::test]
    async fn kept_rows_record_what_row_by_row_records() {
        use crate::store::workflow_runs::pass::{Ids, Pass};
        for db in crate::store::tests::every_backend().await {
            let backend = db.get_database_backend();
            let t0 = 1_800_000_000_000;
            let now = crate::clock::ms_to_naive(t0);
            let addresses = Some("http://a:1/,http://b:1/".to_string());
            let g = crate::store::groups::insert(&db, "app", "App", 1, addresses, now)
                .await
                .unwrap();
            let spec = |name: &str, retries: i32| {
                let mut s = crate::JobSpec::cron(g, name, "0 0 3 * * ?", "h");
                s.executor_fail_retry_count = retries;
                s
            };
            let valid = |s: crate::JobSpec| s.validate(chrono_tz::UTC, now).unwrap();
            let job = crate::store::jobs::insert(&db, valid(spec("j", 0)))
                .await
                .unwrap();
            let again = crate::store::jobs::insert(&db, valid(spec("r", 1)))
                .await
                .unwrap();
            let mut wide = spec("w", 0);
            wide.executor_route_strategy = "SHARDING_BROADCAST".into();
            let wide = crate::store::jobs::insert(&db, valid(wide)).await.unwrap();
            let workflow =
                |name: &str, def: serde_json::Value| workflow_row(g, name, &def, "PARALLEL", t0);
            let child = serde_json::json!({
                "nodes": [
                    { "key": "x", "type": "JOB", "jobId": job, "param": "p=${p}" },
                    { "key": "y", "type": "JOB", "jobId": job }
                ],
                "edges": [{ "from": "x", "to": "y" }]
            });
            let child = crate::store::workflows::insert(&db, workflow("child", child))
                .await
                .unwrap();
            let def = serde_json::json!({
                "nodes": [
                    { "key": "a", "type": "JOB", "jobId": job },
                    { "key": "b", "type": "JOB", "jobId": job, "param": "k=${k}" },
                    { "key": "d", "type": "DECISION", "expression": "k == 1" },
                    { "key": "c", "type": "JOB", "jobId": job },
                    { "key": "bad", "type": "JOB", "jobId": again },
                    { "key": "after", "type": "JOB", "jobId": job },
                    { "key": "gone", "type": "JOB", "jobId": 999 },
                    { "key": "sub", "type": "WORKFLOW", "workflowId": child.id },
                    { "key": "end", "type": "JOB", "jobId": job, "allowFailure": true },
                    { "key": "wide", "type": "JOB", "jobId": wide, "param": "k=${k}" }
                ],
                "edges": [
                    { "from": "a", "to": "b" },
                    { "from": "a", "to": "d" },
                    { "from": "d", "to": "c", "condition": "TRUE" },
                    { "from": "a", "to": "bad" },
                    { "from": "bad", "to": "after" },
                    { "from": "c", "to": "gone" },
                    { "from": "b", "to": "sub" },
                    { "from": "sub", "to": "end" },
                    { "from": "a", "to": "wide" },
                    { "from": "wide", "to": "end" }
                ]
            });
            let w = crate::store::workflows::insert(&db, workflow("w", def))
                .await
                .unwrap();
            let runs = Runs::default();
            let ids = Ids::default();
            let ctx = || crate::store::workflow_runs::initial_context(Some(r#"{"p":1}"#)).unwrap();
            let mut top = Vec::new();
            for kept in [false, true] {
                let txn = db.begin().await.unwrap();
                let port = Port::tx(&txn);
                let (run, _) = if kept {
                    let pass = Pass::new(&port, &ids);
                    let out = runs
                        .start_tx(&pass, w.id, TriggerType::Api, None, ctx(), t0)
                        .await
                        .unwrap();
                    pass.flush().await.unwrap();
                    out
                } else {
                    runs.start_tx(&port, w.id, TriggerType::Api, None, ctx(), t0)
                        .await
                        .unwrap()
                };
                txn.commit().await.unwrap();
                top.push(run);
            }
            // results as an executor would send them: `a` puts k=1, `bad` fails (twice)
            for step in 1..20 {
                if !answer_open_rows(&db).await {
                    break;
                }
                let done = runs.finished(&db, 1000).await.unwrap();
                let (mut plain, mut kept) = (Vec::new(), Vec::new());
                for f in done {
                    if top_of(&db, f.run_id).await == top[0] {
                        plain.push(f);
                    } else {
                        kept.push(f);
                    }
                }
                let now = t0 + step * 1000;
                let txn = db.begin().await.unwrap();
                runs.apply_in(&Port::tx(&txn), plain, now).await.unwrap();
                txn.commit().await.unwrap();
                let txn = db.begin().await.unwrap();
                let port = Port::tx(&txn);
                let pass = Pass::new(&port, &ids);
                runs.apply_in(&pass, kept, now).await.unwrap();
                pass.flush().await.unwrap();
                txn.commit().await.unwrap();
            }
            let (plain, kept) = (recorded(&db, top[0]).await, recorded(&db, top[1]).await);
            assert_eq!(plain, kept, "{backend:?}");
            assert!(
                plain.starts_with("FAILED {\"k\":1,\"p\":1}"),
                "{backend:?} {plain}"
            );
            for line in [
                "b 1/1 SUCCEEDED None 1/1/0 None 0 [Some(\"k=1\") 0]",
                "bad 1/2 FAILED None 1/1/1 Some(\"broken\") 0",
                "bad 2/2 FAILED None 1/1/1 Some(\"broken\") 0",
                "after 1/1 SKIPPED",
                "gone 1/1 FAILED None 0/0/0 Some(\"job 999 not found\")",
                "sub 1/1 SUCCEEDED",
                "end 1/1 SUCCEEDED None 1/1/0",
                "wide 1/1 SUCCEEDED None 2/2/0 None 0 [Some(\"k=1\") 0] [Some(\"k=1\") 0]",
            ] {
                assert!(plain.contains(line), "{backend:?}: {line} in {plain}");
            }
        }
    }
    /// Starts asked together are recorded in one transaction, each answered on its own: a
    /// missing workflow, params larger than a context may be and a start its workflow's concurrency
    /// refuses (SKIP, a run is running) fail alone and write nothing; the others run.
    #[tokio::test]
    async fn starts_together_are_answered_each_on_its_own() {
        use crate::store::workflow_runs::StartOne;
        for db in crate::store::tests::every_backend().await {
            let backend = db.get_database_backend();
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
                "nodes": [{ "key": "a", "type": "JOB", "jobId": job }],
                "edges": []
            });
            let workflow =
                |name: &str, concurrency: &str| workflow_row(g, name, &def, concurrency, t0);
            let par = crate::store::workflows::insert(&db, workflow("p", "PARALLEL"))
                .await
                .unwrap();
            let skip = crate::store::workflows::insert(&db, workflow("s", "SKIP"))
                .await
                .unwrap();
            use crate::store::workflow_runs::MAX_CONTEXT;
            let one = |workflow_id: i32, params: Option<&str>| StartOne {
                workflow_id,
                trigger_type: TriggerType::Api,
                params: params.map(str::to_string),
            };
            let runs = Runs::default();
            let (ids, ch) = runs
                .start_many(
                    &db,
                    vec![
                        one(par.id, Some(r#"{"x":1}"#)),
                        one(999, None),
                        one(par.id, Some(&"x".repeat(MAX_CONTEXT + 1))),
                        one(skip.id, None),
                        one(skip.id, None),
                        one(par.id, None),
                    ],
                    t0,
                )
                .await
                .unwrap();
            let kinds: Vec<&str> = ids
                .iter()
                .map(|r| match r {
                    Ok(_) => "run",
                    Err(Error::NotFound { .. }) => "missing",
                    Err(Error::Invalid { .. }) => "invalid",
                    Err(Error::Conflict { .. }) => "refused",
                    Err(_) => "other",
                })
                .collect();
            assert_eq!(
                kinds,
                ["run", "missing", "invalid", "run", "refused", "run"],
                "{backend:?} {ids:?}"
            );
            assert_eq!(ch.started, 3, "{backend:?}");
            assert_eq!(ch.dispatch.len(), 3, "{backend:?}: one node run each");
            let stored: Option<i64> = Port::db(&db)
                .row("SELECT COUNT(*) FROM xjob_workflow_run", &[])
                .await
                .unwrap();
            assert_eq!(stored, Some(3), "{backend:?}: the refused wrote nothing");
            let first = crate::store::workflow_runs::get(&db, *ids[0].as_ref().unwrap())
                .await
                .unwrap();
            assert_eq!(first.context, r#"{"x":1}"#, "{backend:?}");
            // what is dispatched is what was recorded (on MySQL the rows' ids come from their
            // insert at the end of the pass, the rules having had stand-ins)
            let mut sent: Vec<i64> = ch.dispatch.iter().map(|d| d.log_id).collect();
            sent.sort_unstable();
            let open: Vec<i64> = open_rows(&db).await.iter().map(|r| r.0).collect();
            assert_eq!(sent, open, "{backend:?}");
        }
    }

    /// A look for due scheduled workflows fires those due and answers when to look next: the
    /// next fire it saw within [`SCHEDULE_AHEAD_MS`](crate::store::workflow_runs::SCHEDULE_AHEAD_MS),
    /// or that far ahead when it saw none (stopped schedules are not seen).
    #[tokio::test]
    async fn a_look_for_due_schedules_answers_when_the_next_is_due() {
        use crate::store::workflow_runs::SCHEDULE_AHEAD_MS as AHEAD;
        let dir = tempfile::tempdir().unwrap();
        let db = crate::store::tests::file_db(&dir.path().join("w.db")).await;
        let t0 = 1_800_000_000_000;
        let (g, job) = group_and_job(&db, t0).await;
        let def = serde_json::json!({ "nodes": [{ "key": "a", "type": "JOB", "jobId": job }], "edges": [] });
        let scheduled = |name: &str, on: i16, next: i64| {
            let mut w = workflow_row(g, name, &def, "PARALLEL", t0);
            (w.schedule_type, w.schedule_conf) = ("FIX_RATE".into(), Some("10".into()));
            (w.trigger_status, w.trigger_next_time) = (on, next);
            w
        };
        let runs = Runs::default();
        let look = |at: i64| {
            let (db, runs) = (db.clone(), runs.clone());
            async move {
                let (ch, next) = runs.fire_due(&db, at, 5_000, chrono_tz::UTC).await.unwrap();
                (ch.started, next)
            }
        };
        // nothing scheduled: look again a second later
        assert_eq!(look(t0).await, (0, t0 + AHEAD));
        let every = [
            ("later", "10", 1, t0 + 3_000),
            ("soon", "10", 1, t0 + 1_000),
            ("off", "10", 0, t0 + 1_000),
            ("each second", "1", 1, t0 + 6_000),
        ];
        for (name, conf, on, next) in every {
            let mut w = scheduled(name, on, next);
            w.schedule_conf = Some(conf.into());
            crate::store::workflows::insert(&db, w).await.unwrap();
        }
        // `soon` is seen coming (`off` is stopped, `later` beyond the look)
        assert_eq!(look(t0 + 100).await, (0, t0 + 1_000));
        assert_eq!(look(t0 + 999).await, (0, t0 + 1_000));
        // at its time it starts and moves on 10 s; nothing else within a second
        assert_eq!(look(t0 + 1_000).await, (1, t0 + 2_000));
        // `later` is seen from a second before it
        assert_eq!(look(t0 + 2_000).await, (0, t0 + 3_000));
        assert_eq!(look(t0 + 3_000).await, (1, t0 + 4_000));
        // a fire 300 ms late moves on to the next second, which is looked for then
        assert_eq!(look(t0 + 6_300).await, (1, t0 + 7_000));
    }

    /// A start's params with text a literal could break on (quotes, a backslash, a `?`, a
    /// `;`, characters beyond ASCII), and node `c`'s param rendered from them.
    const PARAMS: &str = r#"{"p":7,"s":"it's a \\ \"q\" ?; é 😀"}"#;
    const C_PARAM: &str = r#"p=7 s=it's a \ "q" ?; é 😀"#;

    /// On a database server a start of a `PARALLEL` workflow the node started before is one
    /// round trip (PostgreSQL: one statement; MySQL/MariaDB: one script) answered from what
    /// that start read, and records what a transaction records, text of any character
    /// included; a changed job or workflow makes it write nothing, and the transaction (which
    /// reads them again) take over; a workflow no longer `PARALLEL` is not kept.
    #[tokio::test]
    async fn a_sealed_start_records_what_a_transaction_records() {
        use crate::store::workflow_runs::StartOne;
        for db in crate::store::tests::every_backend().await {
            let backend = db.get_database_backend();
            if backend == DbBackend::Sqlite {
                continue;
            }
            let t0 = 1_800_000_000_000;
            let now = crate::clock::ms_to_naive(t0);
            let g = crate::store::groups::insert(&db, "app", "App", 0, None, now)
                .await
                .unwrap();
            let spec = |name: &str| {
                crate::JobSpec::cron(g, name, "0 0 3 * * ?", "h")
                    .validate(chrono_tz::UTC, now)
                    .unwrap()
            };
            let j = crate::store::jobs::insert(&db, spec("j")).await.unwrap();
            let k = crate::store::jobs::insert(&db, spec("k")).await.unwrap();
            let def = serde_json::json!({
                "nodes": [
                    { "key": "a", "type": "JOB", "jobId": j },
                    { "key": "c", "type": "JOB", "jobId": k, "param": "p=${p} s=${s}" },
                    { "key": "b", "type": "JOB", "jobId": k }
                ],
                "edges": [{ "from": "a", "to": "b" }]
            });
            let w =
                crate::store::workflows::insert(&db, workflow_row(g, "w", &def, "PARALLEL", t0))
                    .await
                    .unwrap();
            let runs = Runs::default();
            let start = || StartOne {
                workflow_id: w.id,
                trigger_type: TriggerType::Api,
                params: Some(PARAMS.into()),
            };
            let count = async || {
                let n: Option<i64> = Port::db(&db)
                    .row("SELECT count(*) FROM xjob_workflow_run", &[])
                    .await
                    .unwrap();
                n.unwrap()
            };
            // nothing kept yet: no statement, nothing written
            assert!(
                runs.start_sealed(&db, &[start()], t0)
                    .await
                    .unwrap()
                    .is_none()
            );
            let (ids, _) = runs.start_many(&db, vec![start()], t0).await.unwrap();
            let by_tx = *ids[0].as_ref().unwrap();
            let (ids, ch) = runs
                .start_sealed(&db, &[start()], t0)
                .await
                .unwrap()
                .expect("a sealed start");
            let sealed = *ids[0].as_ref().unwrap();
            assert_eq!(ch.dispatch.len(), 2, "a and c start");
            assert_eq!(ch.started, 1);
            assert!(ch.claimed, "its rows are recorded claimed by this node");
            for d in &ch.dispatch {
                let l = crate::store::logs::get(&db, d.log_id).await.unwrap();
                assert!(
                    crate::model::fire_state::is_claim(l.fire_state),
                    "{}",
                    l.fire_state
                );
            }
            // a batch of starts too many rows for JSON rows: bound as arrays, recorded alike
            let many: Vec<StartOne> = (0..6).map(|_| start()).collect();
            let (batch, ch) = runs
                .start_sealed(&db, &many, t0)
                .await
                .unwrap()
                .expect("a sealed batch");
            assert_eq!(ch.dispatch.len(), 12, "a and c of each");
            // all run to their end on the same results
            for step in 1..5 {
                if !answer_open_rows(&db).await {
                    break;
                }
                let done = runs.finished(&db, 1000).await.unwrap();
                runs.apply(&db, done, t0 + step * 1000).await.unwrap();
            }
            let (a, b) = (recorded(&db, by_tx).await, recorded(&db, sealed).await);
            assert_eq!(a, b);
            for id in &batch {
                assert_eq!(recorded(&db, *id.as_ref().unwrap()).await, a);
            }
            assert!(a.starts_with("SUCCEEDED"), "{a}");
            let c = format!("c 1/1 SUCCEEDED None 1/1/0 None 0 [{:?} 0]", Some(C_PARAM));
            assert!(a.contains(&c), "{backend:?}: {a}");
            for id in [by_tx, sealed] {
                let params = crate::store::workflow_runs::get(&db, id)
                    .await
                    .unwrap()
                    .params;
                assert_eq!(params.as_deref(), Some(PARAMS), "{backend:?}");
            }
            // MySQL/MariaDB: a batch whose script would be larger than one is sent is left to
            // the transaction
            if backend == DbBackend::MySql {
                let big = format!(r#"{{"p":7,"s":"{}"}}"#, "x".repeat(60_000));
                let large: Vec<StartOne> = (0..40)
                    .map(|_| StartOne {
                        params: Some(big.clone()),
                        ..start()
                    })
                    .collect();
                let sealed = runs.start_sealed(&db, &large, t0).await.unwrap();
                assert!(sealed.is_none(), "a script of 40 starts of 60 kB");
                let (ids, _) = runs.start_many(&db, large, t0).await.unwrap();
                assert!(ids.iter().all(Result::is_ok), "{ids:?}");
            }
            // after `change`, a sealed start writes nothing
            let refused_after = async |change: &str, id: i32| {
                Port::db(&db).execute(change, &[id.into()]).await.unwrap();
                let before = count().await;
                let out = runs.start_sealed(&db, &[start()], t0).await.unwrap();
                assert!(out.is_none(), "{change}");
                assert_eq!(
                    count().await,
                    before,
                    "a refused sealed start writes nothing"
                );
            };
            // a job edited since: the transaction reads it again, and is kept
            let later = match backend {
                DbBackend::MySql => "update_time + INTERVAL 1 SECOND",
                _ => "update_time + interval '1 second'",
            };
            let edited = format!("UPDATE xxl_job_info SET update_time = {later} WHERE id = ?");
            refused_after(&edited, k).await;
            runs.start_many(&db, vec![start()], t0).await.unwrap();
            let again = runs.start_sealed(&db, &[start()], t0).await.unwrap();
            assert!(again.is_some());
            // a workflow whose concurrency changed: refused, then no longer kept
            refused_after(
                "UPDATE xjob_workflow SET concurrency = 'SKIP' WHERE id = ?",
                w.id,
            )
            .await;
            let (ids, _) = runs.start_many(&db, vec![start()], t0).await.unwrap();
            assert!(
                matches!(ids[0], Err(crate::Error::Conflict { .. })),
                "SKIP refuses while runs are running: {:?}",
                ids[0]
            );
            assert!(runs.plans.lock().get(&w.id).is_none());
        }
    }
}
