//! The in-process executor: runs registered Rust handlers in this process and hands results to
//! the center directly (no HTTP).
//!
//! Per job id it keeps one serial worker slot: `SERIAL_EXECUTION` queues, `DISCARD_LATER`
//! refuses while busy, `COVER_EARLY` kills the running and queued runs first; a kill aborts
//! every run of the job. Each trigger yields exactly one result: a run's result and a kill's
//! "killed" result race through one flag per run.

use std::collections::HashMap;
use std::panic::AssertUnwindSafe;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use actix::Recipient;
use futures::FutureExt;
use futures::future::BoxFuture;
use parking_lot::Mutex;

use super::{ExecutorClient, HandlerRegistry, JobContext, JobLogger};
use crate::actors::complete::Callback;
use crate::clock::Clock;
use crate::model::wire::{
    FAIL_CODE, HandleCallbackParam, LogParam, LogResult, ReturnT, SUCCESS_CODE, TIMEOUT_CODE,
    TriggerParam,
};
use crate::model::{BlockStrategy, GlueType};

/// Executor-side cap on a handle message (spec §7.4).
pub const EXECUTOR_MSG_MAX: usize = 50_000;

struct Run {
    log_id: i64,
    log_date: i64,
    reported: Arc<AtomicBool>,
    abort: Option<tokio::task::AbortHandle>,
}

#[derive(Default)]
struct Slot {
    serial: tokio::sync::Mutex<()>,
    queued: AtomicUsize,
    running: AtomicBool,
    runs: Mutex<Vec<Run>>,
}

impl Slot {
    fn busy(&self) -> bool {
        self.running.load(Ordering::SeqCst) || self.queued.load(Ordering::SeqCst) > 0
    }
}

struct Inner {
    handlers: HandlerRegistry,
    callback: Recipient<Callback>,
    clock: Clock,
    log_dir: Option<PathBuf>,
    slots: Mutex<HashMap<i32, Arc<Slot>>>,
}

/// Runs registered handlers in this process.
#[derive(Clone)]
pub struct InProcessExecutor {
    inner: Arc<Inner>,
}

fn cap(msg: String) -> String {
    if msg.chars().count() > EXECUTOR_MSG_MAX {
        let mut s: String = msg.chars().take(EXECUTOR_MSG_MAX).collect();
        s.push_str("...");
        s
    } else {
        msg
    }
}

impl InProcessExecutor {
    /// An executor for `handlers`, reporting results to `callback`, writing run logs under
    /// `log_dir` when given.
    pub fn new(
        handlers: HandlerRegistry,
        callback: Recipient<Callback>,
        clock: Clock,
        log_dir: Option<PathBuf>,
    ) -> Self {
        InProcessExecutor {
            inner: Arc::new(Inner {
                handlers,
                callback,
                clock,
                log_dir,
                slots: Mutex::new(HashMap::new()),
            }),
        }
    }

    fn report(
        &self,
        reported: &AtomicBool,
        log_id: i64,
        log_date: i64,
        code: i32,
        msg: Option<String>,
    ) {
        if reported.swap(true, Ordering::SeqCst) {
            return;
        }
        self.inner
            .callback
            .do_send(Callback(vec![HandleCallbackParam {
                log_id,
                log_date_tim: log_date,
                handle_code: code,
                handle_msg: msg,
            }]));
    }

    fn kill_slot(&self, slot: &Slot, reason: &str) -> usize {
        let runs: Vec<Run> = std::mem::take(&mut *slot.runs.lock());
        let n = runs.len();
        for r in runs {
            if let Some(a) = &r.abort {
                a.abort();
            }
            self.report(
                &r.reported,
                r.log_id,
                r.log_date,
                FAIL_CODE,
                Some(format!("{reason} [job running, killed]")),
            );
        }
        slot.queued.store(0, Ordering::SeqCst);
        slot.running.store(false, Ordering::SeqCst);
        n
    }

    fn start(&self, p: TriggerParam) -> ReturnT {
        match p.glue_type.as_deref().unwrap_or("BEAN").parse::<GlueType>() {
            Ok(GlueType::Bean) => {}
            _ => {
                return ReturnT::fail(format!(
                    "glueType[{}] is not valid.",
                    p.glue_type.as_deref().unwrap_or_default()
                ));
            }
        }
        let name = p.executor_handler.clone().unwrap_or_default();
        let Some(handler) = self.inner.handlers.get(&name).cloned() else {
            return ReturnT::fail(format!("job handler [{name}] not found."));
        };
        let slot = self
            .inner
            .slots
            .lock()
            .entry(p.job_id)
            .or_insert_with(|| {
                handler.init();
                Arc::default()
            })
            .clone();
        let block = p
            .executor_block_strategy
            .as_deref()
            .and_then(|b| b.parse().ok())
            .unwrap_or(BlockStrategy::SerialExecution);
        if slot.busy() {
            match block {
                BlockStrategy::DiscardLater => {
                    return ReturnT::fail("block strategy effect：Discard Later");
                }
                BlockStrategy::CoverEarly => {
                    self.kill_slot(&slot, "block strategy effect：Cover Early");
                }
                BlockStrategy::SerialExecution => {}
            }
        }
        if slot.runs.lock().iter().any(|r| r.log_id == p.log_id) {
            return ReturnT::fail(format!("repeate trigger job, logId:{}", p.log_id));
        }
        let reported = Arc::new(AtomicBool::new(false));
        slot.queued.fetch_add(1, Ordering::SeqCst);
        let me = self.clone();
        let (log_id, log_date) = (p.log_id, p.log_date_time);
        let task_slot = slot.clone();
        let task_reported = reported.clone();
        let task = tokio::spawn(async move {
            let slot = task_slot;
            let _turn = slot.serial.lock().await;
            slot.queued.fetch_sub(1, Ordering::SeqCst);
            slot.running.store(true, Ordering::SeqCst);
            let logger = JobLogger::new(
                me.inner.log_dir.clone(),
                me.inner.clock.clone(),
                log_id,
                log_date,
            );
            let ctx = JobContext::new(
                p.job_id,
                log_id,
                p.executor_params.clone().unwrap_or_default(),
                (p.broadcast_index, p.broadcast_total.max(1)),
                log_date,
                logger.clone(),
            );
            logger.log(&format!(
                "<br>----------- xxl-job job execute start -----------<br>----------- Param:{}",
                ctx.param
            ));
            let fut = AssertUnwindSafe(handler.call(ctx)).catch_unwind();
            let outcome = if p.executor_timeout > 0 {
                tokio::time::timeout(Duration::from_secs(p.executor_timeout as u64), fut)
                    .await
                    .ok()
            } else {
                Some(fut.await)
            };
            let (code, msg) = match outcome {
                None => (TIMEOUT_CODE, Some("job execute timeout ".to_string())),
                Some(Ok(Ok(()))) => (SUCCESS_CODE, None),
                Some(Ok(Err(e))) => (FAIL_CODE, Some(cap(format!("{e:#}")))),
                Some(Err(panic)) => {
                    let text = panic
                        .downcast_ref::<&str>()
                        .map(|s| s.to_string())
                        .or_else(|| panic.downcast_ref::<String>().cloned())
                        .unwrap_or_else(|| "handler panicked".into());
                    (
                        FAIL_CODE,
                        Some(cap(format!("job handler panicked: {text}"))),
                    )
                }
            };
            logger.log(&format!(
                "<br>----------- xxl-job job execute end(finish) -----------<br>----------- Result: handleCode={code}, handleMsg = {}",
                msg.as_deref().unwrap_or("null")
            ));
            slot.running.store(false, Ordering::SeqCst);
            slot.runs.lock().retain(|r| r.log_id != log_id);
            me.report(&task_reported, log_id, log_date, code, msg);
        });
        slot.runs.lock().push(Run {
            log_id,
            log_date,
            reported,
            abort: Some(task.abort_handle()),
        });
        ReturnT::success()
    }

    fn read_log(&self, p: LogParam) -> ReturnT<LogResult> {
        let logger = JobLogger::new(
            self.inner.log_dir.clone(),
            self.inner.clock.clone(),
            p.log_id,
            p.log_date_tim,
        );
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
        let Ok(text) = std::fs::read_to_string(path) else {
            return missing();
        };
        let lines: Vec<&str> = text.lines().collect();
        let from = p.from_line_num.max(1) as usize;
        let mut content = String::new();
        for l in lines.iter().skip(from - 1) {
            content.push_str(l);
            content.push('\n');
        }
        ReturnT {
            code: SUCCESS_CODE,
            msg: None,
            content: Some(LogResult {
                from_line_num: p.from_line_num,
                to_line_num: lines.len() as i32,
                log_content: content,
                is_end: false,
            }),
        }
    }
}

impl ExecutorClient for InProcessExecutor {
    fn run(&self, _address: &str, param: TriggerParam) -> BoxFuture<'static, ReturnT> {
        futures::future::ready(self.start(param)).boxed()
    }

    fn beat(&self, _address: &str) -> BoxFuture<'static, ReturnT> {
        futures::future::ready(ReturnT::success()).boxed()
    }

    fn idle_beat(&self, _address: &str, job_id: i32) -> BoxFuture<'static, ReturnT> {
        let busy = self
            .inner
            .slots
            .lock()
            .get(&job_id)
            .is_some_and(|s| s.busy());
        let r = if busy {
            ReturnT::fail("job thread is running or has trigger queue.")
        } else {
            ReturnT::success()
        };
        futures::future::ready(r).boxed()
    }

    fn kill(&self, _address: &str, job_id: i32) -> BoxFuture<'static, ReturnT> {
        let slot = self.inner.slots.lock().get(&job_id).cloned();
        let r = match slot {
            Some(s) if s.busy() => {
                self.kill_slot(&s, "scheduling center kill job.");
                ReturnT::success()
            }
            _ => ReturnT {
                code: SUCCESS_CODE,
                msg: Some("job thread already killed.".into()),
                content: None,
            },
        };
        futures::future::ready(r).boxed()
    }

    fn log(&self, _address: &str, param: LogParam) -> BoxFuture<'static, ReturnT<LogResult>> {
        futures::future::ready(self.read_log(param)).boxed()
    }
}
