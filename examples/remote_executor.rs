//! An application that runs its own handlers as a remote XXL-JOB executor: it serves the
//! executor protocol, registers with an admin (xjob or XXL-JOB 2.4) and reports results there.
//!
//! Run an admin first (`cargo run -- serve`, note the token it prints), then:
//! `cargo run --example remote_executor -- http://127.0.0.1:8080 <token>`
//! and create a job on group `report-app` with handler `buildReport` in the admin.

use xjob::executor::StandaloneExecutor;
use xjob::prelude::*;

#[actix_web::main]
async fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt().with_env_filter("info").init();
    let mut args = std::env::args().skip(1);
    let admin = args
        .next()
        .unwrap_or_else(|| "http://127.0.0.1:8080".into());
    let token = args
        .next()
        .ok_or_else(|| anyhow::anyhow!("usage: remote_executor <admin url> <access token>"))?;

    let mut handlers = HandlerRegistry::new();
    handlers.register_fn("buildReport", |ctx: JobContext| async move {
        ctx.log(format!(
            "building report for {:?} (shard {}/{})",
            ctx.param, ctx.shard_index, ctx.shard_total
        ));
        anyhow::ensure!(!ctx.param.contains("fail"), "asked to fail");
        Ok(())
    })?;

    let mut config = Config::default();
    config.executor.app_name = "report-app".into();
    config.executor.admin_addresses = vec![admin];
    config.executor.access_token = token;
    config.executor.port = 9998;
    config.executor.log_path = "data/report-app-logs".into();

    let executor = StandaloneExecutor::start(&config, handlers, None).await?;
    println!("executor serving at {}; Ctrl-C to stop", executor.address);
    tokio::signal::ctrl_c().await?;
    executor.stop().await;
    Ok(())
}
