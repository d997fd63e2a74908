//! The `xjob` binary: `xjob <command> [--config FILE]` (see [`USAGE`] and each command's
//! `--help`).
//!
//! - `serve`: the scheduling center with its HTTP routes and the in-process demo executor
//!   `xjob-demo` (SQLite under `./data/` by default).
//! - `executor`: a standalone executor with the demo handlers.
//! - `migrate`: applies the schema migrations and exits.
//! - `check`: configuration, database and migrations, for deploy scripts (exit codes below).
//! - `config`: the effective configuration, secrets masked.
//! - `admin reset-password <user>`: a new console password (from standard input or
//!   `XJOB_NEW_PASSWORD`), ending the user's sessions and API keys.
//! - `version` (`--version`, `-V`).
//!
//! Configuration: defaults, then the TOML file, then `XJOB_*` environment variables with `__`
//! between levels (`XJOB_HTTP__BIND=0.0.0.0:8080`, `XJOB_DATABASE__URL=postgres://…`).
//!
//! Exit codes: 0 done; 1 failed; 2 bad usage or an invalid configuration; 3 (`check`) the
//! database cannot be reached; 4 (`check`) migrations are pending.

use std::time::Duration;

use actix_web::{App, HttpServer};
use anyhow::Context as _;
use figment::Figment;
use figment::providers::{Env, Format, Serialized, Toml};
use xjob::console::Paging;
use xjob::{Config, Engine};

/// On a graceful stop of `xjob serve`, fires due within this long are still dispatched.
const STOP_DISPATCH_WINDOW: Duration = Duration::from_secs(5);

/// Exit code of bad usage or an invalid configuration.
const EXIT_USAGE: i32 = 2;
/// Exit code of `check` when the database cannot be reached.
const EXIT_NO_DATABASE: i32 = 3;
/// Exit code of `check` when migrations are pending.
const EXIT_PENDING: i32 = 4;

const USAGE: &str = "usage: xjob <command> [--config FILE]

commands:
  serve                        run the scheduling center with the demo executor `xjob-demo`
  executor                     run a standalone executor with the demo handlers
  migrate                      apply database migrations and exit
  check                        check the configuration, the database and its migrations
  config                       print the effective configuration (secrets masked)
  admin reset-password <user>  set a console user's password (read from standard input, or
                               XJOB_NEW_PASSWORD); ends the user's sessions and API keys
  version                      print the version (also --version, -V)

`xjob <command> --help` tells more. Configuration: --config FILE (TOML), then XJOB_*
environment variables, `__` between levels, e.g. XJOB_HTTP__BIND=127.0.0.1:8080
XJOB_DATABASE__URL=sqlite://data/xjob.db?mode=rwc

exit codes: 0 done, 1 failed, 2 bad usage or invalid configuration,
            3 (check) database unreachable, 4 (check) migrations pending";

/// Each command's `--help`.
fn help(cmd: &str) -> Option<&'static str> {
    Some(match cmd {
        "serve" => {
            "usage: xjob serve [--config FILE]

Runs the scheduling center: the console (web pages and /v1), XXL-JOB's admin API for executors,
its console endpoints and job API, /metrics and /health, on http.bind; an in-process executor
`xjob-demo` with the demo handlers; SQLite under ./data/ unless database.url says otherwise.
On first start it creates the console user `admin` (password: security.admin_password, or
generated and printed once) and, unless security.access_token is set, an executor access token
kept in data/access_token. SIGTERM or Ctrl-C stops it gracefully."
        }
        "executor" => {
            "usage: xjob executor [--config FILE]

Runs a standalone executor with the demo handlers on executor.ip:executor.port, registering
with executor.admin_addresses as executor.app_name. Needs executor.access_token (or
security.access_token)."
        }
        "migrate" => {
            "usage: xjob migrate [--config FILE]

Applies the schema migrations to database.url and exits."
        }
        "check" => {
            "usage: xjob check [--config FILE]

Checks that the configuration is valid (every XJOB_* variable and config-file key names a
setting), that the database answers, and which migrations are applied or pending; prints what it
found. Exit code 0 when all is well, 2 for an invalid configuration, 3 when the database cannot
be reached, 4 when migrations are pending (run `xjob migrate`)."
        }
        "config" => {
            "usage: xjob config [--config FILE]

Prints the effective configuration (defaults, the file, then XJOB_* variables) as TOML, with
every token, password and database password masked."
        }
        "admin" => {
            "usage: xjob admin reset-password <user> [--config FILE]

Sets console user <user>'s password, for an administrator locked out of the console. The new
password (8 to 128 characters) is read from XJOB_NEW_PASSWORD, or else from the first line of
standard input — never from the command line. Every session and API key of the user ends; the
change is audited as done by `cli`."
        }
        "version" => "usage: xjob version (also xjob --version, xjob -V)",
        _ => return None,
    })
}

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
    let mut words: Vec<String> = Vec::new();
    let mut config_path = None;
    let mut wants_help = false;
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--config" | "-c" => match it.next() {
                Some(p) => config_path = Some(p.clone()),
                None => usage_error("--config needs a file"),
            },
            "-h" | "--help" => wants_help = true,
            "-V" | "--version" => words.insert(0, "version".into()),
            other if !other.starts_with('-') => words.push(other.to_string()),
            other => usage_error(&format!("unexpected argument `{other}`")),
        }
    }
    let cmd = words.first().cloned();
    if wants_help {
        println!("{}", cmd.as_deref().and_then(help).unwrap_or(USAGE));
        return Ok(());
    }
    match cmd.as_deref() {
        Some("version") => {
            println!("xjob {}", env!("CARGO_PKG_VERSION"));
            return Ok(());
        }
        None => {
            eprintln!("{USAGE}");
            std::process::exit(EXIT_USAGE);
        }
        Some("serve" | "executor" | "migrate" | "check" | "config" | "admin") => {}
        Some(other) => usage_error(&format!("unknown command `{other}`")),
    }
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| "info,sqlx=warn,sea_orm=warn".into()),
        )
        .init();
    let cfg = match load_config(config_path.as_deref()) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("xjob: {e:#}");
            std::process::exit(EXIT_USAGE);
        }
    };
    // settings that would be ignored: a typo in a variable or a key goes unnoticed otherwise
    let mut unknown = xjob::ops::unknown_env_settings(std::env::vars());
    if let Some(text) = config_path
        .as_deref()
        .and_then(|p| std::fs::read_to_string(p).ok())
    {
        unknown.extend(
            xjob::ops::unknown_file_settings(&text)
                .into_iter()
                .map(|k| format!("`{k}` in the config file (no such setting)")),
        );
    }
    if !unknown.is_empty() {
        if cmd.as_deref() == Some("check") {
            println!("configuration: invalid");
            for u in &unknown {
                println!("  unknown: {u}");
            }
            std::process::exit(EXIT_USAGE);
        }
        for u in &unknown {
            tracing::warn!("ignored, not a setting: {u}");
        }
    }
    match cmd.as_deref() {
        Some("serve") => actix_web::rt::System::new().block_on(serve(cfg)),
        Some("executor") => actix_web::rt::System::new().block_on(executor(cfg)),
        Some("migrate") => actix_web::rt::System::new().block_on(async {
            xjob::migrate(&cfg.database).await?;
            tracing::info!(url = %cfg.database.url, "migrations applied");
            Ok(())
        }),
        Some("check") => actix_web::rt::System::new().block_on(check(cfg)),
        Some("config") => {
            print!("{}", xjob::ops::masked_config(&cfg)?);
            Ok(())
        }
        Some("admin") => match (words.get(1).map(String::as_str), words.get(2)) {
            (Some("reset-password"), Some(user)) if words.len() == 3 => {
                actix_web::rt::System::new().block_on(reset_password(cfg, user))
            }
            _ => usage_error("usage: xjob admin reset-password <user>"),
        },
        _ => unreachable_usage(),
    }
}

/// Prints `what` and the usage to standard error, and exits with [`EXIT_USAGE`].
fn usage_error(what: &str) -> ! {
    eprintln!("xjob: {what}\n\n{USAGE}");
    std::process::exit(EXIT_USAGE);
}

fn unreachable_usage() -> anyhow::Result<()> {
    usage_error("unknown command")
}

/// `xjob check`: prints what it found; exits 3 or 4 when the database or its schema is not
/// ready.
async fn check(cfg: Config) -> anyhow::Result<()> {
    println!("configuration: valid");
    match xjob::ops::check(&cfg.database).await {
        Err(e) => {
            println!("database: cannot be reached ({e})");
            std::process::exit(EXIT_NO_DATABASE);
        }
        Ok(r) => {
            println!("database: reachable");
            println!(
                "migrations: {} applied, {} pending",
                r.applied,
                r.pending.len()
            );
            if !r.pending.is_empty() {
                for m in &r.pending {
                    println!("  pending: {m}");
                }
                println!("run `xjob migrate` to apply them");
                std::process::exit(EXIT_PENDING);
            }
            Ok(())
        }
    }
}

/// `xjob admin reset-password <user>`: the password from `XJOB_NEW_PASSWORD` or the first line
/// of standard input.
async fn reset_password(cfg: Config, user: &str) -> anyhow::Result<()> {
    let password = match std::env::var("XJOB_NEW_PASSWORD") {
        Ok(p) if !p.is_empty() => p,
        _ => {
            eprintln!("new password for `{user}` (one line on standard input):");
            let mut line = String::new();
            std::io::stdin()
                .read_line(&mut line)
                .context("cannot read the new password from standard input")?;
            line.trim_end_matches(['\n', '\r']).to_string()
        }
    };
    anyhow::ensure!(
        !password.is_empty(),
        "no password given (set XJOB_NEW_PASSWORD or write it on standard input)"
    );
    let r = xjob::ops::reset_password(&cfg.database, user, &password).await?;
    println!(
        "password of `{user}` reset; {} session(s) and {} API key(s) ended",
        r.sessions_ended, r.api_keys_ended
    );
    Ok(())
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
