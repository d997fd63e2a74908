//! Executors: the [`ExecutorClient`] trait the center dispatches through, the handler registry
//! and [`JobContext`] for handlers written in Rust, and the in-process executor.
//!
//! The center never knows where an executor runs: it calls an address through an
//! `ExecutorClient`. `NodeClient` answers the node's own address from the in-process executor
//! and hands every other address to a remote client when one is configured.

pub(crate) mod actor;
mod admin_routes;
pub(crate) mod builtin;
pub(crate) mod callback;
pub(crate) mod client;
mod context;
mod h1;
mod handlers;
mod http_client;
mod job_thread;
pub(crate) mod local;
mod log_page;
pub(crate) mod log_reader;
mod registrar;
mod run_logs;
pub(crate) mod script;
pub(crate) mod server;
mod standalone;

pub(crate) use actor::RuntimeConfig;
pub(crate) use admin_routes::AdminRoutes;
pub use builtin::{COMMAND_HANDLER, HTTP_HANDLER};
pub(crate) use client::Callback;
pub(crate) use client::NodeClient;
pub use client::{Answers, ExecutorClient, ExecutorKind};
pub use context::{JobContext, JobLogger, MAX_OUTPUTS, OUTPUT_PREFIX, split_outputs};
pub use handlers::{Handler, HandlerRegistry, JobResult};
pub use http_client::{DEFAULT_TIMEOUT, HttpExecutorClient};
pub(crate) use local::InProcessExecutor;
pub use standalone::StandaloneExecutor;
