//! The demo handlers that `xjob serve` registers for its in-process `xjob-demo` executor.

use std::time::Duration;

use crate::error::Result;
use crate::executor::HandlerRegistry;

/// The demo executor's appname.
pub const DEMO_APP: &str = "xjob-demo";

/// `demoJobHandler` (succeeds, logs its param), `failJobHandler` (returns an error),
/// `sleepJobHandler` (sleeps param seconds), `shardingJobHandler` (logs shard index/total),
/// `noopJobHandler` (does nothing; the load bench's remote mode uses it).
pub fn handlers() -> Result<HandlerRegistry> {
    let mut r = HandlerRegistry::new();
    r.register_fn("demoJobHandler", |ctx| async move {
        ctx.log(format!("XXL-JOB, Hello World. param: {}", ctx.param));
        Ok(())
    })?
    .register_fn("failJobHandler", |ctx| async move {
        ctx.log("failJobHandler: failing on purpose");
        Err(anyhow::anyhow!(
            "failJobHandler failed on purpose (param: {})",
            ctx.param
        ))
    })?
    .register_fn("sleepJobHandler", |ctx| async move {
        let secs: u64 = ctx.param.trim().parse().unwrap_or(0);
        ctx.log(format!("sleeping {secs} s"));
        tokio::time::sleep(Duration::from_secs(secs)).await;
        ctx.log("awake");
        Ok(())
    })?
    .register_fn("noopJobHandler", |_ctx| async { Ok(()) })?
    .register_fn("shardingJobHandler", |ctx| async move {
        ctx.log(format!(
            "sharding param: index = {}, total = {}",
            ctx.shard_index, ctx.shard_total
        ));
        Ok(())
    })?;
    Ok(r)
}
