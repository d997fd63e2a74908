//! One fire reads as one trace: the trigger, the run on the executor and the result on the way
//! back all carry the run's log id (at debug level, which costs nothing when it is off).
#![allow(clippy::unwrap_used)]

mod common;

use std::sync::Arc;

use common::{T0, TestApp, run_paused};
use parking_lot::Mutex;
use xjob::console::Paging;
use xjob::prelude::*;

/// Collects what the test's subscriber writes.
#[derive(Clone, Default)]
struct Buf(Arc<Mutex<Vec<u8>>>);

impl std::io::Write for Buf {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        self.0.lock().extend_from_slice(b);
        Ok(b.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Whether `line` names log id `id` (not a longer id that starts with it).
fn names(line: &str, id: i64) -> bool {
    let tag = format!("log_id={id}");
    line.match_indices(&tag).any(|(at, _)| {
        !line[at + tag.len()..]
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_digit())
    })
}

/// A scheduled fire's trigger, its run's start and finish and its result all log under the
/// same log id.
#[test]
fn a_fire_reads_as_one_trace_under_its_log_id() {
    run_paused(|| async {
        let buf = Buf::default();
        let out = buf.clone();
        let subscriber = tracing_subscriber::fmt()
            .with_env_filter("warn,xjob=debug")
            .with_ansi(false)
            .with_writer(move || out.clone())
            .finish();
        let _trace = tracing::subscriber::set_default(subscriber);

        let dir = tempfile::tempdir().unwrap();
        let app = TestApp::start_in(dir.path(), T0, |_| {}).await;
        let job = app
            .job(JobSpec::cron(
                app.group,
                "traced",
                "* * * * * ?",
                "demoJobHandler",
            ))
            .await;
        app.advance(1_500).await;
        let run = app.engine.runs(job, Paging::first(1)).await.unwrap().items[0].clone();
        assert_eq!(run.status, "success");

        let text = String::from_utf8(buf.0.lock().clone()).unwrap();
        let lines: Vec<&str> = text.lines().filter(|l| names(l, run.id)).collect();
        for step in [
            "triggered",
            "run started",
            "run finished",
            "result received",
        ] {
            assert!(
                lines.iter().any(|l| l.contains(step)),
                "`{step}` not logged under log_id={}: {lines:#?}",
                run.id
            );
        }
        app.close().await;
    });
}
