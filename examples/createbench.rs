//! Job-creation bench: how many jobs per second a user can create and start through the console
//! API of a real `xjob serve` (SQLite file in a temporary directory): each of C concurrent
//! clients repeats `POST /v1/jobs` then `POST /v1/jobs/{id}/start` for S seconds, ending with
//! one JSON summary line `{"bench":"create","clients":C,"seconds":S,"jobs":N,"jobs_per_sec":..,
//! "errors":E}`.
//!
//! Run: `cargo build --release && cargo run --release --example createbench -- --clients 4
//! --seconds 10` (`--xjob PATH` picks the binary; default `target/release/xjob`). The created
//! jobs fire once a day (`0 0 0 * * ?`), so the scheduler stays idle and only creation is
//! measured.

use std::time::{Duration, Instant};

#[path = "bench_args/mod.rs"]
mod bench_args;
use bench_args::{arg, xjob_binary};

/// Kills the server when the bench ends, however it ends.
struct Server(std::process::Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let clients: usize = arg(&args, "--clients").map_or(Ok(4), |v| v.parse())?;
    let seconds: u64 = arg(&args, "--seconds").map_or(Ok(10), |v| v.parse())?;
    let xjob = xjob_binary(&args)?;
    let dir = tempfile::tempdir()?;
    let port = std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port();
    let base = format!("http://127.0.0.1:{port}");
    const PASSWORD: &str = "createbench-password";
    let _server = Server(
        std::process::Command::new(&xjob)
            .arg("serve")
            .current_dir(dir.path())
            .env("XJOB_HTTP__BIND", format!("127.0.0.1:{port}"))
            .env("XJOB_SECURITY__ADMIN_PASSWORD", PASSWORD)
            .env("XJOB_SECURITY__ACCESS_TOKEN", "createbench-token")
            .env("RUST_LOG", "warn")
            .stdout(std::process::Stdio::null())
            .spawn()?,
    );
    actix_rt::System::new().block_on(async move {
        let client = awc::Client::default();
        let deadline = Instant::now() + Duration::from_secs(30);
        while client.get(format!("{base}/health")).send().await.is_err() {
            anyhow::ensure!(Instant::now() < deadline, "xjob serve did not start");
            actix_rt::time::sleep(Duration::from_millis(100)).await;
        }
        let mut login = client
            .post(format!("{base}/v1/auth/login"))
            .send_json(&serde_json::json!({"username": "admin", "password": PASSWORD}))
            .await
            .map_err(|e| anyhow::anyhow!("login: {e}"))?;
        let body: serde_json::Value = login.json().await?;
        let token = body["token"]
            .as_str()
            .ok_or_else(|| anyhow::anyhow!("login answered {body}"))?
            .to_string();
        let started = Instant::now();
        let until = started + Duration::from_secs(seconds);
        let tasks: Vec<_> = (0..clients)
            .map(|c| {
                let (base, token) = (base.clone(), token.clone());
                actix_rt::spawn(async move {
                    let client = awc::Client::builder()
                        .timeout(Duration::from_secs(30))
                        .finish();
                    let auth = ("authorization", format!("Bearer {token}"));
                    let (mut ok, mut errors, mut i) = (0u64, 0u64, 0u64);
                    while Instant::now() < until {
                        i += 1;
                        let job = serde_json::json!({
                            "jobGroup": 1, "jobDesc": format!("bench {c}-{i}"), "author": "bench",
                            "scheduleType": "CRON", "scheduleConf": "0 0 0 * * ?",
                            "executorHandler": "demoJobHandler"
                        });
                        let created = client
                            .post(format!("{base}/v1/jobs"))
                            .insert_header(auth.clone())
                            .send_json(&job)
                            .await;
                        let id = match created {
                            Ok(mut r) if r.status().is_success() => r
                                .json::<serde_json::Value>()
                                .await
                                .ok()
                                .and_then(|v| v["id"].as_i64()),
                            _ => None,
                        };
                        let Some(id) = id else {
                            errors += 1;
                            continue;
                        };
                        match client
                            .post(format!("{base}/v1/jobs/{id}/start"))
                            .insert_header(auth.clone())
                            .send()
                            .await
                        {
                            // read to the end, so the connection is kept for the next job
                            Ok(mut r) => match (r.status().is_success(), r.body().await) {
                                (true, Ok(_)) => ok += 1,
                                _ => errors += 1,
                            },
                            Err(_) => errors += 1,
                        }
                    }
                    (ok, errors)
                })
            })
            .collect();
        let (mut jobs, mut errors) = (0, 0);
        for t in tasks {
            let (o, e) = t.await?;
            jobs += o;
            errors += e;
        }
        let secs = started.elapsed().as_secs_f64();
        println!(
            "{{\"bench\":\"create\",\"clients\":{clients},\"seconds\":{seconds},\"jobs\":{jobs},\"jobs_per_sec\":{:.1},\"errors\":{errors}}}",
            jobs as f64 / secs
        );
        Ok(())
    })
}
