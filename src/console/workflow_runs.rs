//! Workflow runs: trigger a workflow with params, list runs, read one run with every
//! node run (each attempt, its state, shards and run rows), stop a run — confined to the
//! user's groups, audited.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::audit::shown;
use super::reach::Root;
use super::{Console, Page, Principal};
use crate::error::{Error, Result};
use crate::model::TriggerType;
use crate::store::{workflow_runs, workflows};

/// Longest params text of a trigger.
pub const MAX_PARAMS: usize = workflow_runs::MAX_CONTEXT;

/// A trigger of a workflow.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RunInput {
    /// The workflow.
    pub workflow_id: i32,
    /// The run's first context: a JSON object, or text (kept under `params`).
    #[serde(default)]
    pub params: Option<Value>,
}

/// How a run is run again.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RerunInput {
    /// Run again from this node (and everything downstream); absent: from the failed and
    /// stopped nodes.
    #[serde(default)]
    pub from: Option<String>,
}

/// Which node to mark succeeded.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MarkInput {
    /// The node's key.
    pub node: String,
}

/// A node run as the console shows it.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeRunView {
    /// Id.
    pub id: i64,
    /// The node.
    pub node_key: String,
    /// 1 for the first attempt.
    pub attempt: i32,
    /// Attempts the node may make.
    pub max_attempts: i32,
    /// RUNNING, SUCCEEDED, FAILED, SKIPPED or STOPPED.
    pub state: String,
    /// A decision's value.
    pub decision: Option<bool>,
    /// Run rows dispatched (one per shard).
    pub shards_total: i32,
    /// Of those, with a result.
    pub shards_done: i32,
    /// Of those, failed.
    pub shards_failed: i32,
    /// The run rows (log ids), by shard: their logs are the runs' logs.
    pub log_ids: Vec<i64>,
    /// A nested workflow's run.
    pub child_run: Option<i64>,
    /// Started (RFC 3339).
    pub start_time: Option<String>,
    /// Ended (RFC 3339).
    pub end_time: Option<String>,
    /// Why it ended as it did.
    pub message: Option<String>,
    /// A re-run cleared it: history, the node ran again as a later attempt.
    pub cleared: bool,
}

/// A workflow run as the console shows it.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RunView {
    /// Id.
    pub id: i64,
    /// The workflow.
    pub workflow_id: i32,
    /// Its name now (absent when the workflow was deleted).
    pub workflow_name: Option<String>,
    /// The version of its DAG the run follows.
    pub version: i32,
    /// Its group.
    pub job_group: i32,
    /// QUEUED, RUNNING, SUCCEEDED, FAILED or STOPPED.
    pub status: String,
    /// MANUAL, API, CRON, MISFIRE or WORKFLOW (nested).
    pub trigger_type: String,
    /// The trigger's params.
    pub params: Option<String>,
    /// The run's context.
    pub context: Value,
    /// The parent workflow's node run (a nested run).
    pub parent_node_run: Option<i64>,
    /// Started (RFC 3339).
    pub start_time: Option<String>,
    /// Ended (RFC 3339).
    pub end_time: Option<String>,
    /// Why it ended as it did.
    pub message: Option<String>,
    /// Every node run, each attempt (one run read alone; absent in lists).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub nodes: Option<Vec<NodeRunView>>,
}

/// Filters of the run list.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct RunQuery {
    /// Only runs of this workflow.
    pub workflow_id: Option<i32>,
    /// Only this group's (0 or absent: every group the user may see).
    pub job_group: Option<i32>,
    /// Only runs with this status.
    pub status: Option<String>,
    /// First item.
    pub offset: Option<u64>,
    /// Page size.
    pub limit: Option<u64>,
}

fn view(r: entity::xjob_workflow_run::Model) -> RunView {
    RunView {
        id: r.id,
        workflow_id: r.workflow_id,
        workflow_name: None,
        version: r.version,
        job_group: r.job_group,
        status: r.status,
        trigger_type: r.trigger_type,
        params: r.params,
        context: serde_json::from_str(&r.context).unwrap_or(Value::Null),
        parent_node_run: r.parent_node_run,
        start_time: super::rfc3339_ms(Some(r.start_time)),
        end_time: super::rfc3339_ms(r.end_time),
        message: r.message,
        nodes: None,
    }
}

fn node_view((n, log_ids): (entity::xjob_workflow_node_run::Model, Vec<i64>)) -> NodeRunView {
    NodeRunView {
        id: n.id,
        node_key: n.node_key,
        attempt: n.attempt,
        max_attempts: n.max_attempts,
        state: n.state,
        decision: n.decision.map(|d| d != 0),
        shards_total: n.shards_total,
        shards_done: n.shards_done,
        shards_failed: n.shards_failed,
        log_ids,
        child_run: n.child_run,
        start_time: super::rfc3339_ms(Some(n.start_time)),
        end_time: super::rfc3339_ms(n.end_time),
        message: n.message,
        cleared: n.cleared != 0,
    }
}

const STATUSES: &[&str] = &[
    workflow_runs::status::RUNNING,
    workflow_runs::status::SUCCEEDED,
    workflow_runs::status::FAILED,
    workflow_runs::status::STOPPED,
    workflow_runs::status::QUEUED,
];

impl Console {
    /// Starts a run of a workflow the user may see, with `input.params` as its first context.
    pub async fn trigger_workflow(&self, who: &Principal, input: RunInput) -> Result<RunView> {
        // an unknown workflow is 404, as every unknown id is
        let w = workflows::get(self.db(), input.workflow_id).await?;
        who.require_group(w.job_group, "workflowId")?;
        // the run starts every job and nested workflow the workflow reaches, with params the
        // caller chooses: the caller must be allowed all of them
        self.require_reach(
            who,
            Root::Current(w.id),
            &format!("workflow {}", w.id),
            "workflowId",
        )
        .await?;
        let params = match input.params {
            None | Some(Value::Null) => None,
            Some(Value::String(s)) => Some(s),
            Some(v) => Some(v.to_string()),
        };
        if let Some(p) = &params
            && p.len() > MAX_PARAMS
        {
            return Err(Error::Invalid {
                field: "params",
                reason: format!("at most {MAX_PARAMS} bytes"),
            });
        }
        let trigger_type = if who.key.is_some() {
            TriggerType::Api
        } else {
            TriggerType::Manual
        };
        let id = self
            .engine
            .trigger_workflow(w.id, trigger_type, params)
            .await?;
        self.audit(
            who,
            "workflow.trigger",
            "workflow",
            w.id,
            format!("`{}`, run {id}", shown(&w.name)),
        )
        .await;
        self.get_workflow_run(who, id).await
    }

    /// Refuses `who` unless they may act on everything run `r` reaches (its version's jobs and
    /// nested workflows).
    async fn require_run_reach(
        &self,
        who: &Principal,
        r: &entity::xjob_workflow_run::Model,
    ) -> Result<()> {
        self.require_reach(
            who,
            Root::Version(r.workflow_id, r.version),
            &format!("workflow run {}", r.id),
            "id",
        )
        .await
    }

    /// Runs the user may see, newest first.
    pub async fn list_workflow_runs(&self, who: &Principal, q: &RunQuery) -> Result<Page<RunView>> {
        let (offset, limit) = super::page_bounds(q.offset, q.limit)?;
        if let Some(s) = q.status.as_deref().filter(|s| !s.is_empty())
            && !STATUSES.contains(&s)
        {
            return Err(Error::Invalid {
                field: "status",
                reason: format!("one of {}", STATUSES.join(", ")),
            });
        }
        let groups = match q.job_group.filter(|g| *g > 0) {
            Some(g) => {
                who.require_group(g, "jobGroup")?;
                Some(vec![g])
            }
            None => who.visible_groups(),
        };
        let (total, rows) = workflow_runs::page(
            self.db(),
            q.workflow_id,
            groups.as_deref(),
            q.status.as_deref(),
            offset,
            limit,
        )
        .await?;
        let mut ids: Vec<i32> = rows.iter().map(|r| r.workflow_id).collect();
        ids.sort_unstable();
        ids.dedup();
        let names = workflows::names(self.db(), &ids).await?;
        Ok(Page {
            total,
            items: rows
                .into_iter()
                .map(|r| {
                    let mut v = view(r);
                    v.workflow_name = names.get(&v.workflow_id).cloned();
                    v
                })
                .collect(),
        })
    }

    /// One run with every node run.
    pub async fn get_workflow_run(&self, who: &Principal, id: i64) -> Result<RunView> {
        let r = workflow_runs::get(self.db(), id).await?;
        who.require_group(r.job_group, "id")?;
        let nodes = workflow_runs::node_runs(self.db(), id).await?;
        let mut v = view(r);
        v.workflow_name = workflows::names(self.db(), &[v.workflow_id])
            .await?
            .remove(&v.workflow_id);
        v.nodes = Some(nodes.into_iter().map(node_view).collect());
        Ok(v)
    }

    /// Stops a running or queued run (a conflict when it is neither).
    pub async fn stop_workflow_run(&self, who: &Principal, id: i64) -> Result<RunView> {
        let r = workflow_runs::get(self.db(), id).await?;
        who.require_group(r.job_group, "id")?;
        self.require_run_reach(who, &r).await?;
        if !self.engine.stop_workflow_run(id, &who.username).await? {
            return Err(Error::Conflict {
                reason: format!("workflow run {id} is not running"),
            });
        }
        self.audit(
            who,
            "workflow.stop",
            "workflow-run",
            id,
            format!("workflow {}", r.workflow_id),
        )
        .await;
        self.get_workflow_run(who, id).await
    }

    /// Runs an ended run again from its failed nodes, or from node `input.from`.
    pub async fn rerun_workflow_run(
        &self,
        who: &Principal,
        id: i64,
        input: RerunInput,
    ) -> Result<RunView> {
        let r = workflow_runs::get(self.db(), id).await?;
        who.require_group(r.job_group, "id")?;
        self.require_run_reach(who, &r).await?;
        let from = input.from.filter(|f| !f.trim().is_empty());
        self.engine
            .rerun_workflow_run(id, from.clone(), &who.username)
            .await?;
        let detail = match &from {
            Some(f) => format!("from node `{}`", shown(f)),
            None => "from its failed nodes".into(),
        };
        self.audit(who, "workflow.rerun", "workflow-run", id, detail)
            .await;
        self.get_workflow_run(who, id).await
    }

    /// Marks a failed, stopped or skipped node of a run succeeded; what is downstream runs.
    pub async fn mark_workflow_node(
        &self,
        who: &Principal,
        id: i64,
        input: MarkInput,
    ) -> Result<RunView> {
        let r = workflow_runs::get(self.db(), id).await?;
        who.require_group(r.job_group, "id")?;
        self.require_run_reach(who, &r).await?;
        if input.node.trim().is_empty() {
            return Err(Error::Invalid {
                field: "node",
                reason: "the node's key is required".into(),
            });
        }
        self.engine
            .mark_workflow_node(id, &input.node, &who.username)
            .await?;
        self.audit(
            who,
            "workflow.mark",
            "workflow-run",
            id,
            format!("node `{}` marked succeeded", shown(&input.node)),
        )
        .await;
        self.get_workflow_run(who, id).await
    }
}
