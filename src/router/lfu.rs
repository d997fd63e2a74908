//! LEAST_FREQUENTLY_USED: per-job use counts; new addresses (or counts past 1,000,000) start at
//! a random count below the list length; addresses gone from the list are dropped; the least
//! used address is picked (ties by list order) and its count incremented.
//!
//! Counts are kept aligned with the list they were last synced with, so a pick over an
//! unchanged list is one scan of a vector, with no hashing.

use std::collections::HashMap;

use rand::Rng;

/// One job's counts, index-aligned with `list`.
#[derive(Default)]
pub(super) struct Counts {
    list: Vec<String>,
    counts: Vec<u64>,
}

impl Counts {
    pub(super) fn pick(&mut self, addresses: &[String], rng: &mut impl Rng) -> usize {
        let n = addresses.len() as u64;
        if self.list.as_slice() != addresses {
            // re-align: keep the counts of addresses still present, seed the new ones
            let old: HashMap<&String, u64> =
                self.list.iter().zip(self.counts.iter().copied()).collect();
            self.counts = addresses
                .iter()
                .map(|a| {
                    old.get(a)
                        .copied()
                        .unwrap_or_else(|| rng.random_range(0..n))
                })
                .collect();
            self.list = addresses.to_vec();
        }
        let mut best = 0;
        for i in 0..self.counts.len() {
            if self.counts[i] > 1_000_000 {
                self.counts[i] = rng.random_range(0..n);
            }
            if self.counts[i] < self.counts[best] {
                best = i;
            }
        }
        if let Some(c) = self.counts.get_mut(best) {
            *c += 1;
        }
        best
    }
}
