//! ROUND: a per-job counter; the first use (or a counter past 1,000,000) starts at a random
//! value below 100, then it counts up; the address is `list[count mod len]`.

use rand::Rng;

/// Advances a job's counter and returns the index to use.
pub(super) fn next(count: &mut u64, len: usize, rng: &mut impl Rng) -> usize {
    *count = if *count == 0 || *count > 1_000_000 {
        // 0 marks an unused counter, so the random start is drawn from 1..=100
        rng.random_range(1..=100)
    } else {
        *count + 1
    };
    (*count % len as u64) as usize
}
