//! End-to-end load bench: N jobs firing every second through the real engine (scan → ring →
//! lanes → in-process no-op handler → completion → log row) on a real database, for S seconds,
//! ending with one JSON summary line.
//!
//! Run: `cargo run --release --example loadbench -- --jobs 1000 --seconds 30`
//! Options: `--mode inprocess|remote`, `--database URL` (default: a temporary SQLite file),
//! `--connections N` (pool size, default 8), `--fast-max N` (the fast lane's places, default
//! the configuration's), `--idle-jobs M` (M more running jobs whose next
//! fire is in 2099: the scan must not pay for them), and for remote mode `--executors K` (default 2)
//! and `--xjob PATH` (default: the `xjob` binary next to this example's directory, i.e.
//! `target/release/xjob`: build it first with `cargo build --release`), `--executor-logs DIR`
//! (where the executors write their run logs; default a temporary directory on `/dev/shm`
//! when there is one: see the comment where it is chosen).
//!
//! In-process mode: a no-op handler registered in this process; lateness is nominal fire time →
//! handler start. Remote mode: this process serves the admin API on loopback and starts K
//! `xjob executor` processes that register with it; jobs route ROUND over them to
//! `noopJobHandler`; lateness is nominal fire time → the executor's acceptance of `/run` (its
//! handler starts right after, in the executor process), and CPU is this admin process's only.
//! Only fires whose nominal second lies in the measured window (after a 3 s warm-up, before a
//! 2 s tail) count; `lost` is nominal fires in the window without a run and `duplicates` fires
//! run more than once.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use xjob::prelude::*;

#[path = "bench_args/mod.rs"]
mod bench_args;
use bench_args::{arg, cpu_s, xjob_binary};

/// CPU seconds per thread name (threads of one name summed), from `/proc/self/task`.
fn cpu_by_thread() -> std::collections::BTreeMap<String, f64> {
    let mut out = std::collections::BTreeMap::new();
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
        return out;
    };
    for t in tasks.flatten() {
        let stat = std::fs::read_to_string(t.path().join("stat")).unwrap_or_default();
        let (Some(open), Some(close)) = (stat.find('('), stat.rfind(')')) else {
            continue;
        };
        let name = stat[open + 1..close].to_string();
        let f: Vec<&str> = stat[close + 1..].split_whitespace().collect();
        let v = |i: usize| f.get(i).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
        *out.entry(name).or_insert(0.0) += (v(11) + v(12)) / 100.0;
    }
    out
}

/// CPU seconds of process `pid` so far (user + system), from `/proc`.
fn process_cpu_s(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let Some(close) = stat.rfind(')') else {
        return 0.0;
    };
    let f: Vec<&str> = stat[close + 1..].split_whitespace().collect();
    let v = |i: usize| f.get(i).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
    (v(11) + v(12)) / 100.0
}

/// A line of `/proc/self/status` in MB (`VmRSS:` now, `VmHWM:` the most since the last
/// [`reset_peak_rss`]); 0 where there is no such file.
fn status_mb(key: &str) -> f64 {
    let s = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    s.lines()
        .find(|l| l.starts_with(key))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|kb| kb.parse::<f64>().ok())
        .map_or(0.0, |kb| kb / 1024.0)
}

fn rss_mb() -> f64 {
    status_mb("VmRSS:")
}

/// Starts the kernel's peak resident memory (`VmHWM`) over from what is resident now
/// (Linux: `5` written to `/proc/self/clear_refs`); answers whether it could.
fn reset_peak_rss() -> bool {
    std::fs::write("/proc/self/clear_refs", "5").is_ok()
}

fn pct(sorted: &[i64], p: f64) -> i64 {
    if sorted.is_empty() {
        return 0;
    }
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

#[global_allocator]
static ALLOC: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> anyhow::Result<()> {
    // the allocator as `xjob serve` runs it (freed memory handed back at once)
    xjob_alloc::tune();
    let args: Vec<String> = std::env::args().collect();
    let jobs: usize = arg(&args, "--jobs").map_or(Ok(1000), |v| v.parse())?;
    let seconds: i64 = arg(&args, "--seconds").map_or(Ok(30), |v| v.parse())?;
    let mode = arg(&args, "--mode").unwrap_or_else(|| "inprocess".into());
    anyhow::ensure!(
        seconds >= 8,
        "--seconds must be at least 8 (3 s warm-up, 2 s tail)"
    );
    if mode != "inprocess" && mode != "remote" {
        eprintln!("loadbench: --mode must be inprocess or remote, not {mode}");
        std::process::exit(2);
    }
    // logs on stderr: stdout carries the summary line alone (other programs read it)
    tracing_subscriber::fmt()
        .with_env_filter("warn,sqlx=error")
        .with_writer(std::io::stderr)
        .init();
    let dir = tempfile::tempdir()?;
    let url = arg(&args, "--database").unwrap_or_else(|| {
        format!(
            "sqlite://{}?mode=rwc",
            dir.path().join("bench.db").display()
        )
    });
    let connections: u32 = arg(&args, "--connections").map_or(Ok(8), |v| v.parse())?;
    let idle_jobs: u64 = arg(&args, "--idle-jobs").map_or(Ok(0), |v| v.parse())?;
    let fast_max: Option<usize> = arg(&args, "--fast-max").map(|v| v.parse()).transpose()?;
    // the executors' run logs (a file per run): on tmpfs unless told otherwise, so that what
    // is measured is not the file system's inode allocator (this machine's journal-less ext4
    // skips every inode deleted in the last 5 minutes one buffer lookup at a time: after an
    // earlier run removed its 100,000 log files, creating a file was 78 % of an executor's CPU)
    let logs = match arg(&args, "--executor-logs") {
        Some(d) => tempfile::tempdir_in(d)?,
        None if std::path::Path::new("/dev/shm").is_dir() => tempfile::tempdir_in("/dev/shm")?,
        None => tempfile::tempdir()?,
    };
    let remote = (mode == "remote")
        .then(|| -> anyhow::Result<Remote> {
            let xjob = xjob_binary(&args)?;
            Ok(Remote {
                xjob,
                executors: arg(&args, "--executors").map_or(Ok(2), |v| v.parse())?,
                dir: logs.path().to_path_buf(),
            })
        })
        .transpose()?;
    actix_rt::System::new().block_on(run(
        jobs,
        seconds,
        mode,
        url,
        Sizes {
            connections,
            fast_max,
        },
        idle_jobs,
        remote,
    ))
}

/// The engine's sizes the bench can set.
struct Sizes {
    /// The database pool's size (`--connections`).
    connections: u32,
    /// The fast lane's places (`--fast-max`), or the configuration's default.
    fast_max: Option<usize>,
}

/// Remote mode's settings.
struct Remote {
    xjob: std::path::PathBuf,
    executors: usize,
    dir: std::path::PathBuf,
}

/// Remote mode: the HTTP client, noting when each `/run` was accepted.
struct TimedClient {
    inner: xjob::executor::HttpExecutorClient,
    clock: Clock,
    runs: Arc<Mutex<Vec<(i64, i64)>>>,
}

impl xjob::executor::ExecutorClient for TimedClient {
    fn run(
        &self,
        address: &str,
        param: xjob::model::wire::TriggerParam,
    ) -> futures::future::BoxFuture<'static, xjob::model::wire::ReturnT> {
        let (log_id, clock, runs) = (param.log_id, self.clock.clone(), self.runs.clone());
        let call = self.inner.run(address, param);
        Box::pin(async move {
            let r = call.await;
            if r.is_success() {
                runs.lock().push((log_id, clock.now_ms()));
            }
            r
        })
    }
    /// The product's batch path (one hop to the client thread, answers in groups), each
    /// accepted run noted when its answer reaches the dispatcher.
    fn run_each(
        &self,
        calls: Vec<(String, xjob::model::wire::TriggerParam)>,
    ) -> xjob::executor::Answers {
        self.run_each_counted(calls).1
    }
    /// The same, with the client's count of executor calls (the lane's places).
    fn run_each_counted(
        &self,
        calls: Vec<(String, xjob::model::wire::TriggerParam)>,
    ) -> (usize, xjob::executor::Answers) {
        use futures::StreamExt;
        let ids: Vec<i64> = calls.iter().map(|(_, p)| p.log_id).collect();
        let (clock, runs) = (self.clock.clone(), self.runs.clone());
        let (made, answers) = self.inner.run_each_counted(calls);
        let answers = answers
            .inspect(move |group| {
                let now = clock.now_ms();
                let mut runs = runs.lock();
                for (i, r) in group {
                    if r.is_success() {
                        runs.push((ids[*i], now));
                    }
                }
            })
            .boxed();
        (made, answers)
    }
    fn beat(&self, a: &str) -> futures::future::BoxFuture<'static, xjob::model::wire::ReturnT> {
        self.inner.beat(a)
    }
    /// What each executor registered as (xjob's executors take `/runBatch`): the wrapped
    /// client's to know, or every batch would go one call at a time.
    fn learn(&self, address: &str, kind: xjob::executor::ExecutorKind) {
        self.inner.learn(address, kind)
    }
    fn idle_beat(
        &self,
        a: &str,
        job: i32,
    ) -> futures::future::BoxFuture<'static, xjob::model::wire::ReturnT> {
        self.inner.idle_beat(a, job)
    }
    fn kill(
        &self,
        a: &str,
        job: i32,
    ) -> futures::future::BoxFuture<'static, xjob::model::wire::ReturnT> {
        self.inner.kill(a, job)
    }
    fn log(
        &self,
        a: &str,
        p: xjob::model::wire::LogParam,
    ) -> futures::future::BoxFuture<'static, xjob::model::wire::ReturnT<xjob::model::wire::LogResult>>
    {
        self.inner.log(a, p)
    }
}

/// Kills the executor processes when the bench ends, however it ends.
struct Children(Vec<std::process::Child>);

impl Drop for Children {
    fn drop(&mut self) {
        for c in &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// Inserts `n` running jobs of `group` that next fire on 2099-01-01, 10,000 per statement (a
/// cross join of two 100-row derived tables: portable SQL, no recursion limits).
async fn insert_idle_jobs(
    db: &sea_orm::DatabaseConnection,
    group: i32,
    n: u64,
) -> anyhow::Result<()> {
    use sea_orm::ConnectionTrait;
    const NEXT_2099: i64 = 4_070_908_800_000;
    let hundred = (0..100)
        .map(|i| format!("SELECT {i} AS x"))
        .collect::<Vec<_>>()
        .join(" UNION ALL ");
    let mut left = n;
    while left > 0 {
        let take = left.min(10_000);
        let sql = format!(
            "INSERT INTO xxl_job_info (job_group, job_desc, schedule_type, schedule_conf, \
             misfire_strategy, executor_route_strategy, executor_handler, executor_block_strategy, \
             executor_timeout, executor_fail_retry_count, glue_type, trigger_status, \
             trigger_last_time, trigger_next_time, retry_interval) \
             SELECT {group}, 'idle', 'CRON', '0 0 0 1 1 ? 2099', 'DO_NOTHING', 'FIRST', 'noop', \
             'SERIAL_EXECUTION', 0, 0, 'BEAN', 1, 0, {NEXT_2099}, 0 \
             FROM ({hundred}) a, ({hundred}) b WHERE a.x * 100 + b.x < {take}"
        );
        db.execute_unprepared(&sql).await?;
        left -= take;
    }
    Ok(())
}

fn free_port() -> anyhow::Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port())
}

async fn run(
    jobs: usize,
    seconds: i64,
    mode: String,
    url: String,
    sizes: Sizes,
    idle_jobs: u64,
    remote: Option<Remote>,
) -> anyhow::Result<()> {
    let mut cfg = Config::default();
    cfg.database.url = url;
    cfg.database.max_connections = sizes.connections;
    if let Some(n) = sizes.fast_max {
        cfg.trigger_pool.fast_max = n;
    }
    cfg.executor.app_name = if remote.is_some() {
        String::new()
    } else {
        "bench".into()
    };
    cfg.scheduler.pre_read_count = (jobs as u64 * 2).max(cfg.pre_read_count());
    // the bench's own record of every run, resident from the start (written once, then
    // emptied; not zeros, which the allocator would map untouched): RSS growth over a long run
    // is then the scheduler's, not this record's
    let mut record = vec![(-1i64, -1i64); jobs * seconds as usize];
    record.clear();
    let runs: Arc<Mutex<Vec<(i64, i64)>>> = Arc::new(Mutex::new(record));
    let clock = Clock::system();
    let mut handlers = HandlerRegistry::new();
    {
        let (runs, clock) = (runs.clone(), clock.clone());
        handlers.register_fn("noop", move |ctx: JobContext| {
            runs.lock().push((ctx.log_id, clock.now_ms()));
            async { Ok(()) }
        })?;
    }
    const TOKEN: &str = "loadbench-token";
    let mut builder = Engine::builder(cfg).clock(clock.clone()).handlers(handlers);
    if remote.is_some() {
        builder = builder.remote_client(Arc::new(TimedClient {
            inner: xjob::executor::HttpExecutorClient::new(
                Some(TOKEN.into()),
                Duration::from_secs(3),
            ),
            clock: clock.clone(),
            runs: runs.clone(),
        }));
    }
    let engine = builder.start().await?;
    let group = engine.ensure_group("bench", "bench").await?;
    // remote mode: the admin API on loopback, and K `xjob executor` processes registering to it
    let mut _children = Children(vec![]);
    let mut _server = None;
    let handler = if let Some(r) = &remote {
        let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
        let admin = format!("http://{}/", listener.local_addr()?);
        let routes = xjob::routes::node(engine.clone(), Some(TOKEN.into()));
        let server =
            actix_web::HttpServer::new(move || actix_web::App::new().configure(routes.clone()))
                .workers(1)
                .listen(listener)?
                .run();
        _server = Some(server.handle());
        actix_rt::spawn(server);
        for k in 0..r.executors {
            let port = free_port()?;
            let mut command = std::process::Command::new(&r.xjob);
            command
                .arg("executor")
                .env("XJOB_EXECUTOR__APP_NAME", "bench")
                .env("XJOB_EXECUTOR__ADMIN_ADDRESSES", format!("[\"{admin}\"]"))
                .env("XJOB_EXECUTOR__ACCESS_TOKEN", TOKEN)
                .env("XJOB_EXECUTOR__PORT", port.to_string())
                .env("XJOB_EXECUTOR__LOG_PATH", r.dir.join(format!("exec{k}")))
                .env("XJOB_EXECUTOR__QUEUE_CAPACITY", "100000")
                .env("RUST_LOG", "warn")
                .stdout(std::process::Stdio::null());
            // separate processes, as in production: not on the CPUs this (the dispatch)
            // thread is kept on, which a child would inherit
            _children
                .0
                .push(xjob::with_process_cpus(|| command.spawn())?);
        }
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        loop {
            let g = xjob::testing::store::groups::get(engine.db(), group).await?;
            let n = g
                .address_list
                .as_deref()
                .unwrap_or_default()
                .split(',')
                .filter(|a| !a.is_empty())
                .count();
            if n >= r.executors {
                break;
            }
            anyhow::ensure!(
                std::time::Instant::now() < deadline,
                "executors did not register within 30 s"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        "noopJobHandler"
    } else {
        "noop"
    };
    if idle_jobs > 0 {
        let t = std::time::Instant::now();
        insert_idle_jobs(engine.db(), group, idle_jobs).await?;
        eprintln!(
            "loadbench: {idle_jobs} idle running jobs (next fire in 2099) inserted in {:.1} s",
            t.elapsed().as_secs_f64()
        );
    }
    let mut ids = Vec::with_capacity(jobs);
    for i in 0..jobs {
        let mut spec = JobSpec::cron(group, &format!("bench {i}"), "* * * * * ?", handler);
        spec.executor_route_strategy = "ROUND".into();
        ids.push(engine.add_job(spec).await?);
    }
    for id in &ids {
        engine.start_job(*id).await?;
    }
    eprintln!(
        "loadbench: RSS {:.1} MB after creating and starting the jobs",
        rss_mb()
    );
    let started = clock.now_ms();
    let win_from = (started / 1000 + 3) * 1000;
    let win_to = (started / 1000 + seconds - 2) * 1000;
    tokio::time::sleep(Duration::from_millis(
        (win_from - clock.now_ms()).max(0) as u64
    ))
    .await;
    let cpu0 = cpu_s();
    let threads0 = cpu_by_thread();
    // the summary's RSS is one sample at the window's end, where the second's burst may or may
    // not be in flight; the peak over the window is told on stderr beside it
    let peak_reset = reset_peak_rss();
    let executors_cpu = || -> f64 { _children.0.iter().map(|c| process_cpu_s(c.id())).sum() };
    let executors0 = executors_cpu();
    tokio::time::sleep(Duration::from_millis(
        (win_to + 1000 - clock.now_ms()).max(0) as u64,
    ))
    .await;
    let cpu1 = cpu_s();
    let executors1 = executors_cpu();
    let rss = rss_mb();
    let rss_peak = status_mb("VmHWM:");
    let per_thread: Vec<String> = cpu_by_thread()
        .into_iter()
        .map(|(name, s)| {
            (
                name.clone(),
                s - threads0.get(&name).copied().unwrap_or(0.0),
            )
        })
        .filter(|(_, s)| *s >= 0.01)
        .map(|(name, s)| format!("{name} {s:.2} s"))
        .collect();
    eprintln!(
        "loadbench: CPU in the window by thread: {}",
        per_thread.join(", ")
    );
    if peak_reset {
        eprintln!("loadbench: RSS in the window: at most {rss_peak:.1} MB, {rss:.1} MB at its end");
    }
    if !_children.0.is_empty() {
        let runs = jobs as f64 * ((win_to + 1000 - win_from) / 1000) as f64;
        let s = executors1 - executors0;
        eprintln!(
            "loadbench: the executor processes' CPU in the window: {s:.2} s, {:.1} µs per run",
            s * 1e6 / runs.max(1.0)
        );
    }
    let (passes, scan_us, scan_max_us) = engine.metrics().scan_stats();
    eprintln!(
        "loadbench: {passes} scan passes, mean {:.1} ms, longest {:.1} ms",
        scan_us as f64 / 1e3 / passes.max(1) as f64,
        scan_max_us as f64 / 1e3
    );
    // diagnostics (stderr, not part of the summary line): how far the pipeline trails
    {
        use entity::xxl_job_log::{Column, Entity};
        use sea_orm::{ColumnTrait, EntityTrait, PaginatorTrait, QueryFilter};
        let due = || Entity::find().filter(Column::FireTime.lte(win_to));
        let pending = due()
            .filter(Column::FireState.ne(0))
            .count(engine.db())
            .await?;
        let unfinished = due()
            .filter(Column::FireState.eq(0))
            .filter(Column::HandleCode.eq(0))
            .count(engine.db())
            .await?;
        eprintln!(
            "loadbench: at the window's end: {pending} due fires not yet dispatched, {unfinished} dispatched runs without a recorded result"
        );
    }
    tokio::time::sleep(Duration::from_millis(
        (started + seconds * 1000 - clock.now_ms()).max(0) as u64,
    ))
    .await;
    // no more results from executors, then stop the engine
    if let Some(h) = _server.take() {
        h.stop(true).await;
    }
    drop(_children);
    engine.stop(Duration::from_secs(10)).await?;

    // three columns, not whole rows: a ten-minute run at 10,000/s has six million of them
    let nominal: HashMap<i64, (i32, i64)> = {
        use entity::xxl_job_log::{Column, Entity};
        use sea_orm::{EntityTrait, QuerySelect};
        let rows: Vec<(i64, i32, Option<i64>)> = Entity::find()
            .select_only()
            .columns([Column::Id, Column::JobId, Column::FireTime])
            .into_tuple()
            .all(engine.db())
            .await?;
        rows.into_iter()
            .filter_map(|(id, job, t)| t.map(|t| (id, (job, t))))
            .collect()
    };
    let mut per_fire: HashMap<(i32, i64), usize> = HashMap::new();
    let mut lateness = Vec::new();
    // the latest run of each nominal second, so that a p99 can be told from one slow second
    let mut worst: HashMap<i64, i64> = HashMap::new();
    for (log_id, at) in runs.lock().iter() {
        if let Some(&(job, t)) = nominal.get(log_id)
            && t >= win_from
            && t <= win_to
        {
            *per_fire.entry((job, t)).or_default() += 1;
            lateness.push(at - t);
            let w = worst.entry(t).or_default();
            *w = (*w).max(at - t);
        }
    }
    let mut worst: Vec<(i64, i64)> = worst.into_iter().map(|(t, l)| (l, t)).collect();
    worst.sort_unstable_by(|a, b| b.cmp(a));
    eprintln!(
        "loadbench: latest run per second, slowest seconds first (ms, second of the window): {}",
        worst
            .iter()
            .take(5)
            .map(|(l, t)| format!("{l} (s{}, epoch {})", (t - win_from) / 1000, t / 1000))
            .collect::<Vec<_>>()
            .join(", ")
    );
    let expected = jobs as i64 * ((win_to - win_from) / 1000 + 1);
    let duplicates = per_fire.values().filter(|&&n| n > 1).count();
    let lost = expected - per_fire.len() as i64;
    lateness.sort_unstable();
    let triggers = lateness.len();
    let window_s = (win_to - win_from + 1000) as f64 / 1000.0;
    let cpu = cpu1 - cpu0;
    // keys in the documented order (a contract other programs read)
    let cpu_us = if triggers > 0 {
        cpu * 1e6 / triggers as f64
    } else {
        0.0
    };
    println!(
        "{{\"bench\":\"e2e\",\"mode\":{},\"jobs\":{jobs},\"seconds\":{seconds},\"triggers\":{triggers},\"triggers_per_sec\":{:.1},\"cpu_us_per_trigger\":{:.1},\"lateness_ms_p50\":{},\"lateness_ms_p99\":{},\"lateness_ms_max\":{},\"cpu_s\":{:.2},\"rss_mb\":{:.1},\"lost\":{lost},\"duplicates\":{duplicates}}}",
        serde_json::Value::String(mode),
        triggers as f64 / window_s,
        cpu_us,
        pct(&lateness, 0.50),
        pct(&lateness, 0.99),
        lateness.last().copied().unwrap_or(0),
        cpu,
        rss,
    );
    engine.db().clone().close().await?;
    Ok(())
}
