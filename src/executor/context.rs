//! What a handler sees of its run: ids, param, shard, trigger time, and the run log.

use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;

use crate::clock::Clock;

/// Appends lines to a run's log file `<logpath>/<yyyy-MM-dd>/<logId>.log` (protocol.md §6.5). Without a
/// log path, lines go to `tracing` only.
#[derive(Clone, Debug)]
pub struct JobLogger {
    file: Option<PathBuf>,
    clock: Clock,
    log_id: i64,
    /// A line held back to be written with the next ([`JobLogger::hold`]).
    held: Arc<Held>,
}

/// A run's lines, held from its first line until its handler waits ([`JobLogger::release`]) or
/// the run ends ([`JobLogger::take_held`]): a run that finishes in its handler's first poll
/// opens its file once, and its executor writes that when it is quiet ([`super::run_logs`]).
#[derive(Debug, Default)]
struct Held {
    line: parking_lot::Mutex<Option<(PathBuf, String, i64)>>,
}

impl Drop for Held {
    fn drop(&mut self) {
        // a run dropped before its handler was polled (killed at once) still has its first line
        if let Some((path, line, log_id)) = self.line.get_mut().take() {
            append(&path, log_id, line.as_bytes());
        }
    }
}

impl JobLogger {
    /// A logger for `log_id`, whose trigger time `trigger_ms` picks the day directory.
    pub fn new(log_dir: Option<PathBuf>, clock: Clock, log_id: i64, trigger_ms: i64) -> Self {
        let file = log_dir.map(|mut d| {
            d.push(day(trigger_ms.div_euclid(86_400_000)));
            d.push(format!("{log_id}.log"));
            d
        });
        JobLogger {
            file,
            clock,
            log_id,
            held: Arc::default(),
        }
    }

    /// The file this run logs to, if any.
    pub fn path(&self) -> Option<&PathBuf> {
        self.file.as_ref()
    }

    /// Whether lines go anywhere (a log file, or `tracing` at debug level): callers skip
    /// formatting lines nobody keeps.
    pub fn active(&self) -> bool {
        self.file.is_some() || tracing::enabled!(tracing::Level::DEBUG)
    }

    /// Appends one timestamped line: to the lines held while the run's first poll lasts, or to
    /// its file. I/O errors are reported through `tracing`, never to the job.
    pub fn log(&self, text: &str) {
        tracing::debug!(log_id = self.log_id, "{text}");
        let Some(path) = &self.file else { return };
        let line = self.line(text);
        {
            let mut held = self.held.line.lock();
            if let Some((_, lines, _)) = held.as_mut() {
                lines.push_str(&line);
                return;
            }
        }
        append(path, self.log_id, line.as_bytes());
    }

    /// Holds `text`'s line back, and every line after it, until [`JobLogger::release`],
    /// [`JobLogger::take_held`], or the last copy of this logger goes (then they are written).
    pub(crate) fn hold(&self, text: &str) {
        tracing::debug!(log_id = self.log_id, "{text}");
        let Some(path) = &self.file else { return };
        let mut line = self.line(text);
        // room for the run's end line, which usually joins it
        line.reserve(HELD_ROOM);
        let earlier = self
            .held
            .line
            .lock()
            .replace((path.clone(), line, self.log_id));
        if let Some((path, line, log_id)) = earlier {
            append(&path, log_id, line.as_bytes());
        }
    }

    /// Writes the held lines now, if there are any (the handler is waiting: its run may be
    /// long); later lines are written as they come.
    pub(crate) fn release(&self) {
        if let Some((path, line, log_id)) = self.held.line.lock().take() {
            append(&path, log_id, line.as_bytes());
        }
    }

    /// The held lines and their file, for the caller to write (the run ended in its first
    /// poll); later lines are written as they come.
    pub(crate) fn take_held(&self) -> Option<(PathBuf, String)> {
        self.held
            .line
            .lock()
            .take()
            .map(|(path, lines, _)| (path, lines))
    }

    fn line(&self, text: &str) -> String {
        let mut line = String::with_capacity(STAMP_LEN + text.len() + 3);
        stamp(self.clock.now_ms().div_euclid(1000), &mut line);
        line.push(' ');
        line.push_str(text);
        line.push_str("\r\n");
        line
    }
}

/// `2026-01-02 03:04:05`
const STAMP_LEN: usize = 19;
/// Room kept after a held first line for the lines that usually join it (the end line).
const HELD_ROOM: usize = 192;

thread_local! {
    /// The last second stamped on this thread and its text: a run's lines are stamped to the
    /// second, and a burst of runs shares a few seconds (formatting a date each time was a
    /// tenth of an executor's thread, BENCHMARKS.md, 2026-11-27, 237692d).
    static STAMP: std::cell::RefCell<(i64, String)> =
        const { std::cell::RefCell::new((i64::MIN, String::new())) };
    /// The same for the last day directory named on this thread.
    static DAY: std::cell::RefCell<(i64, String)> =
        const { std::cell::RefCell::new((i64::MIN, String::new())) };
}

/// Day `days` (since the epoch)'s directory name, `2026-01-02`.
fn day(days: i64) -> String {
    DAY.with(|d| {
        let mut d = d.borrow_mut();
        if d.0 != days {
            let text = crate::clock::ms_to_naive(days.saturating_mul(86_400_000))
                .format("%Y-%m-%d")
                .to_string();
            *d = (days, text);
        }
        d.1.clone()
    })
}

/// Appends second `secs`'s stamp to `out`.
fn stamp(secs: i64, out: &mut String) {
    STAMP.with(|s| {
        let mut s = s.borrow_mut();
        if s.0 != secs {
            let text = crate::clock::ms_to_naive(secs.saturating_mul(1000))
                .format("%Y-%m-%d %H:%M:%S")
                .to_string();
            *s = (secs, text);
        }
        out.push_str(&s.1);
    });
}

/// Appends `bytes` to `path`, making its (day) directory when it is missing: every other
/// write is one open and one write, no look at the directory first. Errors go to `tracing`.
pub(super) fn append(path: &std::path::Path, log_id: i64, bytes: &[u8]) {
    let open = || {
        std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
    };
    let write = || -> std::io::Result<()> {
        let mut f = match open() {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                if let Some(dir) = path.parent() {
                    std::fs::create_dir_all(dir)?;
                }
                open()?
            }
            other => other?,
        };
        f.write_all(bytes)
    };
    if let Err(e) = write() {
        tracing::warn!(log_id, error = %e, "cannot write run log");
    }
}

/// Everything a handler knows about the run it is executing.
#[derive(Clone, Debug)]
pub struct JobContext {
    /// The job's id.
    pub job_id: i32,
    /// This run's log id.
    pub log_id: i64,
    /// The job's param, or the override given to this trigger (empty when none).
    pub param: String,
    /// Shard index, 0-based (0 when not sharded).
    pub shard_index: i32,
    /// Shard total (1 when not sharded).
    pub shard_total: i32,
    /// When the center triggered this run, epoch ms.
    pub trigger_time_ms: i64,
    logger: JobLogger,
    outputs: Outputs,
}

/// What a run adds to its workflow run's context ([`JobContext::put`]).
pub(crate) type Outputs =
    std::sync::Arc<parking_lot::Mutex<serde_json::Map<String, serde_json::Value>>>;

/// Most bytes a run may add to its workflow's context (as JSON); more fails the run.
pub const MAX_OUTPUTS: usize = 8 * 1024;

/// How a result message carries the values a run adds to its workflow's context: its first line
/// is this prefix and a JSON object (any executor may send it; XXL-JOB's ignore it).
pub const OUTPUT_PREFIX: &str = "xjob.context=";

/// `msg` with `outputs` on a first line of its own ([`OUTPUT_PREFIX`]); an error when they are
/// larger than [`MAX_OUTPUTS`].
pub(crate) fn with_outputs(
    outputs: &serde_json::Map<String, serde_json::Value>,
    msg: Option<String>,
) -> Result<Option<String>, String> {
    if outputs.is_empty() {
        return Ok(msg);
    }
    let json = serde_json::Value::Object(outputs.clone()).to_string();
    if json.len() > MAX_OUTPUTS {
        return Err(format!(
            "the values put for the workflow's context are {} bytes; at most {MAX_OUTPUTS}",
            json.len()
        ));
    }
    Ok(Some(match msg {
        Some(m) if !m.is_empty() => format!("{OUTPUT_PREFIX}{json}\n{m}"),
        _ => format!("{OUTPUT_PREFIX}{json}"),
    }))
}

/// The values a result message carries for the workflow's context, and the message without
/// them (a first line that does not parse is left as it is).
pub fn split_outputs(msg: &str) -> (Option<serde_json::Map<String, serde_json::Value>>, &str) {
    let Some(rest) = msg.strip_prefix(OUTPUT_PREFIX) else {
        return (None, msg);
    };
    let (line, tail) = rest.split_once('\n').unwrap_or((rest, ""));
    match serde_json::from_str::<serde_json::Value>(line.trim_end()) {
        Ok(serde_json::Value::Object(m)) => (Some(m), tail),
        _ => (None, msg),
    }
}

impl JobContext {
    /// A context (used by executors, and by tests of handlers).
    pub fn new(
        job_id: i32,
        log_id: i64,
        param: String,
        shard: (i32, i32),
        trigger_time_ms: i64,
        logger: JobLogger,
    ) -> Self {
        JobContext {
            job_id,
            log_id,
            param,
            shard_index: shard.0,
            shard_total: shard.1,
            trigger_time_ms,
            logger,
            outputs: Default::default(),
        }
    }

    /// Puts `value` under `key` in the context of the workflow run this run belongs to, for the
    /// nodes downstream (decisions read it, params reference it as `${key}`). Sent with the
    /// run's result; at most [`MAX_OUTPUTS`] bytes of JSON in all, or the run fails. Outside a
    /// workflow the values are reported and ignored.
    pub fn put(&self, key: impl Into<String>, value: impl Into<serde_json::Value>) {
        self.outputs.lock().insert(key.into(), value.into());
    }

    /// The values put so far.
    pub(crate) fn outputs(&self) -> Outputs {
        self.outputs.clone()
    }

    /// Writes a line to this run's log.
    pub fn log(&self, text: impl AsRef<str>) {
        self.logger.log(text.as_ref());
    }

    /// The run log.
    pub fn logger(&self) -> &JobLogger {
        &self.logger
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Held lines are written by a release, given to whoever takes them, or written when the
    /// last copy of the logger goes; never twice, never lost.
    #[test]
    fn held_lines_are_written_once_when_released_taken_or_dropped() {
        let dir = tempfile::tempdir().expect("temp dir");
        let t = 1_800_000_000_000;
        let at = |id: i64| JobLogger::new(Some(dir.path().to_path_buf()), Clock::system(), id, t);
        let read = |l: &JobLogger| std::fs::read_to_string(l.path().expect("a file"));
        let lines = |l: &JobLogger| -> Vec<String> {
            read(l)
                .expect("the log")
                .split("\r\n")
                .filter(|x| !x.is_empty())
                .map(|x| x.split_once(' ').map(|(_, rest)| rest).unwrap_or(x)[9..].to_string())
                .collect()
        };

        let next = at(1);
        next.hold("start");
        assert!(read(&next).is_err(), "held, not written");
        next.clone().log("end");
        assert!(read(&next).is_err(), "held with the first");
        next.release();
        assert_eq!(lines(&next), ["start", "end"]);
        next.log("more");
        assert_eq!(lines(&next), ["start", "end", "more"]);

        let taken = at(4);
        taken.hold("start");
        taken.log("end");
        let (path, text) = taken.take_held().expect("held");
        assert_eq!(Some(&path), taken.path());
        assert_eq!(text.matches("\r\n").count(), 2, "{text}");
        assert!(taken.take_held().is_none(), "taken once");
        drop(taken);
        assert!(!path.exists(), "the taker writes it");

        let released = at(2);
        released.hold("start");
        released.release();
        released.release();
        assert_eq!(lines(&released), ["start"]);

        let dropped = at(3);
        let path = dropped.path().expect("a file").clone();
        let copy = dropped.clone();
        dropped.hold("start");
        drop(dropped);
        assert!(!path.exists(), "a copy still holds it");
        drop(copy);
        assert_eq!(
            std::fs::read_to_string(&path)
                .expect("written when the last copy went")
                .matches("start")
                .count(),
            1
        );
    }

    /// A run's file is in the directory of its trigger's day (UTC), whichever day the thread
    /// named last.
    #[test]
    fn a_run_log_is_in_its_trigger_days_directory() {
        let t = 1_800_000_000_000; // 2027-01-15 08:00:00 UTC
        let day_of = |ms: i64| {
            let l = JobLogger::new(Some(PathBuf::from("/logs")), Clock::system(), 9, ms);
            l.path().expect("a file").display().to_string()
        };
        assert_eq!(day_of(t), "/logs/2027-01-15/9.log");
        assert_eq!(day_of(t + 86_400_000), "/logs/2027-01-16/9.log");
        assert_eq!(day_of(t - 8 * 3_600_000 - 1), "/logs/2027-01-14/9.log");
        assert_eq!(day_of(t), "/logs/2027-01-15/9.log");
    }

    /// A run's lines land in its day's directory, made by the first line; a directory removed
    /// between two lines is made again, and no line is lost.
    #[tokio::test(start_paused = true)]
    async fn a_run_log_makes_its_day_directory_when_it_is_missing() {
        let dir = tempfile::tempdir().expect("temp dir");
        let t = 1_800_000_000_000;
        let clock = Clock::tokio_at(t);
        let logger = JobLogger::new(Some(dir.path().to_path_buf()), clock, 7, t);
        let path = logger.path().expect("a file").clone();
        assert!(!path.parent().expect("day dir").exists());
        logger.log("first");
        logger.log("second");
        std::fs::remove_dir_all(path.parent().expect("day dir")).expect("removed");
        logger.log("third");
        let text = std::fs::read_to_string(&path).expect("the log");
        let lines: Vec<&str> = text.split("\r\n").filter(|l| !l.is_empty()).collect();
        assert_eq!(lines.len(), 1, "{text}");
        assert!(lines[0].ends_with(" third"), "{text}");
        logger.log("fourth");
        let text = std::fs::read_to_string(&path).expect("the log");
        assert!(
            text.ends_with(" third\r\n2027-01-15 08:00:00 fourth\r\n"),
            "{text:?}"
        );
        // each line has its own second's stamp (the stamp is kept per second)
        tokio::time::advance(std::time::Duration::from_millis(1_500)).await;
        logger.log("fifth");
        let text = std::fs::read_to_string(&path).expect("the log");
        assert!(
            text.ends_with(" fourth\r\n2027-01-15 08:00:01 fifth\r\n"),
            "{text:?}"
        );
    }
}
