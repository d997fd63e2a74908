//! Workflows (issue 29): named, versioned DAGs of jobs with trigger rules, decisions on a JSON
//! context, and nested workflows.
//!
//! This first part is the model and its rules, with no I/O: [`model`] (the definition a user
//! writes), [`graph`] (checking it: a DAG, edges between existing nodes, branch edges from
//! decisions only, expressions that parse — every problem naming its node), [`expr`] (the
//! decisions' small, safe expression language) and [`rules`] (which nodes of a run run or are
//! skipped given every node's state, and how a run ends). Definitions are stored per version
//! and managed through `/v1/workflows`; running them is not built yet.

//! ## Running them: the plan the next part follows
//!
//! - Tables `xjob_workflow_run` (workflow, version, status, context JSON, trigger type and
//!   params, times) and `xjob_workflow_node_run` (run, node key, attempt, state, first log id,
//!   shards total / done / failed, message), unique on (run, node, attempt).
//! - A job node is dispatched through the durable path of a scheduled fire: its node-run row
//!   and a pending `xxl_job_log` row (carrying the node run's id) are inserted in the same
//!   transaction that records the upstream result making it due; the trigger pool dispatches the
//!   pending row as it does any fire, so a crash between the two leaves a pending row that the
//!   recovery pass dispatches once.
//! - A result of a node's log row is applied by the run-row writer in its batch transaction:
//!   shard counts first (a sharded node completes when every shard has a result), then
//!   [`rules::advance`] over the run's node states, inserting the node runs (and pending log
//!   rows) it answers, and the run's end from [`rules::outcome`] — all in that one transaction,
//!   so a restart or another node continues with no node run twice and none forgotten.
//! - Decisions evaluate [`expr`] on the context in that same step; a handler's context additions
//!   come back with its result and merge into the run's context (size-bounded).

pub mod expr;
pub mod graph;
pub mod model;
pub mod rules;

pub use graph::{Graph, Problem};
pub use model::{Definition, Edge, EdgeCondition, Node, NodeKind, TriggerRule};
