//! The `xjob` binary's tuning of its allocators: how long mimalloc keeps freed memory resident
//! before it is handed back to the operating system, and how many arenas glibc's `malloc`
//! (SQLite's allocator) spreads over.
//!
//! mimalloc 3 keeps memory a thread freed for 1 s before handing it back, so that the next
//! allocations reuse it. `xjob serve` allocates in bursts, once a second (a second's fires,
//! their requests, answers and rows), so with that delay it holds about a burst's worth of freed
//! memory at all times: at 5,000 fires/s about 14 MiB of a 60 MiB process (BENCHMARKS.md,
//! History, 2026-11-27, `0700b58`). Handed back at once, the process stays near what it uses,
//! for about 3 % more CPU (inside the run-to-run spread: the next burst faults its pages in
//! again).
//!
//! SQLite allocates through glibc's `malloc`, which gives each thread that allocates an arena of
//! its own (up to eight per core): the writer's thread and each pooled connection's thread keep
//! freed memory in theirs. Under the side-by-side harness the process's resident memory then
//! settled at 47 or at 54 MiB from one run to the next, depending on which pooled connections
//! had run the larger statements; with one arena for all, at 45–48 MiB, for no measurable CPU
//! (BENCHMARKS.md, History, 2026-11-27, `3e17be7`).
//!
//! glibc also keeps the pages SQLite frees inside its heap: it hands back only the heap's top,
//! and a block still in use near the top pins every free page below it. At 5,000 remote
//! fires/s about half the load bench's runs ended with 17–18 MB in glibc's heap for about 6 MB
//! in use, the others with 5–6 MB: the process's peak 62–65 MB against 52–54 MB. Once a second a
//! thread of the binary's asks glibc to hand back every whole free page (`malloc_trim`,
//! [`start_glibc_trimming`]), which brought such a heap from 17.7 to 7.3 MB (BENCHMARKS.md,
//! History, 2026-12-05, `05cd2ad`). Giving SQLite mimalloc's functions instead (`sqlite3_config`) ended the
//! large heaps too, but cost 0.8 µs of CPU per fire: mimalloc, with the purge delay below,
//! hands back SQLite's page-cache churn at every free.
//!
//! Setting these from the program takes calls through C (`mi_option_set`, `mallopt`,
//! `malloc_trim`), so they live in this crate, apart from the rest of the workspace, which
//! forbids `unsafe` code. An operator's `MIMALLOC_PURGE_DELAY` (read by mimalloc itself at
//! start) and `MALLOC_ARENA_MAX` or `GLIBC_TUNABLES` (read by glibc) are left as they are.

use std::time::Duration;

/// `mi_option_purge_delay` in mimalloc 3's `mi_option_t` (libmimalloc-sys 0.1.49 names no
/// constant for it; the test below checks the number against the option's default).
const PURGE_DELAY: libmimalloc_sys::mi_option_t = 15;

/// The environment variable mimalloc reads the purge delay from.
pub const PURGE_DELAY_VAR: &str = "MIMALLOC_PURGE_DELAY";

/// The variable's older name, which mimalloc still reads.
const LEGACY_VAR: &str = "MIMALLOC_RESET_DELAY";

/// The purge delay `xjob`'s binaries (`xjob`, the load bench) run with, in milliseconds:
/// freed memory goes back at once.
pub const PURGE_DELAY_MS: u32 = 0;

/// How often the binary's trimming thread hands glibc's free pages back
/// ([`start_glibc_trimming`]): its bursts come once a second.
pub const TRIM_PERIOD: Duration = Duration::from_secs(1);

/// Applies [`PURGE_DELAY_MS`] ([`default_purge_delay`]) and [`one_glibc_arena`], and starts the
/// trimming thread ([`start_glibc_trimming`] every [`TRIM_PERIOD`]); the first thing `main`
/// does, before it starts any other thread. Answers whether the purge delay was set.
pub fn tune() -> bool {
    one_glibc_arena();
    start_glibc_trimming(TRIM_PERIOD);
    default_purge_delay(PURGE_DELAY_MS)
}

/// Hands every whole free page inside glibc's heaps back to the system (`malloc_trim(0)`);
/// elsewhere than on glibc it does nothing. Answers whether any memory went back.
pub fn trim_glibc() -> bool {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        // SAFETY: `malloc_trim` takes any padding and only releases pages no allocation
        // holds, under the arenas' own locks; it may be called from any thread at any time.
        unsafe { libc::malloc_trim(0) == 1 }
    }
    #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
    false
}

/// Starts a thread (`xjob-trim`) that calls [`trim_glibc`] every `period` for the rest of the
/// process's life; on glibc only. Answers whether it started.
pub fn start_glibc_trimming(period: Duration) -> bool {
    if cfg!(not(all(target_os = "linux", target_env = "gnu"))) {
        return false;
    }
    std::thread::Builder::new()
        .name("xjob-trim".into())
        .spawn(move || {
            loop {
                std::thread::sleep(period);
                trim_glibc();
            }
        })
        .is_ok()
}

/// Limits glibc's `malloc` to one arena for every thread (`mallopt(M_ARENA_MAX, 1)`), unless
/// the environment sets `MALLOC_ARENA_MAX` or an `arena_max` in `GLIBC_TUNABLES`; elsewhere than
/// on glibc it does nothing. Answers whether it was set. Call it before starting threads: an
/// arena a thread already made stays.
pub fn one_glibc_arena() -> bool {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        let tuned = std::env::var_os("MALLOC_ARENA_MAX").is_some()
            || std::env::var("GLIBC_TUNABLES").is_ok_and(|t| t.contains("arena_max"));
        if tuned {
            return false;
        }
        // SAFETY: `mallopt` takes any parameter and value and answers whether it applied them;
        // `M_ARENA_MAX` only bounds the arenas glibc creates from then on.
        unsafe { libc::mallopt(libc::M_ARENA_MAX, 1) == 1 }
    }
    #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
    false
}

/// Sets mimalloc's purge delay to `ms` milliseconds (0: freed memory goes back at once), unless
/// the environment sets [`PURGE_DELAY_VAR`] (or its older name, `MIMALLOC_RESET_DELAY`). Answers whether it was set. Call it early in
/// `main`; it may be called at any time, from any thread.
pub fn default_purge_delay(ms: u32) -> bool {
    if [PURGE_DELAY_VAR, LEGACY_VAR]
        .iter()
        .any(|v| std::env::var_os(v).is_some())
    {
        return false;
    }
    // SAFETY: `mi_option_set` takes any option number and value; options are plain integers
    // mimalloc reads atomically, so a change while other threads allocate is allowed (it only
    // changes when their later frees are purged).
    unsafe { libmimalloc_sys::mi_option_set(PURGE_DELAY, ms.into()) };
    true
}

/// The purge delay mimalloc uses now, in milliseconds.
#[allow(
    clippy::useless_conversion,
    reason = "`c_long` is 32 bits on some targets"
)]
pub fn purge_delay() -> i64 {
    // SAFETY: reading an option has no precondition.
    i64::from(unsafe { libmimalloc_sys::mi_option_get(PURGE_DELAY) })
}

/// The system allocator, counting the bytes it holds and the most it held since
/// [`Counting::reset_peak`]: for tests that bound what an operation allocates (a request body's
/// cost in memory, say) as `#[global_allocator] static A: Counting = Counting::new();`.
pub struct Counting {
    held: std::sync::atomic::AtomicUsize,
    peak: std::sync::atomic::AtomicUsize,
}

impl Counting {
    /// A counter at zero.
    pub const fn new() -> Self {
        Counting {
            held: std::sync::atomic::AtomicUsize::new(0),
            peak: std::sync::atomic::AtomicUsize::new(0),
        }
    }

    /// Bytes held now.
    pub fn held(&self) -> usize {
        self.held.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// The most bytes held at once since the last [`Counting::reset_peak`].
    pub fn peak(&self) -> usize {
        self.peak.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Starts the peak over from what is held now.
    pub fn reset_peak(&self) {
        self.peak
            .store(self.held(), std::sync::atomic::Ordering::Relaxed);
    }

    fn grew(&self, by: usize) {
        use std::sync::atomic::Ordering::Relaxed;
        let now = self.held.fetch_add(by, Relaxed) + by;
        self.peak.fetch_max(now, Relaxed);
    }

    fn shrank(&self, by: usize) {
        self.held
            .fetch_sub(by, std::sync::atomic::Ordering::Relaxed);
    }
}

impl Default for Counting {
    fn default() -> Self {
        Counting::new()
    }
}

// SAFETY: every call is passed to the system allocator unchanged; the counters are atomics
// updated after a successful allocation and before a release, so they never affect what the
// system allocator is asked.
unsafe impl std::alloc::GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: std::alloc::Layout) -> *mut u8 {
        // SAFETY: the caller's contract for `alloc` is the system allocator's.
        let p = unsafe { std::alloc::System.alloc(layout) };
        if !p.is_null() {
            self.grew(layout.size());
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: std::alloc::Layout) {
        self.shrank(layout.size());
        // SAFETY: `ptr` and `layout` come from this allocator, i.e. from the system's.
        unsafe { std::alloc::System.dealloc(ptr, layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: std::alloc::Layout) -> *mut u8 {
        // SAFETY: as for `alloc`.
        let p = unsafe { std::alloc::System.alloc_zeroed(layout) };
        if !p.is_null() {
            self.grew(layout.size());
        }
        p
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: std::alloc::Layout, new_size: usize) -> *mut u8 {
        // SAFETY: the caller's contract for `realloc` is the system allocator's.
        let p = unsafe { std::alloc::System.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            self.grew(new_size);
            self.shrank(layout.size());
        }
        p
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// glibc takes the one-arena limit (unless the environment set its own).
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    #[test]
    fn glibc_is_limited_to_one_arena() {
        let tuned = std::env::var_os("MALLOC_ARENA_MAX").is_some()
            || std::env::var("GLIBC_TUNABLES").is_ok_and(|t| t.contains("arena_max"));
        assert_eq!(one_glibc_arena(), !tuned);
    }

    /// Free pages below a block still in use stay resident until trimmed: after freeing all but
    /// the last of 16,384 blocks of 4 KiB (64 MiB, below glibc's mmap threshold, so from its
    /// heap), the trim hands at least half of them back.
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    #[test]
    fn trimming_hands_back_the_free_pages_a_live_block_pins() {
        fn resident_bytes() -> usize {
            let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
            let kib: usize = status
                .lines()
                .find_map(|l| l.strip_prefix("VmRSS:"))
                .and_then(|v| v.split_whitespace().next())
                .and_then(|v| v.parse().ok())
                .unwrap_or(0);
            kib * 1024
        }
        const BLOCK: usize = 4096;
        const BLOCKS: usize = 16_384;
        // SAFETY: each block is allocated by glibc, written within its size, and freed once.
        let (before, after) = unsafe {
            let blocks: Vec<*mut libc::c_void> = (0..BLOCKS)
                .map(|_| {
                    let p = libc::malloc(BLOCK);
                    assert!(!p.is_null());
                    std::ptr::write_bytes(p.cast::<u8>(), 1, BLOCK);
                    p
                })
                .collect();
            for &p in &blocks[..BLOCKS - 1] {
                libc::free(p);
            }
            let before = resident_bytes();
            assert!(trim_glibc(), "the free pages went back");
            let after = resident_bytes();
            libc::free(blocks[BLOCKS - 1]);
            (before, after)
        };
        assert!(
            before.saturating_sub(after) >= BLOCK * BLOCKS / 2,
            "resident {before} bytes before the trim, {after} after"
        );
    }

    /// The option numbered [`PURGE_DELAY`] is the purge delay: its default is mimalloc 3's 1,000
    /// ms (unless the environment set one), and it takes what is set.
    #[test]
    fn the_option_is_the_purge_delay() {
        match std::env::var(PURGE_DELAY_VAR).or_else(|_| std::env::var(LEGACY_VAR)) {
            Ok(v) => {
                assert_eq!(Some(purge_delay()), v.parse().ok());
                assert!(!default_purge_delay(0), "the environment's setting is kept");
            }
            Err(_) => {
                assert_eq!(purge_delay(), 1_000, "mimalloc 3's default");
                assert!(default_purge_delay(0));
                assert_eq!(purge_delay(), 0);
            }
        }
    }
}
