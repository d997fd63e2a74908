//! Executors: the [`ExecutorClient`] trait the center dispatches through, the handler registry
//! and [`JobContext`] for handlers written in Rust, and the in-process executor.
//!
//! The center never knows where an executor runs: it calls an address through an
//! `ExecutorClient`. [`NodeClient`] answers the node's own address from the in-process executor
//! and hands every other address to a remote client when one is configured.

mod client;
mod context;
mod handlers;
pub mod http_client;
mod local;
pub mod server;

pub use client::{ExecutorClient, NodeClient};
pub use context::{JobContext, JobLogger};
pub use handlers::{Handler, HandlerRegistry, JobResult};
pub use http_client::HttpExecutorClient;
pub use local::{EXECUTOR_MSG_MAX, InProcessExecutor};
