//! Workflow bench: the real engine on a temporary SQLite file with the in-process executor and
//! a no-op handler, ending with one JSON summary line.
//!
//! Run: `cargo run --release --example wfbench -- --shape wide --nodes 1000 --fanout 100` or
//! `-- --shape many --runs 2000 --nodes 5`; `--repeat K` runs the shape K times one after
//! another and measures them together; `--database URL` uses that (empty) database instead of
//! a temporary SQLite file; `--clients C` starts the runs from C callers at once (default one,
//! each start awaited before the next). The callers run on a thread of their own, as the REST
//! API's callers do (its workers are threads apart from the engine's); `--callers-on-engine`
//! runs them on the engine's thread instead (how this bench measured until 2026-12-04).
//! - `wide`: one workflow of N nodes: a start node, then stages of F nodes in parallel each
//!   joined by one node (fan-out F then fan-in), until N nodes.
//! - `many`: R runs of a small workflow of N nodes (a start, N-2 in parallel, a join) started
//!   at once; node runs per second in aggregate.
//!
//! Both report wall time, the process's CPU per node run (its idle CPU, measured for 3 s
//! first, taken out), a start's time as its caller waited for it (mean, p50, p90, p99: with one
//! caller, what bounds the rate), and (`--baseline`) the CPU per fire of scheduled fires of the same handler
//! (as many jobs as nodes, at most 1,000, each firing every second) — what a node run costs as
//! a plain fire — so the workflow's own cost per node transition is the difference. Every node
//! must run exactly once (checked).

use std::time::{Duration, Instant};

use serde_json::json;
use xjob::console::workflows::WorkflowInput;
use xjob::model::TriggerType;
use xjob::prelude::*;

#[path = "bench_args/mod.rs"]
mod bench_args;
use bench_args::{arg, cpu_s};

#[global_allocator]
static ALLOC: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// A definition of `n` nodes: a start, then stages of `fanout` parallel nodes each joined by
/// one node.
fn wide(job: i32, n: usize, fanout: usize) -> serde_json::Value {
    let mut nodes = vec![json!({ "key": "n0", "type": "JOB", "jobId": job })];
    let mut edges = Vec::new();
    let mut last = "n0".to_string();
    let mut i = 1;
    while i < n {
        let width = fanout.min(n - i - 1).max(1);
        let join_at = i + width;
        let join = format!("n{join_at}");
        for k in i..join_at.min(n) {
            let key = format!("n{k}");
            nodes.push(json!({ "key": key, "type": "JOB", "jobId": job }));
            edges.push(json!({ "from": last, "to": key }));
            if join_at < n {
                edges.push(json!({ "from": key, "to": join }));
            }
        }
        if join_at < n {
            nodes.push(json!({ "key": join, "type": "JOB", "jobId": job }));
        }
        last = join;
        i = join_at + 1;
    }
    json!({ "nodes": nodes, "edges": edges })
}

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let shape = arg(&args, "--shape").unwrap_or_else(|| "wide".into());
    let nodes: usize = arg(&args, "--nodes").map_or(Ok(1000), |v| v.parse())?;
    let fanout: usize = arg(&args, "--fanout").map_or(Ok(100), |v| v.parse())?;
    let runs: usize = arg(&args, "--runs").map_or(Ok(2000), |v| v.parse())?;
    let repeat: usize = arg(&args, "--repeat").map_or(Ok(1), |v| v.parse())?;
    let clients: usize = arg(&args, "--clients").map_or(Ok(1), |v| v.parse())?;
    anyhow::ensure!(clients >= 1, "--clients is at least 1");
    let database = arg(&args, "--database");
    let baseline = args.iter().any(|a| a == "--baseline");
    let callers_on_engine = args.iter().any(|a| a == "--callers-on-engine");
    let dir = tempfile::tempdir()?;
    let mut cfg = Config::default();
    cfg.database.url = database
        .unwrap_or_else(|| format!("sqlite://{}?mode=rwc", dir.path().join("wf.db").display()));
    cfg.executor.app_name = xjob::demo::DEMO_APP.into();
    cfg.executor.address = "http://127.0.0.1:1/".into();
    cfg.executor.queue_capacity = 1_000_000;
    // the runner outlives the answer, so an error is told before what is in flight is dropped
    let system = actix_rt::System::new();
    let answer = system.block_on(async move {
        let engine = Engine::builder(cfg)
            .handlers(xjob::demo::handlers()?)
            .start()
            .await?;
        let g = engine.ensure_group(xjob::demo::DEMO_APP, "bench").await?;
        let job = engine
            .add_job(JobSpec::cron(g, "noop", "0 0 3 * * ?", "noopJobHandler"))
            .await?;
        let def = match shape.as_str() {
            "wide" => wide(job, nodes, fanout),
            "many" => wide(job, nodes, nodes.saturating_sub(2).max(1)),
            other => anyhow::bail!("unknown --shape {other} (wide or many)"),
        };
        let n_nodes = def["nodes"].as_array().map_or(0, Vec::len);
        let w = engine
            .add_workflow(WorkflowInput {
                job_group: g,
                name: "bench".into(),
                definition: serde_json::from_value(def)?,
                ..WorkflowInput::default()
            })
            .await?;
        let count = if shape == "wide" { 1 } else { runs };
        let total_nodes = count * n_nodes;

        // the engine's own background work (scan passes, heartbeats, polls), per second
        let (c0, t0) = (cpu_s(), Instant::now());
        actix_rt::time::sleep(Duration::from_secs(3)).await;
        let idle_per_s = (cpu_s() - c0) / t0.elapsed().as_secs_f64();
        let metrics = engine.metrics().clone();
        // the plain path first: scheduled fires of as many jobs of the same handler (up to
        // 1,000, each firing every second), for the cost of a node run's fire itself
        let mut base_us = None;
        if baseline {
            let k = total_nodes.min(1000);
            let mut fire_jobs = Vec::with_capacity(k);
            for i in 0..k {
                let spec = JobSpec::cron(g, &format!("fire{i}"), "* * * * * ?", "noopJobHandler");
                fire_jobs.push(engine.add_job(spec).await?);
            }
            for id in &fire_jobs {
                engine.start_job(*id).await?;
            }
            let wait_for = |n: u64| {
                let metrics = metrics.clone();
                async move {
                    while metrics.callback_count() < n {
                        actix_rt::time::sleep(Duration::from_millis(2)).await;
                    }
                }
            };
            // past the first (partial) second
            wait_for(metrics.callback_count() + k as u64).await;
            let (c0, t0, before) = (cpu_s(), Instant::now(), metrics.callback_count());
            // ten seconds' worth at least: CPU is read in 10 ms ticks
            wait_for(before + (10 * k).max(total_nodes) as u64).await;
            let wall = t0.elapsed().as_secs_f64();
            let fires = metrics.callback_count() - before;
            base_us = Some((cpu_s() - c0 - idle_per_s * wall) * 1e6 / fires as f64);
            for id in &fire_jobs {
                engine.stop_job(*id).await?;
            }
            // what is in flight ends before the workflow's part is measured
            actix_rt::time::sleep(Duration::from_millis(1500)).await;
            eprintln!("baseline: {fires} scheduled fires in {wall:.3} s");
        }

        let (c0, t0) = (cpu_s(), Instant::now());
        let window_from = std::time::SystemTime::now();
        let mut ids = Vec::with_capacity(count * repeat);
        // how long each start took, as its caller waited for it
        let mut start_waits: Vec<Duration> = Vec::with_capacity(count * repeat);
        // `--repeat`: the same runs again once they ended, measured together
        for _ in 0..repeat {
            let ended_before = metrics.workflow_counts();
            // `--clients C`: C callers start the runs at once, each its share in turn
            let starts = (0..clients).map(|c| {
                let engine = engine.clone();
                let n = count / clients + usize::from(c < count % clients);
                async move {
                    let mut ids = Vec::with_capacity(n);
                    let mut waits = Vec::with_capacity(n);
                    for _ in 0..n {
                        let asked = Instant::now();
                        ids.push(
                            engine
                                .trigger_workflow(w.id, TriggerType::Api, None)
                                .await?,
                        );
                        waits.push(asked.elapsed());
                    }
                    Ok::<_, anyhow::Error>((ids, waits))
                }
            });
            let all = futures::future::try_join_all(starts);
            let joined = if callers_on_engine {
                all.await?
            } else {
                let (tx, rx) = tokio::sync::oneshot::channel();
                std::thread::Builder::new()
                    .name("wfbench-callers".into())
                    .spawn(move || {
                        let rt = tokio::runtime::Builder::new_current_thread()
                            .enable_all()
                            .build();
                        let out = rt
                            .map_err(anyhow::Error::from)
                            .and_then(|rt| rt.block_on(all));
                        let _ = tx.send(out);
                    })?;
                rx.await??
            };
            for (started, waits) in joined {
                ids.extend(started);
                start_waits.extend(waits);
            }
            eprintln!(
                "{count} runs started in {:.3} s",
                t0.elapsed().as_secs_f64()
            );
            let deadline = Instant::now() + Duration::from_secs(600);
            loop {
                let (_, ok, failed) = metrics.workflow_counts();
                if (ok + failed - ended_before.1 - ended_before.2) as usize >= count {
                    break;
                }
                anyhow::ensure!(Instant::now() < deadline, "runs did not end in 600 s");
                actix_rt::time::sleep(Duration::from_millis(5)).await;
            }
        }
        let wall = t0.elapsed().as_secs_f64();
        // the measured window in epoch ms, for a tool sampling the database's CPU meanwhile
        let epoch_ms = |t: std::time::SystemTime| {
            t.duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_millis())
        };
        eprintln!(
            "window {} {}",
            epoch_ms(window_from),
            epoch_ms(std::time::SystemTime::now())
        );
        let cpu = cpu_s() - c0 - idle_per_s * wall;
        // every node of every run ran exactly once, and every run succeeded
        let mut node_runs = 0;
        for id in &ids {
            let r = engine.workflow_run(*id).await?;
            anyhow::ensure!(r.status == "SUCCEEDED", "run {id} {}", r.status);
            let ns = r.nodes.unwrap_or_default();
            anyhow::ensure!(ns.len() == n_nodes, "run {id}: {} node runs", ns.len());
            anyhow::ensure!(ns.iter().all(|n| n.log_ids.len() == 1 && n.attempt == 1));
            node_runs += ns.len();
        }
        let cpu_us = cpu * 1e6 / node_runs as f64;
        // a start's time as its caller saw it (ms): with one caller, what bounds the rate
        start_waits.sort_unstable();
        let start_ms = |q: f64| {
            let i = ((start_waits.len() as f64 * q) as usize).min(start_waits.len().max(1) - 1);
            start_waits
                .get(i)
                .map(|d| (d.as_secs_f64() * 1e5).round() / 100.0)
        };
        let start_mean_ms =
            start_waits.iter().sum::<Duration>().as_secs_f64() * 1e3 / start_waits.len() as f64;
        println!(
            "{}",
            json!({
                "bench": "workflow", "shape": shape, "runs": ids.len(), "nodes_per_run": n_nodes,
                "clients": clients,
                "callers_thread": if callers_on_engine { "engine" } else { "own" },
                "node_runs": node_runs, "wall_s": (wall * 1000.0).round() / 1000.0,
                "node_runs_per_sec": (node_runs as f64 / wall).round(),
                "cpu_us_per_node_run": cpu_us.round(),
                "idle_cpu_pct": (idle_per_s * 1000.0).round() / 10.0,
                "baseline_cpu_us_per_run": base_us.map(f64::round),
                "workflow_cpu_us_per_transition": base_us.map(|b| (cpu_us - b).round()),
                "start_ms_mean": (start_mean_ms * 100.0).round() / 100.0,
                "start_ms_p50": start_ms(0.5), "start_ms_p90": start_ms(0.9),
                "start_ms_p99": start_ms(0.99),
            })
        );
        engine.stop(Duration::from_secs(5)).await?;
        engine.db().clone().close().await?;
        Ok(())
    });
    if let Err(e) = &answer {
        eprintln!("wfbench: {e:#}");
    }
    answer
}
