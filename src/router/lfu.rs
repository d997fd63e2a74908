//! LEAST_FREQUENTLY_USED: per-job use counts; new addresses (or counts past 1,000,000) start at
//! a random count below the list length; addresses gone from the list are dropped; the least
//! used address is picked (ties by list order) and its count incremented.

use std::collections::HashMap;

use rand::Rng;

/// One job's counts.
#[derive(Default)]
pub(super) struct Counts(HashMap<String, u64>);

impl Counts {
    pub(super) fn pick(&mut self, addresses: &[String], rng: &mut impl Rng) -> usize {
        self.0.retain(|a, _| addresses.contains(a));
        let mut best = 0;
        let mut best_count = u64::MAX;
        for (i, a) in addresses.iter().enumerate() {
            let c = self
                .0
                .entry(a.clone())
                .or_insert_with(|| rng.random_range(0..addresses.len() as u64));
            if *c > 1_000_000 {
                *c = rng.random_range(0..addresses.len() as u64);
            }
            if *c < best_count {
                best = i;
                best_count = *c;
            }
        }
        if let Some(c) = self.0.get_mut(&addresses[best]) {
            *c += 1;
        }
        best
    }
}
