//! ExecutorActor: the executor side of `/run`, `/idleBeat`, `/kill` (protocol.md §6.2–6.4).
//!
//! Owns one [`JobThread`] per job id. Receives [`Run`] (resolve the handler by glue type, apply
//! the block strategy, enqueue), [`IdleBeat`], [`Kill`], and
//! [`Shutdown`]. A different handler or script version for a job replaces its thread, as does
//! `COVER_EARLY` while busy; `DISCARD_LATER` refuses while busy; `SERIAL_EXECUTION` queues.
//! Script jobs are refused unless scripts are enabled.

use foldhash::HashMap;
use std::path::PathBuf;

use actix::prelude::*;

use super::Callback;
pub(crate) use super::job_thread::Reporter;
use super::job_thread::{IDLE_POLL, JobThread, StopThread, ThreadEnv, TriggerQueue, Wake};
use super::{HandlerRegistry, script};
use crate::clock::Clock;
use crate::model::wire::{ReturnT, SUCCESS_CODE, TriggerParam};
use crate::model::{BlockStrategy, GlueType};

/// One trigger for this executor.
#[derive(Message, Debug)]
#[rtype(result = "ReturnT")]
pub struct Run(pub TriggerParam);

/// Is this job idle here (no run, nothing queued)?
#[derive(Message, Debug)]
#[rtype(result = "ReturnT")]
pub struct IdleBeat(pub i32);

/// Kill this job's thread.
#[derive(Message, Debug)]
#[rtype(result = "ReturnT")]
pub struct Kill(pub i32);

/// Kill every thread (executor shutting down).
#[derive(Message, Debug)]
#[rtype(result = "()")]
pub struct Shutdown;

/// Settings of an executor runtime.
#[derive(Clone, Debug)]
pub struct RuntimeConfig {
    /// Most triggers waiting per job.
    pub queue_capacity: usize,
    /// Idle rounds of 3 s before a job's thread stops (XXL-JOB: 30).
    pub idle_limit: u32,
    /// Whether GLUE script jobs may run.
    pub scripts_enabled: bool,
    /// Run-log root (also holds `gluesource/`).
    pub log_dir: Option<PathBuf>,
    /// Whether each run writes its log file under `log_dir` (off: no file per run; `/log`
    /// answers that run logs are off).
    pub run_logs: bool,
    /// The engine's work in flight: a write of queued run logs counts while it lasts (so a
    /// test on paused time that waits for the engine to settle waits for their results).
    pub activity: Option<crate::activity::Activity>,
}

impl Default for RuntimeConfig {
    fn default() -> Self {
        RuntimeConfig {
            queue_capacity: 1000,
            idle_limit: 30,
            scripts_enabled: false,
            log_dir: None,
            run_logs: true,
            activity: None,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum Kind {
    Bean(String),
    Script(GlueType, i64),
}

/// The kind of job thread a trigger asks for, borrowed from the trigger.
#[derive(Clone, Copy)]
enum Wanted<'a> {
    Bean(&'a str),
    Script(GlueType, i64),
}

impl Wanted<'_> {
    /// Whether a thread of kind `k` serves it.
    fn is(self, k: &Kind) -> bool {
        match (self, k) {
            (Wanted::Bean(a), Kind::Bean(b)) => a == b,
            (Wanted::Script(g, v), Kind::Script(h, w)) => g == *h && v == *w,
            _ => false,
        }
    }

    fn owned(self) -> Kind {
        match self {
            Wanted::Bean(name) => Kind::Bean(name.to_owned()),
            Wanted::Script(g, v) => Kind::Script(g, v),
        }
    }
}

struct Entry {
    addr: Addr<JobThread>,
    kind: Kind,
    queue: TriggerQueue,
    /// Idle rounds counted by [`ExecutorActor::sweep_idle`] since its last trigger.
    idle_rounds: u32,
}

/// The executor.
pub struct ExecutorActor {
    handlers: HandlerRegistry,
    threads: HashMap<i32, Entry>,
    cfg: RuntimeConfig,
    callback: Reporter,
    clock: Clock,
}

impl ExecutorActor {
    /// An executor for `handlers`, reporting to `callback`.
    pub fn new(
        handlers: HandlerRegistry,
        callback: Recipient<Callback>,
        clock: Clock,
        cfg: RuntimeConfig,
    ) -> Self {
        ExecutorActor {
            handlers,
            threads: HashMap::default(),
            callback: Reporter::new(callback, cfg.activity.clone()),
            cfg,
            clock,
        }
    }

    /// What reports this executor's results (and knows which runs have not reported yet).
    pub(crate) fn reporter(&self) -> Reporter {
        self.callback.clone()
    }

    fn retire(&mut self, job_id: i32, reason: &str) -> bool {
        match self.threads.remove(&job_id) {
            Some(e) => {
                e.addr.do_send(StopThread {
                    reason: reason.into(),
                });
                true
            }
            None => false,
        }
    }

    /// Removes a job's thread and answers when it has stopped (its runs aborted and reported),
    /// so a replacement never overlaps it.
    fn replace(&mut self, job_id: i32, reason: &str) -> Option<Request<JobThread, StopThread>> {
        self.threads.remove(&job_id).map(|e| {
            e.addr.send(StopThread {
                reason: reason.into(),
            })
        })
    }
}

impl ExecutorActor {
    /// One idle round: a thread with nothing queued or running counts a round; past the idle
    /// limit it is retired (its destroy hook runs).
    fn sweep_idle(&mut self) {
        let limit = self.cfg.idle_limit;
        let mut idle = Vec::new();
        for (&job_id, e) in self.threads.iter_mut() {
            if e.queue.busy() {
                e.idle_rounds = 0;
                continue;
            }
            e.idle_rounds += 1;
            if e.idle_rounds > limit {
                idle.push(job_id);
            }
        }
        for job_id in idle {
            self.retire(job_id, "excutor idel times over limit.");
        }
    }
}

impl Actor for ExecutorActor {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Self::Context) {
        ctx.set_mailbox_capacity(1024);
        ctx.run_interval(IDLE_POLL, |a, _| a.sweep_idle());
    }
}

/// A batch of triggers for this executor (one message for what one dispatch pass has for it);
/// answers one `ReturnT` per trigger, in order.
#[derive(Message, Debug)]
#[rtype(result = "Vec<ReturnT>")]
pub struct RunMany(pub Vec<TriggerParam>);

impl ExecutorActor {
    /// Resolves the handler of `p` by glue type, applies the block strategy and hands `p` to
    /// its job's thread (started on first use).
    fn accept(&mut self, p: TriggerParam, ctx: &mut Context<Self>) -> ReturnT {
        // a log id this executor has (or had a moment ago) is not run again, before anything
        // else is decided (a block strategy must not stop a thread for a refused trigger)
        if p.log_id > 0 && self.callback.knows(p.log_id) {
            return repeated(p.log_id);
        }
        // nothing is copied on the way to a known handler: the names are owned only by a
        // new job thread's entry and by error messages
        let glue_name = p.glue_type.as_deref().unwrap_or("BEAN");
        let invalid = || ReturnT::fail(format!("glueType[{glue_name}] is not valid."));
        let (wanted, change_reason) = match glue_name.parse::<GlueType>() {
            Ok(GlueType::Bean) => {
                let name = p.executor_handler.as_deref().unwrap_or_default();
                if self.handlers.get(name).is_none() {
                    return ReturnT::fail(format!("job handler [{name}] not found."));
                }
                (
                    Wanted::Bean(name),
                    "change jobhandler or glue type, and terminate the old job thread.",
                )
            }
            Ok(g) if g.is_script() => {
                if !self.cfg.scripts_enabled {
                    return ReturnT::fail(format!(
                        "glueType[{glue_name}] is not valid. (script jobs are disabled on this executor)"
                    ));
                }
                (
                    Wanted::Script(g, p.glue_updatetime),
                    "change job source or glue type, and terminate the old job thread.",
                )
            }
            _ => return invalid(),
        };
        let block = p
            .executor_block_strategy
            .as_deref()
            .and_then(|b| b.parse().ok())
            .unwrap_or(BlockStrategy::SerialExecution);
        let mut stopping = None;
        if let Some(e) = self.threads.get(&p.job_id) {
            let busy = e.queue.busy();
            if !wanted.is(&e.kind) {
                stopping = self.replace(p.job_id, change_reason);
            } else if busy && block == BlockStrategy::DiscardLater {
                return ReturnT::fail("block strategy effect：Discard Later");
            } else if busy && block == BlockStrategy::CoverEarly {
                stopping = self.replace(p.job_id, "block strategy effect：Cover Early");
            }
        }
        if !self.threads.contains_key(&p.job_id) {
            let handler = match wanted {
                // found above
                Wanted::Bean(name) => match self.handlers.get(name) {
                    Some(h) => h.clone(),
                    None => return invalid(),
                },
                Wanted::Script(g, v) => {
                    let root = self
                        .cfg
                        .log_dir
                        .clone()
                        .unwrap_or_else(|| std::env::temp_dir().join("xjob"));
                    match script::handler(
                        g,
                        p.job_id,
                        v,
                        p.glue_source.clone().unwrap_or_default(),
                        root,
                    ) {
                        Some(h) => h,
                        None => return invalid(),
                    }
                }
            };
            let queue = TriggerQueue::new(self.cfg.queue_capacity);
            let env = ThreadEnv {
                callback: self.callback.clone(),
                clock: self.clock.clone(),
                log_dir: self.cfg.log_dir.clone().filter(|_| self.cfg.run_logs),
            };
            let addr = JobThread::new(p.job_id, handler, env, queue.clone()).start();
            self.threads.insert(
                p.job_id,
                Entry {
                    addr,
                    kind: wanted.owned(),
                    queue,
                    idle_rounds: 0,
                },
            );
        }
        let Some(e) = self.threads.get_mut(&p.job_id) else {
            return ReturnT::fail("job thread unavailable");
        };
        e.idle_rounds = 0;
        let addr = e.addr.clone();
        let log_id = p.log_id;
        if !self.callback.accept_id(log_id) {
            return repeated(log_id);
        }
        let pushed = e.queue.push(p);
        match pushed {
            Err(refused) => {
                self.callback.refused(log_id);
                refused
            }
            Ok(wake) => {
                match stopping {
                    None if wake => addr.do_send(Wake),
                    None => {}
                    // the replacement starts once the thread it replaces has stopped
                    Some(old) => {
                        ctx.spawn(
                            async move {
                                let _ = old.await;
                                addr.do_send(Wake);
                            }
                            .into_actor(self),
                        );
                    }
                }
                ReturnT::success()
            }
        }
    }
}

/// XXL-JOB 2.4's answer (its spelling) to a log id its executor already has.
fn repeated(log_id: i64) -> ReturnT {
    ReturnT::fail(format!("repeate trigger job, logId:{log_id}"))
}

impl Handler<Run> for ExecutorActor {
    type Result = MessageResult<Run>;

    fn handle(&mut self, msg: Run, ctx: &mut Self::Context) -> Self::Result {
        MessageResult(self.accept(msg.0, ctx))
    }
}

impl Handler<RunMany> for ExecutorActor {
    type Result = MessageResult<RunMany>;

    fn handle(&mut self, msg: RunMany, ctx: &mut Self::Context) -> Self::Result {
        MessageResult(msg.0.into_iter().map(|p| self.accept(p, ctx)).collect())
    }
}

impl Handler<IdleBeat> for ExecutorActor {
    type Result = MessageResult<IdleBeat>;

    fn handle(&mut self, msg: IdleBeat, _ctx: &mut Self::Context) -> Self::Result {
        let busy = self.threads.get(&msg.0).is_some_and(|e| e.queue.busy());
        MessageResult(if busy {
            ReturnT::fail("job thread is running or has trigger queue.")
        } else {
            ReturnT::success()
        })
    }
}

impl Handler<Kill> for ExecutorActor {
    type Result = MessageResult<Kill>;

    fn handle(&mut self, msg: Kill, _ctx: &mut Self::Context) -> Self::Result {
        MessageResult(if self.retire(msg.0, "scheduling center kill job.") {
            ReturnT::success()
        } else {
            ReturnT {
                code: SUCCESS_CODE,
                msg: Some("job thread already killed.".into()),
                content: None,
            }
        })
    }
}

impl Handler<Shutdown> for ExecutorActor {
    type Result = ResponseFuture<()>;

    /// Answers once every thread has stopped and its runs' results (the killed running one and
    /// the queued ones) have been handed to the callback recipient, so a flush sent after this
    /// answer carries them.
    fn handle(&mut self, _: Shutdown, _ctx: &mut Self::Context) -> Self::Result {
        let stops: Vec<_> = self
            .threads
            .drain()
            .map(|(_, e)| {
                e.addr.send(StopThread {
                    reason: "web container destroy and kill the job.".into(),
                })
            })
            .collect();
        let reporter = self.callback.clone();
        Box::pin(async move {
            futures::future::join_all(stops).await;
            reporter.flush();
        })
    }
}
