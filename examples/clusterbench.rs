//! Cluster bench: K `xjob serve` processes on one PostgreSQL or MySQL/MariaDB database, N jobs
//! firing every second routed ROUND over E executors (standalone executors served by this
//! process, whose no-op handler records when each run started), for S seconds; optionally one
//! node killed with `kill -9` (and restarted) and one stopped with `kill -STOP` (and resumed)
//! mid-run. Ends with one JSON summary line.
//!
//! Run: `cargo build --release --bin xjob --example clusterbench`, then
//! `target/release/examples/clusterbench --database postgres://… --nodes 3 --jobs 10000
//!  --seconds 60 [--db-pid PID] [--kill 1@15:25] [--stop 2@35:6] [--executors 2]`
//! (`--kill I@T[:R]`: `kill -9` node I at T s, restart it at R s; `--stop I@T:D`: `kill -STOP`
//! node I at T s for D s; `--db-pid`: the database server's process, whose CPU and its
//! children's is counted; `--xjob PATH` as for `loadbench`). The database must be empty (a new
//! one): the bench migrates it and inserts the jobs.
//!
//! Only fires whose nominal second lies in the measured window (after a 10 s warm-up, before
//! an 8 s tail) count: `lost` is nominal fires in the window that no executor ran, `duplicates`
//! fires run more than once, `shares` the fires each node dispatched (by the admin address in
//! the run's trigger record), lateness is nominal time → the handler's start, and the CPU of
//! the xjob processes and of the database server is per fire of the window.
//!
//! Summary line: `{"bench":"cluster","nodes":K,"jobs":N,"seconds":S,"fires":..,
//! "fires_per_sec":..,"shares":[..],"lateness_ms_p50":..,"lateness_ms_p99":..,
//! "lateness_ms_max":..,"lost":..,"duplicates":..,"xjob_cpu_us_per_fire":..,
//! "db_cpu_us_per_fire":..}`

use std::collections::HashMap;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use xjob::prelude::*;

#[path = "bench_args/mod.rs"]
mod bench_args;
use bench_args::{arg, xjob_binary};

const TOKEN: &str = "clusterbench-token-0123456789";
const WARMUP_S: i64 = 10;
const TAIL_S: i64 = 8;

/// utime + stime + (reaped children's) of process `pid`, in clock ticks.
fn ticks(pid: u32, with_children: bool) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let after = stat.rsplit_once(')').map(|(_, r)| r).unwrap_or("");
    let f: Vec<u64> = after
        .split_whitespace()
        .map(|v| v.parse().unwrap_or(0))
        .collect();
    let t = |i: usize| f.get(i).copied().unwrap_or(0);
    let own = t(11) + t(12);
    if !with_children {
        return own;
    }
    // reaped children, then live ones
    let mut sum = own + t(13) + t(14);
    if let Ok(kids) = std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children")) {
        for k in kids
            .split_whitespace()
            .filter_map(|k| k.parse::<u32>().ok())
        {
            sum += ticks(k, false);
        }
    }
    sum
}

fn hz() -> f64 {
    // CLK_TCK is 100 on Linux
    100.0
}

fn pct(sorted: &[i64], p: f64) -> i64 {
    if sorted.is_empty() {
        return 0;
    }
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}

fn free_port() -> anyhow::Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port())
}

/// One `xjob serve` process: its port, working directory and, while it runs, the child.
struct NodeProc {
    port: u16,
    dir: std::path::PathBuf,
    child: Option<Child>,
    /// CPU ticks of earlier incarnations (killed, then restarted).
    spent: u64,
}

impl NodeProc {
    fn spawn(&mut self, xjob: &std::path::Path, url: &str, jobs: usize) -> anyhow::Result<()> {
        std::fs::create_dir_all(&self.dir)?;
        let log = std::fs::File::create(self.dir.join("serve.log"))?;
        let child = Command::new(xjob)
            .arg("serve")
            .current_dir(&self.dir)
            .env("XJOB_DATABASE__URL", url)
            .env("XJOB_DATABASE__MAX_CONNECTIONS", "8")
            .env("XJOB_HTTP__BIND", format!("127.0.0.1:{}", self.port))
            .env("XJOB_SECURITY__ACCESS_TOKEN", TOKEN)
            .env("XJOB_SECURITY__ADMIN_PASSWORD", "clusterbench-admin-1")
            .env(
                "XJOB_SCHEDULER__PRE_READ_COUNT",
                (jobs * 2).max(6000).to_string(),
            )
            .env("RUST_LOG", "warn")
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()?;
        self.child = Some(child);
        Ok(())
    }

    fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    fn cpu(&self) -> u64 {
        self.spent + self.pid().map_or(0, |p| ticks(p, false))
    }

    fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            self.spent += ticks(c.id(), false);
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    fn signal(&self, sig: &str) {
        if let Some(pid) = self.pid() {
            let _ = Command::new("kill").args([sig, &pid.to_string()]).status();
        }
    }

    fn admin(&self) -> String {
        format!("http://127.0.0.1:{}/", self.port)
    }
}

impl Drop for NodeProc {
    /// A node never outlives the bench, however it ends.
    fn drop(&mut self) {
        self.signal("-CONT");
        self.kill();
    }
}

/// `I@T[:X]` → (I, T, X).
fn event(spec: &str) -> anyhow::Result<(usize, i64, Option<i64>)> {
    let (node, rest) = spec
        .split_once('@')
        .ok_or_else(|| anyhow::anyhow!("`{spec}`: expected NODE@SECONDS[:SECONDS]"))?;
    let (at, extra) = match rest.split_once(':') {
        Some((a, x)) => (a, Some(x.parse()?)),
        None => (rest, None),
    };
    Ok((node.parse()?, at.parse()?, extra))
}

/// Inserts `n` running jobs of `group` firing every second from `first_ms` (one statement per
/// 10,000: a cross join of two 100-row derived tables).
async fn insert_jobs(
    db: &sea_orm::DatabaseConnection,
    group: i32,
    n: usize,
    first_ms: i64,
) -> anyhow::Result<()> {
    use sea_orm::ConnectionTrait;
    let hundred = (0..100)
        .map(|i| format!("SELECT {i} AS x"))
        .collect::<Vec<_>>()
        .join(" UNION ALL ");
    let mut left = n;
    while left > 0 {
        let take = left.min(10_000);
        db.execute_unprepared(&format!(
            "INSERT INTO xxl_job_info (job_group, job_desc, author, schedule_type, schedule_conf, \
             misfire_strategy, executor_route_strategy, executor_handler, executor_block_strategy, \
             executor_timeout, executor_fail_retry_count, glue_type, trigger_status, \
             trigger_last_time, trigger_next_time, retry_interval) \
             SELECT {group}, 'bench', 'bench', 'CRON', '* * * * * ?', 'DO_NOTHING', 'ROUND', \
             'noopJobHandler', 'SERIAL_EXECUTION', 0, 0, 'BEAN', 1, 0, {first_ms}, 0 \
             FROM ({hundred}) a, ({hundred}) b WHERE a.x * 100 + b.x < {take}"
        ))
        .await?;
        left -= take;
    }
    Ok(())
}

#[global_allocator]
static ALLOC: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let url = arg(&args, "--database")
        .ok_or_else(|| anyhow::anyhow!("--database postgres://… or mysql://… is required"))?;
    let nodes: usize = arg(&args, "--nodes").map_or(Ok(3), |v| v.parse())?;
    let jobs: usize = arg(&args, "--jobs").map_or(Ok(10_000), |v| v.parse())?;
    let seconds: i64 = arg(&args, "--seconds").map_or(Ok(60), |v| v.parse())?;
    let executors: usize = arg(&args, "--executors").map_or(Ok(2), |v| v.parse())?;
    let db_pid: Option<u32> = arg(&args, "--db-pid").map(|v| v.parse()).transpose()?;
    let kill = arg(&args, "--kill").map(|s| event(&s)).transpose()?;
    let stop = arg(&args, "--stop").map(|s| event(&s)).transpose()?;
    anyhow::ensure!(
        seconds > WARMUP_S + TAIL_S + 2,
        "--seconds must exceed {}",
        WARMUP_S + TAIL_S + 2
    );
    let xjob = xjob_binary(&args)?.canonicalize()?;
    // logs on stderr: stdout carries the summary line alone (other programs read it)
    tracing_subscriber::fmt()
        .with_env_filter("warn,sqlx=error")
        .with_writer(std::io::stderr)
        .init();
    actix_rt::System::new().block_on(run(
        url, nodes, jobs, seconds, executors, db_pid, kill, stop, xjob,
    ))
}

#[allow(clippy::too_many_arguments)]
async fn run(
    url: String,
    n_nodes: usize,
    jobs: usize,
    seconds: i64,
    n_executors: usize,
    db_pid: Option<u32>,
    kill: Option<(usize, i64, Option<i64>)>,
    stop: Option<(usize, i64, Option<i64>)>,
    xjob: std::path::PathBuf,
) -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let mut db_cfg = xjob::config::DatabaseConfig {
        url: url.clone(),
        ..Default::default()
    };
    db_cfg.max_connections = 4;
    xjob::migrate(&db_cfg).await?;
    let db = xjob::testing::store::connect(&db_cfg).await?;
    let now = xjob::testing::clock::ms_to_naive(0);
    let group = xjob::testing::store::groups::insert(&db, "bench", "bench", 0, None, now).await?;

    let mut nodes: Vec<NodeProc> = (0..n_nodes)
        .map(|k| {
            Ok(NodeProc {
                port: free_port()?,
                dir: dir.path().join(format!("node{k}")),
                child: None,
                spent: 0,
            })
        })
        .collect::<anyhow::Result<_>>()?;
    let admins: Vec<String> = nodes.iter().map(NodeProc::admin).collect();

    for n in nodes.iter_mut() {
        n.spawn(&xjob, &url, jobs)?;
    }
    let deadline = Instant::now() + Duration::from_secs(60);
    let client = awc::Client::default();
    for n in &nodes {
        loop {
            let up = client
                .get(format!("{}health", n.admin()))
                .send()
                .await
                .is_ok_and(|r| r.status().is_success());
            if up {
                break;
            }
            anyhow::ensure!(
                Instant::now() < deadline,
                "node {} did not start: {}",
                n.admin(),
                std::fs::read_to_string(n.dir.join("serve.log")).unwrap_or_default()
            );
            actix_rt::time::sleep(Duration::from_millis(100)).await;
        }
    }
    // the executors: this process, each run's start recorded
    let runs: Arc<Mutex<Vec<(i64, i64)>>> =
        Arc::new(Mutex::new(Vec::with_capacity(jobs * seconds as usize)));
    let clock = Clock::system();
    let mut execs = Vec::new();
    for k in 0..n_executors {
        let mut handlers = HandlerRegistry::new();
        let (runs, clock) = (runs.clone(), clock.clone());
        handlers.register_fn("noopJobHandler", move |ctx: JobContext| {
            runs.lock().push((ctx.log_id, clock.now_ms()));
            async { Ok(()) }
        })?;
        let mut cfg = Config::default();
        cfg.executor.app_name = "bench".into();
        // each executor calls the nodes back in its own order
        let mut order = admins.clone();
        order.rotate_left(k % n_nodes.max(1));
        cfg.executor.admin_addresses = order;
        cfg.executor.access_token = TOKEN.into();
        cfg.executor.queue_capacity = 100_000;
        cfg.registry.beat_secs = 2;
        cfg.executor.log_path = dir.path().join(format!("exec{k}")).display().to_string();
        // load generators: no log file per run (creating 10,000 files a second took a core)
        cfg.executor.run_logs = false;
        execs.push(
            xjob::executor::StandaloneExecutor::start(
                &cfg,
                handlers,
                Some(std::net::TcpListener::bind("127.0.0.1:0")?),
            )
            .await?,
        );
    }

    // the jobs only once every executor is in the group's list
    loop {
        let g = xjob::testing::store::groups::get(&db, group).await?;
        let listed = g
            .address_list
            .as_deref()
            .unwrap_or_default()
            .split(',')
            .filter(|a| !a.is_empty())
            .count();
        if listed >= n_executors {
            break;
        }
        anyhow::ensure!(
            Instant::now() < deadline + Duration::from_secs(30),
            "the executors did not register"
        );
        actix_rt::time::sleep(Duration::from_millis(100)).await;
    }
    let started = clock.now_ms();
    insert_jobs(&db, group, jobs, (started / 1000 + 3) * 1000).await?;
    let win_from = (started / 1000 + WARMUP_S) * 1000;
    let win_to = (started / 1000 + seconds - TAIL_S) * 1000;

    // the scenario, second by second
    let at = |s: i64| started + s * 1000;
    let mut xjob_cpu0 = None;
    let mut db_cpu0 = None;
    let (mut xjob_cpu1, mut db_cpu1) = (0, 0);
    let mut killed = false;
    let mut restarted = false;
    let mut stopped = false;
    let mut resumed = false;
    loop {
        let now = clock.now_ms();
        if now >= started + seconds * 1000 {
            break;
        }
        if xjob_cpu0.is_none() && now >= win_from {
            xjob_cpu0 = Some(nodes.iter().map(NodeProc::cpu).sum::<u64>());
            db_cpu0 = db_pid.map(|p| ticks(p, true));
        }
        if xjob_cpu0.is_some() && xjob_cpu1 == 0 && now >= win_to + 1000 {
            xjob_cpu1 = nodes.iter().map(NodeProc::cpu).sum::<u64>();
            db_cpu1 = db_pid.map_or(0, |p| ticks(p, true));
        }
        if let Some((k, t, again)) = kill {
            if !killed && now >= at(t) {
                killed = true;
                nodes[k].kill();
                eprintln!("clusterbench: node {k} killed (kill -9) at {t} s");
            }
            if let Some(r) = again
                && killed
                && !restarted
                && now >= at(r)
            {
                restarted = true;
                nodes[k].spawn(&xjob, &url, jobs)?;
                eprintln!("clusterbench: node {k} restarted at {r} s");
            }
        }
        if let Some((k, t, d)) = stop {
            if !stopped && now >= at(t) {
                stopped = true;
                nodes[k].signal("-STOP");
                eprintln!("clusterbench: node {k} stopped (kill -STOP) at {t} s");
            }
            if stopped && !resumed && now >= at(t + d.unwrap_or(5)) {
                resumed = true;
                nodes[k].signal("-CONT");
                eprintln!("clusterbench: node {k} resumed at {} s", t + d.unwrap_or(5));
            }
        }
        actix_rt::time::sleep(Duration::from_millis(50)).await;
    }
    for n in nodes.iter_mut() {
        n.signal("-CONT");
        n.signal("-TERM");
    }
    for n in nodes.iter_mut() {
        if let Some(c) = n.child.as_mut() {
            let _ = c.wait();
        }
    }
    for e in execs {
        e.stop().await;
    }

    // what ran, against what was due
    let rows: HashMap<i64, (i32, i64, String)> = {
        use entity::xxl_job_log::{Column, Entity};
        use sea_orm::{ColumnTrait, EntityTrait, QueryFilter, QuerySelect};
        let rows: Vec<(i64, i32, Option<i64>, Option<String>)> = Entity::find()
            .select_only()
            .columns([
                Column::Id,
                Column::JobId,
                Column::FireTime,
                Column::TriggerMsg,
            ])
            .filter(Column::FireTime.between(win_from, win_to))
            .into_tuple()
            .all(&db)
            .await?;
        rows.into_iter()
            .filter_map(|(id, job, t, msg)| {
                // the compact trigger record: MARK, type, admin address, …
                let admin = msg
                    .as_deref()
                    .and_then(|m| m.split('\u{1f}').nth(2))
                    .unwrap_or("")
                    .to_string();
                t.map(|t| (id, (job, t, admin)))
            })
            .collect()
    };
    let mut per_fire: HashMap<(i32, i64), usize> = HashMap::new();
    let mut per_node: HashMap<String, usize> = HashMap::new();
    let mut lateness = Vec::new();
    for (log_id, ran_at) in runs.lock().iter() {
        if let Some((job, t, admin)) = rows.get(log_id) {
            let n = per_fire.entry((*job, *t)).or_default();
            *n += 1;
            if *n == 1 {
                *per_node.entry(admin.clone()).or_default() += 1;
                lateness.push(ran_at - t);
            }
        }
    }
    eprintln!("clusterbench: fires by admin address {per_node:?}");
    let expected = jobs as i64 * ((win_to - win_from) / 1000 + 1);
    let duplicates = per_fire.values().filter(|&&n| n > 1).count();
    let lost = expected - per_fire.len() as i64;
    lateness.sort_unstable();
    let fires = per_fire.len();
    let window_s = (win_to - win_from + 1000) as f64 / 1000.0;
    let per_fire_us = |t: u64| {
        if fires == 0 {
            0.0
        } else {
            t as f64 / hz() * 1e6 / fires as f64
        }
    };
    let shares: Vec<usize> = nodes
        .iter()
        .map(|n| {
            per_node
                .get(&format!("127.0.0.1:{}", n.port))
                .copied()
                .unwrap_or(0)
        })
        .collect();
    println!(
        "{{\"bench\":\"cluster\",\"nodes\":{n_nodes},\"jobs\":{jobs},\"seconds\":{seconds},\"fires\":{fires},\"fires_per_sec\":{:.1},\"shares\":{shares:?},\"lateness_ms_p50\":{},\"lateness_ms_p99\":{},\"lateness_ms_max\":{},\"lost\":{lost},\"duplicates\":{duplicates},\"xjob_cpu_us_per_fire\":{:.1},\"db_cpu_us_per_fire\":{:.1}}}",
        fires as f64 / window_s,
        pct(&lateness, 0.50),
        pct(&lateness, 0.99),
        lateness.last().copied().unwrap_or(0),
        per_fire_us(xjob_cpu1.saturating_sub(xjob_cpu0.unwrap_or(0))),
        per_fire_us(db_cpu1.saturating_sub(db_cpu0.unwrap_or(0))),
    );
    db.close().await?;
    Ok(())
}
