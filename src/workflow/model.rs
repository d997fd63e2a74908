//! A workflow's definition: a DAG of nodes and edges, as a user writes it (JSON with camelCase
//! keys) and as each saved version stores it.

use serde::{Deserialize, Serialize};

/// Most nodes a workflow may have.
pub const MAX_NODES: usize = 2_000;
/// Most edges a workflow may have.
pub const MAX_EDGES: usize = 20_000;
/// Most node runs one trigger of a workflow may expand to, nested workflows' nodes counted as
/// many times as they are nested: checked when a workflow is saved (from the versions it nests
/// then), and when a run starts nodes (a node past it fails instead of starting).
pub const MAX_RUN_NODES: u64 = 10_000;
/// Longest node key (letters, digits, `_`, `-`, `.`).
pub const MAX_KEY: usize = 64;

/// What a node does.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "SCREAMING_SNAKE_CASE")]
pub enum NodeKind {
    /// Runs a job (any job type, with the job's routing, sharding, block strategy, timeout and
    /// retries).
    Job {
        /// The job.
        #[serde(rename = "jobId")]
        job_id: i32,
    },
    /// Evaluates an expression on the run's context ([`super::expr`]); its outgoing `TRUE` and
    /// `FALSE` edges pick the branch.
    Decision {
        /// The expression.
        expression: String,
    },
    /// Runs another workflow to completion.
    Workflow {
        /// The workflow.
        #[serde(rename = "workflowId")]
        workflow_id: i32,
    },
}

/// When a node runs, given what its incoming edges delivered (Airflow's rules, the useful
/// subset).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum TriggerRule {
    /// Every input succeeded (the default).
    #[default]
    AllSuccess,
    /// Every input is done, whatever its outcome.
    AllDone,
    /// At least one input failed (runs as soon as one has).
    OneFailed,
    /// No input failed (succeeded or skipped).
    NoneFailed,
    /// At least one input succeeded (runs as soon as one has).
    OneSuccess,
}

/// When an edge is taken.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum EdgeCondition {
    /// Whatever the upstream's outcome; it passes the outcome on (the default).
    #[default]
    Always,
    /// Only when the upstream succeeded.
    OnSuccess,
    /// Only when the upstream failed (a failure handler).
    OnFailure,
    /// Only when the upstream decision was true.
    True,
    /// Only when the upstream decision was false.
    False,
}

/// One node.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", try_from = "NodeWire")]
pub struct Node {
    /// Unique within the workflow; edges name nodes by it.
    pub key: String,
    /// Shown in the console (the key when absent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// What it does.
    #[serde(flatten)]
    pub kind: NodeKind,
    /// When it runs.
    #[serde(default)]
    pub trigger_rule: TriggerRule,
    /// Treated as succeeded without running.
    #[serde(default)]
    pub disabled: bool,
    /// Its failure counts as success downstream and does not fail the run.
    #[serde(default)]
    pub allow_failure: bool,
    /// The param its job gets (the job's own when absent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub param: Option<String>,
}

/// A node as a request spells it: every kind's field typed, whatever the node's `type`, so a
/// field of another kind with a value of the wrong type is refused like any other (as the
/// OpenAPI document types it), not ignored.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct NodeWire {
    key: String,
    #[serde(default)]
    name: Option<String>,
    #[serde(rename = "type")]
    kind: String,
    #[serde(default)]
    job_id: Option<serde_json::Value>,
    #[serde(default)]
    expression: Option<serde_json::Value>,
    #[serde(default)]
    workflow_id: Option<serde_json::Value>,
    #[serde(default)]
    trigger_rule: TriggerRule,
    #[serde(default)]
    disabled: bool,
    #[serde(default)]
    allow_failure: bool,
    #[serde(default)]
    param: Option<String>,
}

impl TryFrom<NodeWire> for Node {
    type Error = String;

    fn try_from(w: NodeWire) -> Result<Self, String> {
        let missing = |field: &str| format!("node `{}`: a {} node needs `{field}`", w.key, w.kind);
        let id = |field: &str, v: &Option<serde_json::Value>| match v {
            None | Some(serde_json::Value::Null) => Ok(None),
            Some(n) => n
                .as_i64()
                .and_then(|n| i32::try_from(n).ok())
                .map(Some)
                .ok_or_else(|| {
                    format!(
                        "node `{}`: `{field}` must be an id (an integer), not {n}",
                        w.key
                    )
                }),
        };
        let job_id = id("jobId", &w.job_id)?;
        let workflow_id = id("workflowId", &w.workflow_id)?;
        let expression = match &w.expression {
            None | Some(serde_json::Value::Null) => None,
            Some(serde_json::Value::String(s)) => Some(s.clone()),
            Some(other) => {
                return Err(format!(
                    "node `{}`: `expression` must be a string, not {other}",
                    w.key
                ));
            }
        };
        let kind = match w.kind.as_str() {
            "JOB" => NodeKind::Job {
                job_id: job_id.ok_or_else(|| missing("jobId"))?,
            },
            "DECISION" => NodeKind::Decision {
                expression: expression.ok_or_else(|| missing("expression"))?,
            },
            "WORKFLOW" => NodeKind::Workflow {
                workflow_id: workflow_id.ok_or_else(|| missing("workflowId"))?,
            },
            other => {
                return Err(format!(
                    "unknown node type `{other}`, expected one of `JOB`, `DECISION`, `WORKFLOW`"
                ));
            }
        };
        Ok(Node {
            key: w.key,
            name: w.name,
            kind,
            trigger_rule: w.trigger_rule,
            disabled: w.disabled,
            allow_failure: w.allow_failure,
            param: w.param,
        })
    }
}

/// One edge.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Edge {
    /// Upstream node key.
    pub from: String,
    /// Downstream node key.
    pub to: String,
    /// When it is taken.
    #[serde(default)]
    pub condition: EdgeCondition,
}

/// A workflow's DAG.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Definition {
    /// The nodes.
    #[serde(default)]
    pub nodes: Vec<Node>,
    /// The edges.
    #[serde(default)]
    pub edges: Vec<Edge>,
}
