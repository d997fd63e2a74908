//! The embedder's questions to [`Engine`] (runs, one run, job and group reads and edits),
//! answered without SQL and with the console's validation.

#![allow(clippy::unwrap_used)]

mod common;

use common::{T0, TestApp, run_paused};
use xjob::console::Paging;
use xjob::console::groups::GroupInput;
use xjob::console::jobs::JobQuery;
use xjob::prelude::*;

/// A job's runs come newest first, one page at a time; one run reads by its id; a missing job
/// or run and a bad page size are errors naming what is wrong.
#[test]
fn runs_of_a_job_page_newest_first() {
    run_paused(|| async {
        let dir = tempfile::tempdir().unwrap();
        let app = TestApp::start_in(dir.path(), T0, |_| {}).await;
        let job = app
            .job(JobSpec::cron(
                app.group,
                "every second",
                "* * * * * ?",
                "demoJobHandler",
            ))
            .await;
        app.advance(3_500).await;

        let page = app.engine.runs(job, Paging::first(2)).await.unwrap();
        assert!(page.total >= 3, "three seconds fired: {}", page.total);
        assert_eq!(page.items.len(), 2);
        assert!(page.items[0].id > page.items[1].id, "newest first");
        assert!(page.items.iter().all(|r| r.job_id == job));
        let rest = app.engine.runs(job, Paging::new(2, 100)).await.unwrap();
        assert_eq!(rest.items.len() as u64, page.total - 2);
        assert!(rest.items[0].id < page.items[1].id);

        let first = &page.items[0];
        let one = app.engine.run(first.id).await.unwrap();
        assert_eq!((one.id, one.job_id), (first.id, job));
        assert_eq!(one.status, "success");

        assert!(matches!(
            app.engine.runs(job + 1000, Paging::default()).await,
            Err(Error::JobNotFound { .. })
        ));
        assert!(matches!(
            app.engine.run(999_999).await,
            Err(Error::LogNotFound { .. })
        ));
        assert!(matches!(
            app.engine.runs(job, Paging::first(0)).await,
            Err(Error::Invalid { field: "limit", .. })
        ));
        app.close().await;
    });
}

/// Jobs list, read, change and delete through the engine; a changed job keeps its id and
/// a deleted one is gone with its runs.
#[test]
fn jobs_are_read_changed_and_removed() {
    run_paused(|| async {
        let dir = tempfile::tempdir().unwrap();
        let app = TestApp::start_in(dir.path(), T0, |_| {}).await;
        let job = app
            .job(JobSpec::cron(
                app.group,
                "before",
                "* * * * * ?",
                "demoJobHandler",
            ))
            .await;
        app.advance(1_500).await;

        let all = app.engine.jobs(&JobQuery::default()).await.unwrap();
        assert_eq!(all.total, 1);
        assert_eq!(all.items[0].id, job);
        assert_eq!(app.engine.job(job).await.unwrap().job_desc, "before");

        let changed = app
            .engine
            .update_job(
                job,
                JobSpec::cron(app.group, "after", "0 0 * * * ?", "demoJobHandler"),
            )
            .await
            .unwrap();
        assert_eq!((changed.id, changed.job_desc.as_str()), (job, "after"));
        assert_eq!(changed.schedule_conf.as_deref(), Some("0 0 * * * ?"));
        let bad = JobSpec::cron(app.group, "bad", "not a cron", "demoJobHandler");
        assert!(app.engine.update_job(job, bad).await.is_err());
        assert_eq!(app.engine.job(job).await.unwrap().job_desc, "after");

        app.engine.remove_job(job).await.unwrap();
        assert!(matches!(
            app.engine.job(job).await,
            Err(Error::JobNotFound { .. })
        ));
        assert_eq!(
            app.engine.jobs(&JobQuery::default()).await.unwrap().total,
            0
        );
        app.close().await;
    });
}

/// Groups are created, listed, changed and deleted with the console's rules: a bad appname
/// is refused and changes nothing, the last group stays.
#[test]
fn groups_are_created_changed_and_removed() {
    run_paused(|| async {
        let dir = tempfile::tempdir().unwrap();
        let app = TestApp::start_in(dir.path(), T0, |_| {}).await;
        let manual = |title: &str| GroupInput {
            app_name: "billing-app".into(),
            title: title.into(),
            address_type: 1,
            address_list: Some("http://127.0.0.1:9999/".into()),
            access_token: None,
        };
        let g = app.engine.add_group(manual("Billing")).await.unwrap();
        assert_eq!(g.registry_list, vec!["http://127.0.0.1:9999/".to_string()]);
        assert_eq!(app.engine.groups(Paging::default()).await.unwrap().total, 2);

        let bad = GroupInput {
            app_name: "<x>".into(),
            ..manual("Bad")
        };
        assert!(matches!(
            app.engine.update_group(g.id, bad).await,
            Err(Error::Invalid {
                field: "appName",
                ..
            })
        ));
        assert_eq!(app.engine.group(g.id).await.unwrap().title, "Billing");
        let renamed = app
            .engine
            .update_group(g.id, manual("Invoices"))
            .await
            .unwrap();
        assert_eq!(renamed.title, "Invoices");

        app.engine.remove_group(g.id).await.unwrap();
        assert!(app.engine.group(g.id).await.is_err());
        assert!(matches!(
            app.engine.remove_group(app.group).await,
            Err(Error::Conflict { .. })
        ));
        app.close().await;
    });
}

/// An engine on the system clock with the SQLite writer on a CPU of its own (this thread
/// dispatches: the engine keeps it, and what it starts, off the writer's CPU, which touches no
/// other test's thread), once its in-process executor is routed to; and the demo group.
async fn with_a_writer_cpu(
    dir: &std::path::Path,
    handlers: HandlerRegistry,
    tweak: impl FnOnce(&mut Config),
) -> (Engine, i32) {
    let mut cfg = common::test_config(dir);
    cfg.database.separate_writer_cpu = true;
    tweak(&mut cfg);
    let engine = Engine::builder(cfg)
        .handlers(handlers)
        .log_dir(dir.join("joblogs"))
        .start()
        .await
        .unwrap();
    let group = engine
        .ensure_group(xjob::demo::DEMO_APP, "demo")
        .await
        .unwrap();
    common::eventually("the executor is routed to", 10, || async {
        !xjob::testing::routed_addresses(&engine, group).is_empty()
    })
    .await;
    (engine, group)
}

/// With the SQLite writer on a CPU of its own (the default on a machine with several), the
/// in-process executor starts handlers on a thread of its own, off the dispatching one, and
/// runs end as they do on one thread.
#[test]
fn with_a_cpu_for_the_writer_handlers_run_off_the_dispatching_thread() {
    common::init_tracing();
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    let dir = tempfile::tempdir().unwrap();
    actix_rt::System::new().block_on(async {
        let ran_on = std::sync::Arc::new(parking_lot::Mutex::new(Vec::new()));
        let mut handlers = xjob::demo::handlers().unwrap();
        let seen = ran_on.clone();
        handlers
            .register_fn("where", move |_ctx: JobContext| {
                let seen = seen.clone();
                async move {
                    seen.lock().push(std::thread::current().id());
                    Ok(())
                }
            })
            .unwrap();
        let (engine, group) = with_a_writer_cpu(dir.path(), handlers, |_| {}).await;
        let job = engine
            .add_job(JobSpec::cron(group, "where", "0 0 0 * * ?", "where"))
            .await
            .unwrap();
        for _ in 0..3 {
            engine.trigger_job(job, None, None).await.unwrap();
        }
        let db = engine.db().clone();
        common::eventually("three runs succeeded", 10, || {
            let db = db.clone();
            async move {
                let rows = xjob::testing::store::logs::for_job(&db, job).await.unwrap();
                rows.len() == 3 && rows.iter().all(|r| r.handle_code == 200)
            }
        })
        .await;
        let here = std::thread::current().id();
        let threads = ran_on.lock().clone();
        assert_eq!(threads.len(), 3);
        if cpus >= 2 {
            assert!(
                threads.iter().all(|t| *t != here),
                "{threads:?} vs {here:?}"
            );
        } else {
            assert!(threads.iter().all(|t| *t == here), "one CPU: one thread");
        }
        engine
            .stop(std::time::Duration::from_secs(5))
            .await
            .unwrap();
    });
}

/// The CPUs the calling thread may run on, as Linux lists them (`0-1`).
fn allowed_cpus() -> String {
    let status = std::fs::read_to_string("/proc/thread-self/status").unwrap();
    let line = status
        .lines()
        .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
        .unwrap();
    line.trim().to_string()
}

/// With the SQLite writer on a CPU of its own, a script job's process may use every CPU the
/// process had, not only the one the in-process executor's thread is kept on (it ran on that
/// one CPU, with everything it started).
#[test]
#[cfg(target_os = "linux")]
fn with_a_cpu_for_the_writer_a_script_runs_on_every_cpu_of_the_process() {
    common::init_tracing();
    // before the engine keeps this (the dispatching) thread off the writer's CPU
    let ours = allowed_cpus();
    let dir = tempfile::tempdir().unwrap();
    actix_rt::System::new().block_on(async {
        let handlers = xjob::demo::handlers().unwrap();
        let (engine, group) = with_a_writer_cpu(dir.path(), handlers, |c| {
            c.executor.scripts_enabled = true;
        })
        .await;
        let mut spec = JobSpec::cron(group, "cpus", "0 0 0 * * ?", "");
        spec.glue_type = "GLUE_SHELL".into();
        spec.glue_source = Some("#!/bin/sh\ngrep Cpus_allowed_list /proc/self/status\n".into());
        let job = engine.add_job(spec).await.unwrap();
        engine.trigger_job(job, None, None).await.unwrap();
        let db = engine.db().clone();
        common::eventually("the script succeeded", 10, || {
            let db = db.clone();
            async move {
                let rows = xjob::testing::store::logs::for_job(&db, job).await.unwrap();
                rows.len() == 1 && rows[0].handle_code == 200
            }
        })
        .await;
        let run = xjob::testing::store::logs::for_job(&db, job).await.unwrap()[0].id;
        let log = engine.run_log(run, 1).await.unwrap().content;
        assert!(
            log.contains(&format!("Cpus_allowed_list:\t{ours}\n")),
            "the script's CPUs are not the process's {ours}: {log}"
        );
        let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
        if cpus >= 2 {
            assert_ne!(
                allowed_cpus(),
                ours,
                "this thread stays off the writer's CPU"
            );
        }
        engine
            .stop(std::time::Duration::from_secs(5))
            .await
            .unwrap();
    });
}
