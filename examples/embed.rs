//! An actix-web application that embeds the xjob scheduling center: it binds its listener
//! first (so the address it registers is the one it serves), starts the engine, mounts xjob's
//! routes (admin API, executor protocol, `/v1` console API and the web console) next to its own
//! `/hello`, registers a Rust handler, schedules it every second, prints the runs through the
//! public API and stops gracefully.
//!
//! Run: `cargo run --example embed` (a temporary SQLite file; `-- 10` runs 10 seconds and
//! leaves time to open the console at the printed address).

use std::time::Duration;

use actix_web::{App, HttpResponse, HttpServer, web};
use xjob::console::{Console, Paging};
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
        .unwrap_or(3);
    let dir = tempfile::tempdir()?;

    // the listener first: the engine registers its in-process executor at this address
    let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
    let addr = listener.local_addr()?;
    let mut config = Config::default();
    config.database.url = format!(
        "sqlite://{}?mode=rwc",
        dir.path().join("embed.db").display()
    );
    config.http.bind = addr.to_string();
    config.executor.app_name = "embed-app".into();
    config.executor.address = format!("http://{addr}/");

    let mut handlers = HandlerRegistry::new();
    handlers.register_fn("greet", |ctx: JobContext| async move {
        ctx.log(format!(
            "hello from job {} (log {})",
            ctx.job_id, ctx.log_id
        ));
        Ok(())
    })?;
    let engine = Engine::builder(config)
        .handlers(handlers)
        .log_dir(dir.path().join("joblogs"))
        .start()
        .await?;

    // the console needs a user: `admin` with a generated password, shown once
    let console = Console::new(engine.clone());
    if let Some(password) = console.bootstrap_admin().await? {
        println!("console: http://{addr}/ (user admin, password {password})");
    }
    // executors (and this node's own) must send this token
    let token = xjob::config::random_token();
    let routes = xjob::routes::center(console, Some(token));
    let server = HttpServer::new(move || {
        App::new()
            .route("/hello", web::get().to(hello))
            .configure(routes.clone())
    })
    .workers(1)
    .listen(listener)?
    .run();
    let handle = server.handle();
    let app = actix_web::rt::spawn(server);

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
    tokio::time::sleep(Duration::from_secs(seconds)).await;

    let runs = engine.runs(job, Paging::first(100)).await?;
    println!("{} runs of job {job}, newest first:", runs.total);
    for run in &runs.items {
        println!(
            "  run {:>3}  fired {}  {}  {}",
            run.id,
            run.trigger_time.as_deref().unwrap_or("-"),
            run.status,
            run.handle_msg.as_deref().unwrap_or("")
        );
    }
    let pending = engine.stop(Duration::from_secs(5)).await?;
    println!("stopped; {pending} future fires stay pending in the database");
    handle.stop(true).await;
    let _ = app.await;
    Ok(())
}
