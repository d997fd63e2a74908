//! # xjob
//!
//! A distributed job scheduling center and executor runtime, wire-compatible with XXL-JOB 2.4,
//! built as an actix actor engine.
//!
//! A scan pre-reads the due jobs of the buckets this node schedules (every one on SQLite; those
//! it holds leases on when nodes share a database; no global lock) and records each fire
//! durably (a pending log row, unique per job and nominal time) in the same transaction that
//! advances the job's next time; a one-second ring holds the fires (each with the job the scan read) until their
//! second; the trigger pool claims each fire on a shared database (exactly one node wins it; a
//! SQLite file serves one node and needs no claim), routes it and calls the executor; trigger
//! outcomes and results go to one run-row writer (on SQLite a dedicated thread with its own
//! connection) and finished runs with child jobs come back to the completion actor. See
//! `docs/architecture.md` for the whole picture and `docs/protocol.md` for the wire.
//!
//! ## Embedding it
//!
//! An actix-web application binds its listener first (the engine registers its in-process
//! executor at that address), starts the engine with its Rust handlers, mounts xjob's routes
//! (the admin API executors call, the executor protocol, the `/v1` console API and the web
//! console) next to its own, and schedules jobs. `examples/embed.rs` is the same as a program.
//!
//! ```
//! use std::time::Duration;
//! use actix_web::{App, HttpServer};
//! use xjob::console::{Console, Paging};
//! use xjob::prelude::*;
//!
//! # fn main() -> std::result::Result<(), Box<dyn std::error::Error>> {
//! actix_web::rt::System::new().block_on(async {
//!     let dir = tempfile::tempdir()?;
//!     let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
//!     let addr = listener.local_addr()?;
//!     let mut config = Config::default();
//!     config.database.url = format!("sqlite://{}?mode=rwc", dir.path().join("app.db").display());
//!     config.http.bind = addr.to_string();
//!     config.executor.app_name = "my-app".into();
//!     config.executor.address = format!("http://{addr}/");
//!
//!     let mut handlers = HandlerRegistry::new();
//!     handlers.register_fn("greet", |ctx: JobContext| async move {
//!         ctx.log(format!("hello, {}", ctx.param));
//!         Ok(())
//!     })?;
//!     let engine = Engine::builder(config)
//!         .handlers(handlers)
//!         .log_dir(dir.path().join("joblogs"))
//!         .start()
//!         .await?;
//!
//!     // xjob's routes beside the app's own; executors must send the access token
//!     let routes = xjob::routes::center(Console::new(engine.clone()), Some(xjob::config::random_token()));
//!     let server = HttpServer::new(move || App::new().configure(routes.clone()))
//!         .workers(1)
//!         .listen(listener)?
//!         .run();
//!     let http = server.handle();
//!     actix_web::rt::spawn(server);
//!
//!     // a job on a schedule (hourly), started, and triggered once now with a param
//!     let group = engine.ensure_group("my-app", "My app").await?;
//!     let job = engine.add_job(JobSpec::cron(group, "greet", "0 0 * * * ?", "greet")).await?;
//!     engine.start_job(job).await?;
//!     engine.trigger_job(job, Some("world".into()), None).await?;
//!
//!     // its runs, through the engine (no SQL)
//!     let mut run = None;
//!     for _ in 0..500 {
//!         let page = engine.runs(job, Paging::first(10)).await?;
//!         if let Some(r) = page.items.into_iter().find(|r| r.status != "running") {
//!             run = Some(r);
//!             break;
//!         }
//!         tokio::time::sleep(Duration::from_millis(10)).await;
//!     }
//!     let run = run.expect("the run finished");
//!     assert_eq!(run.status, "success");
//!     assert!(engine.run_log(run.id, 1).await?.content.contains("hello, world"));
//!
//!     engine.stop(Duration::from_secs(5)).await?;
//!     http.stop(true).await;
//!     Ok(())
//! })
//! # }
//! ```
//!
//! ## What is stable API
//! What this page lists: [`Engine`] and [`EngineBuilder`] (with [`RunLog`]), [`Config`] and the
//! [`config`] tree, [`Error`] / [`Result`], [`JobSpec`], [`Schedule`], the handler types
//! ([`HandlerRegistry`], [`JobContext`], [`JobResult`]), the [`executor`] clients
//! ([`ExecutorClient`], [`executor::HttpExecutorClient`], [`executor::StandaloneExecutor`]),
//! the route scopes in [`routes`], the [`console`] service with its views, the XXL-JOB wire
//! model in [`model`], [`alarm`] for custom alarms, [`migrate`] and the [`demo`] handlers.
//! Everything else is the engine's inside (scan, ring, trigger pool, completion, registry,
//! storage) and private; the hidden `testing` module exists for this crate's own tests and
//! carries no promise.
//!
//! ## Layout (inside)
//! - `activity`: in-flight work counter (lets tests wait for the engine to settle).
//! - `allowlist`: URL prefixes the node may send requests to for users (HTTP jobs, webhooks).
//! - `bounded`: texts cut (and marked) to the bounds of where they are kept.
//! - `clock`: the one source of "now" ([`Clock`]).
//! - `cpu`: where the node's threads run (the SQLite writer's own CPU, job processes on all).
//! - `schedule`: Quartz cron and fixed-rate next times ([`Schedule`]).
//! - `store`: every SQL statement, and the hot path's two stores, each one interface over a
//!   SQLite file's dedicated connection and the pool: the run-row writer (`store::writer`: the
//!   queue and its backends `sqlite_file` and `pool`, over the outcome/result pairing of
//!   `pairing`; the pooled final writes in `store::run_rows`) and the scan's store
//!   (`store::scan`: a pass's plan in `plan`, its transaction in `file` and `pool`); bucket
//!   leases in `store::leases`.
//! - `directory`: jobs and groups as dispatch sees them (in memory, refreshed by the scan).
//! - `router`: the routing strategies.
//! - `token`: access-token checks in constant time.
//! - `trigger`: the trigger procedure.
//! - `jobs`: job definitions and their validation ([`JobSpec`]).
//! - `actors`: scan (timing and back-pressure; passes are the scan store's), ring, trigger
//!   pool, completion, registry, fail monitor, log report, lease keeper (shared databases),
//!   settle (fires in doubt, asked of their executors; the rule's statements in
//!   `store::in_doubt`), workflows.
//! - `lost_runs`: the sweep of the node's own executor's runs that ended without a result.
//! - `trigger_msg`: the bounded HTML summary of a trigger.
//! - `engine`: wiring ([`Engine`]) and the embedder's queries (`engine/api.rs`).
//! - `metrics`: Prometheus counters and histograms.
//! - `ownership`: which buckets of jobs this node schedules (all on SQLite; leased on a shared
//!   database, see `actors/lease.rs` and `store/leases.rs`).

#![cfg_attr(test, allow(clippy::unwrap_used))]
#![warn(unreachable_pub)]

// the stable API: these modules and the re-exports below
pub mod alarm;
pub mod config;
pub mod console;
pub mod demo;
pub mod executor;
pub mod model;
pub mod ops;
pub mod routes;
pub mod workflow;

// the engine's inside, crate-private (tests reach a few items through `testing`)
mod activity;
mod actors;
mod allowlist;
mod bounded;
mod clock;
mod cpu;
mod directory;
mod engine;
mod error;
mod fire;
mod jobs;
mod lost_runs;
mod metrics;
mod ownership;
mod router;
mod schedule;
mod store;
mod token;
mod trigger;
mod trigger_msg;

pub use clock::Clock;
pub use config::Config;
pub use cpu::with_process_cpus;
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
        pub use crate::actors::complete::RecordResults;
        pub use crate::actors::log_report::{CleanLogs, RefreshReport};
        pub use crate::actors::registry::Heartbeat;
        pub use crate::actors::ring::{PushRing, Ring, RingActor};
        pub use crate::actors::settle::Settled;
        pub use crate::actors::trigger_pool::{FireBatch, PoolStats};
    }
    /// Time conversions.
    pub mod clock {
        pub use crate::clock::ms_to_naive;
    }
    /// The executor's actors.
    pub mod executor {
        pub use crate::executor::actor::{
            ExecutorActor, IdleBeat, Kill, Run, RuntimeConfig, Shutdown,
        };
        pub use crate::executor::callback::{CallbackActor, FlushCallbacks, RetrySpool};
        pub use crate::executor::client::Callback;
        pub use crate::executor::log_reader::read_log;
    }
    pub use crate::metrics::Metrics;
    pub use crate::router::Router;
    /// The trigger message as the console shows it.
    pub mod trigger_msg {
        pub use crate::trigger_msg::render;
    }
    pub use crate::schedule::CronExpr;
    pub use crate::schedule::plan::{Window, plan_job};
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
                Fire, PendingFire, TriggerRecord, all, all_pending, claim, for_job, get,
                insert_pending, insert_run, record_handle, record_trigger,
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
        /// Workflow runs (crash-point tests record what a node would have before it died).
        pub mod workflow_runs {
            pub use crate::store::workflow_runs::{Changes, Dispatch, Runs};
        }
        /// The run-row writer.
        pub mod writer {
            pub use crate::store::writer::{LogWriter, Target};
        }
    }
    pub use crate::token::random_hex;
    pub use crate::trigger::{Trigger, TriggerRequest};

    /// The address list of group `group_id` as dispatch routes by it now (the in-memory
    /// directory, which follows the stored list a moment after the registry rewrites it).
    pub fn routed_addresses(engine: &crate::Engine, group_id: i32) -> Vec<String> {
        engine
            .directory()
            .groups()
            .get(&group_id)
            .and_then(|g| g.address_list.clone())
            .map(|l| l.split(',').map(str::to_string).collect())
            .unwrap_or_default()
    }
}
