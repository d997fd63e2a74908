//! The `xjob` binary.
//!
//! - `xjob serve [--config FILE]`: the scheduling center with its HTTP routes and the in-process
//!   demo executor `xjob-demo` (SQLite under `./data/` by default).
//! - `xjob migrate [--config FILE]`: applies the schema migrations and exits.
//!
//! Configuration: defaults, then the TOML file, then `XJOB_*` environment variables with `__`
//! between levels (`XJOB_HTTP__BIND=0.0.0.0:8080`, `XJOB_DATABASE__URL=postgres://…`).

use std::time::Duration;

use actix_web::{App, HttpServer};
use anyhow::Context as _;
use figment::Figment;
use figment::providers::{Env, Format, Serialized, Toml};
use xjob::console::Paging;
use xjob::{Config, Engine};

/// On a graceful stop of `xjob serve`, fires due within this long are still dispatched.
const STOP_DISPATCH_WINDOW: Duration = Duration::from_secs(5);

const USAGE: &str = "usage: xjob <serve|executor|migrate> [--config FILE]

  serve     run the scheduling center with the demo executor `xjob-demo`
  executor  run a standalone executor with the demo handlers (needs executor.app_name,
            executor.admin_addresses and executor.access_token)
  migrate   apply database migrations and exit

Configuration: --config FILE (TOML), then XJOB_* environment variables, `__` between levels,
e.g. XJOB_HTTP__BIND=127.0.0.1:8080 XJOB_DATABASE__URL=sqlite://data/xjob.db?mode=rwc";

fn load_config(path: Option<&str>) -> anyhow::Result<Config> {
    let mut fig = Figment::from(Serialized::defaults(Config::default()));
    if let Some(p) = path {
        anyhow::ensure!(
            std::path::Path::new(p).is_file(),
            "config file {p} not found"
        );
        fig = fig.merge(Toml::file(p));
    }
    // one line naming the key and what it takes (figment's message carries both)
    let cfg: Config = fig
        .merge(Env::prefixed("XJOB_").split("__"))
        .extract()
        .map_err(|e| anyhow::anyhow!("invalid configuration: {e}"))?;
    cfg.validate()?;
    Ok(cfg)
}

#[global_allocator]
static ALLOC: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> anyhow::Result<()> {
    // freed memory back to the system at once, not after mimalloc's 1 s (the once-a-second
    // bursts kept a burst's worth resident), and SQLite's allocations in one glibc arena, not
    // one per thread; `MIMALLOC_PURGE_DELAY` and `MALLOC_ARENA_MAX` override them
    xjob_alloc::tune();
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut cmd = None;
    let mut config_path = None;
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--config" | "-c" => {
                config_path = Some(it.next().context("--config needs a file")?.clone())
            }
            "-h" | "--help" => {
                println!("{USAGE}");
                return Ok(());
            }
            other if cmd.is_none() && !other.starts_with('-') => cmd = Some(other.to_string()),
            other => anyhow::bail!("unexpected argument `{other}`\n{USAGE}"),
        }
    }
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| "info,sqlx=warn,sea_orm=warn".into()),
        )
        .init();
    let cfg = load_config(config_path.as_deref())?;
    match cmd.as_deref() {
        Some("serve") => actix_web::rt::System::new().block_on(serve(cfg)),
        Some("executor") => actix_web::rt::System::new().block_on(executor(cfg)),
        Some("migrate") => actix_web::rt::System::new().block_on(async {
            xjob::migrate(&cfg.database).await?;
            tracing::info!(url = %cfg.database.url, "migrations applied");
            Ok(())
        }),
        _ => {
            eprintln!("{USAGE}");
            std::process::exit(2);
        }
    }
}

/// The configured access token, or the one generated on first start and kept (mode 0600) in
/// `data/access_token`. A generated token is printed once, when it is created.
fn access_token(cfg: &Config) -> anyhow::Result<String> {
    let configured = cfg.security.access_token.trim();
    if !configured.is_empty() {
        return Ok(configured.to_string());
    }
    let path = std::path::Path::new("data/access_token");
    if let Ok(t) = std::fs::read_to_string(path)
        && !t.trim().is_empty()
    {
        return Ok(t.trim().to_string());
    }
    std::fs::create_dir_all("data")?;
    let token = xjob::config::random_token();
    let mut f = std::fs::OpenOptions::new();
    f.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut f, 0o600);
    std::io::Write::write_all(&mut f.open(path)?, token.as_bytes())?;
    tracing::warn!(
        "generated executor access token (kept in data/access_token; set security.access_token to choose one): {token}"
    );
    Ok(token)
}

async fn executor(cfg: Config) -> anyhow::Result<()> {
    let exec =
        xjob::executor::StandaloneExecutor::start(&cfg, xjob::demo::handlers()?, None).await?;
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    tokio::select! {
        r = tokio::signal::ctrl_c() => r?,
        _ = term.recv() => {}
    }
    // graceful: kill running jobs (they report), flush results, leave the registry
    exec.stop().await;
    Ok(())
}

async fn serve(mut cfg: Config) -> anyhow::Result<()> {
    if cfg.executor.app_name.trim().is_empty() {
        cfg.executor.app_name = xjob::demo::DEMO_APP.into();
    }
    let bind = cfg.http.bind.clone();
    let token = access_token(&cfg)?;
    let remote = xjob::executor::HttpExecutorClient::with_ca_file(
        Some(token.clone()),
        Duration::from_secs(cfg.http.client_timeout_secs),
        &cfg.http.client_ca_file,
    )?;
    let engine = Engine::builder(cfg)
        .handlers(xjob::demo::handlers()?)
        .http_client(remote)
        .log_dir("data/joblogs")
        .start()
        .await?;
    if engine.groups(Paging::first(1)).await?.total == 0 {
        let id = engine
            .ensure_group(xjob::demo::DEMO_APP, "xjob demo")
            .await?;
        tracing::info!(group_id = id, "seeded the `xjob-demo` executor group");
    }
    let console = xjob::console::Console::new(engine.clone());
    if let Some(password) = console.bootstrap_admin().await? {
        tracing::warn!(
            "created console user `admin` with generated password (shown once; set security.admin_password to choose one): {password}"
        );
    }
    let routes = xjob::routes::center(console, Some(token));
    let server = HttpServer::new(move || App::new().configure(routes.clone()))
        .bind(&bind)
        .with_context(|| format!("cannot listen on {bind}"))?
        .shutdown_timeout(10)
        .run();
    tracing::info!(%bind, "listening");
    server.await?;
    // fires recorded for the next few seconds still go out on time, then a 10 s grace
    engine
        .stop_dispatching(STOP_DISPATCH_WINDOW, Duration::from_secs(10))
        .await?;
    Ok(())
}
