//! The logs of runs done at once, written when the executor is quiet, each before its run's
//! result is reported.
//!
//! A run whose handler finished in its first poll (a quick handler: most runs) has its whole
//! log, the start and end lines, in memory when it ends ([`super::JobLogger`] holds a run's
//! lines until its handler waits). Creating a file per run was most of what an executor spent
//! on such a run (≈ 8 of 14 µs at 5,000 runs/s, BENCHMARKS.md, 2026-11-27, 237692d), and doing it as each
//! run ended delayed the acceptance of every run after it in the same burst. So such a log is
//! queued here and written once no log has been queued for [`QUIET`] (the burst is over), or
//! [`MAX_DELAY`] after the first one waiting, whichever comes first; its run's result is
//! reported only after the log is written, so the center never has a result without its log.
//! A `/log` read writes the run's queued log first ([`RunLogs::write_now`]), and a graceful
//! stop writes them all.
//!
//! A run whose handler waits writes its lines as before (the first line as the handler waits,
//! each later one at once), so a long run shows its start while it runs. A process killed at
//! once loses the queued logs of the runs done in its last [`MAX_DELAY`] at most, together with
//! their results (never reported: the center's lost-result check settles them).

use std::path::PathBuf;
use std::time::Duration;

use parking_lot::Mutex;
use tokio::time::Instant;

use crate::model::wire::HandleCallbackParam;

/// A queued log is written once no other was queued for this long.
pub(crate) const QUIET: Duration = Duration::from_millis(50);
/// ... and at the latest this long after the first one waiting.
pub(crate) const MAX_DELAY: Duration = Duration::from_millis(250);
/// Queued logs beyond which they are written without waiting any longer (at the writing
/// task's next look, at most [`QUIET`] later).
pub(crate) const MAX_QUEUED: usize = 16_384;

/// A run's queued log and the result that waits for it.
struct Queued {
    path: PathBuf,
    log_id: i64,
    text: String,
    /// Written already (by a `/log` read); only the result still waits.
    written: bool,
    result: HandleCallbackParam,
    /// Results of the same log id queued after the first (a run dispatched twice).
    more: Vec<HandleCallbackParam>,
}

#[derive(Default)]
struct Pending {
    logs: Vec<Queued>,
    /// Log id → its latest entry in `logs`.
    at: foldhash::HashMap<i64, usize>,
    first: Option<Instant>,
    last: Option<Instant>,
    /// A task will write the logs queued now.
    scheduled: bool,
}

/// The queued logs of one executor.
#[derive(Default)]
pub(crate) struct RunLogs {
    pending: Mutex<Pending>,
    /// Held while queued logs are written, so a `/log` read that finds its run no longer queued
    /// knows the run's file is complete.
    io: Mutex<()>,
}

/// How long to wait before writing, for logs first queued at `first`, last at `last`, `queued`
/// of them, at `now`; `None`: write now.
pub(crate) fn wait(first: Instant, last: Instant, queued: usize, now: Instant) -> Option<Duration> {
    if queued >= MAX_QUEUED {
        return None;
    }
    let at = (last + QUIET).min(first + MAX_DELAY);
    at.checked_duration_since(now).filter(|d| !d.is_zero())
}

impl RunLogs {
    /// Queues the log `text` of run `log_id` (file `path`) with the result that waits for it;
    /// true when the caller is to start the task that writes them ([`RunLogs::wait`], then
    /// [`RunLogs::write_all`]).
    pub(crate) fn queue(
        &self,
        path: PathBuf,
        log_id: i64,
        text: String,
        result: HandleCallbackParam,
    ) -> bool {
        let now = Instant::now();
        let mut p = self.pending.lock();
        p.first.get_or_insert(now);
        p.last = Some(now);
        match p.at.get(&log_id).copied() {
            Some(i) if !p.logs[i].written => {
                let q = &mut p.logs[i];
                q.text.push_str(&text);
                q.more.push(result);
            }
            _ => {
                let i = p.logs.len();
                p.logs.push(Queued {
                    path,
                    log_id,
                    text,
                    written: false,
                    result,
                    more: Vec::new(),
                });
                p.at.insert(log_id, i);
            }
        }
        !std::mem::replace(&mut p.scheduled, true)
    }

    /// How long the writing task still waits; `None`: write now.
    pub(crate) fn wait(&self) -> Option<Duration> {
        let p = self.pending.lock();
        match (p.first, p.last) {
            (Some(first), Some(last)) => wait(first, last, p.logs.len(), Instant::now()),
            _ => None,
        }
    }

    /// Writes every queued log (in the order queued) and hands each result that waited for
    /// them to `done`, in the same order, before a later call or a [`RunLogs::write_now`] can
    /// go on: once this returns, the results of every log queued before are handed over.
    pub(crate) fn write_all(&self, mut done: impl FnMut(HandleCallbackParam)) {
        let _io = self.io.lock();
        let logs = {
            let mut p = self.pending.lock();
            p.at.clear();
            p.first = None;
            p.last = None;
            p.scheduled = false;
            std::mem::take(&mut p.logs)
        };
        for q in logs {
            if !q.written {
                super::context::append(&q.path, q.log_id, q.text.as_bytes());
            }
            done(q.result);
            q.more.into_iter().for_each(&mut done);
        }
    }

    /// Writes run `log_id`'s queued log now, if it is queued (its result still waits for the
    /// writing task); once this returns, the run's file holds every line queued before.
    pub(crate) fn write_now(&self, log_id: i64) {
        let _io = self.io.lock();
        let mut p = self.pending.lock();
        if let Some(i) = p.at.get(&log_id).copied() {
            let q = &mut p.logs[i];
            if !q.written {
                super::context::append(&q.path, q.log_id, q.text.as_bytes());
                q.written = true;
                q.text = String::new();
            }
        }
    }

    /// Logs queued and not yet written.
    #[cfg(test)]
    pub(crate) fn queued(&self) -> usize {
        self.pending
            .lock()
            .logs
            .iter()
            .filter(|q| !q.written)
            .count()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn result(log_id: i64) -> HandleCallbackParam {
        HandleCallbackParam {
            log_id,
            log_date_tim: 0,
            handle_code: 200,
            handle_msg: None,
        }
    }

    proptest! {
        /// The wait never runs past the first log's deadline nor past the quiet time after
        /// the last one, and ends (None) exactly when either has come or too many are queued.
        #[test]
        fn the_wait_ends_at_quiet_or_at_the_deadline(
            gaps in proptest::collection::vec(0u64..60, 1..40),
            queued in 1usize..(2 * MAX_QUEUED),
            after in 0u64..400,
        ) {
            let first = Instant::now();
            let last = first + Duration::from_millis(gaps.iter().sum());
            let now = last + Duration::from_millis(after);
            let due = (last + QUIET).min(first + MAX_DELAY);
            match wait(first, last, queued, now) {
                None => prop_assert!(queued >= MAX_QUEUED || now >= due),
                Some(d) => {
                    prop_assert!(queued < MAX_QUEUED && now < due);
                    prop_assert_eq!(now + d, due);
                    prop_assert!(now + d <= first + MAX_DELAY);
                }
            }
        }
    }

    /// Logs are written in the order queued, a log id queued twice is one file with both
    /// texts and both results; a log written early by a read is not written again, and its
    /// result still comes with the others.
    #[test]
    fn queued_logs_are_written_once_in_order_with_their_results() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = |id: i64| dir.path().join("day").join(format!("{id}.log"));
        let logs = RunLogs::default();
        assert!(
            logs.queue(path(1), 1, "a1\n".into(), result(1)),
            "the first starts the task"
        );
        assert!(!logs.queue(path(2), 2, "b\n".into(), result(2)));
        assert!(!logs.queue(path(1), 1, "a2\n".into(), result(10)));
        assert!(!path(2).exists());
        logs.write_now(2);
        assert_eq!(
            std::fs::read_to_string(path(2)).expect("written by the read"),
            "b\n"
        );
        assert!(!path(1).exists(), "only the one read");
        assert_eq!(logs.queued(), 1);
        let mut ids = Vec::new();
        logs.write_all(|r| ids.push(r.log_id));
        assert_eq!(ids, [1, 10, 2]);
        assert_eq!(
            std::fs::read_to_string(path(1)).expect("written"),
            "a1\na2\n"
        );
        assert_eq!(std::fs::read_to_string(path(2)).expect("once"), "b\n");
        assert_eq!(logs.queued(), 0);
        logs.write_all(|r| panic!("nothing queued, yet {} came", r.log_id));
        assert!(
            logs.queue(path(3), 3, "c\n".into(), result(3)),
            "a new round, a new task"
        );
    }
}
