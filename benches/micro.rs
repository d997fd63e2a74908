//! Micro-benchmarks for the per-operation targets of docs/architecture.md §10: cron next fire time
//! (≤ 2 µs), router pick over 100 executors (≤ 1 µs, consistent-hash ring cached), the
//! scan's per-job decision, ring push + expire, and the whole trigger procedure against an
//! in-memory SQLite store with a no-op executor.
//!
//! Run: `cargo bench --bench micro`

use std::hint::black_box;

use criterion::{Criterion, criterion_group, criterion_main};
use xjob::model::{MisfireStrategy, RouteStrategy, ScheduleType};
use xjob::testing::Router;
use xjob::testing::{Window, plan_job};
use xjob::{Schedule, testing::CronExpr};

/// 2026-11-21 14:00:00 UTC.
const T0: i64 = 1_795_269_600_000;

fn cron(c: &mut Criterion) {
    let berlin: chrono_tz::Tz = "Europe/Berlin".parse().expect("zone");
    for (name, expr, tz) in [
        ("every_5s_utc", "0/5 * * * * ?", chrono_tz::UTC),
        ("every_second_berlin", "* * * * * ?", berlin),
        ("last_friday_utc", "0 15 10 ? * 6L", chrono_tz::UTC),
        ("nearest_weekday_utc", "0 0 12 15W * ?", chrono_tz::UTC),
        ("weekdays_berlin", "0 0 10 ? * MON-FRI", berlin),
    ] {
        let e = CronExpr::parse(expr).expect("cron");
        let mut t = T0;
        c.bench_function(&format!("cron_next/{name}"), |b| {
            b.iter(|| {
                let n = e.next_after(black_box(t), tz).expect("next");
                // walk forward so each call starts from a new instant, wrapping after a year
                t = if n > T0 + 365 * 86_400_000 { T0 } else { n };
                n
            })
        });
    }
    c.bench_function("cron_parse", |b| {
        b.iter(|| CronExpr::parse(black_box("0 0/30 9-17 ? * MON-FRI")).expect("cron"))
    });
}

fn router(c: &mut Criterion) {
    let addresses: Vec<String> = (0..100)
        .map(|i| format!("http://10.0.{}.{}:9999/", i / 250, i % 250))
        .collect();
    let r = Router::new();
    for s in [
        RouteStrategy::First,
        RouteStrategy::Round,
        RouteStrategy::Random,
        RouteStrategy::ConsistentHash,
        RouteStrategy::LeastFrequentlyUsed,
        RouteStrategy::LeastRecentlyUsed,
    ] {
        let mut job = 0;
        c.bench_function(&format!("router_pick_100/{s}"), |b| {
            b.iter(|| {
                job = (job + 1) % 1000;
                r.pick(s, black_box(job), &addresses, T0)
            })
        });
    }
}

fn scan(c: &mut Criterion) {
    let s = Schedule::parse(ScheduleType::Cron, Some("* * * * * ?"), chrono_tz::UTC).expect("cron");
    c.bench_function("scan_plan_job/every_second_5s_window", |b| {
        b.iter(|| {
            plan_job(
                1,
                black_box(T0 + 1000),
                T0,
                &s,
                MisfireStrategy::DoNothing,
                &Window {
                    now: T0,
                    ahead_ms: 5_000,
                    misfire_ms: 5_000,
                    max_fires: 1_000,
                },
            )
        })
    });
}

/// Ring push + expire: 10,000 fires spread over five seconds pushed, then the five seconds
/// taken; reported per fire.
fn ring(c: &mut Criterion) {
    use xjob::model::TriggerType;
    use xjob::testing::actors::Ring;
    use xjob::testing::store::logs::Fire;
    const N: i64 = 10_000;
    let t0 = 1_795_269_600_000_i64;
    let fires: Vec<Fire> = (0..N)
        .map(|i| Fire {
            log_id: i,
            job_id: i as i32,
            fire_time: t0 + 1000 + (i % 5) * 1000,
            trigger_type: TriggerType::Cron,
            job: None,
            read_ms: 0,
            epoch: 0,
        })
        .collect();
    let mut g = c.benchmark_group("ring");
    g.throughput(criterion::Throughput::Elements(N as u64));
    g.bench_function("push_and_expire_10k_fires", |b| {
        b.iter_batched(
            || fires.clone(),
            |batch| {
                let mut ring = Ring::new(t0);
                let now_due = ring.push(batch, t0);
                let mut taken = now_due.len();
                for s in 1..=5 {
                    taken += ring.take_due(t0 + s * 1000).len();
                }
                assert_eq!(taken as i64, N);
            },
            criterion::BatchSize::LargeInput,
        )
    });
    g.finish();
}

/// An executor that accepts every call at once.
struct NoopExecutor;

impl xjob::executor::ExecutorClient for NoopExecutor {
    fn run(
        &self,
        _: &str,
        _: xjob::model::wire::TriggerParam,
    ) -> futures::future::BoxFuture<'static, xjob::model::wire::ReturnT> {
        Box::pin(async { xjob::model::wire::ReturnT::success() })
    }
    fn beat(&self, _: &str) -> futures::future::BoxFuture<'static, xjob::model::wire::ReturnT> {
        Box::pin(async { xjob::model::wire::ReturnT::success() })
    }
    fn idle_beat(
        &self,
        _: &str,
        _: i32,
    ) -> futures::future::BoxFuture<'static, xjob::model::wire::ReturnT> {
        Box::pin(async { xjob::model::wire::ReturnT::success() })
    }
    fn kill(
        &self,
        _: &str,
        _: i32,
    ) -> futures::future::BoxFuture<'static, xjob::model::wire::ReturnT> {
        Box::pin(async { xjob::model::wire::ReturnT::success() })
    }
    fn log(
        &self,
        _: &str,
        _: xjob::model::wire::LogParam,
    ) -> futures::future::BoxFuture<'static, xjob::model::wire::ReturnT<xjob::model::wire::LogResult>>
    {
        Box::pin(async { xjob::model::wire::ReturnT::fail("no log") })
    }
}

/// The trigger procedure (read job and group, route, write the run row, call the executor,
/// record the trigger) for one MANUAL trigger, on in-memory SQLite.
fn trigger(c: &mut Criterion) {
    use std::sync::Arc;
    use xjob::testing::store;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let now = chrono::DateTime::from_timestamp_millis(T0)
        .expect("time")
        .naive_utc();
    let (service, job_id) = rt.block_on(async {
        let cfg = xjob::config::DatabaseConfig {
            url: "sqlite::memory:".into(),
            max_connections: 1,
            ..Default::default()
        };
        let db = store::connect(&cfg).await.expect("db");
        store::migrate(&db).await.expect("migrate");
        let group =
            store::groups::insert(&db, "bench", "bench", 1, Some("http://exec/".into()), now)
                .await
                .expect("group");
        let job = xjob::JobSpec::cron(group, "bench", "* * * * * ?", "noop")
            .validate(chrono_tz::UTC, now)
            .expect("job");
        let id = store::jobs::insert(&db, job).await.expect("insert");
        let writer = xjob::testing::store::writer::LogWriter::start(
            xjob::testing::store::writer::Target::Pool(db.clone()),
            xjob::testing::activity::Activity::default(),
            Box::new(|_| {}),
        )
        .await
        .expect("writer");
        let t = xjob::testing::Trigger::new(
            db,
            xjob::Clock::system(),
            Arc::new(NoopExecutor),
            "bench".into(),
            xjob::testing::Metrics::default(),
            writer,
        );
        (t, id)
    });
    c.bench_function("trigger_procedure/in_memory_sqlite_noop_executor", |b| {
        b.iter(|| {
            let req = xjob::testing::TriggerRequest::new(job_id, xjob::model::TriggerType::Manual);
            rt.block_on(service.trigger(req)).expect("trigger")
        })
    });
}

criterion_group!(benches, cron, router, scan, ring, trigger);
criterion_main!(benches);
