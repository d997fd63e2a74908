//! Where the node's threads run: the SQLite writer on a CPU of its own, the thread that
//! dispatches kept off it, the writer yielding to a thread that shares its CPU, and processes
//! that jobs start given every CPU the process had (`database.separate_writer_cpu`). Linux only
//! (`sched_setaffinity`, `setpriority`, through rustix); elsewhere every call does nothing.

/// On a machine with several CPUs: keeps the calling (dispatch) thread off one CPU and
/// answers that CPU, for the writer thread alone. The writer is woken by every batch the
/// dispatch queues and wakes the dispatch in turn; left free, Linux moves the two onto one
/// CPU (wake-affine) while another idles, and the dispatch is preempted for a scheduler
/// tick (4 ms) in the middle of a second's burst of fires. Measured on 2 CPUs: 1,000
/// fires/s p99 8 → 5 ms, 10,000 fires/s p99 38 → 26 ms (BENCHMARKS.md, 2026-11-23, b6f5efe).
pub(crate) fn separate_cpus() -> Option<usize> {
    #[cfg(target_os = "linux")]
    {
        use rustix::thread::{CpuSet, sched_getaffinity, sched_setaffinity};
        let allowed = sched_getaffinity(None).ok()?;
        if allowed.count() < 2 {
            return None;
        }
        // the first engine's record stands: a later one may start on a thread kept off a CPU
        let _ = PROCESS_CPUS.set(allowed);
        let writer = (0..CpuSet::MAX_CPU).rev().find(|&c| allowed.is_set(c))?;
        let mut rest = allowed;
        rest.unset(writer);
        if let Err(e) = sched_setaffinity(None, &rest) {
            tracing::debug!(error = %e, "cannot keep the dispatch thread off the writer's CPU");
            return None;
        }
        Some(writer)
    }
    #[cfg(not(target_os = "linux"))]
    None
}

/// The CPUs the process's threads could use before [`separate_cpus`] kept its caller off one.
#[cfg(target_os = "linux")]
static PROCESS_CPUS: std::sync::OnceLock<rustix::thread::CpuSet> = std::sync::OnceLock::new();

/// Runs `f` with the calling thread allowed on every CPU the process had before the engine
/// placed its threads (`database.separate_writer_cpu`), then puts the thread back. A process
/// started in `f` inherits that wider set: a script job started on the in-process executor's
/// thread (kept on the writer's CPU) would otherwise run, with everything it starts, on that
/// one CPU. Without such a placement (one CPU, the setting off, another OS) it only runs `f`.
pub fn with_process_cpus<T>(f: impl FnOnce() -> T) -> T {
    #[cfg(target_os = "linux")]
    if let Some(all) = PROCESS_CPUS.get() {
        use rustix::thread::{sched_getaffinity, sched_setaffinity};
        if let Ok(mine) = sched_getaffinity(None)
            && mine != *all
            && sched_setaffinity(None, all).is_ok()
        {
            let out = f();
            if let Err(e) = sched_setaffinity(None, &mine) {
                tracing::debug!(error = %e, "cannot put this thread back on its CPUs");
            }
            return out;
        }
    }
    f()
}

/// Keeps the calling thread on `cpu`.
pub(crate) fn pin(cpu: usize) {
    #[cfg(target_os = "linux")]
    {
        let mut one = rustix::thread::CpuSet::new();
        one.set(cpu);
        if let Err(e) = rustix::thread::sched_setaffinity(None, &one) {
            tracing::debug!(error = %e, cpu, "cannot keep this thread on one CPU");
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = cpu;
}

/// The niceness the writer takes when the in-process executor's thread shares its CPU
/// ([`yield_cpu`]).
const YIELDING_NICE: i32 = 10;

/// Lowers the calling (writer) thread's priority so that a thread sharing its CPU runs first
/// when both are ready: the in-process executor starting a second's handlers must not wait
/// behind a batch of row writes, which have the rest of the second. Measured at 10,000
/// fires/s in process: p99 lateness 37–41 → 25–29 ms with the executor on this CPU; the
/// executor there without it, 34–43 (BENCHMARKS.md, 2026-11-26, d98c68c).
pub(crate) fn yield_cpu() {
    #[cfg(target_os = "linux")]
    {
        let me = rustix::thread::gettid();
        if let Err(e) = rustix::process::setpriority_process(Some(me), YIELDING_NICE) {
            tracing::debug!(error = %e, "cannot lower the SQLite writer's priority");
        }
    }
}
