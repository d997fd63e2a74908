//! Routing strategies as properties: CONSISTENT_HASH matches a reference written from the spec's
//! algorithm, ignores address order, and moves about 1/(n+1) of the jobs (and only to the new
//! executor) when one joins; ROUND and LEAST_FREQUENTLY_USED spread evenly; LEAST_RECENTLY_USED
//! always picks the address used longest ago.
#![allow(clippy::unwrap_used)]

use std::collections::{BTreeMap, HashMap};

use md5::{Digest, Md5};
use proptest::prelude::*;
use xjob::model::RouteStrategy;
use xjob::testing::Router;

/// The spec's algorithm, written out independently: 100 virtual nodes `SHARD-<addr>-NODE-<i>`,
/// MD5, first four digest bytes little-endian, first node at or above the job's hash.
fn reference(addresses: &[String]) -> impl Fn(i32) -> String {
    let h = |k: &str| {
        let d = Md5::digest(k.as_bytes());
        (d[3] as u32) << 24 | (d[2] as u32) << 16 | (d[1] as u32) << 8 | d[0] as u32
    };
    let mut ring = BTreeMap::new();
    for a in addresses {
        for i in 0..100 {
            ring.insert(h(&format!("SHARD-{a}-NODE-{i}")), a.clone());
        }
    }
    move |job_id| {
        let jh = h(&job_id.to_string());
        ring.range(jh..)
            .next()
            .or_else(|| ring.iter().next())
            .unwrap()
            .1
            .clone()
    }
}

fn addrs(n: usize, salt: u32) -> Vec<String> {
    (0..n)
        .map(|i| format!("http://10.{salt}.0.{i}:9999/"))
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// CONSISTENT_HASH picks what the reference algorithm picks for the same jobs and addresses.
    #[test]
    fn consistent_hash_matches_the_reference(n in 1usize..12, salt in 0u32..200, jobs in prop::collection::vec(1i32..1_000_000, 1..50)) {
        let r = Router::new();
        let a = addrs(n, salt);
        let want = reference(&a);
        for j in jobs {
            prop_assert_eq!(r.pick(RouteStrategy::ConsistentHash, j, &a, 0).unwrap(), want(j));
        }
    }

    /// CONSISTENT_HASH's pick does not depend on the order of the address list.
    #[test]
    fn consistent_hash_ignores_address_order(n in 2usize..12, salt in 0u32..200, seed in any::<u64>()) {
        let r = Router::new();
        let a = addrs(n, salt);
        let mut b = a.clone();
        // a seeded shuffle
        let mut s = seed;
        for i in (1..b.len()).rev() {
            s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            b.swap(i, (s >> 33) as usize % (i + 1));
        }
        for j in 1..500 {
            prop_assert_eq!(
                r.pick(RouteStrategy::ConsistentHash, j, &a, 0),
                r.pick(RouteStrategy::ConsistentHash, j, &b, 0)
            );
        }
    }
}

/// Adding an executor moves about 1/(n+1) of the jobs, and only to the new one.
#[test]
fn adding_an_executor_moves_about_one_in_n_plus_one_jobs_and_only_to_it() {
    let r = Router::new();
    for n in [2usize, 3, 5, 8] {
        let before = addrs(n, 7);
        let mut after = before.clone();
        after.push("http://10.7.1.99:9999/".into());
        let jobs = 1..=20_000;
        let mut moved = 0;
        for j in jobs.clone() {
            let x = r
                .pick(RouteStrategy::ConsistentHash, j, &before, 0)
                .unwrap();
            let y = r.pick(RouteStrategy::ConsistentHash, j, &after, 0).unwrap();
            if x != y {
                moved += 1;
                assert_eq!(y, after[n], "a job only ever moves to the new executor");
            }
        }
        let frac = moved as f64 / 20_000.0;
        let ideal = 1.0 / (n as f64 + 1.0);
        assert!(
            frac > ideal * 0.6 && frac < ideal * 1.5,
            "n={n}: moved {frac:.3}, ideal {ideal:.3}"
        );
    }
}

/// ROUND and LFU spread evenly over many jobs; LRU picks the least recently used address.
#[test]
fn round_and_lfu_spread_evenly_and_lru_picks_the_eldest() {
    let r = Router::new();
    let a = addrs(5, 1);
    for strategy in [RouteStrategy::Round, RouteStrategy::LeastFrequentlyUsed] {
        let mut counts: HashMap<String, usize> = HashMap::new();
        for _ in 0..500 {
            *counts
                .entry(r.pick(strategy, 42, &a, 0).unwrap())
                .or_default() += 1;
        }
        let (min, max) = (
            counts.values().min().unwrap(),
            counts.values().max().unwrap(),
        );
        // ROUND differs by at most 1; LFU starts each address at a random count below 5 (XXL-JOB's
        // rule), so its picks differ by at most that head start plus one
        assert!(
            counts.len() == 5 && max - min <= 5,
            "{strategy}: {counts:?}"
        );
    }
    // LRU: after using the list once, a new address joins as newest; the eldest comes next
    let mut b = a.clone();
    let first: Vec<_> = (0..5)
        .map(|_| r.pick(RouteStrategy::LeastRecentlyUsed, 7, &b, 0).unwrap())
        .collect();
    assert_eq!(first, a);
    b.push("http://10.1.9.9:9999/".into());
    assert_eq!(
        r.pick(RouteStrategy::LeastRecentlyUsed, 7, &b, 0).unwrap(),
        a[0]
    );
    // an address that leaves is dropped; state is per job
    b.remove(1);
    assert_eq!(
        r.pick(RouteStrategy::LeastRecentlyUsed, 7, &b, 0).unwrap(),
        a[2]
    );
    assert_eq!(
        r.pick(RouteStrategy::LeastRecentlyUsed, 8, &b, 0).unwrap(),
        b[0]
    );
    // per-job state is wiped after 24 hours
    let day = 24 * 3600 * 1000;
    assert_eq!(
        r.pick(RouteStrategy::LeastRecentlyUsed, 7, &b, day + 1)
            .unwrap(),
        b[0]
    );
}
