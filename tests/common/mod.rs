//! Shared test harness: an engine on a temporary SQLite file, driven on paused tokio time.
//!
//! SQLite answers from its own worker thread, and an idle paused runtime would auto-advance the
//! clock while waiting for it. [`run_paused`] keeps the runtime busy with a yielding task so
//! virtual time moves only when a test calls [`TestApp::advance`], which steps the clock and
//! waits for the engine's in-flight work to settle after each step.
#![allow(dead_code)]

use std::future::Future;
use std::path::{Path, PathBuf};
use std::time::Duration;

use xjob::prelude::*;
use xjob::testing::activity::Activity;

/// 2026-11-21 14:00:00 UTC, a Saturday.
pub const T0: i64 = 1_795_269_600_000;

/// Installs a test subscriber once (quiet unless `RUST_LOG` is set).
pub fn init_tracing() {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| "warn,sqlx=error".into()),
        )
        .with_test_writer()
        .try_init();
}

/// Runs `f` in a fresh actix system on a paused current-thread runtime.
pub fn run_paused<F, Fut>(f: F) -> Fut::Output
where
    F: FnOnce() -> Fut,
    Fut: Future,
{
    init_tracing();
    let sys = actix::System::with_tokio_rt(|| {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .start_paused(true)
            .build()
            .expect("runtime")
    });
    sys.block_on(async move {
        let spinner = tokio::spawn(async {
            loop {
                tokio::task::yield_now().await;
            }
        });
        let out = f().await;
        spinner.abort();
        out
    })
}

/// Waits (in real time, bounded) until `activity` has been idle for a while.
pub async fn settle(activity: &Activity) {
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    let mut quiet = 0;
    while quiet < 64 {
        tokio::task::yield_now().await;
        if activity.is_idle() {
            quiet += 1;
        } else {
            quiet = 0;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "engine did not settle within 20 s of real time"
        );
    }
}

/// Drives paused time in 20 ms steps, each once the engine is idle (its writes take real
/// time), for a call that waits on the clock itself, such as a stop's grace; abort the handle
/// when the call returned.
pub fn drive_clock(activity: Activity) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        loop {
            settle(&activity).await;
            tokio::time::advance(Duration::from_millis(20)).await;
        }
    })
}

/// Steps paused time by `ms` in `step`-ms increments, settling after each.
pub async fn advance(activity: &Activity, ms: i64, step: i64) {
    let mut left = ms;
    while left > 0 {
        let d = left.min(step);
        tokio::time::advance(Duration::from_millis(d as u64)).await;
        settle(activity).await;
        left -= d;
    }
}

/// The SQLite URL of a database file in `dir`.
pub fn sqlite_url(dir: &Path) -> String {
    format!("sqlite://{}?mode=rwc", dir.join("xjob.db").display())
}

/// A config for tests: SQLite in `dir`, in-process executor `xjob-demo`.
pub fn test_config(dir: &Path) -> Config {
    let mut cfg = Config::default();
    cfg.database.url = sqlite_url(dir);
    cfg.database.max_connections = 4;
    // test threads run many engines: leave their CPU affinity alone
    cfg.database.separate_writer_cpu = false;
    cfg.executor.app_name = xjob::demo::DEMO_APP.into();
    cfg
}

/// A running engine with its database directory.
pub struct TestApp {
    /// The engine.
    pub engine: Engine,
    /// The demo group's id.
    pub group: i32,
    /// Where the database lives.
    pub dir: PathBuf,
}

impl TestApp {
    /// Starts an engine at `now_ms` on the database in `dir`, with the demo handlers.
    pub async fn start_in(dir: &Path, now_ms: i64, tweak: impl FnOnce(&mut Config)) -> TestApp {
        let mut cfg = test_config(dir);
        tweak(&mut cfg);
        let engine = Engine::builder(cfg)
            .clock(Clock::tokio_at(now_ms))
            .handlers(xjob::demo::handlers().expect("handlers"))
            .log_dir(dir.join("joblogs"))
            .start()
            .await
            .expect("engine starts");
        let group = engine
            .ensure_group(xjob::demo::DEMO_APP, "demo")
            .await
            .expect("group");
        settle(engine.activity()).await;
        TestApp {
            engine,
            group,
            dir: dir.to_path_buf(),
        }
    }

    /// Closes the pool (call last: sqlx must not drop connections after the runtime is gone).
    pub async fn close(&self) {
        settle(self.engine.activity()).await;
        self.engine.db().clone().close().await.expect("close pool");
    }

    /// Stops the engine with a 5 s grace, driving paused time while it waits (only when the
    /// engine is idle, so the grace never runs out while a write is still on its way).
    pub async fn stop(&self) {
        let ticker = drive_clock(self.engine.activity().clone());
        self.engine
            .stop(Duration::from_secs(5))
            .await
            .expect("stop");
        ticker.abort();
    }

    /// Advances paused time by `ms` in 100 ms steps.
    pub async fn advance(&self, ms: i64) {
        advance(self.engine.activity(), ms, 100).await;
    }

    /// Adds and starts a job; returns its id.
    pub async fn job(&self, spec: JobSpec) -> i32 {
        let id = self.engine.add_job(spec).await.expect("add job");
        self.engine.start_job(id).await.expect("start job");
        id
    }

    /// Every log row of `job_id` that was dispatched (not pending), by nominal time.
    pub async fn dispatched(&self, job_id: i32) -> Vec<entity::xxl_job_log::Model> {
        xjob::testing::store::logs::for_job(self.engine.db(), job_id)
            .await
            .expect("logs")
            .into_iter()
            .filter(|l| l.fire_state == 0)
            .collect()
    }
}

/// A node serving its routes on 127.0.0.1 in real time: the admin API, and with `executor` the
/// demo executor at the node's own address. Executors must send `token`.
pub struct HttpNode {
    /// The engine.
    pub engine: Engine,
    /// `http://127.0.0.1:<port>/`.
    pub address: String,
    /// Stops the HTTP server.
    pub server: actix_web::dev::ServerHandle,
}

/// Starts an [`HttpNode`] on the database in `dir`; `tweak` adjusts its config.
pub async fn http_node(
    dir: &Path,
    token: &str,
    executor: bool,
    tweak: impl FnOnce(&mut Config),
) -> HttpNode {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let address = format!("http://{}/", listener.local_addr().expect("addr"));
    let mut cfg = test_config(dir);
    if executor {
        cfg.executor.address = address.clone();
    } else {
        cfg.executor.app_name = String::new();
    }
    tweak(&mut cfg);
    let engine = Engine::builder(cfg)
        .handlers(xjob::demo::handlers().expect("handlers"))
        .remote_client(std::sync::Arc::new(
            xjob::executor::HttpExecutorClient::new(Some(token.into()), Duration::from_secs(3)),
        ))
        .log_dir(dir.join("joblogs"))
        .start()
        .await
        .expect("engine starts");
    let routes = xjob::routes::node(engine.clone(), Some(token.into()));
    let server =
        actix_web::HttpServer::new(move || actix_web::App::new().configure(routes.clone()))
            .workers(1)
            .listen(listener)
            .expect("listen")
            .run();
    let handle = server.handle();
    actix_rt::spawn(server);
    HttpNode {
        engine,
        address,
        server: handle,
    }
}

impl HttpNode {
    /// Stops the server and closes the pool.
    pub async fn shutdown(self) {
        self.server.stop(false).await;
        self.engine.db().clone().close().await.expect("close pool");
    }
}

/// Polls `f` (real time, every 20 ms) until it holds; fails after `secs` seconds naming `what`.
pub async fn eventually<F, Fut>(what: &str, secs: u64, f: F)
where
    F: Fn() -> Fut,
    Fut: Future<Output = bool>,
{
    let deadline = std::time::Instant::now() + Duration::from_secs(secs);
    while !f().await {
        assert!(std::time::Instant::now() < deadline, "timed out: {what}");
        actix_rt::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The database server URL in `var` (`XJOB_TEST_PG_URL`, `XJOB_TEST_MYSQL_URL`): in CI a
/// missing one fails the test, elsewhere the test is skipped.
pub fn database_url(var: &str) -> Option<String> {
    match std::env::var(var) {
        Ok(u) if !u.is_empty() => Some(u),
        _ => {
            assert!(
                std::env::var_os("CI").is_none(),
                "{var} is not set: .ci/run must start the database"
            );
            eprintln!("skipped: {var} is not set (source .ci/databases.sh)");
            None
        }
    }
}

/// A fresh database on the server behind `base_url`; returns its URL.
pub fn fresh_database(base_url: &str) -> String {
    use sea_orm::ConnectionTrait;
    let name = format!("xjob_c{}", rand::random::<u32>());
    actix_rt::System::new().block_on(async {
        let db = sea_orm::Database::connect(base_url).await.unwrap();
        db.execute_unprepared(&format!("CREATE DATABASE {name}"))
            .await
            .unwrap();
        db.close().await.unwrap();
    });
    let (head, _) = base_url.rsplit_once('/').unwrap();
    format!("{head}/{name}")
}

/// Sends one request to an in-memory app (from 127.0.0.1), with a bearer token unless `token`
/// is empty and a JSON body when given; answers the status and the JSON answer (`null` when it
/// is not JSON).
pub async fn call<S>(
    svc: &S,
    method: actix_web::http::Method,
    path: &str,
    token: &str,
    body: Option<serde_json::Value>,
) -> (actix_web::http::StatusCode, serde_json::Value)
where
    S: actix_web::dev::Service<
            actix_http::Request,
            Response = actix_web::dev::ServiceResponse,
            Error = actix_web::Error,
        >,
{
    use actix_web::test::{TestRequest, call_service, read_body};
    let mut req = TestRequest::default()
        .method(method)
        .uri(path)
        .peer_addr("127.0.0.1:40000".parse().expect("address"));
    if !token.is_empty() {
        req = req.insert_header(("Authorization", format!("Bearer {token}")));
    }
    if let Some(b) = body {
        req = req.set_json(b);
    }
    let res = call_service(svc, req.to_request()).await;
    let status = res.status();
    let bytes = read_body(res).await;
    (
        status,
        serde_json::from_slice(&bytes).unwrap_or(serde_json::Value::Null),
    )
}

/// `GET path` from a server at `addr` over plain HTTP/1.1; the whole response (status line,
/// headers and body), or `None` when it cannot connect or read. For tests that drive a real
/// `xjob` process.
pub fn http_get(addr: &str, path: &str) -> Option<String> {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(addr).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )
    .ok()?;
    let mut body = String::new();
    s.read_to_string(&mut body).ok()?;
    Some(body)
}
