//! Reads a run log a page at a time (`/log`, protocol.md §2.5, 2.4 semantics), in time proportional
//! to the page, not to the file: each file read has a sparse index of line starts (one every
//! [`STRIDE`] lines), built once and extended only over what the file grew by since, so a page
//! deep in a large, still growing log is a seek and a short scan. The index of the most recently
//! read files is kept ([`MAX_FILES`]); reading is blocking I/O, run off the async threads by the
//! caller ([`read_log_blocking`]).

use std::collections::HashMap;
use std::fs::File;
use std::io::{BufRead, BufReader, Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::sync::LazyLock;

use parking_lot::Mutex;

use super::JobLogger;
use crate::clock::Clock;
use crate::model::wire::{LogParam, LogResult, ReturnT, SUCCESS_CODE};

/// Most bytes of log text one `/log` answer carries (whole lines; a longer single line goes
/// alone). Well under the 5 MiB a reader accepts per answer.
pub(crate) const LOG_PAGE_BYTES: usize = 1024 * 1024;
/// Lines between two indexed line starts: a page is found after at most this many lines.
const STRIDE: u64 = 1024;
/// Files whose index is kept (the logs being watched in consoles right now).
const MAX_FILES: usize = 128;

/// The line starts of one file, as far as it was read.
#[derive(Debug)]
struct FileIndex {
    /// Bytes indexed so far (the file's length at the last read).
    scanned: u64,
    /// Newlines in those bytes.
    newlines: u64,
    /// Whether the indexed bytes end with a newline (or are none).
    at_line_start: bool,
    /// `marks[k]`: the offset where line `k * STRIDE + 1` starts.
    marks: Vec<u64>,
    /// When this index was last used (for eviction).
    used: u64,
}

impl Default for FileIndex {
    /// The index of an empty file.
    fn default() -> Self {
        FileIndex {
            scanned: 0,
            newlines: 0,
            at_line_start: true,
            marks: vec![0],
            used: 0,
        }
    }
}

impl FileIndex {
    /// Indexes the bytes the file grew by since the last read.
    fn extend(&mut self, file: &mut File, len: u64) -> std::io::Result<()> {
        if len < self.scanned {
            // shorter than before: another file now; start over
            *self = FileIndex::default();
        }
        if len == self.scanned {
            return Ok(());
        }
        file.seek(SeekFrom::Start(self.scanned))?;
        let mut reader = BufReader::with_capacity(64 * 1024, file.take(len - self.scanned));
        let mut at = self.scanned;
        loop {
            let buf = reader.fill_buf()?;
            if buf.is_empty() {
                break;
            }
            for (i, &b) in buf.iter().enumerate() {
                if b == b'\n' {
                    self.newlines += 1;
                    if self.newlines.is_multiple_of(STRIDE) {
                        self.marks.push(at + i as u64 + 1);
                    }
                }
            }
            self.at_line_start = buf.last() == Some(&b'\n');
            let n = buf.len();
            count_read(n);
            at += n as u64;
            reader.consume(n);
        }
        self.scanned = at;
        Ok(())
    }

    /// Lines in the indexed bytes, as `str::lines` counts them (a last line without its
    /// newline counts).
    fn lines(&self) -> u64 {
        self.newlines + u64::from(!self.at_line_start)
    }
}

/// The indexes of recently read files.
#[derive(Default)]
struct Indexes {
    files: HashMap<PathBuf, FileIndex>,
    tick: u64,
}

static INDEXES: LazyLock<Mutex<Indexes>> = LazyLock::new(Default::default);

// Bytes read from log files, per thread (tests check that a page costs a page).
#[cfg(test)]
thread_local! {
    static BYTES_READ: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

fn count_read(_n: usize) {
    #[cfg(test)]
    BYTES_READ.with(|b| b.set(b.get() + _n as u64));
}

/// A page of `path` from line `from` (1-based): whole lines up to [`LOG_PAGE_BYTES`] (at least
/// one), the last line's number, and the file's line count.
fn page(path: &Path, from: u64) -> std::io::Result<(String, u64, u64)> {
    let mut file = File::open(path)?;
    let len = file.metadata()?.len();
    // the index is taken out while this read uses it (another read of the same file builds
    // its own meanwhile; the last one put back stays)
    let mut index = {
        let mut all = INDEXES.lock();
        all.tick += 1;
        all.files.remove(path).unwrap_or_default()
    };
    index.extend(&mut file, len)?;
    let total = index.lines();
    let out = if from > total {
        (String::new(), from - 1, total)
    } else {
        let k = ((from - 1) / STRIDE) as usize;
        let (start, mut line) = (index.marks[k], k as u64 * STRIDE + 1);
        file.seek(SeekFrom::Start(start))?;
        let mut reader = BufReader::new(file.take(len - start));
        let mut buf = Vec::new();
        let mut content = String::new();
        let mut to = from - 1;
        loop {
            buf.clear();
            if reader.read_until(b'\n', &mut buf)? == 0 {
                break;
            }
            count_read(buf.len());
            if line >= from {
                let mut text: &[u8] = &buf;
                text = text.strip_suffix(b"\n").unwrap_or(text);
                text = text.strip_suffix(b"\r").unwrap_or(text);
                let text = String::from_utf8_lossy(text);
                if !content.is_empty() && content.len() + text.len() + 1 > LOG_PAGE_BYTES {
                    break;
                }
                content.push_str(&text);
                content.push('\n');
                to = line;
            }
            line += 1;
        }
        (content, to, total)
    };
    let mut all = INDEXES.lock();
    index.used = all.tick;
    if all.files.len() >= MAX_FILES
        && let Some(oldest) = all
            .files
            .iter()
            .min_by_key(|(_, i)| i.used)
            .map(|(p, _)| p.clone())
    {
        all.files.remove(&oldest);
    }
    all.files.insert(path.to_path_buf(), index);
    Ok(out)
}

/// Reads `<log_dir>/<day>/<logId>.log` from line `fromLineNum`: one page of whole lines (the
/// reader asks again from `toLineNum + 1` for the rest); past the end, no content and the
/// line count as `toLineNum` (as XXL-JOB answers). Blocking file I/O.
pub fn read_log(log_dir: Option<PathBuf>, clock: Clock, p: LogParam) -> ReturnT<LogResult> {
    let logger = JobLogger::new(log_dir, clock, p.log_id, p.log_date_tim);
    let missing = || ReturnT {
        code: SUCCESS_CODE,
        msg: None,
        content: Some(LogResult {
            from_line_num: p.from_line_num,
            to_line_num: 0,
            log_content: "readLog fail, logFile not exists".into(),
            is_end: true,
        }),
    };
    let Some(path) = logger.path() else {
        return missing();
    };
    let from = p.from_line_num.max(1) as u64;
    let Ok((content, to, total)) = page(path, from) else {
        return missing();
    };
    let to = if content.is_empty() { total } else { to };
    ReturnT {
        code: SUCCESS_CODE,
        msg: None,
        content: Some(LogResult {
            from_line_num: p.from_line_num,
            to_line_num: i32::try_from(to).unwrap_or(i32::MAX),
            log_content: content,
            is_end: false,
        }),
    }
}

/// [`read_log`] on the blocking pool, off the threads that serve requests and run actors,
/// after `first` (given the log id: it writes the run's log if it is still queued).
pub(crate) async fn read_log_blocking(
    log_dir: Option<PathBuf>,
    clock: Clock,
    p: LogParam,
    first: impl FnOnce(i64) + Send + 'static,
) -> ReturnT<LogResult> {
    tokio::task::spawn_blocking(move || {
        first(p.log_id);
        read_log(log_dir, clock, p)
    })
    .await
    .unwrap_or_else(|_| ReturnT {
        code: crate::model::wire::FAIL_CODE,
        msg: Some("reading the log failed".into()),
        content: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn reader(dir: &Path, log_id: i64, at: i64) -> impl Fn(i32) -> LogResult {
        let dir = dir.to_path_buf();
        move |from| {
            read_log(
                Some(dir.clone()),
                Clock::system(),
                LogParam {
                    log_date_tim: at,
                    log_id,
                    from_line_num: from,
                },
            )
            .content
            .unwrap()
        }
    }

    fn log_file(dir: &Path, log_id: i64, at: i64) -> PathBuf {
        let logger = JobLogger::new(Some(dir.to_path_buf()), Clock::system(), log_id, at);
        let path = logger.path().unwrap().clone();
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        path
    }

    /// A log larger than a page is read in pages of whole lines that, followed from
    /// `toLineNum + 1`, give back every line once and in order; past the end the line count.
    #[test]
    fn a_large_log_is_read_in_pages() {
        let dir = tempfile::tempdir().unwrap();
        let (log_id, at) = (42, 1_700_000_000_000);
        let path = log_file(dir.path(), log_id, at);
        let line = "x".repeat(999);
        let lines: Vec<String> = (0..3000).map(|i| format!("{i:05}{line}")).collect();
        std::fs::write(&path, lines.join("\n") + "\n").unwrap();
        let read = reader(dir.path(), log_id, at);
        let (mut from, mut got, mut pages) = (1, String::new(), 0);
        loop {
            let page = read(from);
            assert!(page.log_content.len() <= LOG_PAGE_BYTES);
            if page.log_content.is_empty() {
                assert_eq!(page.to_line_num, 3000, "past the end: the line count");
                break;
            }
            got.push_str(&page.log_content);
            from = page.to_line_num + 1;
            pages += 1;
        }
        assert_eq!(got, lines.join("\n") + "\n");
        assert!(pages >= 3, "about 3 MB in pages of at most 1 MiB: {pages}");
    }

    /// Once a file is indexed, a page costs what it reads plus at most one stride of lines,
    /// wherever it is in the file, and the file's growth is indexed alone.
    #[test]
    fn a_page_costs_a_page_not_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let (log_id, at) = (9, 1_700_000_000_000);
        let path = log_file(dir.path(), log_id, at);
        let line = format!("{}\n", "y".repeat(99));
        std::fs::write(&path, line.repeat(200_000)).unwrap(); // 20 MB, 200,000 lines
        let read = reader(dir.path(), log_id, at);
        let bytes = || BYTES_READ.with(|b| b.replace(0));
        read(1);
        let first = bytes();
        assert!(
            first >= 20_000_000,
            "the first read indexes the file: {first}"
        );
        for from in [150_000, 199_990, 3] {
            let p = read(from);
            assert!(p.log_content.starts_with("yyy"));
            let cost = bytes();
            let bound = (STRIDE * 100) + LOG_PAGE_BYTES as u64 + 100;
            assert!(cost <= bound, "line {from}: {cost} bytes read");
        }
        // the file grows by one line: only that line is indexed
        std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .unwrap()
            .write_all(b"new\n")
            .unwrap();
        let p = read(200_001);
        assert_eq!((p.log_content.as_str(), p.to_line_num), ("new\n", 200_001));
        let cost = bytes();
        assert!(cost <= STRIDE * 100 + 200, "{cost}");
    }

    /// Any line of a growing log reads as `str::lines` would give it, wherever it falls
    /// against the index's strides, with CRLF endings, invalid UTF-8 and a last line without
    /// its newline; the index follows the file as it grows and when it is replaced.
    #[test]
    fn pages_match_the_lines_of_a_growing_file() {
        let dir = tempfile::tempdir().unwrap();
        let (log_id, at) = (7, 1_700_000_000_000);
        let path = log_file(dir.path(), log_id, at);
        let read = reader(dir.path(), log_id, at);
        let mut bytes = Vec::new();
        for round in 0..3 {
            for i in 0..1500 {
                let end: &[u8] = if i % 7 == 0 { b"\r\n" } else { b"\n" };
                bytes.extend_from_slice(format!("r{round} line {i}").as_bytes());
                if i % 500 == 3 {
                    bytes.extend_from_slice(&[0xff, 0xfe]);
                }
                bytes.extend_from_slice(end);
            }
            bytes.extend_from_slice(b"tail without newline");
            std::fs::write(&path, &bytes).unwrap();
            let text = String::from_utf8_lossy(&bytes).into_owned();
            let want: Vec<&str> = text.lines().collect();
            let probes = [
                1,
                2,
                1024,
                1025,
                1026,
                2048,
                2049,
                3073,
                want.len() - 1,
                want.len(),
            ];
            for from in probes.into_iter().filter(|&f| f <= want.len()) {
                let p = read(from as i32);
                let first = p.log_content.lines().next().unwrap();
                assert_eq!(first, want[from - 1], "round {round}, line {from}");
                assert_eq!(p.to_line_num as usize, want.len(), "one page to the end");
            }
            let past = read(want.len() as i32 + 1);
            assert_eq!(
                (past.log_content.as_str(), past.to_line_num as usize),
                ("", want.len())
            );
            // the tail's line grows on in the next round
            bytes.extend_from_slice(b" (continued)\n");
        }
        // replaced by a shorter file: indexed anew
        std::fs::write(&path, "a\nb\n").unwrap();
        let p = read(2);
        assert_eq!((p.log_content.as_str(), p.to_line_num), ("b\n", 2));
    }
}
