//! Executors: the [`ExecutorClient`] trait the center dispatches through, the handler registry
//! and [`JobContext`] for handlers written in Rust, and the in-process executor.
//!
//! The center never knows where an executor runs: it calls an address through an
//! `ExecutorClient`. [`NodeClient`] answers the node's own address from the in-process executor
//! and hands every other address to a remote client when one is configured.

pub mod actor;
pub mod callback;
mod client;
mod context;
mod handlers;
pub mod http_client;
pub mod job_thread;
mod local;
pub mod registrar;
pub mod script;
pub mod server;
pub mod standalone;

pub use actor::RuntimeConfig;
pub use client::{Answers, ExecutorClient, NodeClient};
pub use context::{JobContext, JobLogger};
pub use handlers::{Handler, HandlerRegistry, JobResult};
pub use http_client::HttpExecutorClient;
pub use job_thread::EXECUTOR_MSG_MAX;
pub use local::{InProcessExecutor, read_log};
