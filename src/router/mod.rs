//! Executor routing (protocol.md §7.6): picks an address from a group's list for one trigger.
//!
//! One file per strategy. FIRST, LAST, RANDOM, ROUND, CONSISTENT_HASH, LEAST_FREQUENTLY_USED
//! and LEAST_RECENTLY_USED are synchronous ([`Router::pick`]); FAILOVER and BUSYOVER probe
//! executors ([`failover`], [`busyover`]); SHARDING_BROADCAST is expanded into shards by the
//! trigger procedure ([`sharding_broadcast`]). Per-job state is wiped every 24 hours, as XXL-JOB
//! does, and the consistent-hash ring is built once per address list and cached.

pub(crate) mod busyover;
mod consistent_hash;
pub(crate) mod failover;
mod first;
mod last;
mod lfu;
mod lru;
pub(crate) mod probe;
mod random;
mod round;
pub(crate) mod sharding_broadcast;

use std::collections::HashMap;
use std::sync::Arc;

use parking_lot::Mutex;

pub(crate) use consistent_hash::HashRing;

use crate::model::RouteStrategy;

/// Per-job routing state lives this long before it is wiped (protocol.md §7.6).
pub(crate) const STATE_TTL_MS: i64 = 24 * 3600 * 1000;

#[derive(Default)]
struct State {
    expires_at: i64,
    round: HashMap<i32, u64>,
    lfu: HashMap<i32, lfu::Counts>,
    lru: HashMap<i32, lru::Order>,
    rings: HashMap<Vec<String>, Arc<HashRing>>,
    /// The ring used last, checked first (most jobs of a node share few lists).
    last_ring: Option<(Vec<String>, Arc<HashRing>)>,
}

/// Routing state shared by every trigger of a node.
#[derive(Default)]
pub struct Router {
    state: Mutex<State>,
}

impl Router {
    /// A router with empty state.
    pub fn new() -> Self {
        Self::default()
    }

    /// Picks an address with a synchronous strategy; `None` for an empty list or a strategy that
    /// needs probes (FAILOVER, BUSYOVER) or expansion (SHARDING_BROADCAST).
    pub fn pick(
        &self,
        strategy: RouteStrategy,
        job_id: i32,
        addresses: &[String],
        now_ms: i64,
    ) -> Option<String> {
        if addresses.is_empty() {
            return None;
        }
        // one address: every strategy that picks from the list picks it (no state to keep)
        if addresses.len() == 1
            && !matches!(
                strategy,
                RouteStrategy::Failover
                    | RouteStrategy::Busyover
                    | RouteStrategy::ShardingBroadcast
            )
        {
            return Some(addresses[0].clone());
        }
        let mut rng = rand::rng();
        let mut st = self.state.lock();
        if now_ms >= st.expires_at {
            st.round.clear();
            st.lfu.clear();
            st.lru.clear();
            st.expires_at = now_ms + STATE_TTL_MS;
        }
        let i = match strategy {
            RouteStrategy::First => first::pick(addresses.len()),
            RouteStrategy::Last => last::pick(addresses.len()),
            RouteStrategy::Random => random::pick(addresses.len(), &mut rng),
            RouteStrategy::Round => round::next(
                st.round.entry(job_id).or_default(),
                addresses.len(),
                &mut rng,
            ),
            RouteStrategy::LeastFrequentlyUsed => {
                st.lfu.entry(job_id).or_default().pick(addresses, &mut rng)
            }
            RouteStrategy::LeastRecentlyUsed => st.lru.entry(job_id).or_default().pick(addresses),
            RouteStrategy::ConsistentHash => {
                if st.rings.len() > 1024 {
                    st.rings.clear();
                }
                // the last list first, then by slice; the list is copied only for a new ring
                let ring = match &st.last_ring {
                    Some((l, r)) if l.as_slice() == addresses => r.clone(),
                    _ => {
                        let r = match st.rings.get(addresses) {
                            Some(r) => r.clone(),
                            None => {
                                let r = Arc::new(HashRing::new(addresses));
                                st.rings.insert(addresses.to_vec(), r.clone());
                                r
                            }
                        };
                        st.last_ring = Some((addresses.to_vec(), r.clone()));
                        r
                    }
                };
                return ring.pick(job_id).map(str::to_string);
            }
            RouteStrategy::Failover
            | RouteStrategy::Busyover
            | RouteStrategy::ShardingBroadcast => {
                return None;
            }
        };
        addresses.get(i).cloned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn addrs(n: usize) -> Vec<String> {
        (0..n).map(|i| format!("http://10.0.0.{i}:9999/")).collect()
    }

    /// With one address every list strategy picks it (no per-job state is kept), and the
    /// probing ones still answer `None` here (the trigger routes them itself).
    #[test]
    fn one_address_is_picked_by_every_list_strategy() {
        let r = Router::new();
        let a = addrs(1);
        for &s in RouteStrategy::ALL {
            let probing = matches!(
                s,
                RouteStrategy::Failover
                    | RouteStrategy::Busyover
                    | RouteStrategy::ShardingBroadcast
            );
            let want = if probing { None } else { Some(a[0].clone()) };
            assert_eq!(r.pick(s, 7, &a, 0), want, "{s:?}");
        }
        assert!(
            r.state.lock().round.is_empty(),
            "no round-robin state for one address"
        );
    }

    /// FIRST and LAST pick the ends of the list; an empty list picks nothing.
    #[test]
    fn first_last_and_empty() {
        let r = Router::new();
        let a = addrs(3);
        assert_eq!(r.pick(RouteStrategy::First, 1, &a, 0), Some(a[0].clone()));
        assert_eq!(r.pick(RouteStrategy::Last, 1, &a, 0), Some(a[2].clone()));
        assert_eq!(r.pick(RouteStrategy::Round, 1, &[], 0), None);
        assert_eq!(r.pick(RouteStrategy::Failover, 1, &a, 0), None);
    }

    /// ROUND spreads a job's fires evenly over its addresses.
    #[test]
    fn round_is_fair() {
        let r = Router::new();
        let a = addrs(4);
        let mut counts = HashMap::new();
        for _ in 0..400 {
            let p = r.pick(RouteStrategy::Round, 7, &a, 0).expect("pick");
            *counts.entry(p).or_insert(0) += 1;
        }
        assert!(counts.values().all(|&c| c == 100), "{counts:?}");
    }

    /// LEAST_RECENTLY_USED goes through every address before repeating one.
    #[test]
    fn lru_cycles_through_every_address() {
        let r = Router::new();
        let a = addrs(3);
        let picks: Vec<_> = (0..6)
            .map(|_| {
                r.pick(RouteStrategy::LeastRecentlyUsed, 1, &a, 0)
                    .expect("pick")
            })
            .collect();
        assert_eq!(picks[..3], a[..]);
        assert_eq!(picks[3..], a[..]);
    }

    /// LEAST_FREQUENTLY_USED keeps the use counts of addresses within one of each other.
    #[test]
    fn lfu_balances_use() {
        let r = Router::new();
        let a = addrs(3);
        let mut counts = HashMap::new();
        for _ in 0..300 {
            let p = r
                .pick(RouteStrategy::LeastFrequentlyUsed, 1, &a, 0)
                .expect("pick");
            *counts.entry(p).or_insert(0) += 1;
        }
        let (min, max) = (
            counts.values().min().copied().unwrap_or(0),
            counts.values().max().copied().unwrap_or(0),
        );
        assert!(max - min <= 3, "{counts:?}");
    }
}
