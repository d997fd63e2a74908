//! Workflows: named, versioned DAGs of jobs with trigger rules, decisions on a JSON
//! context, and nested workflows.
//!
//! This module is the model and its rules, with no I/O: [`model`] (the definition a user
//! writes), [`graph`] (checking it: a DAG, edges between existing nodes, branch edges from
//! decisions only, expressions that parse — every problem naming its node), [`expr`] (the
//! decisions' small, safe expression language) and [`rules`] (which nodes of a run run or are
//! skipped given every node's state, and how a run ends). Definitions are stored per version
//! and managed through `/v1/workflows`.
//!
//! Running them lives in `store::workflow_runs` (the tables and every transition, each in one
//! transaction under the run's row lock) and `actors::workflow` (polls results, fires schedules,
//! claims and dispatches node runs through the trigger pool, recovers what a stopped node left):
//!
//! - Tables `xjob_workflow_run` (workflow, version, status, context JSON, trigger, times),
//!   `xjob_workflow_node_run` (run, node key, attempt, state, shards total / done / failed,
//!   child run, message; unique on (run, node, attempt)) and `xjob_workflow_node_log` (each node
//!   run's `xxl_job_log` rows, one per shard, and whether each one's result was applied).
//! - A job node's run rows are inserted *pending* in the transaction that makes the node due, with
//!   their links; the node that committed claims and dispatches them; a crash between the two
//!   leaves pending rows that the recovery pass claims and dispatches once, and a crash after a
//!   claim leaves the row in doubt, settled by asking its executors (docs/architecture.md §6).
//! - A result is applied once (its link's `done` 0 → 1 under the run's lock): shard counts
//!   first (a sharded node completes when every shard has a result), a failed node's next
//!   attempt, then [`rules::advance`] over the run's node states and the run's end from
//!   [`rules::outcome`], all in that one transaction; a nested run's end completes its parent's
//!   node.
//! - Decisions evaluate [`expr`] on the context in that same step; a handler's context additions
//!   come back with its result (`xjob.context=` on its message's first line) and merge into the
//!   run's context, bounded.

pub mod expr;
pub mod graph;
pub mod model;
pub mod rules;

pub use graph::{Graph, Problem};
pub use model::{Definition, Edge, EdgeCondition, MAX_RUN_NODES, Node, NodeKind, TriggerRule};
