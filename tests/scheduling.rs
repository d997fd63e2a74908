#![allow(clippy::unwrap_used)]
//! End-to-end scheduling on SQLite and paused time: cron and fixed-rate fires, durable pending
//! fires across an abrupt stop, misfire policies after downtime, lane bounds.

mod common;

use std::collections::BTreeMap;

use common::*;
use xjob::prelude::*;

fn nominal_counts(rows: &[entity::xxl_job_log::Model]) -> BTreeMap<i64, usize> {
    let mut m = BTreeMap::new();
    for r in rows {
        if let Some(t) = r.fire_time {
            *m.entry(t).or_insert(0) += 1;
        }
    }
    m
}

/// An every-second cron job fires once per second, each run succeeding.
#[test]
fn every_second_cron_fires_once_per_second_with_200_results() {
    let dir = tempfile::tempdir().expect("tempdir");
    run_paused(|| async {
        let app = TestApp::start_in(dir.path(), T0, |_| {}).await;
        let job = app
            .job(JobSpec::cron(
                app.group,
                "every second",
                "* * * * * ?",
                "demoJobHandler",
            ))
            .await;
        // the last run's result comes once the executor has written its log (50 ms quiet)
        app.advance(10_100).await;
        let rows = app.dispatched(job).await;
        let counts = nominal_counts(&rows);
        let expected: Vec<i64> = (1..=10).map(|s| T0 + s * 1000).collect();
        assert_eq!(counts.keys().copied().collect::<Vec<_>>(), expected);
        assert!(counts.values().all(|&n| n == 1), "duplicates: {counts:?}");
        for r in &rows {
            assert_eq!(r.trigger_code, 200, "trigger_msg: {:?}", r.trigger_msg);
            assert_eq!(r.handle_code, 200, "handle_msg: {:?}", r.handle_msg);
            assert_eq!(
                r.executor_address.as_deref(),
                Some("http://127.0.0.1:8080/")
            );
            // on paused time the ring fires exactly on the nominal second
            let trigger_ms = r.trigger_time.map(|t| t.and_utc().timestamp_millis());
            assert_eq!(trigger_ms, r.fire_time, "lateness");
        }
        app.close().await;
    });
}

/// A FIX_RATE job fires on its period from its start.
#[test]
fn fix_rate_keeps_its_period() {
    let dir = tempfile::tempdir().expect("tempdir");
    run_paused(|| async {
        let app = TestApp::start_in(dir.path(), T0, |_| {}).await;
        let job = app
            .job(JobSpec::fix_rate(
                app.group,
                "every 3 s",
                3,
                "demoJobHandler",
            ))
            .await;
        app.advance(12_050).await;
        let times: Vec<i64> = app
            .dispatched(job)
            .await
            .iter()
            .filter_map(|r| r.fire_time)
            .collect();
        assert_eq!(times, vec![T0 + 3000, T0 + 6000, T0 + 9000, T0 + 12_000]);
        app.close().await;
    });
}

/// Fires recorded before an abrupt stop run exactly once after the restart.
#[test]
fn pending_fires_survive_an_abrupt_stop_and_run_exactly_once() {
    let dir = tempfile::tempdir().expect("tempdir");
    let job = run_paused(|| async {
        let app = TestApp::start_in(dir.path(), T0, |_| {}).await;
        let job = app
            .job(JobSpec::cron(
                app.group,
                "every second",
                "* * * * * ?",
                "demoJobHandler",
            ))
            .await;
        app.advance(2_500).await;
        let pending = xjob::testing::store::logs::all_pending(app.engine.db())
            .await
            .expect("pending");
        // (a job is read again when its next fire is within half the 5 s window, and its
        // fires are recorded through the whole window: at 2.5 s, seconds 3–5 wait)
        assert!(
            pending.len() >= 3,
            "the scan recorded the window ahead: {pending:?}"
        );
        // the process dies: its connections close; nothing is drained or stopped
        app.close().await;
        job
        // the system and its actors are dropped without Engine::stop: an abrupt stop
    });
    run_paused(|| async {
        let app = TestApp::start_in(dir.path(), T0 + 2_500, |_| {}).await;
        app.advance(10_000).await;
        let rows = app.dispatched(job).await;
        let counts = nominal_counts(&rows);
        let expected: Vec<i64> = (1..=12).map(|s| T0 + s * 1000).collect();
        assert_eq!(counts.keys().copied().collect::<Vec<_>>(), expected);
        assert!(counts.values().all(|&n| n == 1), "duplicates: {counts:?}");
        assert!(
            rows.iter()
                .all(|r| r.trigger_code == 200 && r.handle_code == 200)
        );
        app.close().await;
    });
}

/// Downtime beyond the threshold: DO_NOTHING skips the missed fires, FIRE_ONCE_NOW fires one.
#[test]
fn downtime_beyond_the_threshold_applies_each_misfire_policy() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (skip, once) = run_paused(|| async {
        let app = TestApp::start_in(dir.path(), T0, |_| {}).await;
        let skip = app
            .job(JobSpec::cron(
                app.group,
                "skip",
                "* * * * * ?",
                "demoJobHandler",
            ))
            .await;
        let mut spec = JobSpec::cron(app.group, "once", "* * * * * ?", "demoJobHandler");
        spec.misfire_strategy = "FIRE_ONCE_NOW".into();
        let once = app.job(spec).await;
        app.advance(2_500).await;
        app.engine
            .stop(std::time::Duration::from_secs(1))
            .await
            .expect("stop");
        app.close().await;
        (skip, once)
    });
    // back a minute later
    let back = T0 + 62_500;
    run_paused(|| async {
        let app = TestApp::start_in(dir.path(), back, |_| {}).await;
        app.advance(3_000).await;
        let skipped = app.dispatched(skip).await;
        let times: Vec<i64> = skipped.iter().filter_map(|r| r.fire_time).collect();
        assert_eq!(
            times,
            vec![T0 + 1000, T0 + 2000, T0 + 64_000, T0 + 65_000],
            "DO_NOTHING: nothing for the downtime, then on schedule after the first scan"
        );
        let fired = app.dispatched(once).await;
        let misfires: Vec<_> = fired
            .iter()
            .filter(|r| r.trigger_type.as_deref() == Some("MISFIRE"))
            .collect();
        assert_eq!(
            misfires.len(),
            1,
            "FIRE_ONCE_NOW fires exactly once: {fired:#?}"
        );
        let trigger_ms = misfires[0]
            .trigger_time
            .map(|t| t.and_utc().timestamp_millis());
        assert!(
            trigger_ms.is_some_and(|t| t >= back && t <= back + 1000),
            "fired on return"
        );
        let cron: Vec<i64> = fired
            .iter()
            .filter(|r| r.trigger_type.as_deref() == Some("CRON"))
            .filter_map(|r| r.fire_time)
            .collect();
        assert_eq!(cron, vec![T0 + 1000, T0 + 2000, T0 + 64_000, T0 + 65_000]);
        app.close().await;
    });
}

/// A manual trigger sends its own param instead of the job's.
#[test]
fn manual_trigger_uses_the_param_override() {
    let dir = tempfile::tempdir().expect("tempdir");
    run_paused(|| async {
        let app = TestApp::start_in(dir.path(), T0, |_| {}).await;
        let job = app
            .engine
            .add_job(JobSpec::cron(
                app.group,
                "manual",
                "0 0 0 * * ?",
                "failJobHandler",
            ))
            .await
            .expect("add");
        app.engine
            .trigger_job(job, Some("p-42".into()), None)
            .await
            .expect("trigger");
        // the result comes once the executor has written the run's log (50 ms quiet)
        app.advance(200).await;
        let rows = xjob::testing::store::logs::for_job(app.engine.db(), job)
            .await
            .expect("rows");
        assert_eq!(rows.len(), 1);
        let r = &rows[0];
        assert_eq!(r.trigger_type.as_deref(), Some("MANUAL"));
        assert_eq!(r.executor_param.as_deref(), Some("p-42"));
        assert_eq!(r.trigger_code, 200);
        assert_eq!(r.handle_code, 500);
        assert!(
            r.handle_msg.as_deref().is_some_and(|m| m.contains("p-42")),
            "{:?}",
            r.handle_msg
        );
        assert!(
            r.trigger_msg
                .as_deref()
                .is_some_and(|m| m.contains("Manual trigger"))
        );
        app.close().await;
    });
}

/// A fire claimed by a node that died mid-dispatch is in doubt once its claim is older than
/// the claim timeout: its executors are asked (here the node's own, up since well before the
/// fire), none has it, so it is sent once, with its own log id, and runs (its job fires
/// misfires; one that skips them would skip it, as it is later than the misfire threshold).
#[test]
fn a_fire_claimed_by_a_node_that_died_mid_dispatch_is_asked_of_its_executors() {
    let dir = tempfile::tempdir().expect("tempdir");
    run_paused(|| async {
        let app =
            TestApp::start_in(dir.path(), T0, |c| c.scheduler.claim_timeout_ms = 10_000).await;
        // (late by more than the misfire threshold once settled: a job that fires misfires)
        let mut spec = JobSpec::cron(app.group, "orphan", "0 0 0 * * ?", "demoJobHandler");
        spec.misfire_strategy = "FIRE_ONCE_NOW".into();
        let job = app.engine.add_job(spec).await.expect("add");
        // another node recorded a fire and claimed it, then died before writing the trigger
        let db = app.engine.db();
        xjob::testing::store::logs::insert_pending(
            db,
            &[xjob::testing::store::logs::PendingFire {
                job_id: job,
                job_group: app.group,
                fire_time: T0 + 6_000,
                trigger_type: xjob::model::TriggerType::Cron,
            }],
        )
        .await
        .expect("pending");
        let fire = xjob::testing::store::logs::all_pending(db)
            .await
            .expect("pending")
            .remove(0);
        // claim it as the dead node did (this node's ring never held it)
        assert_eq!(
            xjob::testing::store::logs::claim(db, &[fire.log_id])
                .await
                .expect("claim"),
            vec![fire.log_id]
        );
        app.advance(9_500).await;
        let row = xjob::testing::store::logs::get(db, fire.log_id)
            .await
            .expect("row");
        assert_eq!(
            row.trigger_code, 0,
            "within the claim timeout the claimant may still record it"
        );
        app.advance(8_000).await;
        let row = xjob::testing::store::logs::get(db, fire.log_id)
            .await
            .expect("row");
        assert_eq!(
            (row.fire_state, row.trigger_code, row.handle_code),
            (0, 200, 200),
            "{:?}",
            row.trigger_msg
        );
        let rows = app.dispatched(job).await;
        assert_eq!(rows.len(), 1, "sent once, with its own log id");
        assert_eq!(rows[0].id, fire.log_id);
        app.close().await;
    });
}

/// An in-process run's rolling log reads from the center, and the center kills it.
#[test]
fn an_in_process_run_shows_its_log_and_can_be_killed_from_the_center() {
    let dir = tempfile::tempdir().expect("tempdir");
    run_paused(|| async {
        let app = TestApp::start_in(dir.path(), T0, |_| {}).await;
        let add = |handler: &str| JobSpec::cron(app.group, handler, "0 0 0 * * ?", handler);
        let hello = app
            .engine
            .add_job(add("demoJobHandler"))
            .await
            .expect("add");
        let sleeper = app
            .engine
            .add_job(add("sleepJobHandler"))
            .await
            .expect("add");
        app.engine
            .trigger_job(hello, Some("in-proc".into()), None)
            .await
            .expect("trigger");
        app.engine
            .trigger_job(sleeper, Some("600".into()), None)
            .await
            .expect("trigger");
        app.advance(1_000).await;
        let run = |job| {
            let db = app.engine.db().clone();
            async move {
                xjob::testing::store::logs::for_job(&db, job)
                    .await
                    .expect("rows")
                    .remove(0)
            }
        };
        let done = run(hello).await;
        assert_eq!(done.handle_code, 200);
        let log = app.engine.run_log(done.id, 1).await.expect("log");
        assert!(
            log.content.contains("Hello World. param: in-proc"),
            "{log:?}"
        );
        let tail = app
            .engine
            .run_log(done.id, log.to_line + 1)
            .await
            .expect("log");
        assert!(tail.end && tail.content.is_empty());
        let running = run(sleeper).await;
        assert_eq!(running.handle_code, 0, "still sleeping");
        let live = app.engine.run_log(running.id, 1).await.expect("log");
        assert!(
            live.content.contains("sleeping 600 s") && !live.end,
            "{live:?}"
        );
        app.engine.kill_run(running.id).await.expect("kill");
        app.advance(100).await;
        let killed = run(sleeper).await;
        // failed with the center's message, though the executor reports the kill too
        assert_eq!(killed.handle_code, 500);
        assert_eq!(
            killed.handle_msg.as_deref(),
            Some("Manual operation, kill job:")
        );
        assert!(
            app.engine.kill_run(killed.id).await.is_ok(),
            "a second kill finds no thread and still answers"
        );
        app.close().await;
    });
}

/// A started demo job whose schedule is not due in the test (it runs when triggered).
async fn never_due(app: &TestApp, name: &str) -> i32 {
    app.job(JobSpec::cron(
        app.group,
        name,
        "0 0 0 1 1 ? 2099",
        "demoJobHandler",
    ))
    .await
}

/// A graceful stop writes the results already received before it returns.
#[test]
fn stop_waits_for_results_already_received() {
    let dir = tempfile::tempdir().expect("tempdir");
    run_paused(|| async {
        let app = TestApp::start_in(dir.path(), T0, |_| {}).await;
        let db = app.engine.db();
        let job = never_due(&app, "r").await;
        let mut ids = Vec::new();
        for _ in 0..50 {
            ids.push(
                xjob::testing::store::logs::insert_run(
                    db,
                    app.group,
                    job,
                    T0,
                    xjob::model::TriggerType::Manual,
                    0,
                )
                .await
                .expect("row"),
            );
        }
        let results = ids
            .iter()
            .map(|&log_id| xjob::model::wire::HandleCallbackParam {
                log_id,
                log_date_tim: T0,
                handle_code: 200,
                handle_msg: Some("done".into()),
            })
            .collect();
        app.engine
            .complete()
            .do_send(xjob::testing::executor::Callback(results));
        // the stop's grace runs on (paused) time: `stop` drives the clock while it waits
        app.stop().await;
        // a shutdown right after stop must not leave received results unwritten
        for id in ids {
            let row = xjob::testing::store::logs::get(db, id).await.expect("row");
            assert_eq!(row.handle_code, 200, "run {id}");
            assert_eq!(row.alarm_status, 1, "a success needs no alarm");
        }
        app.close().await;
    });
}

/// A run done at once has its result held until the executor has written its log (when the
/// executor is quiet); a stop right after writes the queued logs and their results now, so
/// the run is not left without its result.
#[test]
fn stop_writes_the_results_waiting_for_their_logs() {
    let dir = tempfile::tempdir().expect("tempdir");
    run_paused(|| async {
        let app = TestApp::start_in(dir.path(), T0, |_| {}).await;
        let db = app.engine.db();
        let job = never_due(&app, "manual").await;
        app.engine
            .trigger_job(job, None, None)
            .await
            .expect("trigger");
        // paused time does not move: the run is done, its log and result wait for quiet
        settle(app.engine.activity()).await;
        let rows = xjob::testing::store::logs::for_job(db, job)
            .await
            .expect("rows");
        assert_eq!(rows.len(), 1);
        assert_eq!((rows[0].trigger_code, rows[0].handle_code), (200, 0));
        app.engine
            .stop(std::time::Duration::from_secs(5))
            .await
            .expect("stop");
        let row = xjob::testing::store::logs::get(db, rows[0].id)
            .await
            .expect("row");
        assert_eq!(row.handle_code, 200, "written by the stop");
        let day = xjob::testing::clock::ms_to_naive(T0).format("%Y-%m-%d");
        let log = std::fs::read_to_string(dir.path().join(format!("joblogs/{day}/{}.log", row.id)))
            .expect("the run's log");
        assert!(log.contains("execute end"), "{log}");
        app.close().await;
    });
}

/// An edited job fires with its new definition from the next pass on: an edit made through this
/// node (`Engine::job_edited`) and one made in the database only (its `update_time` moves), on
/// the single-node SQLite pass that re-reads a job only when its version changed.
#[test]
fn an_edited_job_fires_with_its_new_definition() {
    let dir = tempfile::tempdir().expect("tempdir");
    run_paused(|| async {
        let app = TestApp::start_in(dir.path(), T0, |_| {}).await;
        let mut spec = JobSpec::cron(app.group, "edited", "* * * * * ?", "demoJobHandler");
        spec.executor_param = Some("first".into());
        let job = app.job(spec).await;
        app.advance(10_050).await;
        let db = app.engine.db();
        let edit = |param: &'static str, at_ms: i64| async move {
            let mut j = xjob::testing::store::jobs::get(db, job).await.unwrap();
            j.executor_param = Some(param.into());
            j.update_time = Some(xjob::testing::clock::ms_to_naive(at_ms));
            xjob::testing::store::jobs::update_definition(db, &j)
                .await
                .unwrap();
        };
        // through this node: same update_time as before, so only the edit mark re-reads it
        let same = xjob::testing::store::jobs::get(db, job)
            .await
            .unwrap()
            .update_time;
        let mut j = xjob::testing::store::jobs::get(db, job).await.unwrap();
        j.executor_param = Some("second".into());
        j.update_time = same;
        xjob::testing::store::jobs::update_definition(db, &j)
            .await
            .unwrap();
        app.engine.job_edited(job);
        app.advance(10_000).await;
        // in the database only: the version moves
        edit("third", T0 + 20_500).await;
        app.advance(10_000).await;
        let params: Vec<(i64, String)> = app
            .dispatched(job)
            .await
            .into_iter()
            .map(|r| (r.fire_time.unwrap(), r.executor_param.unwrap_or_default()))
            .collect();
        let at = |t: i64| &params.iter().find(|(f, _)| *f == t).unwrap().1;
        assert_eq!(at(T0 + 2_000), "first");
        // fires recorded up to the scan window (5 s) ahead keep the definition they were read with
        assert_eq!(at(T0 + 18_000), "second", "{params:?}");
        assert_eq!(at(T0 + 29_000), "third", "{params:?}");
        app.close().await;
    });
}

/// The periodic tasks run once when a node starts, not only after their first period: a failed
/// run left by the previous process is handled by the fail monitor, and the day's run report
/// exists, well before the 10 s and 60 s periods.
#[test]
fn periodic_tasks_run_once_at_start() {
    let dir = tempfile::tempdir().expect("tempdir");
    let failed = run_paused(|| async {
        let app = TestApp::start_in(dir.path(), T0, |_| {}).await;
        let db = app.engine.db();
        let id = xjob::testing::store::logs::insert_run(
            db,
            app.group,
            1,
            T0,
            xjob::model::TriggerType::Manual,
            0,
        )
        .await
        .unwrap();
        xjob::testing::store::logs::record_trigger(
            db,
            xjob::testing::store::logs::TriggerRecord {
                log_id: id,
                trigger_ms: T0,
                trigger_code: 500,
                trigger_msg: "failed".into(),
                trigger_type: xjob::model::TriggerType::Manual,
                ..Default::default()
            },
        )
        .await
        .unwrap();
        // the process dies before any periodic task ran
        app.close().await;
        id
    });
    run_paused(|| async {
        let app = TestApp::start_in(dir.path(), T0 + 1_000, |_| {}).await;
        app.advance(500).await;
        let db = app.engine.db();
        let row = xjob::testing::store::logs::get(db, failed).await.unwrap();
        assert_ne!(row.alarm_status, 0, "the fail monitor handled it at start");
        assert!(
            !xjob::testing::store::reports::all(db)
                .await
                .unwrap()
                .is_empty(),
            "the day's run report is written at start"
        );
        app.close().await;
    });
}

/// A graceful stop with a dispatch window sends the fires already recorded for the next
/// moments at their own second (not later, not left pending for a misfire policy); fires
/// beyond the window are handed back to the database for the next start.
#[test]
fn a_graceful_stop_dispatches_the_fires_of_the_next_seconds() {
    let dir = tempfile::tempdir().expect("tempdir");
    run_paused(|| async {
        let app = TestApp::start_in(dir.path(), T0, |_| {}).await;
        let job = app
            .job(JobSpec::cron(
                app.group,
                "every second",
                "* * * * * ?",
                "demoJobHandler",
            ))
            .await;
        // at 2.5 s the fires of seconds 3–5 are recorded and wait in the ring
        app.advance(2_500).await;
        let ticker = drive_clock(app.engine.activity().clone());
        let handed_back = app
            .engine
            .stop_dispatching(
                std::time::Duration::from_millis(1_600),
                std::time::Duration::from_secs(5),
            )
            .await
            .expect("stop");
        ticker.abort();
        let rows = app.dispatched(job).await;
        let counts = nominal_counts(&rows);
        let expected: Vec<i64> = (1..=4).map(|s| T0 + s * 1000).collect();
        assert_eq!(
            counts.keys().copied().collect::<Vec<_>>(),
            expected,
            "seconds 3 and 4 (within 1.6 s of the stop) went out during it"
        );
        for r in &rows {
            let trigger_ms = r.trigger_time.map(|t| t.and_utc().timestamp_millis());
            assert_eq!(trigger_ms, r.fire_time, "on its own second");
        }
        assert!(handed_back >= 1, "second 5 is beyond the window");
        app.close().await;
    });
}

/// After a stop, the engine's periodic upkeep starts no new round: a failed run that appears
/// afterwards is left to the next start (the fail monitor would otherwise retry and alarm it
/// from an engine that was stopped, reading a database the application may have closed).
#[test]
fn a_stopped_engine_starts_no_upkeep_round() {
    use sea_orm::ConnectionTrait;
    let dir = tempfile::tempdir().expect("tempdir");
    run_paused(|| async {
        let app = TestApp::start_in(dir.path(), T0, |_| {}).await;
        let db = app.engine.db();
        let job = never_due(&app, "f").await;
        app.stop().await;
        let id = xjob::testing::store::logs::insert_run(
            db,
            app.group,
            job,
            T0,
            xjob::model::TriggerType::Manual,
            0,
        )
        .await
        .expect("row");
        db.execute_unprepared(&format!(
            "UPDATE xxl_job_log SET trigger_code = 200, handle_code = 500, fire_state = 0, \
             alarm_status = 0 WHERE id = {id}"
        ))
        .await
        .expect("a failed run");
        // three of the fail monitor's passes, and every other upkeep period
        app.advance(35_000).await;
        let row = xjob::testing::store::logs::get(db, id).await.expect("row");
        assert_eq!(row.alarm_status, 0, "the failure is left unchecked");
        app.close().await;
    });
}
