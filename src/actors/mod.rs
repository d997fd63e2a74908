//! The scheduling center's actors, one per file. Each file owns the messages it handles.

pub(crate) mod complete;
pub(crate) mod fail_monitor;
pub(crate) mod lease;
pub(crate) mod log_report;
pub(crate) mod registry;
pub(crate) mod ring;
pub(crate) mod scan;
pub(crate) mod settle;
pub(crate) mod trigger_pool;
pub(crate) mod workflow;
pub(crate) mod workflow_starts;
