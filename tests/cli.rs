//! The `xjob` binary: usage, configuration from `XJOB_*` variables and a TOML file, `migrate`,
//! and `serve` answering `/health` with the demo group seeded.
#![allow(clippy::unwrap_used)]

mod common;

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

use common::http_get as get;

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

/// `--version`, `-V` and `version` print the version; each command has its own `--help`.
#[test]
fn version_and_each_commands_help() {
    for args in [&["--version"][..], &["-V"], &["version"]] {
        let out = xjob().args(args).output().unwrap();
        assert!(out.status.success(), "{args:?}");
        assert_eq!(
            String::from_utf8_lossy(&out.stdout).trim(),
            format!("xjob {}", env!("CARGO_PKG_VERSION"))
        );
    }
    for (cmd, says) in [
        ("serve", "xjob serve"),
        ("check", "Exit code 0"),
        ("config", "masked"),
        ("admin", "reset-password"),
    ] {
        let out = xjob().args([cmd, "--help"]).output().unwrap();
        assert!(out.status.success(), "{cmd}");
        assert!(String::from_utf8_lossy(&out.stdout).contains(says), "{cmd}");
    }
}

/// `xjob check`: 4 while migrations are pending, 0 once applied, 3 when the database cannot be
/// reached, 2 for an invalid configuration; what it found is printed.
#[test]
fn check_tells_deploy_scripts_what_is_ready() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}?mode=rwc", dir.path().join("c.db").display());
    let run = |env: &[(&str, &str)]| {
        let mut c = xjob();
        c.arg("check").env("XJOB_DATABASE__URL", &url);
        for (k, v) in env {
            c.env(k, v);
        }
        let out = c.output().unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).to_string(),
        )
    };
    let (code, said) = run(&[]);
    assert_eq!(code, Some(4), "{said}");
    assert!(said.contains("pending"), "{said}");
    let out = xjob()
        .arg("migrate")
        .env("XJOB_DATABASE__URL", &url)
        .output()
        .unwrap();
    assert!(out.status.success());
    let (code, said) = run(&[]);
    assert_eq!(code, Some(0), "{said}");
    assert!(said.contains("0 pending"), "{said}");
    let (code, said) = run(&[("XJOB_DATABASE__URL", "postgres://x:y@127.0.0.1:1/none")]);
    assert_eq!(code, Some(3), "{said}");
    let (code, _) = run(&[("XJOB_SCHEDULER__TIME_ZONE", "Mars/Olympus")]);
    assert_eq!(code, Some(2));
    // a variable that names no setting would be ignored: check refuses it, naming the key
    let (code, said) = run(&[("XJOB_SECURITY__ADMIN_PASSWD", "typo")]);
    assert_eq!(code, Some(2), "{said}");
    assert!(
        said.contains("XJOB_SECURITY__ADMIN_PASSWD (no setting `security.admin_passwd`)"),
        "{said}"
    );
}

/// `xjob config` prints the effective configuration with every secret masked.
#[test]
fn config_prints_the_settings_with_secrets_masked() {
    let out = xjob()
        .arg("config")
        .env("XJOB_SECURITY__ACCESS_TOKEN", "a-very-secret-token")
        .env(
            "XJOB_DATABASE__URL",
            "postgres://xjob:db-secret@db.example/xjob",
        )
        .env("XJOB_HTTP__BIND", "0.0.0.0:9090")
        .output()
        .unwrap();
    assert!(out.status.success());
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(said.contains("bind = \"0.0.0.0:9090\""), "{said}");
    assert!(
        !said.contains("a-very-secret-token") && !said.contains("db-secret"),
        "{said}"
    );
    assert!(said.contains("********"), "{said}");
}

/// `xjob admin reset-password` sets a user's password from `XJOB_NEW_PASSWORD` or standard input
/// (never an argument), ends the user's sessions and API keys, and audits it as `cli`.
#[test]
fn an_administrator_locked_out_resets_a_password_from_the_shell() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("r.db");
    let url = format!("sqlite://{}?mode=rwc", path.display());
    let out = xjob()
        .arg("migrate")
        .env("XJOB_DATABASE__URL", &url)
        .output()
        .unwrap();
    assert!(out.status.success());
    let sql = |q: &str| {
        actix_rt::System::new().block_on(async {
            let db = sea_orm::Database::connect(url.as_str()).await.unwrap();
            db.execute_unprepared(q).await.unwrap();
            db.close().await.unwrap();
        })
    };
    let scalar = |q: &str| -> String {
        actix_rt::System::new().block_on(async {
            let db = sea_orm::Database::connect(url.as_str()).await.unwrap();
            let r = db
                .query_one_raw(Statement::from_string(db.get_database_backend(), q))
                .await
                .unwrap()
                .unwrap();
            let v: String = r
                .try_get_by_index::<String>(0)
                .or_else(|_| r.try_get_by_index::<i64>(0).map(|n| n.to_string()))
                .unwrap();
            db.close().await.unwrap();
            v
        })
    };
    // a user with a session and an API key (XXL-JOB 2.4's MD5 of "123456")
    sql("INSERT INTO xxl_job_user (id, username, password, role) \
         VALUES (7, 'boss', 'e10adc3949ba59abbe56e057f20f883e', 1)");
    sql(
        "INSERT INTO xjob_session (token_hash, user_id, expires_at) VALUES ('h', 7, 9999999999999)",
    );
    sql(
        "INSERT INTO xjob_api_key (name, key_hash, prefix, user_id, role, created_at, expires_at) \
         VALUES ('ci', 'k', 'xjk_1234', 7, 1, 0, 9999999999999)",
    );

    // a password on the command line is refused
    let out = xjob()
        .args(["admin", "reset-password", "boss", "hunter2hunter2"])
        .env("XJOB_DATABASE__URL", &url)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    // too short: refused, nothing changed
    let out = xjob()
        .args(["admin", "reset-password", "boss"])
        .env("XJOB_DATABASE__URL", &url)
        .env("XJOB_NEW_PASSWORD", "short")
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert_eq!(
        scalar("SELECT password FROM xxl_job_user WHERE id = 7"),
        "e10adc3949ba59abbe56e057f20f883e"
    );
    // from standard input
    let mut child = xjob()
        .args(["admin", "reset-password", "boss"])
        .env("XJOB_DATABASE__URL", &url)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(b"a-new-long-password\n")
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success());
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(
        said.contains("1 session(s) and 1 API key(s) ended"),
        "{said}"
    );
    assert!(scalar("SELECT password FROM xxl_job_user WHERE id = 7").starts_with("$argon2id$"));
    assert_eq!(
        scalar("SELECT COUNT(*) FROM xjob_session WHERE user_id = 7"),
        "0"
    );
    assert_eq!(
        scalar("SELECT COUNT(*) FROM xjob_api_key WHERE user_id = 7"),
        "0"
    );
    assert_eq!(
        scalar("SELECT username FROM xjob_audit WHERE action = 'user.update'"),
        "cli"
    );
    // an unknown user
    let out = xjob()
        .args(["admin", "reset-password", "nobody"])
        .env("XJOB_DATABASE__URL", &url)
        .env("XJOB_NEW_PASSWORD", "a-new-long-password")
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("nobody"));
}
