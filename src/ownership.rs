//! Which buckets of jobs this node schedules, as the scan and dispatch see it (in memory; the
//! lease actor keeps it in step with the `xjob_lease` table).
//!
//! A SQLite database serves one node, which owns every bucket ([`Ownership::all`]). On a
//! shared database a node owns the buckets it holds a lease on, each at its epoch, until a
//! local deadline: the moment the renewal that granted it was sent, plus the lease time, minus
//! a margin. The database's expiry of the same lease is later than that deadline (the renewal
//! reached the database after it was sent), so a node stops dispatching a bucket's fires before
//! any other node may take the bucket over, whatever the nodes' clocks say.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

use parking_lot::RwLock;

use crate::store::leases::{BUCKETS, Lease, Taken, bucket_of};

/// A bucket this node holds.
#[derive(Clone, Copy, Debug)]
struct Held {
    epoch: i64,
    /// Past this instant the lease may have expired in the database: nothing more is done
    /// with the bucket until a renewal says otherwise.
    valid_until: Instant,
    /// Being handed back (a node joined): fires are recorded only up to this nominal time
    /// (epoch ms); the bucket is released once they have all had their second, and its next
    /// holder records from there.
    releasing: Option<i64>,
    /// Just taken over: the previous holder's fires after this nominal time (epoch ms) were
    /// never sent; the next scan pass takes them over (`None` once it did).
    takeover: Option<i64>,
}

#[derive(Debug, Default)]
struct State {
    /// Owns every bucket with no lease (one node on its database).
    all: bool,
    held: HashMap<i32, Held>,
    /// Buckets were given up since the lease keeper last looked ([`Ownership::give_up`]).
    gave_up: bool,
}

/// What a scan pass records fires for.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct ScanSet {
    /// Every bucket, without leases (a SQLite database).
    pub all: bool,
    /// The leases to record fires for, checked again by the pass's transaction before it
    /// commits.
    pub leases: Vec<Lease>,
    /// Buckets being handed back: fires are recorded for them only up to this nominal time.
    pub caps: HashMap<i32, i64>,
    /// Leases just taken over, with the nominal time through which their previous holder
    /// dispatched: the pass takes over the fires recorded for them.
    pub takeovers: Vec<(Lease, i64)>,
}

impl ScanSet {
    /// Whether the pass has nothing to record.
    pub(crate) fn is_empty(&self) -> bool {
        !self.all && self.leases.is_empty()
    }

    /// Whether the pass covers every bucket (its reads need no bucket filter).
    pub(crate) fn covers_all(&self) -> bool {
        self.all || self.leases.len() == BUCKETS as usize
    }

    /// The buckets of the pass (empty when it covers all).
    pub(crate) fn buckets(&self) -> Vec<i32> {
        if self.covers_all() {
            return Vec::new();
        }
        self.leases.iter().map(|l| l.bucket).collect()
    }

    /// The last nominal time a fire of `job_id` may be recorded for (`None`: no limit).
    pub(crate) fn cap_of(&self, job_id: i32) -> Option<i64> {
        if self.caps.is_empty() {
            return None;
        }
        self.caps.get(&bucket_of(job_id)).copied()
    }

    /// The epoch a fire of `job_id` is recorded under (0 without leases).
    pub(crate) fn epoch_of(&self, job_id: i32) -> i64 {
        let b = bucket_of(job_id);
        self.leases
            .iter()
            .find(|l| l.bucket == b)
            .map_or(0, |l| l.epoch)
    }
}

/// This node's buckets (cheap to clone; one shared state).
#[derive(Clone, Debug, Default)]
pub(crate) struct Ownership(Arc<RwLock<State>>);

impl Ownership {
    /// Every bucket, for good (a node alone on its SQLite database).
    pub(crate) fn all() -> Self {
        Ownership(Arc::new(RwLock::new(State {
            all: true,
            ..State::default()
        })))
    }

    /// No bucket yet: the lease actor takes them.
    pub(crate) fn leased() -> Self {
        Ownership::default()
    }

    /// Whether buckets come from leases.
    pub(crate) fn is_leased(&self) -> bool {
        !self.0.read().all
    }

    /// What a scan pass at `now` (`now_ms` on the engine's clock) records fires for.
    pub(crate) fn scan_set(&self, now: Instant, now_ms: i64) -> ScanSet {
        let s = self.0.read();
        if s.all {
            return ScanSet {
                all: true,
                ..Default::default()
            };
        }
        let mut set = ScanSet::default();
        for (&bucket, h) in &s.held {
            if h.valid_until <= now {
                continue;
            }
            let lease = Lease {
                bucket,
                epoch: h.epoch,
            };
            if let Some(through) = h.takeover {
                set.takeovers.push((lease, through));
            }
            match h.releasing {
                None => set.leases.push(lease),
                Some(cutoff) if cutoff > now_ms => {
                    set.leases.push(lease);
                    set.caps.insert(bucket, cutoff);
                }
                Some(_) => {}
            }
        }
        set.leases.sort();
        set.takeovers.sort();
        set
    }

    /// The scan took over the fires of these leases.
    pub(crate) fn took_over(&self, leases: &[(Lease, i64)]) {
        let mut s = self.0.write();
        for (l, _) in leases {
            if let Some(h) = s.held.get_mut(&l.bucket).filter(|h| h.epoch == l.epoch) {
                h.takeover = None;
            }
        }
    }

    /// Whether a fire of `job_id` recorded at `epoch` may be dispatched by this node at `now`.
    pub(crate) fn dispatchable(&self, job_id: i32, epoch: i64, now: Instant) -> bool {
        let s = self.0.read();
        s.all
            || s.held
                .get(&bucket_of(job_id))
                .is_some_and(|h| h.epoch == epoch && h.valid_until > now)
    }

    /// The leases (as held now) of the buckets of these job ids, each once.
    pub(crate) fn leases_of(&self, job_ids: impl Iterator<Item = i32>) -> Vec<Lease> {
        let s = self.0.read();
        let mut out: Vec<Lease> = job_ids
            .map(bucket_of)
            .filter_map(|b| {
                s.held.get(&b).map(|h| Lease {
                    bucket: b,
                    epoch: h.epoch,
                })
            })
            .collect();
        out.sort();
        out.dedup();
        out
    }

    /// Every lease held now.
    pub(crate) fn held(&self) -> Vec<Lease> {
        let s = self.0.read();
        let mut out: Vec<Lease> = s
            .held
            .iter()
            .map(|(&bucket, h)| Lease {
                bucket,
                epoch: h.epoch,
            })
            .collect();
        out.sort();
        out
    }

    /// How many buckets are held, and how many of them are being handed back.
    pub(crate) fn counts(&self) -> (usize, usize) {
        let s = self.0.read();
        let releasing = s.held.values().filter(|h| h.releasing.is_some()).count();
        (s.held.len(), releasing)
    }

    /// A renewal sent before `valid_until - lease + margin` found exactly `leases` still held:
    /// those this node knows stay valid until `valid_until`; every other bucket is gone.
    /// Answers the leases the database holds for this node that it does not know (taken in a
    /// round whose answer was lost): the caller hands them back.
    pub(crate) fn renewed(&self, leases: &[Lease], valid_until: Instant) -> Vec<Lease> {
        let mut s = self.0.write();
        let keep: HashMap<i32, i64> = leases.iter().map(|l| (l.bucket, l.epoch)).collect();
        s.held
            .retain(|b, h| keep.get(b).is_some_and(|&e| e == h.epoch));
        let mut unknown = Vec::new();
        for l in leases {
            match s.held.get_mut(&l.bucket) {
                Some(h) => h.valid_until = valid_until,
                None => unknown.push(*l),
            }
        }
        unknown
    }

    /// Leases just taken (at `valid_until`): the next scan takes over their fires.
    pub(crate) fn taken(&self, taken: &[Taken], valid_until: Instant) {
        let mut s = self.0.write();
        for t in taken {
            s.held.insert(
                t.lease.bucket,
                Held {
                    epoch: t.lease.epoch,
                    valid_until,
                    releasing: None,
                    takeover: Some(t.dispatched_through),
                },
            );
        }
    }

    /// Starts handing back `n` of the held buckets (the highest numbers, not yet being handed
    /// back): fires are recorded for them up to `cutoff_ms` only. Answers how many were marked.
    pub(crate) fn start_releasing(&self, n: usize, cutoff_ms: i64) -> usize {
        let mut s = self.0.write();
        let mut candidates: Vec<i32> = s
            .held
            .iter()
            .filter(|(_, h)| h.releasing.is_none())
            .map(|(&b, _)| b)
            .collect();
        candidates.sort_unstable_by(|a, b| b.cmp(a));
        let mut marked = 0;
        for b in candidates.into_iter().take(n) {
            if let Some(h) = s.held.get_mut(&b) {
                h.releasing = Some(cutoff_ms);
                marked += 1;
            }
        }
        marked
    }

    /// Stops handing back buckets (this node's share grew again): answers how many.
    pub(crate) fn keep_releasing(&self, n: usize) -> usize {
        let mut s = self.0.write();
        let mut kept = 0;
        for h in s.held.values_mut() {
            if kept == n {
                break;
            }
            if h.releasing.take().is_some() {
                kept += 1;
            }
        }
        kept
    }

    /// The leases being handed back whose last recorded fire is at or before `done_ms` (it
    /// has had its second): ready to release.
    pub(crate) fn drained(&self, done_ms: i64) -> Vec<Lease> {
        let s = self.0.read();
        let mut out: Vec<Lease> = s
            .held
            .iter()
            .filter(|(_, h)| h.releasing.is_some_and(|cutoff| cutoff <= done_ms))
            .map(|(&bucket, h)| Lease {
                bucket,
                epoch: h.epoch,
            })
            .collect();
        out.sort();
        out
    }

    /// Forgets `leases` (released, or found lost).
    pub(crate) fn forget(&self, leases: &[Lease]) {
        Self::remove(&mut self.0.write(), leases);
    }

    /// Removes the `leases` held at their epochs; answers whether any was.
    fn remove(s: &mut State, leases: &[Lease]) -> bool {
        let mut any = false;
        for l in leases {
            if s.held.get(&l.bucket).is_some_and(|h| h.epoch == l.epoch) {
                s.held.remove(&l.bucket);
                any = true;
            }
        }
        any
    }

    /// Gives `leases` up while the database still holds them in this node's name (their
    /// dispatch mark could not be written): forgets them, and the lease keeper's next round
    /// reconciles ([`Ownership::take_gave_up`]): it hands them back and takes buckets again at
    /// new epochs, so their fires go out within a round, from this node or another. A node's
    /// leases are renewed all at once through its own row, so without that round the database
    /// would go on holding them for a live node that no longer sends their fires.
    pub(crate) fn give_up(&self, leases: &[Lease]) {
        let mut s = self.0.write();
        if Self::remove(&mut s, leases) {
            s.gave_up = true;
        }
    }

    /// Whether buckets were given up since the last call.
    pub(crate) fn take_gave_up(&self) -> bool {
        std::mem::take(&mut self.0.write().gave_up)
    }
}

/// This node's fair share of the buckets among `nodes` (sorted ids of the live nodes): an
/// equal part, the first `BUCKETS % n` nodes one more, so the shares add up to every bucket.
pub(crate) fn fair_share(nodes: &[String], me: &str) -> usize {
    let n = nodes.len().max(1);
    let base = BUCKETS as usize / n;
    let extra = BUCKETS as usize % n;
    let at = nodes.iter().position(|x| x == me).unwrap_or(n - 1);
    base + usize::from(at < extra)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    /// Shares add up to every bucket, differ by at most one, and follow the node order.
    #[test]
    fn shares_cover_every_bucket() {
        for n in 1..=7 {
            let nodes: Vec<String> = (0..n).map(|i| format!("n{i}")).collect();
            let shares: Vec<usize> = nodes.iter().map(|me| fair_share(&nodes, me)).collect();
            assert_eq!(shares.iter().sum::<usize>(), BUCKETS as usize, "{n} nodes");
            let (lo, hi) = (shares.iter().min().unwrap(), shares.iter().max().unwrap());
            assert!(hi - lo <= 1, "{shares:?}");
        }
    }

    /// The `n`th job id (from 1) in `bucket`.
    fn job_in(bucket: i32, n: usize) -> i32 {
        (1..).filter(|&id| bucket_of(id) == bucket).nth(n).unwrap()
    }

    /// A held lease is dispatchable at its epoch until its deadline; a renewal keeps only what
    /// the database still holds; a taken lease is scanned and taken over once.
    #[test]
    fn leases_are_dispatchable_until_their_deadline() {
        let (j1, j1b, j2, j3) = (job_in(1, 0), job_in(1, 1), job_in(2, 0), job_in(3, 0));
        let o = Ownership::leased();
        let t0 = Instant::now();
        let until = t0 + Duration::from_secs(2);
        let lease = |bucket, epoch| Lease { bucket, epoch };
        o.taken(
            &[
                Taken {
                    lease: lease(1, 5),
                    dispatched_through: 100,
                },
                Taken {
                    lease: lease(2, 7),
                    dispatched_through: 0,
                },
            ],
            until,
        );
        assert!(o.dispatchable(j1, 5, t0));
        assert!(o.dispatchable(j1b, 5, t0), "another job of bucket 1");
        assert!(!o.dispatchable(j1, 4, t0), "an older epoch's fire");
        assert!(!o.dispatchable(j1, 5, until), "past the deadline");
        assert!(!o.dispatchable(j3, 0, t0), "a bucket not held");
        let set = o.scan_set(t0, 0);
        assert_eq!(set.leases, vec![lease(1, 5), lease(2, 7)]);
        assert_eq!(set.takeovers, vec![(lease(1, 5), 100), (lease(2, 7), 0)]);
        assert_eq!(set.buckets(), vec![1, 2]);
        o.took_over(&set.takeovers);
        assert!(o.scan_set(t0, 0).takeovers.is_empty());
        // the database still holds only bucket 1 (and 9, which this node never knew it took)
        let unknown = o.renewed(&[lease(1, 5), lease(9, 1)], t0 + Duration::from_secs(4));
        assert_eq!(unknown, vec![lease(9, 1)]);
        assert!(o.dispatchable(j1, 5, until), "renewed");
        assert!(!o.dispatchable(j2, 7, t0), "bucket 2 is gone");
        // handing back: recorded up to the cutoff only, still dispatchable, released once the
        // cutoff has passed
        assert_eq!(o.start_releasing(5, 10_000), 1);
        let set = o.scan_set(t0, 9_000);
        assert_eq!(
            (set.leases.clone(), set.cap_of(j1)),
            (vec![lease(1, 5)], Some(10_000))
        );
        assert!(
            o.scan_set(t0, 10_000).leases.is_empty(),
            "nothing more to record"
        );
        assert!(o.dispatchable(j1, 5, t0));
        assert!(o.drained(9_999).is_empty());
        assert_eq!(o.drained(10_000), vec![lease(1, 5)]);
        o.forget(&[lease(1, 5)]);
        assert_eq!(o.counts(), (0, 0));
        assert!(Ownership::all().dispatchable(42, 0, t0));
        assert!(Ownership::all().scan_set(t0, 0).covers_all());
    }

    /// Leases given up are forgotten and leave word for the lease keeper once; a lease at
    /// another epoch than the one held (already replaced) leaves none.
    #[test]
    fn leases_given_up_ask_for_a_reconciling_round_once() {
        let o = Ownership::leased();
        let t0 = Instant::now();
        let lease = |bucket, epoch| Lease { bucket, epoch };
        let taken = |l| Taken {
            lease: l,
            dispatched_through: 0,
        };
        o.taken(
            &[taken(lease(1, 5)), taken(lease(2, 7))],
            t0 + Duration::from_secs(2),
        );
        o.give_up(&[lease(1, 4)]);
        assert!(!o.take_gave_up(), "an epoch no longer held");
        assert_eq!(o.counts(), (2, 0));
        o.give_up(&[lease(1, 5)]);
        assert_eq!(o.held(), vec![lease(2, 7)]);
        assert!(o.take_gave_up());
        assert!(!o.take_gave_up(), "said once");
        o.forget(&[lease(2, 7)]);
        assert!(!o.take_gave_up(), "a lease released or lost is no reason");
    }
}
