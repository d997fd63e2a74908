//! Two scheduling-center nodes sharing one PostgreSQL database, the way a cluster runs: both
//! scan under the `schedule_lock` row, each fire is recorded once (unique on job and nominal
//! time) and claimed by exactly one node. Stopping one node mid-run shows the other taking over
//! its fires.
//!
//! Run (with a PostgreSQL server; `source .ci/databases.sh` starts one on 127.0.0.1:25432):
//! `cargo run --example cluster_pg -- postgres://postgres@127.0.0.1:25432/xjob_test`

use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use xjob::prelude::*;

fn node_config(url: &str) -> Config {
    let mut c = Config::default();
    c.database.url = url.to_string();
    // both nodes run the same in-process executor, addressed alike, so either can run any fire
    c.executor.app_name = "cluster-demo".into();
    c.executor.address = "http://cluster-demo.local/".into();
    c
}

#[actix_web::main]
async fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter("info,sqlx=warn")
        .init();
    let url = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "postgres://postgres@127.0.0.1:25432/xjob_test".into());
    let ran: Arc<Mutex<Vec<(&'static str, i64)>>> = Arc::default();
    let mut nodes = Vec::new();
    for name in ["node-a", "node-b"] {
        let ran = ran.clone();
        let mut handlers = HandlerRegistry::new();
        handlers.register_fn("tick", move |ctx: JobContext| {
            ran.lock().push((name, ctx.log_id));
            async { Ok(()) }
        })?;
        nodes.push(
            Engine::builder(node_config(&url))
                .handlers(handlers)
                .start()
                .await?,
        );
    }
    let group = nodes[0]
        .ensure_group("cluster-demo", "cluster demo")
        .await?;
    let mut jobs = Vec::new();
    for i in 0..20 {
        let id = nodes[0]
            .add_job(JobSpec::cron(
                group,
                &format!("tick {i}"),
                "* * * * * ?",
                "tick",
            ))
            .await?;
        nodes[0].start_job(id).await?;
        jobs.push(id);
    }
    tokio::time::sleep(Duration::from_secs(6)).await;
    // whichever node takes the lock first each second records (and usually runs) the fires;
    // stop the busier one and watch the other take over, including the fires it had recorded
    let a_runs = ran.lock().iter().filter(|(n, _)| *n == "node-a").count();
    let (busy, other) = if a_runs * 2 >= ran.lock().len() {
        (0, 1)
    } else {
        (1, 0)
    };
    let names = ["node-a", "node-b"];
    println!(
        "stopping {} after {} runs; {} takes over",
        names[busy],
        ran.lock().len(),
        names[other]
    );
    let handed_back = nodes[busy].stop(Duration::from_secs(5)).await?;
    println!("{} handed back {handed_back} recorded fires", names[busy]);
    tokio::time::sleep(Duration::from_secs(6)).await;
    for id in &jobs {
        nodes[other].stop_job(*id).await?;
    }
    nodes[other].stop(Duration::from_secs(5)).await?;
    let runs = ran.lock().clone();
    let by = |n: &str| runs.iter().filter(|(w, _)| *w == n).count();
    let mut ids: Vec<i64> = runs.iter().map(|(_, id)| *id).collect();
    ids.sort_unstable();
    let before = ids.len();
    ids.dedup();
    println!(
        "runs: {} by node-a, {} by node-b, {} run twice",
        by("node-a"),
        by("node-b"),
        before - ids.len()
    );
    Ok(())
}
