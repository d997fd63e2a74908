//! # xjob
//!
//! A distributed job scheduling center and executor runtime, wire-compatible with XXL-JOB 2.4,
//! built as an actix actor engine.
//!
//! A scan pre-reads due jobs under the schedule lock and records each fire durably (a pending
//! log row, unique per job and nominal time) in the same transaction that advances the job's
//! next time; a one-second ring holds the fires (each with the job the scan read) until their
//! second; the trigger pool claims each fire on a shared database (exactly one node wins it; a
//! SQLite file serves one node and needs no claim), routes it and calls the executor; trigger
//! outcomes and results go to one run-row writer (on SQLite a dedicated thread with its own
//! connection) and finished runs with child jobs come back to the completion actor. See
//! `DESIGN.md` beside the repository for the whole picture.
//!
//! ```no_run
//! # async fn demo() -> xjob::Result<()> {
//! use xjob::prelude::*;
//! let mut config = Config::default();
//! config.executor.app_name = "my-app".into();
//! let engine = Engine::builder(config).handlers(xjob::demo::handlers()?).start().await?;
//! let group = engine.ensure_group("my-app", "My app").await?;
//! let job = engine.add_job(JobSpec::cron(group, "hello", "* * * * * ?", "demoJobHandler")).await?;
//! engine.start_job(job).await?;
//! # Ok(()) }
//! ```
//!
//! ## Layout
//! - `activity`: in-flight work counter (lets tests wait for the engine to settle).
//! - `clock`: the one source of "now" ([`Clock`]).
//! - `config`: the typed configuration tree ([`Config`]).
//! - `error`: the crate's error type ([`Error`]).
//! - `model`: XXL-JOB enums and wire objects with exact spellings.
//! - `schedule`: Quartz cron and fixed-rate next times ([`Schedule`]).
//! - `store`: every SQL statement, and the hot path's run-row writer (`store::writer`).
//! - `directory`: jobs and groups as dispatch sees them (in memory, refreshed by the scan).
//! - `router`: the routing strategies.
//! - `token`: access-token checks in constant time.
//! - `trigger`: the trigger procedure.
//! - `jobs`: job definitions and their validation ([`JobSpec`]).
//! - `executor`: handlers, [`JobContext`], the in-process executor and [`ExecutorClient`].
//! - `actors`: scan, ring, trigger pool, completion, registry, fail monitor, log report.
//! - `alarm`: alarms for failed runs (e-mail, webhook).
//! - `engine`: wiring ([`Engine`]).
//! - `metrics`: Prometheus counters and histograms.
//! - `console`: the console's operations with authentication and per-group permissions.
//! - `routes`: HTTP scopes (admin API, executor protocol, `/v1` console API, OpenAPI, metrics).
//! - `demo`: the demo handlers of `xjob serve`.

#![cfg_attr(test, allow(clippy::unwrap_used))]

pub mod activity;
pub mod actors;
pub mod alarm;
pub mod clock;
pub mod config;
pub mod console;
pub mod demo;
pub mod directory;
pub mod engine;
pub mod error;
pub mod executor;
pub mod jobs;
pub mod metrics;
pub mod model;
pub mod router;
pub mod routes;
pub mod schedule;
pub mod store;
pub mod token;
pub mod trigger;
pub(crate) mod trigger_msg;

pub use clock::Clock;
pub use config::Config;
pub use engine::{Engine, EngineBuilder, RunLog};
pub use error::{Error, Result};
pub use executor::{ExecutorClient, HandlerRegistry, JobContext, JobResult};
pub use jobs::JobSpec;
pub use schedule::Schedule;

/// The names most embedding code needs.
pub mod prelude {
    pub use crate::{
        Clock, Config, Engine, Error, ExecutorClient, HandlerRegistry, JobContext, JobResult,
        JobSpec, Result, Schedule,
    };
}
