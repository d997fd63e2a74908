//! Command-line helpers shared by the bench examples (`loadbench`, `createbench`); included
//! with `#[path]`, not an example of its own (each uses what it needs).
#![allow(dead_code)]

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
