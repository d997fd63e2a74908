//! Property tests at actor level on paused time.
//!
//! - The whole center (scan → ring → lanes → in-process executor → completion) on SQLite, with
//!   random cron and fixed-rate jobs and random clock steps including stalls of several seconds:
//!   no fire runs twice; without a stall beyond the misfire threshold every nominal time runs;
//!   with one, only fires inside the stall may be skipped, and only by their job's policy.
//! - The ring alone with a probe in place of the pool: every pushed fire comes out exactly once,
//!   never early, and at the first tick once due, whatever the tick delays.
#![allow(clippy::unwrap_used)]

mod common;

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;

use actix::prelude::*;
use common::*;
use parking_lot::Mutex;
use proptest::prelude::*;
use xjob::model::{ScheduleType, TriggerType};
use xjob::prelude::*;
use xjob::testing::actors::FireBatch;
use xjob::testing::actors::{PushRing, RingActor};
use xjob::testing::store::logs::Fire;

#[derive(Clone, Debug)]
struct JobCase {
    every_secs: u32,
    cron: bool,
    fire_once: bool,
}

fn job_case() -> impl Strategy<Value = JobCase> {
    (
        prop::sample::select(vec![1u32, 2, 3, 5, 7]),
        any::<bool>(),
        any::<bool>(),
    )
        .prop_map(|(every_secs, cron, fire_once)| JobCase {
            every_secs,
            cron,
            fire_once,
        })
}

fn steps(allow_misfire: bool) -> impl Strategy<Value = Vec<u64>> {
    let big = if allow_misfire { 9_000u64 } else { 4_000 };
    prop::collection::vec(
        prop_oneof![
            6 => 50u64..400,
            2 => 400u64..1_500,
            1 => 1_500u64..=big,
        ],
        20..60,
    )
}

type Runs = Arc<Mutex<Vec<(i32, i64)>>>;

fn counting_handlers(runs: Runs) -> HandlerRegistry {
    let mut h = HandlerRegistry::new();
    h.register_fn("count", move |ctx: JobContext| {
        let runs = runs.clone();
        async move {
            runs.lock().push((ctx.job_id, ctx.log_id));
            Ok(())
        }
    })
    .unwrap();
    h
}

fn check_center(jobs: Vec<JobCase>, steps: Vec<u64>) -> Result<(), TestCaseError> {
    let dir = tempfile::tempdir().unwrap();
    let runs: Runs = Arc::default();
    let threshold = 5_000i64;
    run_paused(|| async {
        let mut cfg = test_config(dir.path());
        cfg.scheduler.misfire_threshold_ms = threshold;
        let engine = Engine::builder(cfg)
            .clock(Clock::tokio_at(T0))
            .handlers(counting_handlers(runs.clone()))
            .start()
            .await
            .unwrap();
        let group = engine
            .ensure_group(xjob::demo::DEMO_APP, "demo")
            .await
            .unwrap();
        let mut ids = Vec::new();
        for j in &jobs {
            let mut spec = if j.cron {
                JobSpec::cron(
                    group,
                    "c",
                    &format!("*/{} * * * * ?", j.every_secs),
                    "count",
                )
            } else {
                JobSpec::fix_rate(group, "f", j.every_secs, "count")
            };
            if j.fire_once {
                spec.misfire_strategy = "FIRE_ONCE_NOW".into();
            }
            let id = engine.add_job(spec).await.unwrap();
            engine.start_job(id).await.unwrap();
            ids.push(id);
        }
        // Walk the clock: each step is one jump of paused time (a stall when it is long).
        let mut t = T0;
        let mut stalls = Vec::new();
        for s in &steps {
            tokio::time::advance(Duration::from_millis(*s)).await;
            settle(engine.activity()).await;
            if *s as i64 > threshold {
                stalls.push((t, t + *s as i64));
            }
            t += *s as i64;
        }
        let end = t;
        // let everything due by `end` finish
        advance(engine.activity(), 1_000, 100).await;

        let all = xjob::testing::store::logs::all(engine.db()).await.unwrap();
        let runs = runs.lock().clone();
        // 1. Every handler execution is of a distinct log row: nothing ran twice.
        let mut per_log: HashMap<i64, usize> = HashMap::new();
        for (_, log) in &runs {
            *per_log.entry(*log).or_default() += 1;
        }
        prop_assert!(
            per_log.values().all(|&n| n == 1),
            "a log ran twice: {per_log:?}"
        );
        // 2. Every dispatched row ran and succeeded; no nominal time has two rows.
        for r in all.iter().filter(|r| r.fire_state == 0) {
            prop_assert_eq!(r.trigger_code, 200, "{:?}", r.trigger_msg);
            prop_assert_eq!(r.handle_code, 200);
            prop_assert_eq!(
                per_log.get(&r.id).copied(),
                Some(1),
                "row {} did not run once",
                r.id
            );
        }
        for (k, id) in ids.iter().enumerate() {
            let job = &jobs[k];
            let mut by_time: BTreeMap<i64, usize> = BTreeMap::new();
            let mut misfire_rows = 0;
            for r in all.iter().filter(|r| r.job_id == *id && r.fire_state == 0) {
                *by_time.entry(r.fire_time.unwrap()).or_default() += 1;
                if r.trigger_type.as_deref() == Some(TriggerType::Misfire.as_str()) {
                    misfire_rows += 1;
                }
            }
            prop_assert!(by_time.values().all(|&n| n == 1));
            // nominal times the schedule had in (T0, end]
            let schedule = if job.cron {
                Schedule::parse(
                    ScheduleType::Cron,
                    Some(&format!("*/{} * * * * ?", job.every_secs)),
                    chrono_tz::UTC,
                )
            } else {
                Schedule::parse(
                    ScheduleType::FixRate,
                    Some(&job.every_secs.to_string()),
                    chrono_tz::UTC,
                )
            }
            .unwrap();
            let first = schedule.first_after(T0).unwrap();
            let mut nominal = first;
            while nominal <= end {
                if !by_time.contains_key(&nominal) {
                    // Only a fire inside a stall longer than the threshold may be missing.
                    let in_stall = stalls
                        .iter()
                        .any(|&(a, b)| nominal > a - 1_000 && nominal <= b);
                    prop_assert!(
                        in_stall,
                        "job {} lost nominal fire {} (stalls {:?})",
                        id,
                        nominal - T0,
                        stalls
                    );
                }
                nominal = schedule.next_after(nominal, first).unwrap();
            }
            if !job.fire_once {
                prop_assert_eq!(misfire_rows, 0);
            }
            prop_assert!(misfire_rows <= stalls.len() * 2, "too many compensations");
        }
        engine.db().clone().close().await.unwrap();
        Ok(())
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 10, ..ProptestConfig::default() })]

    /// Over random job sets, the center never runs a fire twice nor loses one while it keeps up.
    #[test]
    fn center_never_runs_a_fire_twice_nor_loses_one_without_a_stall(
        jobs in prop::collection::vec(job_case(), 1..5),
        steps in steps(false),
    ) {
        check_center(jobs, steps)?;
    }

    /// Over random stalls, misfire policies apply only to fires inside the stall.
    #[test]
    fn center_applies_misfire_policy_only_inside_stalls(
        jobs in prop::collection::vec(job_case(), 1..5),
        steps in steps(true),
    ) {
        check_center(jobs, steps)?;
    }
}

/// Records every batch the ring sends, with the clock reading at that moment.
struct Probe {
    clock: Clock,
    got: Arc<Mutex<Vec<(i64, Fire)>>>,
}

impl Actor for Probe {
    type Context = Context<Self>;
}

impl Handler<FireBatch> for Probe {
    type Result = ();
    fn handle(&mut self, msg: FireBatch, _: &mut Self::Context) {
        let now = self.clock.now_ms();
        self.got.lock().extend(msg.0.into_iter().map(|f| (now, f)));
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    /// Over random fires and ticks, the ring emits each fire once, never early, on its first due tick.
    #[test]
    fn ring_emits_each_fire_once_never_early_and_on_the_first_tick_due(
        offsets in prop::collection::vec((0i64..70_000, 0i64..6), 1..80),
        steps in prop::collection::vec(prop_oneof![5 => 1u64..1_500, 1 => 1_500u64..90_000], 5..40),
    ) {
        let got: Arc<Mutex<Vec<(i64, Fire)>>> = Arc::default();
        let (pushed, readings) = run_paused(|| async {
            let clock = Clock::tokio_at(T0);
            let probe = Probe { clock: clock.clone(), got: got.clone() }.start();
            let ring = RingActor::new(clock.clone(), probe.recipient()).start();
            let mut pushed = Vec::new();
            // the clock after every jump: timers run only at these readings
            let mut readings = vec![clock.now_ms()];
            let mut steps = steps.into_iter();
            for (i, (push_at, ahead)) in offsets.iter().enumerate() {
                // fires are pushed up to 6 s ahead (the scan's window), in time order
                while clock.now_ms() < T0 + push_at {
                    let s = steps.next().unwrap_or(700);
                    tokio::time::advance(Duration::from_millis(s)).await;
                    readings.push(clock.now_ms());
                    for _ in 0..8 { tokio::task::yield_now().await; }
                }
                let f = Fire {
                    log_id: i as i64,
                    job_id: 1,
                    // fire times are whole seconds, up to 5 s ahead
                    fire_time: (clock.now_ms().div_euclid(1000) + ahead) * 1000,
                    trigger_type: TriggerType::Cron,
                    job: None,
                    read_ms: 0,
                    epoch: 0,
                };
                pushed.push((clock.now_ms(), f.clone()));
                ring.send(PushRing(vec![f])).await.unwrap();
            }
            for _ in 0..8 {
                tokio::time::advance(Duration::from_millis(1_000)).await;
                readings.push(clock.now_ms());
                for _ in 0..16 { tokio::task::yield_now().await; }
            }
            (pushed, readings)
        });
        let got = got.lock().clone();
        prop_assert_eq!(got.len(), pushed.len(), "every fire exactly once");
        let mut seen = std::collections::HashSet::new();
        for (at, f) in &got {
            prop_assert!(seen.insert(f.log_id), "fire {} twice", f.log_id);
            prop_assert!(*at >= f.fire_time, "fire {} early at {} < {}", f.log_id, at, f.fire_time);
        }
        for (pushed_at, f) in &pushed {
            let (at, _) = got.iter().find(|(_, g)| g.log_id == f.log_id).unwrap();
            // due on push → at once; otherwise at the first second boundary at or after its time
            // due on push → at once; otherwise at the first clock reading at or after its time
            let due_by = if f.fire_time <= *pushed_at {
                *pushed_at
            } else {
                *readings.iter().find(|&&r| r >= f.fire_time).unwrap()
            };
            prop_assert_eq!(*at, due_by, "fire {} not sent on the first tick due", f.log_id);
        }
    }
}
