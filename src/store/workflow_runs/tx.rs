//! What a workflow transaction reads and writes, as one trait with two implementations: sea-orm
//! statements in a [`DatabaseTransaction`] (PostgreSQL, MySQL/MariaDB, and SQLite where the
//! run-row writer does not hold the file), and cached prepared statements on the run-row
//! writer's own SQLite connection ([`super::sqlite::SqliteTx`]), where a transition costs no
//! thread hop per statement. The rules that decide a run ([`super::Runs`]) are written once,
//! against this trait.

use std::collections::HashSet;
use std::future::Future;

use entity::xjob_workflow as wf;
use entity::xjob_workflow_node_log as links;
use entity::xjob_workflow_node_run as nodes;
use entity::xjob_workflow_run as runs;
use sea_orm::sea_query::{Expr, ExprTrait};
use sea_orm::{
    ActiveValue::Set, ColumnTrait, ConnectionTrait, DatabaseTransaction, EntityTrait,
    PaginatorTrait, QueryFilter, QueryOrder, QuerySelect,
};

use super::status;
use crate::clock::ms_to_naive;
use crate::error::{Error, Result};
use crate::model::{AlarmStatus, TriggerType, fire_state};

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

/// A pending run row of a job node (trigger type WORKFLOW, no fire time).
#[derive(Clone, Debug)]
pub(crate) struct PendingRow<'a> {
    pub(crate) job: &'a Job,
    pub(crate) param: Option<&'a str>,
    pub(crate) sharding: Option<&'a str>,
    pub(crate) now: i64,
}

/// The reads and writes of a workflow transaction (see the module docs). Every method runs in
/// the transaction the implementation holds; none commits.
pub(crate) trait Tx: Sync {
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
    /// Inserts a pending run row; answers its id.
    fn insert_pending(&self, row: &PendingRow<'_>) -> impl Future<Output = Result<i64>> + Send;
    /// Links run row `log_id` to its node run.
    fn insert_link(
        &self,
        log_id: i64,
        node_run_id: i64,
        run_id: i64,
        shard: i32,
    ) -> impl Future<Output = Result<()>> + Send;
    /// Which of `log_ids`' links are still open.
    fn open_links(&self, log_ids: &[i64]) -> impl Future<Output = Result<HashSet<i64>>> + Send;
    /// Closes `log_ids`' links.
    fn close_links(&self, log_ids: &[i64]) -> impl Future<Output = Result<()>> + Send;
}

/// [`Tx`] as sea-orm statements in a transaction.
pub(crate) struct SeaTx<'a>(pub(crate) &'a DatabaseTransaction);

impl Tx for SeaTx<'_> {
    async fn workflow(&self, id: i32) -> Result<Option<wf::Model>> {
        Ok(wf::Entity::find_by_id(id).one(self.0).await?)
    }

    async fn definition(&self, workflow_id: i32, version: i32) -> Result<Option<String>> {
        use entity::xjob_workflow_version as v;
        Ok(v::Entity::find()
            .filter(v::Column::WorkflowId.eq(workflow_id))
            .filter(v::Column::Version.eq(version))
            .one(self.0)
            .await?
            .map(|v| v.definition))
    }

    async fn job(&self, id: i32) -> Result<Option<Job>> {
        Ok(entity::xxl_job_info::Entity::find_by_id(id)
            .one(self.0)
            .await?)
    }

    async fn group_addresses(&self, group: i32) -> Result<Option<Option<String>>> {
        Ok(entity::xxl_job_group::Entity::find_by_id(group)
            .one(self.0)
            .await?
            .map(|g| g.address_list))
    }

    async fn lock_workflow(&self, id: i32) -> Result<()> {
        wf::Entity::update_many()
            .col_expr(wf::Column::MaxQueued, Expr::col(wf::Column::MaxQueued))
            .filter(wf::Column::Id.eq(id))
            .exec(self.0)
            .await?;
        Ok(())
    }

    async fn count_top_runs(&self, workflow_id: i32, status: &'static str) -> Result<u64> {
        Ok(runs::Entity::find()
            .filter(runs::Column::WorkflowId.eq(workflow_id))
            .filter(runs::Column::Status.eq(status))
            .filter(runs::Column::ParentNodeRun.is_null())
            .count(self.0)
            .await?)
    }

    async fn oldest_queued(&self, workflow_id: i32) -> Result<Option<runs::Model>> {
        Ok(runs::Entity::find()
            .filter(runs::Column::WorkflowId.eq(workflow_id))
            .filter(runs::Column::Status.eq(status::QUEUED))
            .order_by_asc(runs::Column::Id)
            .one(self.0)
            .await?)
    }

    async fn promote_run(&self, id: i64, now: i64) -> Result<bool> {
        let r = runs::Entity::update_many()
            .col_expr(runs::Column::Status, Expr::value(status::RUNNING))
            .col_expr(runs::Column::StartTime, Expr::value(now))
            .filter(runs::Column::Id.eq(id))
            .filter(runs::Column::Status.eq(status::QUEUED))
            .exec(self.0)
            .await?;
        Ok(r.rows_affected == 1)
    }

    async fn insert_run(&self, r: &runs::Model) -> Result<i64> {
        let m = runs::ActiveModel {
            id: sea_orm::ActiveValue::NotSet,
            workflow_id: Set(r.workflow_id),
            version: Set(r.version),
            job_group: Set(r.job_group),
            status: Set(r.status.clone()),
            trigger_type: Set(r.trigger_type.clone()),
            params: Set(r.params.clone()),
            context: Set(r.context.clone()),
            parent_node_run: Set(r.parent_node_run),
            depth: Set(r.depth),
            seq: Set(r.seq),
            start_time: Set(r.start_time),
            end_time: Set(r.end_time),
            message: Set(r.message.clone()),
        };
        Ok(runs::Entity::insert(m).exec(self.0).await?.last_insert_id)
    }

    async fn run_context(&self, id: i64) -> Result<Option<(String, Option<i64>)>> {
        Ok(runs::Entity::find_by_id(id)
            .select_only()
            .columns([runs::Column::Context, runs::Column::ParentNodeRun])
            .into_tuple()
            .one(self.0)
            .await?)
    }

    async fn lock_run(&self, id: i64) -> Result<Option<runs::Model>> {
        let update = runs::Entity::update_many()
            .col_expr(runs::Column::Seq, Expr::col(runs::Column::Seq).add(1))
            .filter(runs::Column::Id.eq(id))
            .filter(runs::Column::Status.eq(status::RUNNING));
        // one statement where UPDATE … RETURNING exists (not MySQL/MariaDB)
        if matches!(
            self.0.get_database_backend(),
            sea_orm::DbBackend::Postgres | sea_orm::DbBackend::Sqlite
        ) {
            return Ok(update.exec_with_returning(self.0).await?.into_iter().next());
        }
        let r = update.exec(self.0).await?;
        if r.rows_affected == 0 {
            return Ok(None);
        }
        Ok(runs::Entity::find_by_id(id).one(self.0).await?)
    }

    async fn end_run(
        &self,
        id: i64,
        st: &'static str,
        now: i64,
        message: Option<String>,
    ) -> Result<()> {
        runs::Entity::update_many()
            .col_expr(runs::Column::Status, Expr::value(st))
            .col_expr(runs::Column::EndTime, Expr::value(now))
            .col_expr(runs::Column::Message, Expr::value(message))
            .filter(runs::Column::Id.eq(id))
            .filter(runs::Column::Status.eq(status::RUNNING))
            .exec(self.0)
            .await?;
        Ok(())
    }

    async fn set_context(&self, id: i64, context: &str) -> Result<()> {
        runs::Entity::update_many()
            .col_expr(runs::Column::Context, Expr::value(context))
            .filter(runs::Column::Id.eq(id))
            .exec(self.0)
            .await?;
        Ok(())
    }

    async fn node_rows(&self, run_id: i64) -> Result<Vec<nodes::Model>> {
        Ok(nodes::Entity::find()
            .filter(nodes::Column::RunId.eq(run_id))
            .all(self.0)
            .await?)
    }

    async fn node(&self, id: i64) -> Result<Option<nodes::Model>> {
        Ok(nodes::Entity::find_by_id(id).one(self.0).await?)
    }

    async fn insert_node(&self, n: &nodes::Model) -> Result<i64> {
        let m = nodes::ActiveModel {
            id: sea_orm::ActiveValue::NotSet,
            run_id: Set(n.run_id),
            node_key: Set(n.node_key.clone()),
            attempt: Set(n.attempt),
            max_attempts: Set(n.max_attempts),
            state: Set(n.state.clone()),
            decision: Set(n.decision),
            shards_total: Set(n.shards_total),
            shards_done: Set(n.shards_done),
            shards_failed: Set(n.shards_failed),
            child_run: Set(n.child_run),
            start_time: Set(n.start_time),
            end_time: Set(n.end_time),
            message: Set(n.message.clone()),
            cleared: Set(n.cleared),
        };
        Ok(nodes::Entity::insert(m).exec(self.0).await?.last_insert_id)
    }

    async fn update_node(&self, id: i64, u: &NodeUpdate) -> Result<()> {
        let mut upd = nodes::Entity::update_many()
            .col_expr(nodes::Column::ShardsDone, Expr::value(u.shards_done))
            .col_expr(nodes::Column::ShardsFailed, Expr::value(u.shards_failed))
            .col_expr(nodes::Column::Message, Expr::value(u.message.clone()))
            .filter(nodes::Column::Id.eq(id));
        if let Some((st, end)) = u.end {
            upd = upd
                .col_expr(nodes::Column::State, Expr::value(st))
                .col_expr(nodes::Column::EndTime, Expr::value(end));
        }
        upd.exec(self.0).await?;
        Ok(())
    }

    async fn set_child(&self, id: i64, child: i64, end: Option<(&'static str, i64)>) -> Result<()> {
        let mut upd = nodes::Entity::update_many()
            .col_expr(nodes::Column::ChildRun, Expr::value(child))
            .filter(nodes::Column::Id.eq(id));
        if let Some((st, t)) = end {
            upd = upd
                .col_expr(nodes::Column::State, Expr::value(st))
                .col_expr(nodes::Column::EndTime, Expr::value(t));
        }
        upd.exec(self.0).await?;
        Ok(())
    }

    async fn end_node_if_running(&self, id: i64, st: &'static str, now: i64) -> Result<bool> {
        let r = nodes::Entity::update_many()
            .col_expr(nodes::Column::State, Expr::value(st))
            .col_expr(nodes::Column::EndTime, Expr::value(now))
            .filter(nodes::Column::Id.eq(id))
            .filter(nodes::Column::State.eq(status::RUNNING))
            .exec(self.0)
            .await?;
        Ok(r.rows_affected > 0)
    }

    async fn insert_pending(&self, row: &PendingRow<'_>) -> Result<i64> {
        use entity::xxl_job_log as l;
        Ok(l::Entity::insert(l::ActiveModel {
            job_group: Set(row.job.job_group),
            job_id: Set(row.job.id),
            trigger_time: Set(Some(ms_to_naive(row.now))),
            trigger_code: Set(0),
            handle_code: Set(0),
            executor_param: Set(row.param.map(str::to_string)),
            executor_sharding_param: Set(row.sharding.map(str::to_string)),
            executor_fail_retry_count: Set(0),
            alarm_status: Set(AlarmStatus::Unchecked.code()),
            fire_time: Set(None),
            fire_state: Set(fire_state::PENDING),
            trigger_type: Set(Some(TriggerType::Workflow.as_str().into())),
            chain_depth: Set(0),
            ..Default::default()
        })
        .exec(self.0)
        .await?
        .last_insert_id)
    }

    async fn insert_link(
        &self,
        log_id: i64,
        node_run_id: i64,
        run_id: i64,
        shard: i32,
    ) -> Result<()> {
        links::Entity::insert(links::ActiveModel {
            log_id: Set(log_id),
            node_run_id: Set(node_run_id),
            run_id: Set(run_id),
            shard: Set(shard),
            done: Set(0),
        })
        .exec_without_returning(self.0)
        .await?;
        Ok(())
    }

    async fn open_links(&self, log_ids: &[i64]) -> Result<HashSet<i64>> {
        Ok(links::Entity::find()
            .select_only()
            .column(links::Column::LogId)
            .filter(links::Column::LogId.is_in(log_ids.iter().copied()))
            .filter(links::Column::Done.eq(0))
            .into_tuple::<i64>()
            .all(self.0)
            .await?
            .into_iter()
            .collect())
    }

    async fn close_links(&self, log_ids: &[i64]) -> Result<()> {
        links::Entity::update_many()
            .col_expr(links::Column::Done, Expr::value(1))
            .filter(links::Column::LogId.is_in(log_ids.iter().copied()))
            .exec(self.0)
            .await?;
        Ok(())
    }
}

/// Workflow `id`, or the error a missing one is.
pub(crate) async fn workflow_of(tx: &impl Tx, id: i32) -> Result<wf::Model> {
    tx.workflow(id).await?.ok_or(Error::NotFound {
        what: "workflow",
        id: id.into(),
    })
}
