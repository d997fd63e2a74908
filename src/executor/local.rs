//! The in-process executor: an [`ExecutorClient`] in front of an [`ExecutorActor`], so the center
//! reaches handlers registered in this process without HTTP, and the node's HTTP routes serve
//! the same executor to other nodes. Run logs are read from the log directory directly
//! ([`super::log_reader`]).

use std::path::PathBuf;

use actix::prelude::*;
use futures::FutureExt;
use futures::StreamExt;
use futures::future::BoxFuture;

use super::Callback;
use super::actor::{ExecutorActor, IdleBeat, Kill, Run, RunMany, RuntimeConfig, Shutdown};
use super::client::Answers;
use super::log_reader::read_log_blocking;
use super::{ExecutorClient, HandlerRegistry};
use crate::clock::Clock;
use crate::model::wire::{FAIL_CODE, LogParam, LogResult, ReturnT, SUCCESS_CODE, TriggerParam};

/// Runs registered handlers (and, when enabled, scripts) in this process.
#[derive(Clone)]
pub(crate) struct InProcessExecutor {
    addr: Addr<ExecutorActor>,
    clock: Clock,
    log_dir: Option<PathBuf>,
    run_logs: bool,
    reporter: super::actor::Reporter,
}

fn stopped<T>() -> ReturnT<T> {
    ReturnT {
        code: FAIL_CODE,
        msg: Some("executor is stopping".into()),
        content: None,
    }
}

impl InProcessExecutor {
    /// Starts an executor for `handlers` reporting results to `callback`, on `thread` (its job
    /// threads and handlers with it) or on the current one.
    pub(crate) fn start(
        handlers: HandlerRegistry,
        callback: Recipient<Callback>,
        clock: Clock,
        cfg: RuntimeConfig,
        thread: Option<&ArbiterHandle>,
    ) -> Self {
        let log_dir = cfg.log_dir.clone();
        let run_logs = cfg.run_logs;
        let actor = ExecutorActor::new(handlers, callback, clock.clone(), cfg);
        let reporter = actor.reporter();
        let addr = match thread {
            Some(t) => ExecutorActor::start_in_arbiter(t, move |_| actor),
            None => actor.start(),
        };
        InProcessExecutor {
            addr,
            clock,
            log_dir,
            run_logs,
            reporter,
        }
    }

    /// The runs this executor accepted whose result it has not sent yet.
    pub(crate) fn active_runs(&self) -> foldhash::HashSet<i64> {
        self.reporter.active()
    }

    /// Kills every job thread (their runs report as killed).
    pub(crate) async fn shutdown(&self) {
        let _ = self.addr.send(Shutdown).await;
    }

    /// Reads a run log from `fromLineNum` (spec §3.5, 2.4 semantics), off the async threads.
    pub(crate) fn read_log(&self, p: LogParam) -> BoxFuture<'static, ReturnT<LogResult>> {
        if !self.run_logs {
            let off = ReturnT {
                code: SUCCESS_CODE,
                msg: None,
                content: Some(LogResult {
                    from_line_num: p.from_line_num,
                    to_line_num: 0,
                    log_content: "run logs are off on this executor (executor.run_logs = false)"
                        .into(),
                    is_end: true,
                }),
            };
            return futures::future::ready(off).boxed();
        }
        read_log_blocking(self.log_dir.clone(), self.clock.clone(), p).boxed()
    }
}

impl ExecutorClient for InProcessExecutor {
    fn run(&self, _address: &str, param: TriggerParam) -> BoxFuture<'static, ReturnT> {
        let f = self.addr.send(Run(param));
        async move { f.await.unwrap_or_else(|_| stopped()) }.boxed()
    }

    fn run_each_counted(&self, calls: Vec<(String, TriggerParam)>) -> (usize, Answers) {
        // the whole batch is one message to the executor
        (usize::from(!calls.is_empty()), self.run_each(calls))
    }

    fn run_each(&self, calls: Vec<(String, TriggerParam)>) -> Answers {
        let n = calls.len();
        let f = self
            .addr
            .send(RunMany(calls.into_iter().map(|(_, p)| p).collect()));
        futures::stream::once(async move {
            f.await
                .unwrap_or_else(|_| (0..n).map(|_| stopped()).collect())
                .into_iter()
                .enumerate()
                .collect()
        })
        .boxed()
    }

    fn beat(&self, _address: &str) -> BoxFuture<'static, ReturnT> {
        futures::future::ready(ReturnT::success()).boxed()
    }

    fn idle_beat(&self, _address: &str, job_id: i32) -> BoxFuture<'static, ReturnT> {
        let f = self.addr.send(IdleBeat(job_id));
        async move { f.await.unwrap_or_else(|_| stopped()) }.boxed()
    }

    fn kill(&self, _address: &str, job_id: i32) -> BoxFuture<'static, ReturnT> {
        let f = self.addr.send(Kill(job_id));
        async move { f.await.unwrap_or_else(|_| stopped()) }.boxed()
    }

    fn log(&self, _address: &str, param: LogParam) -> BoxFuture<'static, ReturnT<LogResult>> {
        self.read_log(param)
    }
}
