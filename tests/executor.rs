//! The executor runtime on paused time: block strategies as properties (any sequence of
//! triggers and handler durations), exactly one result per trigger, bounded queues, timeouts
//! that stop a handler ignoring cancellation, a runaway script's process group killed, kill,
//! idle retirement with the destroy hook.
#![allow(clippy::unwrap_used)]

mod common;

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use actix::prelude::*;
use common::*;
use parking_lot::Mutex;
use proptest::prelude::*;
use xjob::executor::{Handler as JobHandler, HandlerRegistry};
use xjob::model::wire::{HandleCallbackParam, TriggerParam};
use xjob::prelude::*;
use xjob::testing::executor::Callback;
use xjob::testing::executor::{ExecutorActor, IdleBeat, Kill, Run, RuntimeConfig, Shutdown};

/// Collects results.
struct Probe(Arc<Mutex<Vec<HandleCallbackParam>>>);
impl Actor for Probe {
    type Context = Context<Self>;
}
impl Handler<Callback> for Probe {
    type Result = ();
    fn handle(&mut self, msg: Callback, _: &mut Self::Context) {
        self.0.lock().extend(msg.0);
    }
}

/// Answered by the probe in mailbox order with the number of results it had received by
/// then: what was sent to it before the ping, not what arrives while the answer travels.
#[derive(Message)]
#[rtype(result = "usize")]
struct Ping;

impl Handler<Ping> for Probe {
    type Result = usize;

    fn handle(&mut self, _: Ping, _: &mut Self::Context) -> usize {
        self.0.lock().len()
    }
}

type Events = Arc<Mutex<Vec<(&'static str, i64, i64)>>>;

struct End(Events, i64, Clock);
impl Drop for End {
    fn drop(&mut self) {
        self.0.lock().push(("end", self.1, self.2.now_ms()));
    }
}

/// `work`: sleeps the number of ms in its param, recording start/end with the clock.
fn registry(events: Events, clock: Clock) -> HandlerRegistry {
    let mut h = HandlerRegistry::new();
    h.register_fn("work", move |ctx: JobContext| {
        let (events, clock) = (events.clone(), clock.clone());
        async move {
            events.lock().push(("start", ctx.log_id, clock.now_ms()));
            // recorded when the run ends, normally or because its future was dropped (killed)
            let _end = End(events.clone(), ctx.log_id, clock.clone());
            let ms: u64 = ctx.param.parse().unwrap_or(0);
            tokio::time::sleep(Duration::from_millis(ms)).await;
            Ok(())
        }
    })
    .unwrap();
    h
}

fn trigger(log_id: i64, block: &str, ms: u64) -> TriggerParam {
    TriggerParam {
        job_id: 1,
        executor_handler: Some("work".into()),
        executor_params: Some(ms.to_string()),
        executor_block_strategy: Some(block.into()),
        log_id,
        glue_type: Some("BEAN".into()),
        broadcast_total: 1,
        ..Default::default()
    }
}

/// An executor runtime with scripts enabled, logging under `dir`.
fn scripts_in(dir: &std::path::Path) -> RuntimeConfig {
    RuntimeConfig {
        scripts_enabled: true,
        log_dir: Some(dir.to_path_buf()),
        ..RuntimeConfig::default()
    }
}

/// Waits (bounded, real time: scripts run in real processes) until `n` results arrived.
async fn results_within_10s(results: &Mutex<Vec<HandleCallbackParam>>, n: usize) {
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while results.lock().len() < n {
        assert!(
            std::time::Instant::now() < deadline,
            "fewer than {n} results"
        );
        yields(16).await;
    }
}

async fn yields(n: usize) {
    for _ in 0..n {
        tokio::task::yield_now().await;
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    /// Serial, discard-later and cover-early hold their invariants over random run plans (proptest).
    #[test]
    fn block_strategies_hold_their_invariants(
        block in prop::sample::select(vec!["SERIAL_EXECUTION", "DISCARD_LATER", "COVER_EARLY"]),
        plan in prop::collection::vec((0u64..1_500, 0u64..2_000), 1..20),
    ) {
        let results: Arc<Mutex<Vec<HandleCallbackParam>>> = Arc::default();
        let events: Events = Arc::default();
        let (answers, busy_at_push) = run_paused(|| async {
            let clock = Clock::tokio_at(T0);
            let probe = Probe(results.clone()).start();
            let exec = ExecutorActor::new(registry(events.clone(), clock.clone()), probe.recipient(), clock.clone(), RuntimeConfig::default()).start();
            let mut answers = Vec::new();
            let mut busy_at_push = Vec::new();
            for (i, (gap, dur)) in plan.iter().enumerate() {
                tokio::time::advance(Duration::from_millis(*gap)).await;
                yields(32).await;
                let busy = exec.send(IdleBeat(1)).await.unwrap().code != 200;
                busy_at_push.push(busy);
                answers.push(exec.send(Run(trigger(i as i64 + 1, block, *dur))).await.unwrap().code);
                yields(32).await;
            }
            for _ in 0..400 {
                tokio::time::advance(Duration::from_millis(100)).await;
                yields(8).await;
            }
            (answers, busy_at_push)
        });
        let results = results.lock().clone();
        let events = events.lock().clone();
        // every accepted trigger has exactly one result; refused ones have none
        let mut per_log: HashMap<i64, usize> = HashMap::new();
        for r in &results {
            *per_log.entry(r.log_id).or_default() += 1;
        }
        for (i, code) in answers.iter().enumerate() {
            let id = i as i64 + 1;
            let n = per_log.get(&id).copied().unwrap_or(0);
            if *code == 200 { prop_assert_eq!(n, 1, "log {} results", id); } else { prop_assert_eq!(n, 0); }
        }
        // never two runs at once
        let mut running = 0i32;
        for (kind, _, _) in &events {
            running += if *kind == "start" { 1 } else { -1 };
            prop_assert!(running <= 1, "two runs at once");
        }
        match block {
            "SERIAL_EXECUTION" => {
                // everything accepted, everything ran once, in order, successfully
                prop_assert!(answers.iter().all(|c| *c == 200));
                let order: Vec<i64> = events.iter().filter(|e| e.0 == "start").map(|e| e.1).collect();
                prop_assert_eq!(order, (1..=plan.len() as i64).collect::<Vec<_>>());
                prop_assert!(results.iter().all(|r| r.handle_code == 200));
            }
            "DISCARD_LATER" => {
                // refused exactly while busy
                for (i, code) in answers.iter().enumerate() {
                    prop_assert_eq!(*code != 200, busy_at_push[i], "trigger {}", i + 1);
                }
                prop_assert!(results.iter().all(|r| r.handle_code == 200));
            }
            _ => {
                // all accepted; a trigger arriving while busy covers the running one, which
                // reports as killed; the last trigger always completes
                prop_assert!(answers.iter().all(|c| *c == 200));
                for (i, busy) in busy_at_push.iter().enumerate().skip(1) {
                    if *busy {
                        let covered = results.iter().filter(|r| r.log_id <= i as i64).any(|r| {
                            r.handle_msg.as_deref().unwrap_or("").starts_with("block strategy effect：Cover Early")
                        });
                        prop_assert!(covered, "trigger {} covered nothing", i + 1);
                    }
                }
                let last = results.iter().find(|r| r.log_id == plan.len() as i64).unwrap();
                prop_assert_eq!(last.handle_code, 200);
            }
        }
    }
}

/// A full job queue refuses a run and a log id already queued is rejected.
#[test]
fn a_full_queue_refuses_and_a_repeated_log_id_is_rejected() {
    let results: Arc<Mutex<Vec<HandleCallbackParam>>> = Arc::default();
    let events: Events = Arc::default();
    run_paused(|| async {
        let clock = Clock::tokio_at(T0);
        let probe = Probe(results.clone()).start();
        let cfg = RuntimeConfig {
            queue_capacity: 2,
            ..RuntimeConfig::default()
        };
        let exec = ExecutorActor::new(
            registry(events.clone(), clock.clone()),
            probe.recipient(),
            clock,
            cfg,
        )
        .start();
        let codes: Vec<_> = {
            let mut v = vec![];
            for id in 1..=4 {
                v.push(
                    exec.send(Run(trigger(id, "SERIAL_EXECUTION", 1_000)))
                        .await
                        .unwrap(),
                );
                yields(16).await;
            }
            v
        };
        // 1 runs, 2 and 3 wait, 4 finds the queue full
        assert_eq!(
            codes.iter().map(|r| r.code).collect::<Vec<_>>(),
            vec![200, 200, 200, 500]
        );
        assert!(
            codes[3]
                .msg
                .as_deref()
                .unwrap()
                .contains("job queue is full")
        );
        let again = exec
            .send(Run(trigger(3, "SERIAL_EXECUTION", 1)))
            .await
            .unwrap();
        assert_eq!(again.msg.as_deref(), Some("repeate trigger job, logId:3"));
        for _ in 0..50 {
            tokio::time::advance(Duration::from_millis(100)).await;
            yields(16).await;
        }
        assert_eq!(results.lock().len(), 3);
    });
}

/// A job's trigger naming another handler (or an unknown one) is judged against the job's
/// running thread: an unknown handler is refused and leaves the run alone; the same handler
/// queues behind it (serial); a different handler ends the running run with XXL-JOB's reason,
/// and the new handler's run follows it.
#[test]
fn a_trigger_naming_another_handler_replaces_the_jobs_thread() {
    let results: Arc<Mutex<Vec<HandleCallbackParam>>> = Arc::default();
    let events: Events = Arc::default();
    run_paused(|| async {
        let clock = Clock::tokio_at(T0);
        let probe = Probe(results.clone()).start();
        let mut handlers = registry(events.clone(), clock.clone());
        handlers
            .register_fn("other", |_ctx: JobContext| async { Ok(()) })
            .unwrap();
        let exec = ExecutorActor::new(handlers, probe.recipient(), clock, RuntimeConfig::default())
            .start();
        let named = |log_id, handler: &str| TriggerParam {
            executor_handler: Some(handler.into()),
            ..trigger(log_id, "SERIAL_EXECUTION", 60_000)
        };
        let mut codes = vec![];
        for (id, handler) in [(1, "work"), (2, "missing"), (3, "work"), (4, "other")] {
            codes.push(exec.send(Run(named(id, handler))).await.unwrap());
            yields(16).await;
        }
        assert_eq!(
            codes.iter().map(|r| r.code).collect::<Vec<_>>(),
            vec![200, 500, 200, 200]
        );
        assert_eq!(
            codes[1].msg.as_deref(),
            Some("job handler [missing] not found.")
        );
        for _ in 0..20 {
            tokio::time::advance(Duration::from_millis(100)).await;
            yields(16).await;
        }
        let results = results.lock().clone();
        let reason = "change jobhandler or glue type, and terminate the old job thread.";
        let of = |id: i64| results.iter().find(|r| r.log_id == id).cloned();
        // the running run and the one queued behind it end with the reason; the new one ran
        for id in [1, 3] {
            let r = of(id).unwrap_or_else(|| panic!("no result for log {id}"));
            assert_ne!(r.handle_code, 200, "log {id}");
            assert!(
                r.handle_msg.as_deref().unwrap_or("").contains(reason),
                "log {id}: {:?}",
                r.handle_msg
            );
        }
        assert_eq!(of(4).map(|r| r.handle_code), Some(200));
        assert!(of(2).is_none());
        assert_eq!(results.len(), 3);
        // 3 waited behind 1 (same handler) and never started
        let started: Vec<i64> = events
            .lock()
            .iter()
            .filter(|e| e.0 == "start")
            .map(|e| e.1)
            .collect();
        assert_eq!(started, vec![1]);
    });
}

/// A timeout stops a handler that ignores cancellation; a kill reports every queued and running run.
#[test]
fn a_timeout_stops_a_handler_that_ignores_cancellation_and_kill_reports_every_run() {
    let results: Arc<Mutex<Vec<HandleCallbackParam>>> = Arc::default();
    let ticks = Arc::new(AtomicUsize::new(0));
    run_paused(|| async {
        let clock = Clock::tokio_at(T0);
        let probe = Probe(results.clone()).start();
        let mut h = HandlerRegistry::new();
        let t = ticks.clone();
        // never looks at any cancellation flag: it just keeps working
        h.register_fn("stubborn", move |_ctx: JobContext| {
            let t = t.clone();
            async move {
                loop {
                    t.fetch_add(1, Ordering::SeqCst);
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            }
        })
        .unwrap();
        let exec =
            ExecutorActor::new(h, probe.recipient(), clock, RuntimeConfig::default()).start();
        let mut p = trigger(1, "SERIAL_EXECUTION", 0);
        p.executor_handler = Some("stubborn".into());
        p.executor_timeout = 2;
        exec.send(Run(p.clone())).await.unwrap();
        for _ in 0..30 {
            tokio::time::advance(Duration::from_millis(100)).await;
            yields(16).await;
        }
        let r = results.lock().clone();
        assert_eq!((r.len(), r[0].handle_code), (1, 502));
        let at_timeout = ticks.load(Ordering::SeqCst);
        tokio::time::advance(Duration::from_secs(5)).await;
        yields(64).await;
        assert_eq!(
            ticks.load(Ordering::SeqCst),
            at_timeout,
            "the handler really stopped"
        );

        // kill: the running run and the queued one each report once
        p.executor_timeout = 0;
        for id in [2, 3] {
            p.log_id = id;
            exec.send(Run(p.clone())).await.unwrap();
        }
        yields(32).await;
        assert_eq!(exec.send(IdleBeat(1)).await.unwrap().code, 500);
        assert_eq!(exec.send(Kill(1)).await.unwrap().code, 200);
        yields(64).await;
        let r = results.lock().clone();
        let msg = |id: i64| {
            r.iter()
                .find(|x| x.log_id == id)
                .and_then(|x| x.handle_msg.clone())
                .unwrap()
        };
        assert_eq!(msg(2), "scheduling center kill job. [job running, killed]");
        assert_eq!(
            msg(3),
            "scheduling center kill job. [job not executed, in the job queue, killed.]"
        );
        assert_eq!(r.len(), 3);
        assert_eq!(exec.send(IdleBeat(1)).await.unwrap().code, 200);
        assert_eq!(
            exec.send(Kill(1)).await.unwrap().msg.as_deref(),
            Some("job thread already killed.")
        );
    });
}

/// A job thread idle past its limit retires and runs the handler's destroy hook.
#[test]
fn an_idle_thread_retires_with_its_destroy_hook() {
    let results: Arc<Mutex<Vec<HandleCallbackParam>>> = Arc::default();
    let (inits, destroys) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    run_paused(|| async {
        let clock = Clock::tokio_at(T0);
        let probe = Probe(results.clone()).start();
        let mut h = HandlerRegistry::new();
        let (i, d) = (inits.clone(), destroys.clone());
        h.register(
            "work",
            JobHandler::new(|_ctx| async { Ok(()) })
                .with_init(move || {
                    i.fetch_add(1, Ordering::SeqCst);
                })
                .with_destroy(move || {
                    d.fetch_add(1, Ordering::SeqCst);
                }),
        )
        .unwrap();
        let exec =
            ExecutorActor::new(h, probe.recipient(), clock, RuntimeConfig::default()).start();
        exec.send(Run(trigger(1, "SERIAL_EXECUTION", 0)))
            .await
            .unwrap();
        yields(32).await;
        assert_eq!(inits.load(Ordering::SeqCst), 1);
        // 30 idle rounds of 3 s: still there at 90 s, retired after the 31st round
        for _ in 0..30 {
            tokio::time::advance(Duration::from_secs(3)).await;
            yields(8).await;
        }
        assert_eq!(destroys.load(Ordering::SeqCst), 0);
        tokio::time::advance(Duration::from_secs(6)).await;
        yields(32).await;
        assert_eq!(
            destroys.load(Ordering::SeqCst),
            1,
            "destroy hook ran at retirement"
        );
        exec.send(Run(trigger(2, "SERIAL_EXECUTION", 0)))
            .await
            .unwrap();
        yields(32).await;
        assert_eq!(
            inits.load(Ordering::SeqCst),
            2,
            "a new thread for the next trigger"
        );
        assert_eq!(results.lock().len(), 2);
    });
}

/// A script past its timeout is killed with its whole process group.
#[test]
fn a_runaway_script_is_killed_with_its_children_on_timeout() {
    let dir = tempfile::tempdir().unwrap();
    let results: Arc<Mutex<Vec<HandleCallbackParam>>> = Arc::default();
    let pidfile = dir.path().join("child.pid");
    run_paused(|| async {
        let clock = Clock::tokio_at(T0);
        let probe = Probe(results.clone()).start();
        let cfg = scripts_in(dir.path());
        let exec =
            ExecutorActor::new(HandlerRegistry::new(), probe.recipient(), clock, cfg).start();
        let script = format!(
            "sleep 1000 &\necho $! > {}\necho started $1 $2 $3\nwait\n",
            pidfile.display()
        );
        let p = TriggerParam {
            job_id: 9,
            executor_params: Some("P".into()),
            executor_timeout: 1,
            log_id: 1,
            log_date_time: T0,
            glue_type: Some("GLUE_SHELL".into()),
            glue_source: Some(script),
            glue_updatetime: 42,
            broadcast_total: 1,
            ..Default::default()
        };
        assert_eq!(exec.send(Run(p)).await.unwrap().code, 200);
        // the script runs in real processes: wait (bounded, real time) until its child exists
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while !pidfile.exists() || std::fs::read_to_string(&pidfile).unwrap().trim().is_empty() {
            assert!(std::time::Instant::now() < deadline, "script did not start");
            yields(16).await;
        }
        let child: u32 = std::fs::read_to_string(&pidfile)
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        assert!(std::path::Path::new(&format!("/proc/{child}")).exists());
        // and until its output reached the run log (the pidfile is written before the echo)
        let log_path = dir.path().join(format!(
            "{}/1.log",
            xjob::testing::clock::ms_to_naive(T0).format("%Y-%m-%d")
        ));
        while !std::fs::read_to_string(&log_path)
            .unwrap_or_default()
            .contains("started P 0 1")
        {
            assert!(
                std::time::Instant::now() < deadline,
                "script output never logged"
            );
            yields(16).await;
        }
        tokio::time::advance(Duration::from_millis(1_100)).await;
        yields(64).await;
        let r = results.lock().clone();
        assert_eq!((r.len(), r[0].handle_code), (1, 502));
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        loop {
            // the grandchild `sleep` died with its process group (a zombie until reaped counts)
            let stat = std::fs::read_to_string(format!("/proc/{child}/stat")).unwrap_or_default();
            if stat.is_empty() || stat.contains(") Z ") {
                break;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "the script's child survived: {stat}"
            );
            yields(16).await;
        }
        let source = dir.path().join("gluesource/9_42.sh");
        assert!(source.exists(), "source cached by version");
        let log = std::fs::read_to_string(&log_path).unwrap();
        assert!(log.contains("started P 0 1"), "{log}");
        assert!(log.contains("handleCode=502"), "{log}");
    });
}

/// A run's first log line is in its file while its handler waits (a long run shows its start),
/// and a run done at once has its first and last lines, in order, when its result is out: the
/// executor writes them once it has been quiet a moment, and only then reports the result.
#[test]
fn a_runs_first_line_is_written_when_its_handler_waits_or_with_its_last() {
    let results: Arc<Mutex<Vec<HandleCallbackParam>>> = Arc::default();
    let events: Events = Arc::default();
    run_paused(|| async {
        let dir = tempfile::tempdir().unwrap();
        let clock = Clock::tokio_at(T0);
        let mut handlers = registry(events.clone(), clock.clone());
        handlers
            .register_fn("instant", |_ctx: JobContext| async { Ok(()) })
            .unwrap();
        let probe = Probe(results.clone()).start();
        let exec = ExecutorActor::new(
            handlers,
            probe.recipient(),
            clock,
            RuntimeConfig {
                log_dir: Some(dir.path().to_path_buf()),
                ..RuntimeConfig::default()
            },
        )
        .start();
        let day = xjob::testing::clock::ms_to_naive(0)
            .format("%Y-%m-%d")
            .to_string();
        let log =
            |id: i64| std::fs::read_to_string(dir.path().join(&day).join(format!("{id}.log")));

        let waits = trigger(1, "SERIAL_EXECUTION", 60_000);
        assert_eq!(exec.send(Run(waits)).await.unwrap().code, 200);
        yields(16).await;
        assert!(results.lock().is_empty(), "still running");
        let text = log(1).expect("the first line, written as the handler waits");
        assert!(text.contains("xxl-job job execute start"), "{text}");
        assert!(!text.contains("execute end"), "{text}");

        let mut instant = trigger(2, "SERIAL_EXECUTION", 0);
        instant.job_id = 2;
        instant.executor_handler = Some("instant".into());
        assert_eq!(exec.send(Run(instant)).await.unwrap().code, 200);
        yields(16).await;
        assert!(results.lock().is_empty(), "the result waits for the log");
        assert!(log(2).is_err(), "queued until the executor is quiet");
        tokio::time::advance(Duration::from_millis(49)).await;
        yields(16).await;
        assert!(log(2).is_err(), "not yet quiet");
        // quiet for 50 ms (the timer's resolution is a millisecond); written on the blocking
        // pool, which paused time waits for
        tokio::time::advance(Duration::from_millis(2)).await;
        results_within_10s(&results, 1).await;
        assert_eq!(results.lock().len(), 1, "the instant run reported");
        let text = log(2).expect("both lines");
        let start = text.find("xxl-job job execute start").expect("first line");
        let end = text.find("execute end(finish)").expect("last line");
        assert!(start < end, "{text}");
        assert_eq!(text.matches("execute start").count(), 1, "{text}");
    });
}

/// Script runs fail with a clear message unless `executor.scripts_enabled` is set.
#[test]
fn scripts_are_refused_unless_enabled() {
    run_paused(|| async {
        let probe = Probe(Arc::default()).start();
        let exec = ExecutorActor::new(
            HandlerRegistry::new(),
            probe.recipient(),
            Clock::tokio_at(T0),
            RuntimeConfig::default(),
        )
        .start();
        let p = TriggerParam {
            job_id: 1,
            log_id: 1,
            glue_type: Some("GLUE_SHELL".into()),
            glue_source: Some("echo hi".into()),
            ..Default::default()
        };
        let r = exec.send(Run(p)).await.unwrap();
        assert_eq!(r.code, 500);
        assert!(
            r.msg
                .unwrap()
                .starts_with("glueType[GLUE_SHELL] is not valid.")
        );
    });
}

/// A panicking handler, a huge message and a failing script become failed runs, capped.
#[test]
fn panics_and_long_messages_and_failing_scripts_become_failed_runs() {
    let dir = tempfile::tempdir().unwrap();
    let results: Arc<Mutex<Vec<HandleCallbackParam>>> = Arc::default();
    run_paused(|| async {
        let clock = Clock::tokio_at(T0);
        let probe = Probe(results.clone()).start();
        let mut h = HandlerRegistry::new();
        h.register_fn("boom", |_ctx| async { panic!("boom") })
            .unwrap();
        h.register_fn("long", |_ctx| async {
            Err(anyhow::anyhow!("{}", "x".repeat(60_000)))
        })
        .unwrap();
        let cfg = scripts_in(dir.path());
        let exec = ExecutorActor::new(h, probe.recipient(), clock, cfg).start();
        for (id, handler) in [(1, "boom"), (2, "long")] {
            let mut p = trigger(id, "SERIAL_EXECUTION", 0);
            p.job_id = id as i32;
            p.executor_handler = Some(handler.into());
            exec.send(Run(p)).await.unwrap();
        }
        let script = TriggerParam {
            job_id: 3,
            log_id: 3,
            glue_type: Some("GLUE_SHELL".into()),
            glue_source: Some("echo to-stderr >&2\nexit 7\n".into()),
            glue_updatetime: 1,
            broadcast_total: 1,
            ..Default::default()
        };
        exec.send(Run(script)).await.unwrap();
        // the runs done at once report once the executor has been quiet for 50 ms (paused)
        yields(16).await;
        tokio::time::advance(Duration::from_millis(51)).await;
        results_within_10s(&results, 3).await;
        let r = results.lock().clone();
        let get = |id: i64| r.iter().find(|x| x.log_id == id).unwrap().clone();
        assert_eq!(
            (get(1).handle_code, get(1).handle_msg.as_deref()),
            (500, Some("job handler panicked: boom"))
        );
        let long = get(2).handle_msg.unwrap();
        assert_eq!(
            long.chars().count(),
            50_003,
            "capped at 50,000 characters plus ..."
        );
        assert!(long.ends_with("..."));
        assert_eq!(
            (get(3).handle_code, get(3).handle_msg.as_deref()),
            (500, Some("script exit value(7) is failed"))
        );
        let log = std::fs::read_to_string(dir.path().join(format!(
            "{}/3.log",
            xjob::testing::clock::ms_to_naive(0).format("%Y-%m-%d")
        )))
        .unwrap();
        assert!(
            log.contains("to-stderr"),
            "stderr goes to the run log: {log}"
        );
    });
}

/// Script output that is not UTF-8 is logged with its invalid bytes replaced and the rest of
/// the output still follows; a run log holding invalid bytes is still read (lossily), not
/// answered as missing.
#[test]
fn non_utf8_output_is_logged_and_read_lossily() {
    let dir = tempfile::tempdir().unwrap();
    let results: Arc<Mutex<Vec<HandleCallbackParam>>> = Arc::default();
    run_paused(|| async {
        let clock = Clock::tokio_at(T0);
        let probe = Probe(results.clone()).start();
        let cfg = scripts_in(dir.path());
        let exec = ExecutorActor::new(
            HandlerRegistry::new(),
            probe.recipient(),
            clock.clone(),
            cfg,
        )
        .start();
        let p = TriggerParam {
            job_id: 11,
            log_id: 7,
            log_date_time: T0,
            glue_type: Some("GLUE_SHELL".into()),
            glue_source: Some("printf 'before\\n\\377\\376 bad\\nafter\\n'\n".into()),
            glue_updatetime: 1,
            broadcast_total: 1,
            ..Default::default()
        };
        assert_eq!(exec.send(Run(p)).await.unwrap().code, 200);
        // the script runs in a real process: wait (bounded, real time) for its result
        results_within_10s(&results, 1).await;
        assert_eq!(results.lock()[0].handle_code, 200);
        let day = xjob::testing::clock::ms_to_naive(T0)
            .format("%Y-%m-%d")
            .to_string();
        let log = std::fs::read_to_string(dir.path().join(&day).join("7.log")).unwrap();
        assert!(
            log.contains("before") && log.contains("\u{fffd}\u{fffd} bad") && log.contains("after"),
            "{log}"
        );
        // a log file with raw invalid bytes (written by another tool) is read lossily
        std::fs::write(dir.path().join(&day).join("8.log"), b"one\n\xff two\n").unwrap();
        let read = xjob::testing::executor::read_log(
            Some(dir.path().to_path_buf()),
            clock,
            xjob::model::wire::LogParam {
                log_date_tim: T0,
                log_id: 8,
                from_line_num: 1,
            },
        );
        let content = read.content.unwrap();
        assert_eq!(content.log_content, "one\n\u{fffd} two\n");
        assert_eq!(content.to_line_num, 2);
    });
}

/// Shutdown answers only after every thread handed over its results (the running run killed,
/// the queued one not executed), so a callback flush sent after it carries them.
#[test]
fn shutdown_answers_after_the_killed_runs_reported() {
    let results: Arc<Mutex<Vec<HandleCallbackParam>>> = Arc::default();
    let events: Events = Arc::default();
    run_paused(|| async {
        let clock = Clock::tokio_at(T0);
        let probe = Probe(results.clone()).start();
        let exec = ExecutorActor::new(
            registry(events.clone(), clock.clone()),
            probe.clone().recipient(),
            clock,
            RuntimeConfig::default(),
        )
        .start();
        for log_id in [1, 2] {
            let r = exec
                .send(Run(trigger(log_id, "SERIAL_EXECUTION", 60_000)))
                .await
                .unwrap();
            assert_eq!(r.code, 200);
        }
        yields(8).await;
        // from a task of the event loop (as the executor's stop runs), not the test's own
        // future, so the order of the loop's tasks decides what the ping overtakes
        let before_ping = actix::spawn(async move {
            exec.send(Shutdown).await.unwrap();
            // no yield: only what reached the probe's mailbox before this ping counts
            probe.send(Ping).await.unwrap()
        })
        .await
        .unwrap();
        assert_eq!(
            before_ping, 2,
            "both results were handed over before the answer"
        );
        let mut got: Vec<(i64, String)> = results
            .lock()
            .iter()
            .map(|r| (r.log_id, r.handle_msg.clone().unwrap_or_default()))
            .collect();
        got.sort();
        assert_eq!(
            got,
            vec![
                (
                    1,
                    "web container destroy and kill the job. [job running, killed]".into()
                ),
                (
                    2,
                    "web container destroy and kill the job. [job not executed, in the job queue, killed.]"
                        .into()
                ),
            ]
        );
    });
}
