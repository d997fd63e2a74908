//! The `xjob` binary: usage, configuration from `XJOB_*` variables and a TOML file, `migrate`,
//! and `serve` answering `/health` with the demo group seeded.
#![allow(clippy::unwrap_used)]

use std::io::{Read, Write};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use sea_orm::{ConnectionTrait, Statement};

fn xjob() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_xjob"));
    c.env_remove("RUST_LOG").stdin(Stdio::null());
    c
}

/// `xjob --help` lists the commands; an unknown command exits 2.
#[test]
fn help_and_unknown_command() {
    let out = xjob().arg("--help").output().unwrap();
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stdout).contains("serve"));
    let out = xjob().arg("frobnicate").output().unwrap();
    assert_eq!(out.status.code(), Some(2));
}

/// A bad `XJOB_*` value makes the binary exit with one line naming the key.
#[test]
fn a_bad_setting_in_the_environment_is_named() {
    let out = xjob()
        .arg("migrate")
        .env("XJOB_SCHEDULER__TIME_ZONE", "Mars/Olympus")
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("scheduler.time_zone"), "{err}");
}

/// `xjob migrate` creates the schema in WAL mode with the schedule lock row.
#[test]
fn migrate_creates_a_wal_database_with_the_lock_row() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}?mode=rwc", dir.path().join("m.db").display());
    let out = xjob()
        .arg("migrate")
        .env("XJOB_DATABASE__URL", &url)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    actix_rt::System::new().block_on(async {
        let db = sea_orm::Database::connect(url.as_str()).await.unwrap();
        xjob::testing::store::verify_lock_row(&db).await.unwrap();
        let row = db
            .query_one_raw(Statement::from_string(
                db.get_database_backend(),
                "PRAGMA journal_mode",
            ))
            .await
            .unwrap()
            .unwrap();
        let mode: String = row.try_get_by_index(0).unwrap();
        assert_eq!(mode, "wal");
        db.close().await.unwrap();
    });
}

fn get(addr: &str, path: &str) -> Option<String> {
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

fn post(addr: &str, path: &str, json: &str) -> Option<String> {
    let mut s = std::net::TcpStream::connect(addr).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(10))).ok()?;
    write!(
        s,
        "POST {path} HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{json}",
        json.len()
    )
    .ok()?;
    let mut body = String::new();
    s.read_to_string(&mut body).ok()?;
    Some(body)
}

/// `xjob serve` answers /health, seeds the demo group and prints its first-start secrets once.
#[test]
fn serve_answers_health_seeds_the_demo_group_and_prints_first_start_secrets_once() {
    let dir = tempfile::tempdir().unwrap();
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let addr = format!("127.0.0.1:{port}");
    let db = dir.path().join("serve.db");
    let cfg = dir.path().join("xjob.toml");
    std::fs::write(
        &cfg,
        format!(
            "[http]\nbind = \"{addr}\"\n\n[database]\nurl = \"sqlite://{}?mode=rwc\"\n",
            db.display()
        ),
    )
    .unwrap();
    let out = std::fs::File::create(dir.path().join("serve.log")).unwrap();
    let mut child = xjob()
        .current_dir(dir.path())
        .env("NO_COLOR", "1")
        .env_remove("XJOB_SECURITY__ADMIN_PASSWORD")
        .env_remove("XJOB_SECURITY__ACCESS_TOKEN")
        .args(["serve", "--config"])
        .arg(&cfg)
        .stdout(out)
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // wait for readiness (bounded), then check what it serves
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut health = None;
    while Instant::now() < deadline {
        if let Some(r) = get(&addr, "/health").filter(|r| r.starts_with("HTTP/1.1 200")) {
            health = Some(r);
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    // first start: the generated admin password and access token are printed once
    let log = std::fs::read_to_string(dir.path().join("serve.log")).unwrap();
    let shown = |what: &str| -> Vec<String> {
        log.lines()
            .filter(|l| l.contains(what))
            .map(|l| l.rsplit(' ').next().unwrap().to_string())
            .collect()
    };
    let passwords = shown("generated password");
    assert_eq!(passwords.len(), 1, "{log}");
    assert_eq!(shown("generated executor access token").len(), 1, "{log}");
    let token = std::fs::read_to_string(dir.path().join("data/access_token")).unwrap();
    assert_eq!(shown("generated executor access token")[0], token);
    let body = format!(r#"{{"username":"admin","password":"{}"}}"#, passwords[0]);
    let login = post(&addr, "/v1/auth/login", &body).unwrap();
    assert!(login.starts_with("HTTP/1.1 200"), "{login}");
    assert!(login.contains(r#""token":""#), "{login}");
    let wrong = post(
        &addr,
        "/v1/auth/login",
        r#"{"username":"admin","password":"123456"}"#,
    )
    .unwrap();
    assert!(wrong.starts_with("HTTP/1.1 401"), "{wrong}");
    let _ = child.kill();
    let _ = child.wait();
    let health = health.expect("serve answered /health within 60 s");
    assert!(health.contains(r#""status":"ok""#), "{health}");
    actix_rt::System::new().block_on(async {
        let url = format!("sqlite://{}?mode=rwc", db.display());
        let db = sea_orm::Database::connect(url.as_str()).await.unwrap();
        let g = xjob::testing::store::groups::by_app_name(&db, "xjob-demo")
            .await
            .unwrap()
            .expect("seeded");
        assert_eq!(g.address_type, 0);
        assert_eq!(
            g.address_list.as_deref(),
            Some(format!("http://{addr}/").as_str())
        );
        db.close().await.unwrap();
    });
}

/// `xjob executor` without its access token or admin address exits naming the missing key.
#[test]
fn executor_refuses_an_incomplete_configuration() {
    let out = xjob()
        .arg("executor")
        .env("XJOB_EXECUTOR__APP_NAME", "app")
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("executor.access_token"), "{err}");
    let out = xjob()
        .arg("executor")
        .env("XJOB_EXECUTOR__APP_NAME", "app")
        .env("XJOB_EXECUTOR__ACCESS_TOKEN", "t")
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&out.stderr).contains("executor.admin_addresses"));
}
