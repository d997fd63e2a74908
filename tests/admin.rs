//! Admin-side behaviour on paused time: registry eviction and lost runs, child-job chains
//! (with a loop), fail retries with an interval, e-mail and webhook alarms delivered to local
//! servers, daily reports and retention.
#![allow(clippy::unwrap_used)]

mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::sync::Arc;

use common::*;
use parking_lot::Mutex;
use xjob::model::TriggerType;
use xjob::prelude::*;
use xjob::testing::actors::Heartbeat;
use xjob::testing::store::logs::{self, TriggerRecord};

/// A log row dispatched to `address` at the engine's now, still running.
async fn running_on(app: &TestApp, address: &str) -> i64 {
    let now = app.engine.clock().now_ms();
    let id = logs::insert_run(app.engine.db(), app.group, 1, now, TriggerType::Manual, 0)
        .await
        .unwrap();
    logs::record_trigger(
        app.engine.db(),
        TriggerRecord {
            log_id: id,
            trigger_ms: now,
            executor_address: Some(address.into()),
            trigger_code: 200,
            trigger_msg: "t".into(),
            ..Default::default()
        },
    )
    .await
    .unwrap();
    id
}

/// An executor that stops beating is evicted and its open runs marked lost within three beats.
#[test]
fn a_dead_executor_is_evicted_and_its_runs_marked_lost_within_three_beats() {
    let dir = tempfile::tempdir().unwrap();
    run_paused(|| async {
        let app = TestApp::start_in(dir.path(), T0, |_| {}).await;
        let remote = app
            .engine
            .ensure_group("remote-app", "remote")
            .await
            .unwrap();
        let addr = "http://10.0.0.7:9999/";
        app.engine
            .registry()
            .send(Heartbeat {
                app_name: "remote-app".into(),
                address: addr.into(),
            })
            .await
            .unwrap()
            .unwrap();
        let list = || async {
            xjob::testing::store::groups::get(app.engine.db(), remote)
                .await
                .unwrap()
                .address_list
        };
        let manual = xjob::testing::store::groups::insert(
            app.engine.db(),
            "manual-app",
            "manual",
            1,
            Some("http://10.5.5.5:1/".into()),
            app.engine.clock().now_naive(),
        )
        .await
        .unwrap();
        assert_eq!(list().await.as_deref(), Some(addr));
        let run = running_on(&app, addr).await;
        // a run this node's executor really has (an hour's sleep), and one it never had (as
        // after a crash of the node, or a result lost on the way)
        let sleeper = app
            .engine
            .add_job(JobSpec::cron(
                app.group,
                "sleeper",
                "0 0 0 * * ?",
                "sleepJobHandler",
            ))
            .await
            .unwrap();
        app.engine
            .trigger_job(sleeper, Some("3600".into()), None)
            .await
            .unwrap();
        app.advance(100).await;
        let local = app.engine.local_address().unwrap().to_string();
        let local_run = logs::for_job(app.engine.db(), sleeper)
            .await
            .unwrap()
            .into_iter()
            .find(|r| r.executor_address.as_deref() == Some(local.as_str()))
            .unwrap()
            .id;
        let ghost = running_on(&app, &local).await;
        let manual_run = running_on(&app, "http://10.9.9.9:9999/").await;
        // 80 s of silence: not yet dead (90 s)
        app.advance(80_000).await;
        assert_eq!(
            logs::get(app.engine.db(), run).await.unwrap().handle_code,
            0
        );
        assert_eq!(list().await.as_deref(), Some(addr));
        // past the dead timeout: evicted, and its run lost within one check (10 s)
        app.advance(20_000).await;
        assert_eq!(list().await, None);
        let kept = xjob::testing::store::groups::get(app.engine.db(), manual)
            .await
            .unwrap()
            .address_list;
        assert_eq!(
            kept.as_deref(),
            Some("http://10.5.5.5:1/"),
            "a manual group keeps its list"
        );
        let r = logs::get(app.engine.db(), run).await.unwrap();
        assert_eq!(
            (r.handle_code, r.handle_msg.as_deref()),
            (500, Some("Job result lost, marked as failure"))
        );
        // this node keeps its own executor registered: the run it has is not lost, the one it
        // never had is (it would otherwise stay open forever)
        assert_eq!(
            logs::get(app.engine.db(), local_run)
                .await
                .unwrap()
                .handle_code,
            0
        );
        let g = logs::get(app.engine.db(), ghost).await.unwrap();
        assert_eq!(
            (g.handle_code, g.handle_msg.as_deref()),
            (500, Some("Job result lost, marked as failure"))
        );
        // a never-registered (manual) address keeps XXL-JOB's ten minutes
        assert_eq!(
            logs::get(app.engine.db(), manual_run)
                .await
                .unwrap()
                .handle_code,
            0
        );
        app.advance(10 * 60_000).await;
        assert_eq!(
            logs::get(app.engine.db(), manual_run)
                .await
                .unwrap()
                .handle_code,
            500
        );
        // a live executor's run is never "lost", however long it runs
        assert_eq!(
            logs::get(app.engine.db(), local_run)
                .await
                .unwrap()
                .handle_code,
            0
        );
        app.close().await;
    });
}

/// A successful run triggers its child jobs; a loop (A → B → A) stops at the depth limit.
#[test]
fn child_jobs_chain_and_a_loop_stops_at_the_depth_limit() {
    let dir = tempfile::tempdir().unwrap();
    run_paused(|| async {
        let app = TestApp::start_in(dir.path(), T0, |c| c.scheduler.max_chain_depth = 4).await;
        let add = |desc: &'static str| {
            let e = app.engine.clone();
            let g = app.group;
            async move {
                e.add_job(JobSpec::cron(g, desc, "0 0 0 * * ?", "demoJobHandler"))
                    .await
                    .unwrap()
            }
        };
        let (a, b, c) = (add("a").await, add("b").await, add("c").await);
        let (x, y, z) = (add("x").await, add("y").await, add("z").await);
        let set_children = |id: i32, children: String| {
            let db = app.engine.db().clone();
            async move {
                use sea_orm::{ActiveModelTrait, Set};
                entity::xxl_job_info::ActiveModel {
                    id: Set(id),
                    child_jobid: Set(Some(children)),
                    ..Default::default()
                }
                .update(&db)
                .await
                .unwrap();
            }
        };
        set_children(a, format!("{b}")).await;
        set_children(b, format!("{c}, 0, abc")).await;
        set_children(x, format!("{y}")).await;
        set_children(y, format!("{x}")).await;
        set_children(z, format!("{z}")).await;
        for j in [a, x, z] {
            app.engine.trigger_job(j, None, None).await.unwrap();
        }
        app.advance(1_000).await;
        let runs = |j: i32| {
            let db = app.engine.db().clone();
            async move { logs::for_job(&db, j).await.unwrap() }
        };
        let rb = runs(b).await;
        assert_eq!(rb.len(), 1);
        assert_eq!(rb[0].trigger_type.as_deref(), Some("PARENT"));
        assert_eq!(rb[0].chain_depth, 1);
        assert_eq!(runs(c).await.len(), 1);
        let ra = runs(a).await.remove(0);
        let msg = ra.handle_msg.unwrap_or_default();
        assert!(
            msg.contains("Trigger child job")
                && msg.contains(&format!("1/1 [Job ID={b}], Trigger success")),
            "{msg}"
        );
        let msg_b = runs(b).await.remove(0).handle_msg.unwrap_or_default();
        assert!(
            msg_b.contains("2/3 [Job ID=0], Trigger Fail, Trigger msg: Job ID is illegal"),
            "{msg_b}"
        );
        assert!(msg_b.contains("3/3 [Job ID=abc], Trigger Fail"), "{msg_b}");
        // the loop x → y → x … stops when the chain passes 4 parents
        assert_eq!(runs(x).await.len(), 3, "x at depth 0, 2, 4");
        assert_eq!(runs(y).await.len(), 2, "y at depth 1, 3");
        let last_x = runs(x).await.pop().unwrap();
        assert_eq!(last_x.chain_depth, 4);
        assert!(
            last_x
                .handle_msg
                .unwrap_or_default()
                .contains("reached the limit of 4")
        );
        // a job listing itself is skipped
        assert_eq!(runs(z).await.len(), 1);
        assert!(
            runs(z).await[0]
                .handle_msg
                .clone()
                .unwrap_or_default()
                .contains("cannot be its own child")
        );
        app.close().await;
    });
}

/// A failed run is retried after its interval until its retry count runs out.
#[test]
fn failed_runs_retry_after_the_interval_until_retries_run_out() {
    let dir = tempfile::tempdir().unwrap();
    run_paused(|| async {
        let app = TestApp::start_in(dir.path(), T0, |_| {}).await;
        let mut spec = JobSpec::cron(app.group, "flaky", "0 0 0 * * ?", "failJobHandler");
        spec.executor_fail_retry_count = 2;
        spec.retry_interval = 25;
        let job = app.engine.add_job(spec).await.unwrap();
        app.engine
            .trigger_job(job, Some("p".into()), None)
            .await
            .unwrap();
        app.advance(120_000).await;
        let rows = logs::for_job(app.engine.db(), job).await.unwrap();
        assert_eq!(rows.len(), 3, "the run and two retries");
        let types: Vec<_> = rows
            .iter()
            .map(|r| r.trigger_type.clone().unwrap_or_default())
            .collect();
        assert_eq!(types, vec!["MANUAL", "RETRY", "RETRY"]);
        let left: Vec<i32> = rows.iter().map(|r| r.executor_fail_retry_count).collect();
        assert_eq!(left, vec![2, 1, 0]);
        assert!(
            rows.iter()
                .all(|r| r.executor_param.as_deref() == Some("p")),
            "the param is kept"
        );
        let at =
            |r: &entity::xxl_job_log::Model| r.trigger_time.unwrap().and_utc().timestamp_millis();
        for w in rows.windows(2) {
            let gap = at(&w[1]) - w[0].handle_time.unwrap().and_utc().timestamp_millis();
            assert!(
                (25_000..=35_000).contains(&gap),
                "retry {gap} ms after the failure"
            );
        }
        assert!(
            rows[0]
                .trigger_msg
                .clone()
                .unwrap_or_default()
                .contains("Fail retry trigger")
        );
        assert!(
            rows.iter().all(|r| r.alarm_status == 2),
            "every failed attempt alarms (none configured = delivered)"
        );
        app.close().await;
    });
}

/// A one-connection SMTP sink on a thread: records RCPT and DATA.
fn smtp_sink() -> (u16, Arc<Mutex<String>>) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    let got = Arc::new(Mutex::new(String::new()));
    let g = got.clone();
    std::thread::spawn(move || {
        let (s, _) = l.accept().unwrap();
        let mut w = s.try_clone().unwrap();
        let mut r = BufReader::new(s);
        w.write_all(b"220 sink ESMTP\r\n").unwrap();
        let mut in_data = false;
        loop {
            let mut line = String::new();
            if r.read_line(&mut line).unwrap_or(0) == 0 {
                return;
            }
            if in_data {
                if line == ".\r\n" {
                    in_data = false;
                    w.write_all(b"250 queued\r\n").unwrap();
                } else {
                    g.lock().push_str(&line);
                }
                continue;
            }
            let up = line.to_ascii_uppercase();
            if up.starts_with("EHLO") {
                w.write_all(b"250-sink\r\n250 8BITMIME\r\n").unwrap();
            } else if up.starts_with("DATA") {
                in_data = true;
                w.write_all(b"354 go\r\n").unwrap();
            } else if up.starts_with("QUIT") {
                w.write_all(b"221 bye\r\n").unwrap();
                return;
            } else {
                g.lock().push_str(&line);
                w.write_all(b"250 ok\r\n").unwrap();
            }
        }
    });
    (port, got)
}

/// An HTTP server on a thread answering `status` to each request and recording the bodies.
fn webhook_sink(status: u16) -> (String, Arc<Mutex<Vec<String>>>) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/hook", l.local_addr().unwrap());
    let got = Arc::new(Mutex::new(Vec::new()));
    let g = got.clone();
    std::thread::spawn(move || {
        for s in l.incoming() {
            let Ok(s) = s else { return };
            let mut w = s.try_clone().unwrap();
            let mut r = BufReader::new(s);
            let mut len = 0;
            loop {
                let mut h = String::new();
                if r.read_line(&mut h).unwrap_or(0) == 0 {
                    break;
                }
                if let Some(v) = h.to_ascii_lowercase().strip_prefix("content-length:") {
                    len = v.trim().parse().unwrap_or(0);
                }
                if h == "\r\n" {
                    break;
                }
            }
            let mut body = vec![0; len];
            r.read_exact(&mut body).unwrap();
            g.lock().push(String::from_utf8_lossy(&body).into_owned());
            write!(
                w,
                "HTTP/1.1 {status} X\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
            )
            .unwrap();
        }
    });
    (url, got)
}

/// A failure alarm reaches a real SMTP server and a webhook with the run's details.
#[test]
fn alarms_reach_an_smtp_server_and_a_webhook() {
    let dir = tempfile::tempdir().unwrap();
    let (smtp_port, mail) = smtp_sink();
    let (hook, hooks) = webhook_sink(200);
    let (bad_hook, _) = webhook_sink(500);
    run_paused(|| async {
        let app = TestApp::start_in(dir.path(), T0, |c| {
            c.alarm.smtp.host = "127.0.0.1".into();
            c.alarm.smtp.port = smtp_port;
            c.alarm.smtp.tls = "none".into();
            c.alarm.smtp.from = "xjob <xjob@example.com>".into();
            c.alarm.webhook_allowlist = vec![hook.clone(), bad_hook.clone()];
        })
        .await;
        // a job's webhook must be under alarm.webhook_allowlist: any other URL is refused
        let mut spec = JobSpec::cron(app.group, "probe", "0 0 0 * * ?", "failJobHandler");
        spec.alarm_webhook = Some("http://169.254.169.254/latest/meta-data".into());
        let e = app.engine.add_job(spec).await.unwrap_err();
        assert!(
            matches!(&e, Error::Invalid { field: "alarmWebhook", reason } if reason.contains("webhook_allowlist")),
            "{e}"
        );
        let mut spec = JobSpec::cron(app.group, "nightly export", "0 0 0 * * ?", "failJobHandler");
        spec.alarm_email = Some("ops@example.com".into());
        spec.alarm_webhook = Some(hook.clone());
        let job = app.engine.add_job(spec).await.unwrap();
        let mut spec = JobSpec::cron(app.group, "bad hook", "0 0 0 * * ?", "failJobHandler");
        spec.alarm_webhook = Some(bad_hook.clone());
        let job2 = app.engine.add_job(spec).await.unwrap();
        app.engine
            .trigger_job(job, Some("p-7".into()), None)
            .await
            .unwrap();
        app.engine.trigger_job(job2, None, None).await.unwrap();
        app.advance(11_000).await;
        let row = logs::for_job(app.engine.db(), job).await.unwrap().remove(0);
        assert_eq!(row.alarm_status, 2, "delivered");
        // the HTML body is quoted-printable: undo the soft line breaks before reading it
        let mail = mail.lock().replace("=\r\n", "").replace("=3D", "=");
        assert!(mail.contains("RCPT TO:<ops@example.com>"), "{mail}");
        assert!(mail.contains("Subject: xjob alarm: job"), "{mail}");
        assert!(
            mail.contains("nightly export")
                && mail.contains("failJobHandler failed on purpose (param: p-7)"),
            "{mail}"
        );
        let hooks = hooks.lock().clone();
        assert_eq!(hooks.len(), 1);
        let v: serde_json::Value = serde_json::from_str(&hooks[0]).unwrap();
        assert_eq!(v["event"], "job_failed");
        assert_eq!(v["jobId"], job);
        assert_eq!(v["logId"], row.id);
        assert_eq!(v["handleCode"], 500);
        assert!(v["handleMsg"].as_str().unwrap().contains("p-7"));
        let row2 = logs::for_job(app.engine.db(), job2)
            .await
            .unwrap()
            .remove(0);
        assert_eq!(
            row2.alarm_status, 3,
            "a webhook answering 500 is a failed alarm"
        );
        app.close().await;
    });
}

/// Daily reports count three days of runs; retention deletes runs older than the limit.
#[test]
fn reports_count_three_days_and_retention_deletes_old_runs() {
    let dir = tempfile::tempdir().unwrap();
    run_paused(|| async {
        let app = TestApp::start_in(dir.path(), T0, |c| c.log_retention_days = 7).await;
        let db = app.engine.db().clone();
        let day = 86_400_000;
        // today: one success, one failure, one running; yesterday: one success; 10 days ago: one
        for (age, trig, handle) in [
            (0, 200, 200),
            (0, 200, 500),
            (0, 200, 0),
            (day, 200, 200),
            (10 * day, 200, 200),
        ] {
            let id = logs::insert_run(&db, app.group, 1, T0 - age, TriggerType::Manual, 0)
                .await
                .unwrap();
            logs::record_trigger(
                &db,
                TriggerRecord {
                    log_id: id,
                    trigger_ms: T0 - age,
                    trigger_code: trig,
                    trigger_msg: String::new(),
                    ..Default::default()
                },
            )
            .await
            .unwrap();
            if handle != 0 {
                logs::record_handle(&db, id, handle, None, T0 - age)
                    .await
                    .unwrap();
            }
        }
        app.engine
            .log_report()
            .send(xjob::testing::actors::RefreshReport)
            .await
            .unwrap()
            .unwrap();
        let from = xjob::testing::clock::ms_to_naive(T0 - 3 * day);
        let rows = xjob::testing::store::reports::between(
            &db,
            from,
            xjob::testing::clock::ms_to_naive(T0),
        )
        .await
        .unwrap();
        let counts: Vec<(i32, i32, i32)> = rows
            .iter()
            .map(|r| (r.running_count, r.suc_count, r.fail_count))
            .collect();
        assert_eq!(counts, vec![(0, 0, 0), (0, 1, 0), (1, 1, 1)], "{rows:#?}");
        let deleted = app
            .engine
            .log_report()
            .send(xjob::testing::actors::CleanLogs)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(deleted, 1, "only the run older than 7 days");
        assert_eq!(logs::all(&db).await.unwrap().len(), 4);
        app.close().await;
    });
}

/// A new executor's `/api/registry` joins it to its own group at once but does not wait for a
/// whole refresh: another group's list (stale here) is left to the periodic tick.
#[test]
fn a_new_executor_joins_its_group_without_a_full_refresh() {
    let dir = tempfile::tempdir().unwrap();
    run_paused(|| async {
        let app = TestApp::start_in(dir.path(), T0, |_| {}).await;
        let (db, now) = (app.engine.db(), xjob::testing::clock::ms_to_naive(T0));
        let mine = xjob::testing::store::groups::insert(db, "joining-app", "Joining", 0, None, now)
            .await
            .unwrap();
        let stale = Some("http://10.9.9.9:9999/".to_string());
        let other =
            xjob::testing::store::groups::insert(db, "other-app", "Other", 0, stale.clone(), now)
                .await
                .unwrap();
        app.engine
            .registry()
            .send(Heartbeat {
                app_name: "joining-app".into(),
                address: "http://10.0.0.9:9999/".into(),
            })
            .await
            .unwrap()
            .unwrap();
        let db = app.engine.db().clone();
        let list = |id| {
            let db = db.clone();
            async move {
                xjob::testing::store::groups::get(&db, id)
                    .await
                    .unwrap()
                    .address_list
            }
        };
        assert_eq!(list(mine).await.as_deref(), Some("http://10.0.0.9:9999/"));
        assert_eq!(list(other).await, stale, "no full refresh on the request");
        // the periodic refresh (every beat) rewrites the other group
        app.advance(31_000).await;
        assert_eq!(list(other).await, None);
        app.close().await;
    });
}

/// A result of this node's own executor is kept until it is written: while the database
/// refuses every result of its run (here a trigger refuses any result, even the reduced form a
/// refused row falls back to), it is written again and again (after 0.5, 1, 2, … 30 s), the
/// lost-run sweep (every 10 s) leaves its run alone, and once the database takes it the run
/// has its real result.
#[test]
fn an_in_process_result_is_kept_until_written() {
    use sea_orm::ConnectionTrait;
    let dir = tempfile::tempdir().unwrap();
    run_paused(|| async {
        // the pooled writer (in-memory SQLite), which splits a refused batch down to the row
        let app = TestApp::start_in(dir.path(), T0, |c| {
            c.database.url = "sqlite::memory:".into();
            c.database.max_connections = 1;
        })
        .await;
        let db = app.engine.db().clone();
        db.execute_unprepared(
            "CREATE TRIGGER refuse_result BEFORE UPDATE ON xxl_job_log FOR EACH ROW \
             WHEN NEW.handle_code <> 0 AND NEW.executor_param = 'keep-me' \
             BEGIN SELECT RAISE(ABORT, 'refused by the test'); END",
        )
        .await
        .unwrap();
        let job = app
            .engine
            .add_job(JobSpec::cron(
                app.group,
                "fails",
                "0 0 0 * * ?",
                "failJobHandler",
            ))
            .await
            .unwrap();
        app.engine
            .trigger_job(job, Some("keep-me".into()), None)
            .await
            .unwrap();
        let row = || async {
            logs::for_job(&db, job)
                .await
                .unwrap()
                .into_iter()
                .next()
                .unwrap()
        };
        // two minutes of refusals; then the database takes results again, just after a try
        // (the next comes 30 s later): in between, the sweeps must not mark the run lost
        app.advance(125_000).await;
        let r = row().await;
        assert_eq!((r.trigger_code, r.handle_code), (200, 0), "{r:?}");
        db.execute_unprepared("DROP TRIGGER refuse_result")
            .await
            .unwrap();
        app.advance(20_000).await;
        assert_eq!(
            row().await.handle_code,
            0,
            "not marked lost while it is being written"
        );
        app.advance(20_000).await;
        let r = row().await;
        assert_eq!(r.handle_code, 500);
        assert!(
            r.handle_msg
                .as_deref()
                .unwrap()
                .contains("failJobHandler failed on purpose (param: keep-me)"),
            "{:?}",
            r.handle_msg
        );
        app.close().await;
    });
}
