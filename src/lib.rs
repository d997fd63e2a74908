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

// the stable API: these modules and the re-exports below
pub mod alarm;
pub mod config;
pub mod console;
pub mod demo;
pub mod executor;
pub mod model;
pub mod routes;

// the engine's inside, crate-private (tests reach a few items through `testing`)
mod activity;
mod actors;
mod clock;
mod directory;
mod engine;
mod error;
mod jobs;
mod metrics;
mod router;
mod schedule;
mod store;
mod token;
mod trigger;
mod trigger_msg;

pub use clock::Clock;
pub use config::Config;
pub use engine::{Engine, EngineBuilder, RunLog};
pub use error::{Error, Result};
pub use executor::{ExecutorClient, HandlerRegistry, JobContext, JobResult};
pub use jobs::JobSpec;
pub use schedule::Schedule;

/// Connects to `database` and applies every pending schema migration (what `xjob migrate`
/// does; [`EngineBuilder::start`] does it too).
pub async fn migrate(database: &config::DatabaseConfig) -> Result<()> {
    let db = store::connect(database).await?;
    store::migrate(&db).await?;
    db.close().await?;
    Ok(())
}

/// The names most embedding code needs.
pub mod prelude {
    pub use crate::{
        Clock, Config, Engine, Error, ExecutorClient, HandlerRegistry, JobContext, JobResult,
        JobSpec, Result, Schedule,
    };
}

/// Internals the crate's own integration tests, benches and load benches reach. Not an API:
/// anything here may change or go in any release.
#[doc(hidden)]
pub mod testing {
    /// In-flight work counting.
    pub mod activity {
        pub use crate::activity::Activity;
    }
    /// The center's actors and their messages.
    pub mod actors {
        pub use crate::actors::complete::Callback;
        pub use crate::actors::log_report::{CleanLogs, RefreshReport};
        pub use crate::actors::registry::Heartbeat;
        pub use crate::actors::ring::{PushRing, Ring, RingActor};
        pub use crate::actors::scan::plan_job;
        pub use crate::actors::trigger_pool::{FireBatch, PoolStats};
    }
    /// Time conversions.
    pub mod clock {
        pub use crate::clock::ms_to_naive;
    }
    /// The executor's actors.
    pub mod executor {
        pub use crate::executor::actor::{ExecutorActor, IdleBeat, Kill, Run, RuntimeConfig, Shutdown};
        pub use crate::executor::callback::{CallbackActor, FlushCallbacks};
        pub use crate::executor::read_log;
    }
    pub use crate::metrics::Metrics;
    pub use crate::router::Router;
    pub use crate::schedule::CronExpr;
    /// Storage.
    pub mod store {
        pub use crate::store::{connect, migrate, verify_lock_row};
        /// Groups.
        pub mod groups {
            pub use crate::store::groups::{all, by_app_name, get, insert};
        }
        /// Jobs.
        pub mod jobs {
            pub use crate::store::jobs::{get, insert, page, set_running, update_definition};
        }
        /// Run rows.
        pub mod logs {
            pub use crate::store::logs::{
                Fire, PendingFire, TriggerRecord, all, all_pending, claim, for_job, get, record_handle,
                insert_pending, insert_run, record_trigger,
            };
        }
        /// Daily reports.
        pub mod reports {
            pub use crate::store::reports::{all, between};
        }
        /// Users.
        pub mod users {
            pub use crate::store::users::by_name;
        }
        /// The run-row writer.
        pub mod writer {
            pub use crate::store::writer::{LogWriter, Target};
        }
    }
    pub use crate::token::random_hex;
    pub use crate::trigger::{Trigger, TriggerRequest};
}
