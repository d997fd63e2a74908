//! The operators' kit under `deploy/` against the real binary: every metric the Grafana
//! dashboard and the Prometheus rules query is one a running node exposes; the rules pass
//! `promtool check rules` and their unit tests; the systemd units pass `systemd-analyze verify`;
//! the compose file's services run `xjob migrate`, `xjob check` and `xjob config` with their own
//! environment (against a test PostgreSQL); the example configuration passes `xjob check`.
//! In CI a missing tool fails its test; elsewhere the test is skipped.
#![allow(clippy::unwrap_used)]

mod common;

use std::collections::{BTreeMap, BTreeSet};

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn repo(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(path)
}

fn xjob() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_xjob"));
    c.env_remove("RUST_LOG").stdin(Stdio::null());
    // only the settings each test gives
    for (k, _) in std::env::vars() {
        if k.starts_with("XJOB_") {
            c.env_remove(k);
        }
    }
    c
}

/// The tool at `name`, or `None` (skipped) outside CI; in CI a missing tool fails the test.
fn tool(name: &str) -> Option<PathBuf> {
    let found = std::env::var_os("PATH")
        .into_iter()
        .flat_map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
        .map(|d| d.join(name))
        .find(|p| p.is_file());
    if found.is_none() {
        assert!(
            std::env::var_os("CI").is_none(),
            "{name} is not installed: .ci/run must install it"
        );
        eprintln!("skipped: {name} is not installed");
    }
    found
}

/// Every `xjob_…` metric name in `text` (recording rules' `xjob:…` names are not metrics).
fn metric_names(text: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let b = text.as_bytes();
    let mut i = 0;
    while let Some(at) = text[i..].find("xjob_") {
        let start = i + at;
        let boundary =
            start == 0 || !(b[start - 1].is_ascii_alphanumeric() || b[start - 1] == b'_');
        let mut end = start;
        while end < b.len()
            && (b[end].is_ascii_lowercase() || b[end].is_ascii_digit() || b[end] == b'_')
        {
            end += 1;
        }
        if boundary {
            out.insert(text[start..end].to_string());
        }
        i = end;
    }
    out
}

/// Every `expr` string of the dashboard's panels.
fn dashboard_exprs(v: &serde_json::Value, out: &mut Vec<String>) {
    match v {
        serde_json::Value::Object(m) => {
            for (k, x) in m {
                match (k.as_str(), x) {
                    ("expr", serde_json::Value::String(s)) => out.push(s.clone()),
                    _ => dashboard_exprs(x, out),
                }
            }
        }
        serde_json::Value::Array(a) => a.iter().for_each(|x| dashboard_exprs(x, out)),
        _ => {}
    }
}

/// The `expr` of every rule in a rules file (one line, or a `|` block).
fn rule_exprs(yaml: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut lines = yaml.lines().peekable();
    while let Some(line) = lines.next() {
        let Some(rest) = line.trim_start().strip_prefix("expr:") else {
            continue;
        };
        if rest.trim() != "|" {
            out.push(rest.trim().to_string());
            continue;
        }
        let indent = line.len() - line.trim_start().len();
        let mut block = String::new();
        while let Some(next) = lines.peek() {
            if next.len() - next.trim_start().len() <= indent && !next.trim().is_empty() {
                break;
            }
            block.push_str(lines.next().unwrap().trim());
            block.push('\n');
        }
        out.push(block);
    }
    out
}

use common::http_get as get;

/// The metrics a freshly started `xjob serve` exposes on `/metrics`, by name (histograms with
/// their `_bucket`, `_sum` and `_count` series).
fn exposed_metrics() -> BTreeSet<String> {
    let dir = tempfile::tempdir().unwrap();
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let addr = format!("127.0.0.1:{port}");
    let mut child = xjob()
        .current_dir(dir.path())
        .env("XJOB_HTTP__BIND", &addr)
        .env(
            "XJOB_DATABASE__URL",
            format!("sqlite://{}?mode=rwc", dir.path().join("m.db").display()),
        )
        .env("XJOB_SECURITY__ADMIN_PASSWORD", "deploy-test-password")
        .arg("serve")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // readiness only (bounded): nothing here orders events by time
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut text = None;
    while Instant::now() < deadline {
        if let Some(r) = get(&addr, "/metrics").filter(|r| r.starts_with("HTTP/1.1 200")) {
            text = Some(r);
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = child.kill();
    let _ = child.wait();
    let text = text.expect("xjob serve answers /metrics");
    let body = text.split_once("\r\n\r\n").unwrap().1;
    body.lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .map(|l| l.split(['{', ' ']).next().unwrap().to_string())
        .collect()
}

/// The dashboard and the alert rules query only metrics a node exposes, and the dashboard
/// covers every area an operator watches.
#[test]
fn the_dashboard_and_the_rules_query_metrics_a_node_exposes() {
    let exposed = exposed_metrics();
    let dashboard: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(repo("deploy/grafana/xjob-dashboard.json")).unwrap(),
    )
    .unwrap();
    let mut exprs = Vec::new();
    dashboard_exprs(&dashboard["panels"], &mut exprs);
    assert!(exprs.len() >= 15, "{} queries", exprs.len());
    let on_dashboard = metric_names(&exprs.join("\n"));
    let rules = std::fs::read_to_string(repo("deploy/prometheus/xjob-alerts.yml")).unwrap();
    let in_rules = metric_names(&rule_exprs(&rules).join("\n"));
    assert!(in_rules.len() >= 10, "{in_rules:?}");
    for (what, names) in [("dashboard", &on_dashboard), ("alert rules", &in_rules)] {
        let missing: Vec<_> = names.difference(&exposed).collect();
        assert!(
            missing.is_empty(),
            "the {what} query {missing:?}, which /metrics does not expose ({exposed:?})"
        );
    }
    // every area: fires and lateness, lanes and back-pressure, the writer, leases, callbacks,
    // executors, workflows, fires in doubt
    for m in [
        "xjob_fires_recorded_total",
        "xjob_triggers_total",
        "xjob_fire_lateness_seconds_bucket",
        "xjob_misfires_total",
        "xjob_lane_in_flight",
        "xjob_lane_waiting",
        "xjob_trigger_backlog",
        "xjob_writer_queued",
        "xjob_buckets_owned",
        "xjob_leases_lost_total",
        "xjob_callback_results_skipped_total",
        "xjob_live_executors",
        "xjob_workflow_runs_total",
        "xjob_fires_in_doubt_total",
    ] {
        assert!(
            on_dashboard.contains(m),
            "the dashboard has no panel on {m}"
        );
    }
    // and a node exposes no metric the dashboard leaves out
    let shown: BTreeSet<String> = on_dashboard
        .iter()
        .map(|m| m.trim_end_matches("_bucket").to_string())
        .collect();
    let unshown: Vec<_> = exposed
        .iter()
        .filter(|m| !m.ends_with("_sum") && !m.ends_with("_count"))
        .map(|m| m.trim_end_matches("_bucket").to_string())
        .filter(|m| !shown.contains(m))
        .collect();
    assert!(unshown.is_empty(), "not on the dashboard: {unshown:?}");
}

/// The alert rules are valid and their unit tests pass (`promtool`, Debian's `prometheus`).
#[test]
fn the_alert_rules_pass_promtool() {
    let Some(promtool) = tool("promtool") else {
        return;
    };
    let dir = repo("deploy/prometheus");
    for args in [
        ["check", "rules", "xjob-alerts.yml"],
        ["test", "rules", "xjob-alerts.test.yml"],
    ] {
        let out = Command::new(&promtool)
            .args(args)
            .current_dir(&dir)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "promtool {args:?}: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

/// The systemd units pass `systemd-analyze verify` without a warning, with their `ExecStart`
/// pointed at the binary under test.
#[test]
fn the_systemd_units_verify() {
    let Some(analyze) = tool("systemd-analyze") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    for unit in ["xjob.service", "xjob-executor.service"] {
        let text = std::fs::read_to_string(repo(&format!("deploy/systemd/{unit}"))).unwrap();
        assert!(text.contains("/usr/local/bin/xjob "), "{unit}");
        let here = dir.path().join(unit);
        std::fs::write(
            &here,
            text.replace(
                "/usr/local/bin/xjob ",
                &format!("{} ", env!("CARGO_BIN_EXE_xjob")),
            ),
        )
        .unwrap();
        let out = Command::new(&analyze)
            .arg("verify")
            .arg(&here)
            .output()
            .unwrap();
        let said = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(
            out.status.success() && said.trim().is_empty(),
            "{unit}: {said}"
        );
    }
}

/// The example configuration's keys are all settings, and `xjob check` passes with it.
#[test]
fn the_example_configuration_passes_check() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}?mode=rwc", dir.path().join("c.db").display());
    let cfg = repo("deploy/xjob.toml");
    for cmd in ["migrate", "check"] {
        let out = xjob()
            .current_dir(dir.path())
            .arg(cmd)
            .arg("--config")
            .arg(&cfg)
            .env("XJOB_DATABASE__URL", &url)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "xjob {cmd}: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

/// One service of the compose file: its command and environment.
#[derive(Debug, Default)]
struct Service {
    image: String,
    command: Vec<String>,
    env: BTreeMap<String, String>,
}

/// The services of `deploy/compose.yaml` (this file's own layout: two-space indents, block
/// environment maps, commands as JSON arrays), with `${VAR…}` taken from `vars`.
fn compose_services(vars: &BTreeMap<&str, &str>) -> BTreeMap<String, Service> {
    let text = std::fs::read_to_string(repo("deploy/compose.yaml")).unwrap();
    let mut out: BTreeMap<String, Service> = BTreeMap::new();
    let (mut in_services, mut current, mut in_env) = (false, None::<String>, false);
    for line in text.lines() {
        if line.trim_start().starts_with('#') || line.trim().is_empty() {
            continue;
        }
        let indent = line.len() - line.trim_start().len();
        let l = line.trim();
        if indent == 0 {
            in_services = l == "services:";
            current = None;
            continue;
        }
        if !in_services {
            continue;
        }
        if indent == 2 {
            let name = l.trim_end_matches(':').to_string();
            out.entry(name.clone()).or_default();
            current = Some(name);
            in_env = false;
            continue;
        }
        let Some(svc) = current.as_ref().and_then(|n| out.get_mut(n)) else {
            continue;
        };
        if indent == 4 {
            in_env = l == "environment:";
            if let Some(v) = l.strip_prefix("image:") {
                svc.image = v.trim().to_string();
            }
            if let Some(v) = l.strip_prefix("command:") {
                svc.command = serde_json::from_str(v.trim()).unwrap();
            }
        } else if indent == 6 && in_env {
            let (k, v) = l.split_once(':').unwrap();
            svc.env.insert(
                k.trim().to_string(),
                interpolate(v.trim().trim_matches('"'), vars),
            );
        }
    }
    out
}

/// Compose's `${NAME}` / `${NAME:?message}` from `vars` (every one the file uses must be given).
fn interpolate(v: &str, vars: &BTreeMap<&str, &str>) -> String {
    let mut out = String::new();
    let mut rest = v;
    while let Some(at) = rest.find("${") {
        out.push_str(&rest[..at]);
        let end = rest[at..].find('}').unwrap() + at;
        let name = rest[at + 2..end].split([':', '-']).next().unwrap();
        out.push_str(
            vars.get(name)
                .unwrap_or_else(|| panic!("${{{name}}} not given")),
        );
        rest = &rest[end + 1..];
    }
    out.push_str(rest);
    out
}

/// The compose file's xjob services run with their own environment: `migrate` applies the
/// schema, each node's `xjob check` passes (every variable a setting, database reachable, no
/// migration pending), the executor's settings are valid.
#[test]
fn the_compose_services_run_with_their_environment() {
    let Some(base) = common::database_url("XJOB_TEST_PG_URL") else {
        return;
    };
    let password = "compose-db-password";
    let vars = BTreeMap::from([
        ("XJOB_DB_PASSWORD", password),
        ("XJOB_ADMIN_PASSWORD", "compose-admin-password"),
        ("XJOB_ACCESS_TOKEN", "compose-access-token-0123456789"),
    ]);
    let services = compose_services(&vars);
    let xjobs: Vec<(&String, &Service)> = services
        .iter()
        .filter(|(_, s)| s.image == "xjob:latest")
        .collect();
    let names: Vec<&str> = xjobs.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, ["executor", "migrate", "node1", "node2", "node3"]);

    // the compose database on the test server: role `xjob` with the compose password, a fresh
    // database it owns; the URL's host and database swapped for the test server's
    let fresh = common::fresh_database(&base);
    let (server, db_name) = fresh.rsplit_once('/').unwrap();
    let host = server.rsplit_once('@').unwrap().1;
    actix_rt::System::new().block_on(async {
        use sea_orm::ConnectionTrait;
        let db = sea_orm::Database::connect(base.as_str()).await.unwrap();
        db.execute_unprepared(&format!(
            "DO $$ BEGIN CREATE ROLE xjob LOGIN PASSWORD '{password}'; \
             EXCEPTION WHEN duplicate_object THEN ALTER ROLE xjob LOGIN PASSWORD '{password}'; END $$"
        ))
        .await
        .unwrap();
        db.execute_unprepared(&format!("ALTER DATABASE {db_name} OWNER TO xjob"))
            .await
            .unwrap();
        db.close().await.unwrap();
    });
    let local = |env: &BTreeMap<String, String>| -> BTreeMap<String, String> {
        env.iter()
            .map(|(k, v)| {
                let v = v.replace("@postgres:5432/xjob", &format!("@{host}/{db_name}"));
                (k.clone(), v)
            })
            .collect()
    };
    let run = |args: &[&str], env: &BTreeMap<String, String>| {
        let dir = tempfile::tempdir().unwrap();
        let out = xjob()
            .current_dir(dir.path())
            .args(args)
            .envs(local(env))
            .output()
            .unwrap();
        (
            out.status.code(),
            format!(
                "{}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            ),
        )
    };

    let migrate = &services["migrate"];
    assert_eq!(migrate.command, ["migrate"]);
    let (code, said) = run(&["check"], &migrate.env);
    assert_eq!(
        code,
        Some(4),
        "before migrate, check says migrations are pending: {said}"
    );
    let (code, said) = run(&["migrate"], &migrate.env);
    assert_eq!(code, Some(0), "{said}");
    for node in ["node1", "node2", "node3"] {
        let s = &services[node];
        assert_eq!(s.command, ["serve"]);
        assert!(s.env["XJOB_DATABASE__URL"].starts_with("postgres://xjob:compose-db-password@"));
        let (code, said) = run(&["check"], &s.env);
        assert_eq!(code, Some(0), "{node}: {said}");
        assert!(said.contains("0 pending"), "{node}: {said}");
    }
    let executor = &services["executor"];
    assert_eq!(executor.command, ["executor"]);
    let (code, said) = run(&["config"], &executor.env);
    assert_eq!(code, Some(0), "{said}");
    assert!(!said.contains("not a setting"), "{said}");
    assert!(
        said.contains("\"http://node3:8080/xxl-job-admin\""),
        "{said}"
    );
    assert!(
        !said.contains("compose-access-token"),
        "the token is masked: {said}"
    );
}
