//! Script (GLUE) jobs (protocol.md §6.9): the source is written once per version to
//! `<logpath>/gluesource/<jobId>_<glueUpdatetime><suffix>` and run as
//! `<cmd> <file> <param> <shardIndex> <shardTotal>` in its own process group; stdout and stderr
//! go to the run log; a non-zero exit fails the run. Dropping the run (timeout, kill, cover)
//! kills the whole process group, so a runaway script and its children really stop.

use std::path::{Path, PathBuf};
use std::process::Stdio;

use tokio::io::{AsyncBufReadExt, BufReader};

use super::{Handler, JobContext};
use crate::model::GlueType;

/// The interpreter and file suffix of a script glue type.
pub(crate) fn command(glue: GlueType) -> Option<(&'static str, &'static str)> {
    match glue {
        GlueType::GlueShell => Some(("bash", ".sh")),
        GlueType::GluePython => Some(("python3", ".py")),
        GlueType::GluePhp => Some(("php", ".php")),
        GlueType::GlueNodejs => Some(("node", ".js")),
        GlueType::GluePowershell => Some(("pwsh", ".ps1")),
        GlueType::Bean | GlueType::GlueGroovy => None,
    }
}

/// Kills a process group when dropped before the script finished.
struct GroupGuard {
    pgid: Option<u32>,
}

impl Drop for GroupGuard {
    fn drop(&mut self) {
        if let Some(pgid) = self.pgid.take() {
            // the `kill` utility reaches the whole group (negative pid) without unsafe code
            let _ = std::process::Command::new("kill")
                .args(["-KILL", "--", &format!("-{pgid}")])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status();
        }
    }
}

/// Removes older sources of `job_id` (a new handler starts from its own version).
pub(crate) fn clear_sources(dir: &Path, job_id: i32) {
    let prefix = format!("{job_id}_");
    if let Ok(entries) = std::fs::read_dir(dir) {
        for e in entries.flatten() {
            if e.file_name().to_string_lossy().starts_with(&prefix) {
                let _ = std::fs::remove_file(e.path());
            }
        }
    }
}

/// A handler running `source` as a script of type `glue`.
pub(crate) fn handler(
    glue: GlueType,
    job_id: i32,
    version_ms: i64,
    source: String,
    root: PathBuf,
) -> Option<Handler> {
    let (cmd, suffix) = command(glue)?;
    let dir = root.join("gluesource");
    clear_sources(&dir, job_id);
    let file = dir.join(format!("{job_id}_{version_ms}{suffix}"));
    Some(Handler::new(move |ctx: JobContext| {
        let (dir, file, source) = (dir.clone(), file.clone(), source.clone());
        async move { run(cmd, &dir, &file, &source, ctx).await }
    }))
}

async fn run(
    cmd: &str,
    dir: &Path,
    file: &Path,
    source: &str,
    ctx: JobContext,
) -> super::JobResult {
    if !file.exists() {
        std::fs::create_dir_all(dir)?;
        std::fs::write(file, source)?;
    }
    let args = [
        file.as_os_str().to_owned(),
        ctx.param.clone().into(),
        ctx.shard_index.to_string().into(),
        ctx.shard_total.to_string().into(),
    ];
    run_process("script", cmd, &args, ctx).await
}

/// Runs `program` with `args` (a `what`: script or command) in its own process group, its stdout and stderr copied into the
/// run log; a non-zero exit fails the run. Dropping the future (timeout, kill, cover) kills the
/// whole group.
pub(crate) async fn run_process(
    what: &str,
    program: &str,
    args: &[std::ffi::OsString],
    ctx: JobContext,
) -> super::JobResult {
    let mut command = tokio::process::Command::new(program);
    command
        .args(args)
        .process_group(0)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    // on the process's CPUs, not only the one the in-process executor's thread is kept on
    let mut child = crate::with_process_cpus(|| command.spawn()).map_err(|e| {
        anyhow::anyhow!("{what} exit value(-1) is failed: cannot start `{program}`: {e}")
    })?;
    let mut guard = GroupGuard { pgid: child.id() };
    let (out, err) = (child.stdout.take(), child.stderr.take());
    let (status, _, _) = tokio::join!(child.wait(), pump(out, ctx.clone()), pump(err, ctx.clone()));
    guard.pgid = None;
    let status = status?;
    match status.code() {
        Some(0) => Ok(()),
        Some(n) => Err(anyhow::anyhow!("{what} exit value({n}) is failed")),
        None => Err(anyhow::anyhow!(
            "{what} exit value(-1) is failed: killed by a signal"
        )),
    }
}

/// Copies a script's output, line by line, into the run log. Lines are bytes: one that is not
/// UTF-8 is logged with its invalid bytes replaced, and the pump goes on reading (stopping
/// would lose the rest and could kill the script with SIGPIPE).
async fn pump<R: tokio::io::AsyncRead + Unpin>(out: Option<R>, ctx: JobContext) {
    if let Some(out) = out {
        let mut reader = BufReader::new(out);
        let mut line = Vec::new();
        loop {
            line.clear();
            match reader.read_until(b'\n', &mut line).await {
                Ok(0) | Err(_) => break,
                Ok(_) => {
                    while matches!(line.last(), Some(b'\n' | b'\r')) {
                        line.pop();
                    }
                    ctx.log(String::from_utf8_lossy(&line));
                }
            }
        }
    }
}
