//! Workflows (issue 29): named, versioned DAGs of jobs with trigger rules, decisions on a JSON
//! context, and nested workflows.
//!
//! This first part is the model and its rules, with no I/O: [`model`] (the definition a user
//! writes), [`graph`] (checking it: a DAG, edges between existing nodes, branch edges from
//! decisions only, expressions that parse — every problem naming its node), [`expr`] (the
//! decisions' small, safe expression language) and [`rules`] (which nodes of a run run or are
//! skipped given every node's state, and how a run ends). Definitions are stored per version
//! and managed through `/v1/workflows`; running them is not built yet.

pub mod expr;
pub mod graph;
pub mod model;
pub mod rules;

pub use graph::{Graph, Problem};
pub use model::{Definition, Edge, EdgeCondition, Node, NodeKind, TriggerRule};
