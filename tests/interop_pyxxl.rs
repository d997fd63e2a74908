//! Interoperability with a real third-party XXL-JOB executor: pyxxl (Python, from PyPI) registers
//! with our admin, is routed to, runs, and reports success and failure over the 2.4 protocol.
//! `.ci/run` installs pyxxl; without it the test fails in CI and is skipped elsewhere.
#![allow(clippy::unwrap_used)]

mod common;

use std::net::TcpListener;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::*;
use xjob::prelude::*;

const TOKEN: &str = "interop-token";

fn pyxxl_available() -> bool {
    Command::new("python3")
        .args(["-c", "import pyxxl"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

struct Kill(std::process::Child);
impl Drop for Kill {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A real pyxxl executor registers with our admin, runs a trigger and reports its result.
#[test]
fn a_pyxxl_executor_registers_runs_and_reports_against_our_admin() {
    if !pyxxl_available() {
        assert!(
            std::env::var_os("CI").is_none(),
            "CI must install pyxxl (see .ci/run)"
        );
        eprintln!("skipped: pyxxl is not installed (pip install pyxxl==0.4.8)");
        return;
    }
    init_tracing();
    let dir = tempfile::tempdir().unwrap();
    actix_rt::System::new().block_on(async {
        let node = http_node(dir.path(), TOKEN, false, |_| {}).await;
        let admin = format!("{}xxl-job-admin/api/", node.address);
        let engine = node.engine.clone();
        let group = engine.ensure_group("pyxxl-app", "pyxxl").await.unwrap();

        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let logs = dir.path().join("pylogs");
        std::fs::create_dir_all(&logs).unwrap();
        let _py = Kill(
            Command::new("python3")
                .arg(concat!(
                    env!("CARGO_MANIFEST_DIR"),
                    "/tests/interop/pyxxl_executor.py"
                ))
                .env("ADMIN", &admin)
                .env("TOKEN", TOKEN)
                .env("PORT", port.to_string())
                .env("LOGDIR", &logs)
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .unwrap(),
        );
        let expected = format!("http://127.0.0.1:{port}");
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let g = xjob::testing::store::groups::get(engine.db(), group)
                .await
                .unwrap();
            // the list dispatch routes by follows the stored one a moment later
            if g.address_list.as_deref() == Some(expected.as_str())
                && xjob::testing::routed_addresses(&engine, group) == vec![expected.clone()]
            {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "pyxxl did not register: {:?}",
                g.address_list
            );
            actix_rt::time::sleep(Duration::from_millis(50)).await;
        }
        for (handler, param, code, needle) in [
            ("pyHello", "x1", 200, "hello from pyxxl: x1"),
            ("pyFail", "", 500, "pyxxl says no"),
        ] {
            let job = engine
                .add_job(JobSpec::cron(group, handler, "0 0 0 * * ?", handler))
                .await
                .unwrap();
            engine
                .trigger_job(job, Some(param.into()), None)
                .await
                .unwrap();
            let deadline = Instant::now() + Duration::from_secs(30);
            let row = loop {
                let rows = xjob::testing::store::logs::for_job(engine.db(), job)
                    .await
                    .unwrap();
                if let Some(r) = rows.into_iter().find(|r| r.handle_code != 0) {
                    break r;
                }
                assert!(
                    Instant::now() < deadline,
                    "{handler}: no callback from pyxxl"
                );
                actix_rt::time::sleep(Duration::from_millis(50)).await;
            };
            assert_eq!(row.trigger_code, 200, "{handler}: {:?}", row.trigger_msg);
            assert_eq!(row.executor_address.as_deref(), Some(expected.as_str()));
            assert_eq!(row.handle_code, code, "{handler}: {:?}", row.handle_msg);
            assert!(
                row.handle_msg.as_deref().unwrap_or("").contains(needle),
                "{handler}: {:?}",
                row.handle_msg
            );
        }
        node.shutdown().await;
    });
}
