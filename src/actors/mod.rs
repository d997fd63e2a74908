//! The scheduling center's actors, one per file. Each file owns the messages it handles.

pub mod complete;
pub mod fail_monitor;
pub mod log_report;
pub mod registry;
pub mod ring;
pub mod scan;
pub mod trigger_pool;
