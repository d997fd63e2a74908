//! Command-line helpers shared by the bench examples (`loadbench`, `createbench`, `wfbench`); included
//! with `#[path]`, not an example of its own (each uses what it needs).
#![allow(dead_code)]

/// (utime + stime) of this process in seconds (10 ms ticks).
pub fn cpu_s() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    let after = stat.rsplit_once(')').map(|(_, r)| r).unwrap_or("");
    let f: Vec<&str> = after.split_whitespace().collect();
    let t = |i: usize| f.get(i).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
    (t(11) + t(12)) / 100.0
}

/// The value after `name` in `args`, if any.
pub fn arg(args: &[String], name: &str) -> Option<String> {
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1).cloned())
}

/// The `xjob` binary: `--xjob PATH`, else the one next to this example's directory
/// (`target/release/xjob` for `target/release/examples/…`); an error says how to build it.
pub fn xjob_binary(args: &[String]) -> anyhow::Result<std::path::PathBuf> {
    let xjob = match arg(args, "--xjob") {
        Some(p) => std::path::PathBuf::from(p),
        None => std::env::current_exe()?
            .parent()
            .and_then(|d| d.parent())
            .map(|d| d.join("xjob"))
            .ok_or_else(|| anyhow::anyhow!("cannot locate the xjob binary"))?,
    };
    anyhow::ensure!(
        xjob.exists(),
        "{} not found: build it with `cargo build --release` or pass --xjob PATH",
        xjob.display()
    );
    Ok(xjob)
}
