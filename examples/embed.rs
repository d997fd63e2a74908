//! An existing actix-web application that embeds the xjob scheduling center: it starts the
//! engine in its own actix `System`, mounts xjob's routes next to its own, registers a handler,
//! schedules it every second, and after a few seconds prints the runs it recorded.
//!
//! Run: `cargo run --example embed` (uses a temporary SQLite file; `-- 10` runs 10 seconds).

use std::time::Duration;

use actix_web::{App, HttpResponse, HttpServer, web};
use xjob::prelude::*;

async fn hello() -> HttpResponse {
    HttpResponse::Ok().body("my app's own route")
}

#[actix_web::main]
async fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter("info,sqlx=warn")
        .init();
    let seconds: u64 = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(5);
    let dir = tempfile::tempdir()?;

    let mut config = Config::default();
    config.database.url = format!(
        "sqlite://{}?mode=rwc",
        dir.path().join("embed.db").display()
    );
    config.http.bind = "127.0.0.1:0".into();
    config.executor.app_name = "embed-app".into();
    config.executor.address = "http://127.0.0.1:18080/".into();

    let mut handlers = HandlerRegistry::new();
    handlers.register_fn("greet", |ctx: JobContext| async move {
        ctx.log(format!(
            "hello from job {} (log {})",
            ctx.job_id, ctx.log_id
        ));
        Ok(())
    })?;

    let engine = Engine::builder(config).handlers(handlers).start().await?;
    let group = engine.ensure_group("embed-app", "Embedded app").await?;
    let job = engine
        .add_job(JobSpec::cron(
            group,
            "greet every second",
            "* * * * * ?",
            "greet",
        ))
        .await?;
    engine.start_job(job).await?;

    // xjob's routes (health, the executor API, and the executor protocol for "greet") sit next
    // to the app's own; the token is the one executors must send.
    let routes = xjob::routes::node(engine.clone(), Some("embed-example-token".into()));
    let server = HttpServer::new(move || {
        App::new()
            .route("/", web::get().to(hello))
            .configure(routes.clone())
    })
    .bind("127.0.0.1:0")?
    .run();
    let handle = server.handle();
    let app = actix_web::rt::spawn(server);

    tokio::time::sleep(Duration::from_secs(seconds)).await;
    for row in xjob::store::logs::for_job(engine.db(), job).await? {
        if row.fire_state == 0 {
            println!(
                "log {:>3}  nominal {:?}  trigger_code {}  handle_code {}",
                row.id,
                row.fire_time.map(xjob::clock::ms_to_naive),
                row.trigger_code,
                row.handle_code
            );
        }
    }
    let handed_back = engine.stop(Duration::from_secs(5)).await?;
    println!("stopped; {handed_back} future fires stay pending in the database");
    handle.stop(true).await;
    let _ = app.await;
    Ok(())
}
