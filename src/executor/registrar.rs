//! Registrar: a standalone executor's heartbeat (protocol.md §6.7) and run-log retention (§6.8).
//!
//! Every beat period it registers `(EXECUTOR, appname, address)` with every admin address;
//! [`Deregister`] sends `registryRemove` to each (graceful shutdown). Once a day it deletes run-log
//! day directories older than the retention (off below 3 days, XXL-JOB's rule).

use std::path::{Path, PathBuf};
use std::time::Duration;

use actix::prelude::*;
use chrono::NaiveDate;

use super::HttpExecutorClient;
use crate::clock::Clock;
use crate::model::wire::RegistryParam;

/// Unregisters from every admin; answers when done.
#[derive(Message, Debug)]
#[rtype(result = "()")]
pub(super) struct Deregister;

/// The registrar.
pub(super) struct Registrar {
    admins: Vec<String>,
    client: HttpExecutorClient,
    param: RegistryParam,
    beat: Duration,
    log_dir: PathBuf,
    retention_days: i64,
    /// Today's date for the run-log cleanup.
    clock: Clock,
    stopped: bool,
    /// Where the admins' node ids (from their answers) are noted.
    routes: Option<super::AdminRoutes>,
}

/// Deletes `yyyy-MM-dd` directories under `dir` at least `days` old (relative to `today`).
pub(super) fn clean_logs(dir: &Path, today: NaiveDate, days: i64) -> usize {
    if days < 3 {
        return 0;
    }
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    let mut n = 0;
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().to_string();
        if let Ok(d) = NaiveDate::parse_from_str(&name, "%Y-%m-%d")
            && (today - d).num_days() >= days
            && std::fs::remove_dir_all(e.path()).is_ok()
        {
            n += 1;
        }
    }
    n
}

/// Where a standalone executor's run logs live and how long they are kept.
pub(super) struct RunLogs {
    /// `executor.log_path`.
    pub(super) dir: PathBuf,
    /// `executor.log_retention_days` (below 3: kept).
    pub(super) retention_days: i64,
}

impl Registrar {
    /// Registers `app` at `address` with `admins` every `beat`; removes run logs past their
    /// retention.
    pub(super) fn new(
        admins: Vec<String>,
        client: HttpExecutorClient,
        (app, address): (&str, &str),
        beat: Duration,
        logs: RunLogs,
        clock: Clock,
    ) -> Self {
        let RunLogs {
            dir: log_dir,
            retention_days,
        } = logs;
        Registrar {
            clock,
            admins,
            client,
            param: RegistryParam {
                registry_group: "EXECUTOR".into(),
                registry_key: app.into(),
                registry_value: address.into(),
                xjob_executor: Some(env!("CARGO_PKG_VERSION").into()),
            },
            beat,
            log_dir,
            retention_days,
            stopped: false,
            routes: None,
        }
    }

    /// Notes the node id each admin answers with in `routes`.
    pub(super) fn with_routes(mut self, routes: super::AdminRoutes) -> Self {
        self.routes = Some(routes);
        self
    }

    fn beat(&mut self, ctx: &mut Context<Self>) {
        if self.stopped {
            return;
        }
        let (client, admins, p) = (self.client.clone(), self.admins.clone(), self.param.clone());
        let routes = self.routes.clone();
        ctx.spawn(
            async move {
                for a in &admins {
                    let r = client.registry(a, "registry", p.clone()).await;
                    if !r.is_success() {
                        tracing::warn!(admin = %a, msg = ?r.msg, "registration refused");
                    } else if let (Some(routes), Some(node)) = (&routes, &r.content) {
                        // a node of an xjob cluster says which one it is
                        routes.learned(node, a);
                    }
                }
            }
            .into_actor(self),
        );
    }
}

impl Registrar {
    fn clean_run_logs(&self) {
        let n = clean_logs(
            &self.log_dir,
            crate::clock::ms_to_naive(self.clock.now_ms()).date(),
            self.retention_days,
        );
        if n > 0 {
            tracing::info!(days = n, "old run logs removed");
        }
    }
}

impl Actor for Registrar {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Self::Context) {
        self.beat(ctx);
        ctx.run_interval(self.beat, |a, ctx| a.beat(ctx));
        // run logs are cleaned at start (an executor restarted daily still cleans), then daily
        self.clean_run_logs();
        ctx.run_interval(Duration::from_secs(24 * 3600), |a, _| a.clean_run_logs());
    }
}

impl Handler<Deregister> for Registrar {
    type Result = ResponseFuture<()>;

    fn handle(&mut self, _: Deregister, _ctx: &mut Self::Context) -> Self::Result {
        self.stopped = true;
        let (client, admins, p) = (self.client.clone(), self.admins.clone(), self.param.clone());
        Box::pin(async move {
            for a in &admins {
                client.registry(a, "registryRemove", p.clone()).await;
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Run-log retention deletes day directories older than the limit and nothing else.
    #[test]
    fn retention_removes_only_old_day_directories() {
        let dir = tempfile::tempdir().unwrap();
        for d in [
            "2026-11-01",
            "2026-11-18",
            "2026-11-21",
            "gluesource",
            "callbacklog",
        ] {
            std::fs::create_dir_all(dir.path().join(d)).unwrap();
        }
        let today = NaiveDate::from_ymd_opt(2026, 11, 21).unwrap();
        assert_eq!(clean_logs(dir.path(), today, 2), 0, "below 3 days: off");
        assert_eq!(clean_logs(dir.path(), today, 3), 2);
        let mut left: Vec<String> = std::fs::read_dir(dir.path())
            .unwrap()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().to_string())
            .collect();
        left.sort();
        assert_eq!(left, vec!["2026-11-21", "callbacklog", "gluesource"]);
    }
}
