//! The web console in a real browser: starts `xjob serve` on a free port with a known admin
//! password and runs `tests/browser/console.test.mjs` (node's test runner + playwright-core
//! driving Debian's headless Chromium). Failing tests leave screenshots in
//! `target/tmp/browser-screenshots/`.
//!
//! Needs `/usr/bin/chromium` (or `XJOB_CHROMIUM`), `node`, and `npm ci` in `tests/browser`;
//! `.ci/run` installs all three. Outside CI the test is skipped when one is missing; in CI
//! (`CI` set) a missing piece is a failure.
#![allow(clippy::unwrap_used)]

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const ADMIN_PW: &str = "browser-admin-pw";

fn missing_prerequisite() -> Option<String> {
    let chromium = std::env::var("XJOB_CHROMIUM").unwrap_or_else(|_| "/usr/bin/chromium".into());
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/browser");
    if !Path::new(&chromium).exists() {
        return Some(format!("{chromium} (apt-get install chromium)"));
    }
    if Command::new("node").arg("--version").output().is_err() {
        return Some("node".into());
    }
    if !dir.join("node_modules/playwright-core").exists() {
        return Some(format!("playwright-core (cd {} && npm ci)", dir.display()));
    }
    None
}

struct Server(Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn healthy(addr: &str) -> bool {
    let Ok(mut s) = std::net::TcpStream::connect(addr) else {
        return false;
    };
    let _ = s.set_read_timeout(Some(Duration::from_secs(2)));
    if write!(
        s,
        "GET /health HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )
    .is_err()
    {
        return false;
    }
    let mut r = String::new();
    let _ = s.read_to_string(&mut r);
    r.starts_with("HTTP/1.1 200")
}

/// The web console's pages work in headless Chromium (skipped without Chromium outside CI).
#[test]
fn the_web_console_works_in_headless_chromium() {
    if let Some(what) = missing_prerequisite() {
        assert!(
            std::env::var_os("CI").is_none(),
            "browser tests need {what}; .ci/run installs it"
        );
        eprintln!("skipped: browser tests need {what}");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let addr = format!("127.0.0.1:{port}");
    let log = std::fs::File::create(dir.path().join("serve.log")).unwrap();
    let _server = Server(
        Command::new(env!("CARGO_BIN_EXE_xjob"))
            .arg("serve")
            .current_dir(dir.path())
            .env("XJOB_HTTP__BIND", &addr)
            .env("XJOB_SECURITY__ADMIN_PASSWORD", ADMIN_PW)
            .env("XJOB_SECURITY__ACCESS_TOKEN", "browser-test-token")
            .env("NO_COLOR", "1")
            .stdout(log)
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let deadline = Instant::now() + Duration::from_secs(60);
    while !healthy(&addr) {
        assert!(Instant::now() < deadline, "xjob serve did not start");
        std::thread::sleep(Duration::from_millis(50));
    }
    let shots: PathBuf = Path::new(env!("CARGO_TARGET_TMPDIR")).join("browser-screenshots");
    let out = Command::new("node")
        .args(["--test", "--test-concurrency=1", "console.test.mjs"])
        .current_dir(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/browser"))
        .env("XJOB_BASE_URL", format!("http://{addr}"))
        .env("XJOB_ADMIN_PASSWORD", ADMIN_PW)
        .env("XJOB_SCREENSHOT_DIR", &shots)
        .output()
        .unwrap();
    let report = format!(
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    if !out.status.success() {
        let server_log = std::fs::read_to_string(dir.path().join("serve.log")).unwrap_or_default();
        let tail: Vec<&str> = server_log.lines().rev().take(40).collect();
        panic!(
            "browser tests failed (screenshots in {}):\n{report}\n--- server log (last lines) ---\n{}",
            shots.display(),
            tail.into_iter().rev().collect::<Vec<_>>().join("\n")
        );
    }
    // every scenario ran and passed
    assert!(report.contains("# pass 8"), "{report}");
    assert!(report.contains("# fail 0"), "{report}");
}
