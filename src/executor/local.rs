//! The in-process executor: an [`ExecutorClient`] in front of an [`ExecutorActor`], so the center
//! reaches handlers registered in this process without HTTP, and the node's HTTP routes serve
//! the same executor to other nodes. Run logs are read from the log directory directly.

use std::path::PathBuf;

use actix::prelude::*;
use futures::FutureExt;
use futures::StreamExt;
use futures::future::BoxFuture;

use super::Callback;
use super::actor::{ExecutorActor, IdleBeat, Kill, Run, RunMany, RuntimeConfig, Shutdown};
use super::client::Answers;
use super::{ExecutorClient, HandlerRegistry, JobLogger};
use crate::clock::Clock;
use crate::model::wire::{FAIL_CODE, LogParam, LogResult, ReturnT, SUCCESS_CODE, TriggerParam};

/// Runs registered handlers (and, when enabled, scripts) in this process.
#[derive(Clone)]
pub(crate) struct InProcessExecutor {
    addr: Addr<ExecutorActor>,
    clock: Clock,
    log_dir: Option<PathBuf>,
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
    /// Starts an executor for `handlers` reporting results to `callback`.
    pub(crate) fn start(
        handlers: HandlerRegistry,
        callback: Recipient<Callback>,
        clock: Clock,
        cfg: RuntimeConfig,
    ) -> Self {
        let log_dir = cfg.log_dir.clone();
        let actor = ExecutorActor::new(handlers, callback, clock.clone(), cfg);
        let reporter = actor.reporter();
        let addr = actor.start();
        InProcessExecutor {
            addr,
            clock,
            log_dir,
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

    /// Reads a run log from `fromLineNum` (spec §3.5, 2.4 semantics).
    pub(crate) fn read_log(&self, p: LogParam) -> ReturnT<LogResult> {
        read_log(self.log_dir.clone(), self.clock.clone(), p)
    }
}

/// Reads `<log_dir>/<day>/<logId>.log` from line `fromLineNum`.
pub fn read_log(log_dir: Option<PathBuf>, clock: Clock, p: LogParam) -> ReturnT<LogResult> {
    let logger = JobLogger::new(log_dir, clock, p.log_id, p.log_date_tim);
    let missing = || ReturnT {
        code: SUCCESS_CODE,
        msg: None,
        content: Some(LogResult {
            from_line_num: p.from_line_num,
            to_line_num: 0,
            log_content: "readLog fail, logFile not exists".into(),
            is_end: true,
        }),
    };
    let Some(path) = logger.path() else {
        return missing();
    };
    // bytes, decoded lossily: a log with invalid UTF-8 (script output) is still a log
    let Ok(bytes) = std::fs::read(path) else {
        return missing();
    };
    let text = String::from_utf8_lossy(&bytes);
    let from = p.from_line_num.max(1) as usize;
    // one page: whole lines from `from` up to LOG_PAGE_BYTES (at least one line); the reader
    // asks again from `toLineNum + 1` for the rest, so a log of any size is read in pages
    let mut content = String::new();
    let mut to = from - 1;
    for l in text.lines().skip(from - 1) {
        if !content.is_empty() && content.len() + l.len() + 1 > LOG_PAGE_BYTES {
            break;
        }
        content.push_str(l);
        content.push('\n');
        to += 1;
    }
    if content.is_empty() {
        // nothing from `from` on: the line count, as before paging (and as XXL-JOB answers)
        to = text.lines().count();
    }
    ReturnT {
        code: SUCCESS_CODE,
        msg: None,
        content: Some(LogResult {
            from_line_num: p.from_line_num,
            to_line_num: to as i32,
            log_content: content,
            is_end: false,
        }),
    }
}

/// Most bytes of log text one `/log` answer carries (whole lines; a longer single line goes
/// alone). Well under the 5 MiB a reader accepts per answer.
pub(super) const LOG_PAGE_BYTES: usize = 1024 * 1024;

impl ExecutorClient for InProcessExecutor {
    fn run(&self, _address: &str, param: TriggerParam) -> BoxFuture<'static, ReturnT> {
        let f = self.addr.send(Run(param));
        async move { f.await.unwrap_or_else(|_| stopped()) }.boxed()
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
        futures::future::ready(self.read_log(param)).boxed()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A log larger than a page is read in pages of whole lines that, followed from
    /// `toLineNum + 1`, give back every line once and in order; past the end the line count.
    #[test]
    fn a_large_log_is_read_in_pages() {
        let dir = tempfile::tempdir().unwrap();
        let clock = Clock::system();
        let (log_id, at) = (42, 1_700_000_000_000);
        let logger = JobLogger::new(Some(dir.path().to_path_buf()), clock.clone(), log_id, at);
        let path = logger.path().unwrap().clone();
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        let line = "x".repeat(999);
        let lines: Vec<String> = (0..3000).map(|i| format!("{i:05}{line}")).collect();
        std::fs::write(&path, lines.join("\n") + "\n").unwrap();
        let read = |from| {
            read_log(
                Some(dir.path().to_path_buf()),
                clock.clone(),
                LogParam {
                    log_date_tim: at,
                    log_id,
                    from_line_num: from,
                },
            )
            .content
            .unwrap()
        };
        let (mut from, mut got, mut pages) = (1, String::new(), 0);
        loop {
            let page = read(from);
            assert!(page.log_content.len() <= LOG_PAGE_BYTES);
            if page.log_content.is_empty() {
                assert_eq!(page.to_line_num, 3000, "past the end: the line count");
                break;
            }
            got.push_str(&page.log_content);
            from = page.to_line_num + 1;
            pages += 1;
        }
        assert_eq!(got, lines.join("\n") + "\n");
        assert!(pages >= 3, "about 3 MB in pages of at most 1 MiB: {pages}");
    }
}
