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
    /// When this executor started (epoch ms): of a run sent before, it cannot say it never had
    /// it (an earlier process may have).
    started_ms: i64,
}

/// How much earlier than a run's recorded time this executor must have started to say that it
/// never had the run (the center's and the executor's clocks may differ a little).
const START_MARGIN_MS: i64 = 5_000;

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
            started_ms: clock.now_ms(),
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

    /// Writes the run logs queued until the executor is quiet and hands the results that
    /// waited for them to the center, answering once it took them (a stopping engine: those
    /// runs are done, their results are not to be left behind). Blocking file I/O, bounded by
    /// the runs done in the last moments.
    pub(crate) async fn write_queued_logs(&self) {
        self.reporter.flush_delivered().await;
    }

    /// Kills every job thread (their runs report as killed).
    pub(crate) async fn shutdown(&self) {
        let _ = self.addr.send(Shutdown).await;
    }

    /// Reads a run log from `fromLineNum` (protocol.md §2.5, 2.4 semantics), off the async threads.
    ///
    /// A center settling a run it is in doubt about reads whether this executor received it
    /// from the answer: a run it has (queued, running, or done a moment ago) answers a page,
    /// empty when its log is not written yet or run logs are off; a run recorded before this
    /// executor started, whose log it does not find, answers XXL-JOB's `readLog fail, logFile
    /// not exists` followed by `; unsure: …` (an earlier process may have had it, and a run it
    /// had died with it); any other answers XXL-JOB's words alone.
    pub(crate) fn read_log(&self, p: LogParam) -> BoxFuture<'static, ReturnT<LogResult>> {
        let page = |content: &str| ReturnT {
            code: SUCCESS_CODE,
            msg: None,
            content: Some(LogResult {
                from_line_num: p.from_line_num,
                to_line_num: 0,
                log_content: content.into(),
                is_end: true,
            }),
        };
        let before_start = p.log_date_tim < self.started_ms + START_MARGIN_MS;
        // XXL-JOB's words first (what its consoles show), then why this executor cannot be sure
        let unsure = "readLog fail, logFile not exists; unsure: this executor started after the \
             run was sent (a run its earlier process had died with that process)";
        if !self.run_logs {
            let off = if self.reporter.knows(p.log_id) {
                page(
                    "run logs are off on this executor (executor.run_logs = false); it received this run",
                )
            } else if before_start {
                page(unsure)
            } else {
                page("readLog fail, logFile not exists (run logs are off on this executor)")
            };
            return futures::future::ready(off).boxed();
        }
        let reporter = self.reporter.clone();
        let read = reporter.clone();
        let log_id = p.log_id;
        read_log_blocking(self.log_dir.clone(), self.clock.clone(), p, move |id| {
            read.write_log_now(id)
        })
        .map(move |r| {
            let missing = r
                .content
                .as_ref()
                .is_some_and(|c| c.log_content.starts_with("readLog fail"));
            if missing && reporter.knows(log_id) {
                // received, not started yet: its log is not written
                let mut r = r;
                if let Some(c) = r.content.as_mut() {
                    c.log_content.clear();
                    c.is_end = false;
                }
                return r;
            }
            if missing && before_start {
                let mut r = r;
                if let Some(c) = r.content.as_mut() {
                    c.log_content = unsure.into();
                }
                return r;
            }
            r
        })
        .boxed()
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::wire::HandleCallbackParam;
    use std::sync::Arc;

    struct Collect(Arc<parking_lot::Mutex<Vec<HandleCallbackParam>>>);

    impl Actor for Collect {
        type Context = Context<Self>;
    }

    impl Handler<Callback> for Collect {
        type Result = ();

        fn handle(&mut self, msg: Callback, _: &mut Self::Context) {
            self.0.lock().extend(msg.0);
        }
    }

    async fn yields() {
        for _ in 0..32 {
            tokio::task::yield_now().await;
        }
    }

    /// A run done at once has its log queued and its result held back; a `/log` read of the
    /// run before the executor writes its queued logs gets the whole log (written first), the
    /// result still waits for the writing, and the log is not written twice.
    #[actix::test]
    async fn a_queued_run_log_is_read_whole_and_written_once() {
        tokio::time::pause();
        let dir = tempfile::tempdir().expect("temp dir");
        let seen = Arc::new(parking_lot::Mutex::new(Vec::new()));
        let sink = Collect(seen.clone()).start();
        let mut handlers = HandlerRegistry::new();
        handlers
            .register_fn("instant", |ctx: super::super::JobContext| async move {
                ctx.log("hello");
                Ok(())
            })
            .expect("registered");
        let t0 = 1_800_000_000_000;
        let exec = InProcessExecutor::start(
            handlers,
            sink.recipient(),
            Clock::tokio_at(t0),
            RuntimeConfig {
                log_dir: Some(dir.path().to_path_buf()),
                ..RuntimeConfig::default()
            },
            None,
        );
        let run = TriggerParam {
            job_id: 1,
            log_id: 5,
            log_date_time: t0,
            executor_handler: Some("instant".into()),
            glue_type: Some("BEAN".into()),
            broadcast_total: 1,
            ..Default::default()
        };
        assert_eq!(exec.run("", run.clone()).await.code, SUCCESS_CODE);
        yields().await;
        assert!(seen.lock().is_empty(), "the result waits for the log");
        assert!(exec.active_runs().contains(&5), "not reported yet");
        let read = exec
            .read_log(LogParam {
                log_date_tim: t0,
                log_id: 5,
                from_line_num: 1,
            })
            .await
            .content
            .expect("a page");
        let text = read.log_content;
        let (start, hello, end) = (
            text.find("execute start").expect("start"),
            text.find("hello").expect("the handler's line"),
            text.find("execute end").expect("end"),
        );
        assert!(start < hello && hello < end, "{text}");
        assert!(seen.lock().is_empty(), "still waits for the writing task");
        // the timer's resolution is a millisecond: the quiet time and one more; then the
        // writing runs on the blocking pool (real I/O: a bounded wait in real time)
        let quiet = super::super::run_logs::QUIET + std::time::Duration::from_millis(1);
        tokio::time::advance(quiet).await;
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while seen.lock().is_empty() {
            assert!(std::time::Instant::now() < deadline, "no result");
            yields().await;
        }
        let ids: Vec<i64> = seen.lock().iter().map(|r| r.log_id).collect();
        assert_eq!(ids, [5]);
        assert!(!exec.active_runs().contains(&5));
        let day = crate::clock::ms_to_naive(t0).format("%Y-%m-%d").to_string();
        let file = std::fs::read_to_string(dir.path().join(&day).join("5.log")).expect("the log");
        assert_eq!(file.matches("execute start").count(), 1, "{file}");
        assert_eq!(file.matches("hello").count(), 1, "{file}");

        // a graceful stop writes the queued logs and sends their results, quiet or not
        let mut again = run.clone();
        again.log_id = 6;
        assert_eq!(exec.run("", again).await.code, SUCCESS_CODE);
        yields().await;
        assert!(
            !dir.path().join(day.as_str()).join("6.log").exists(),
            "queued"
        );
        exec.shutdown().await;
        yields().await;
        let ids: Vec<i64> = seen.lock().iter().map(|r| r.log_id).collect();
        assert_eq!(ids, [5, 6]);
        let file = std::fs::read_to_string(dir.path().join(day).join("6.log")).expect("written");
        assert!(file.contains("execute end"), "{file}");
    }
}
