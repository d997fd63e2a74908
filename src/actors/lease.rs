//! LeaseActor: this node's share of the buckets on a shared database (PostgreSQL, MySQL).
//!
//! Every [`RENEW`]: renews the node's lease, and with it every bucket it holds, with one update
//! of its `xjob_node` row (on the database's clock; a node whose lease lapsed rejoins holding
//! nothing) and reads the live nodes; takes free or expired buckets up to its fair share
//! ([`fair_share`]), and rescues the buckets of nodes that lapsed (a round looks for them only
//! while a node lapsed recently, and every [`RECONCILE_EVERY`] rounds); when its share shrank (a node joined) starts handing back
//! its extras: their fires are recorded up to a cutoff one pre-read window ahead, and the
//! buckets are released a second before it ([`Ownership::drained`]); the next holder takes over
//! the fires not sent yet and records from the cutoff on, so there is no gap and no overlap
//! (a fire goes out only under a dispatch mark its holder wrote while holding the lease). A bucket
//! whose lease lapsed (the node stalled, or the database was unreachable) is dropped locally
//! before the database can give it to another node (see [`crate::ownership`]). Taking buckets
//! wakes the scan at once ([`ScanNow`]) so their fires are taken over quickly.
//!
//! Messages: [`ReleaseAll`] (engine stop: hand every bucket back and leave).

use std::time::{Duration, Instant};

use actix::prelude::*;
use sea_orm::DatabaseConnection;

use crate::activity::Activity;
use crate::actors::scan::{ScanActor, ScanNow};
use crate::clock::Clock;
use crate::metrics::Metrics;
use crate::ownership::{Ownership, fair_share};
use crate::store::leases;

/// How often leases are renewed and shares balanced.
pub(crate) const RENEW: Duration = Duration::from_millis(500);
/// How long a lease lasts past its renewal (the database's clock); also how long a node
/// without a heartbeat counts as live. A dead node's buckets are taken over within about this
/// plus [`RENEW`].
pub(crate) const LEASE_MS: i64 = 2_500;
/// A bucket whose holder's lease lapsed this long ago is taken by any node, beyond its share:
/// while the shares still count a node that stalled, a dead node's buckets must not wait.
const RESCUE_AFTER_MS: i64 = 500;
/// Taken off the lease time for the local deadline: covers the renewal's round trip after it
/// was sent and the time to stop dispatching.
const MARGIN_MS: i64 = 500;
/// How long a silent node's row stays before any node deletes it.
const FORGET_NODE_MS: i64 = 3_600_000;
/// Every this many rounds (and after a round that failed, or once dispatch gave buckets up), a
/// round reads the leases the database holds in this node's name (a round whose answer was lost
/// may have taken some; dispatch may have given some up) and looks for buckets to rescue even
/// when no node lapsed recently (a holder whose row is gone).
pub(crate) const RECONCILE_EVERY: u64 = 20;

/// The node a lease round is for.
pub(crate) struct RoundOf<'a> {
    /// Its id in the lease table.
    pub(crate) node: &'a str,
    /// Its address, shown to operators.
    pub(crate) address: &'a str,
    /// The buckets it holds.
    pub(crate) ownership: &'a Ownership,
    /// How long a bucket it hands back drains first, ms.
    pub(crate) drain_ms: i64,
    pub(crate) metrics: &'a Metrics,
    /// Read the leases held in the database and look for buckets to rescue whatever the
    /// nodes' table says ([`RECONCILE_EVERY`]).
    pub(crate) reconcile: bool,
}

/// One round of node `of.node`: renew, balance, hand back what is drained. `sent`
/// is now on the monotonic clock (the leases renewed stay valid until `sent` plus the lease time
/// minus a margin), `now_ms` on the engine's (fires' nominal times). Answers how many buckets
/// were taken.
pub(crate) async fn round(
    store: &impl leases::LeaseStore,
    of: &RoundOf<'_>,
    sent: Instant,
    now_ms: i64,
) -> crate::Result<usize> {
    let RoundOf {
        node,
        address,
        ownership,
        drain_ms,
        metrics,
        reconcile,
    } = *of;
    let valid = sent + Duration::from_millis((LEASE_MS - MARGIN_MS) as u64);
    let (renewal, nodes) = store
        .renew_and_read(node, address, LEASE_MS, RESCUE_AFTER_MS)
        .await?;
    let (before, _) = ownership.counts();
    let held = match renewal {
        // nothing was taken from a node whose lease never lapsed
        leases::Renewal::Renewed if !reconcile => ownership.held(),
        leases::Renewal::Renewed => store.held(node).await?,
        leases::Renewal::Rejoined => Vec::new(),
    };
    let unknown = ownership.renewed(&held, valid);
    if !unknown.is_empty() {
        store.release(node, &unknown).await?;
    }
    let (after, _) = ownership.counts();
    let lost = before.saturating_sub(after);
    if lost > 0 {
        metrics.leases_lost(lost);
        tracing::warn!(
            lost,
            "leases lapsed before their renewal; their buckets go to other nodes"
        );
    }
    metrics.leases_renewed(after);
    // a live node keeping leases by other rules (another build, started meanwhile): take and
    // hand back nothing while it is there (the leases held are kept; a bucket it took from a
    // lapsed node could have its fires sent twice)
    let frozen = !nodes.other_rules.is_empty();
    if frozen && reconcile {
        tracing::error!(
            nodes = ?nodes.other_rules,
            "a node of another xjob version is live on this database: this node takes and hands \
             back no bucket until it stops (stop every node of one version)"
        );
    }
    let (owned, releasing) = ownership.counts();
    let share = if frozen {
        owned
    } else {
        fair_share(&nodes.live, node)
    };
    let keeping = owned - releasing;
    // first take back buckets this node was handing back, then free ones up to the share,
    // and (whatever the share) the buckets of a holder whose lease lapsed a while ago
    let want = if keeping < share {
        let kept = ownership.keep_releasing(share - keeping);
        share - keeping - kept
    } else {
        0
    };
    let t = if !frozen && (want > 0 || reconcile || !nodes.lapsed.is_empty()) {
        store.acquire(node, want, RESCUE_AFTER_MS).await?
    } else {
        Vec::new()
    };
    let taken = t.len();
    ownership.taken(&t, valid);
    let (owned, releasing) = ownership.counts();
    let keeping = owned - releasing;
    if keeping > share {
        let n = ownership.start_releasing(keeping - share, now_ms + drain_ms);
        tracing::info!(
            buckets = n,
            share,
            nodes = nodes.live.len(),
            "handing buckets back to the other nodes"
        );
    }
    // released a second before the cutoff: every fire up to the cutoff is recorded by then
    // (the scan reads jobs due within half its window, once a second); the ones not sent yet
    // go out from the next holder, which takes them over at once (this node can no longer
    // mark them sent), and it records from the cutoff on, so none is late
    let ready = ownership.drained(now_ms + 1_000);
    if !ready.is_empty() {
        let n = store.release(node, &ready).await?;
        ownership.forget(&ready);
        tracing::info!(released = n, "buckets handed back");
    }
    let (owned, _) = ownership.counts();
    metrics.buckets_owned(owned);
    if taken > 0 {
        tracing::info!(
            taken,
            owned,
            share,
            nodes = nodes.live.len(),
            "buckets taken"
        );
    }
    Ok(taken)
}

/// Hands every bucket back and leaves the cluster (engine stop); answers once done.
#[derive(Message, Debug)]
#[rtype(result = "()")]
pub(crate) struct ReleaseAll;

/// The lease keeper of one node.
pub(crate) struct LeaseActor {
    db: DatabaseConnection,
    node: String,
    address: String,
    ownership: Ownership,
    /// The engine's clock (fires' nominal times).
    clock: Clock,
    /// A bucket handed back gets fires recorded up to this far ahead (the scan's pre-read
    /// window), then is released once they have had their second.
    drain_ms: i64,
    scan: Option<Addr<ScanActor>>,
    metrics: Metrics,
    activity: Activity,
    busy: bool,
    stopped: bool,
    /// Rounds started.
    rounds: u64,
    /// The last round failed (its answer may be lost): the next one reconciles.
    failed: bool,
    /// The failure last logged, and the round that logged it ([`log_again`]).
    logged: Option<(String, u64)>,
}

/// Whether a round's failure `msg` is logged at round `round`: a new failure at once, the same
/// one again every [`RECONCILE_EVERY`] rounds (10 s), not twice a second while, say, a node of
/// another version keeps this one out. Remembers what it logged in `logged`.
fn log_again(logged: &mut Option<(String, u64)>, msg: &str, round: u64) -> bool {
    let again = match logged {
        Some((last, at)) => last != msg || round >= *at + RECONCILE_EVERY,
        None => true,
    };
    if again {
        *logged = Some((msg.to_string(), round));
    }
    again
}

/// What a [`LeaseActor`] is built from.
pub(crate) struct LeaseWiring {
    pub(crate) db: DatabaseConnection,
    /// This node's id in the lease table.
    pub(crate) node: String,
    /// Its address, shown to operators.
    pub(crate) address: String,
    pub(crate) ownership: Ownership,
    pub(crate) clock: Clock,
    /// `scheduler.pre_read_ms`: how long a bucket handed back drains.
    pub(crate) pre_read_ms: i64,
    pub(crate) metrics: Metrics,
    pub(crate) activity: Activity,
}

impl LeaseActor {
    /// The keeper of node `node`'s leases (`address` is shown to operators).
    pub(crate) fn new(w: LeaseWiring) -> Self {
        let LeaseWiring {
            db,
            node,
            address,
            ownership,
            clock,
            pre_read_ms,
            metrics,
            activity,
        } = w;
        LeaseActor {
            db,
            node,
            address,
            ownership,
            clock,
            drain_ms: pre_read_ms.max(0),
            scan: None,
            metrics,
            activity,
            busy: false,
            stopped: false,
            rounds: 0,
            failed: false,
            logged: None,
        }
    }

    /// Wakes `scan` when buckets are taken.
    pub(crate) fn wake(mut self, scan: Addr<ScanActor>) -> Self {
        self.scan = Some(scan);
        self
    }

    fn tick(&mut self, ctx: &mut Context<Self>) {
        if self.busy || self.stopped {
            return;
        }
        self.busy = true;
        let reconcile = self.ownership.take_gave_up()
            || self.failed
            || self.rounds.is_multiple_of(RECONCILE_EVERY);
        self.rounds += 1;
        let (db, node, address) = (self.db.clone(), self.node.clone(), self.address.clone());
        let (ownership, metrics) = (self.ownership.clone(), self.metrics.clone());
        let (clock, drain_ms) = (self.clock.clone(), self.drain_ms);
        let guard = self.activity.enter();
        ctx.spawn(
            async move {
                let _guard = guard;
                let now = clock.now_ms();
                let store = leases::Sql(&db);
                let of = RoundOf {
                    node: &node,
                    address: &address,
                    ownership: &ownership,
                    drain_ms,
                    metrics: &metrics,
                    reconcile,
                };
                round(&store, &of, Instant::now(), now).await
            }
            .into_actor(self)
            .map(|res, act, _| {
                act.busy = false;
                act.failed = res.is_err();
                match res {
                    Ok(taken) if taken > 0 => {
                        if let Some(scan) = &act.scan {
                            scan.do_send(ScanNow);
                        }
                    }
                    Ok(_) => {}
                    Err(e) => {
                        let msg = e.to_string();
                        if log_again(&mut act.logged, &msg, act.rounds) {
                            tracing::warn!(error = %msg, "lease round failed; retrying");
                        }
                    }
                }
                if !act.failed {
                    act.logged = None;
                }
            }),
        );
    }
}

impl Actor for LeaseActor {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Self::Context) {
        self.tick(ctx);
        ctx.run_interval(RENEW, |a, ctx| a.tick(ctx));
    }
}

impl Handler<ReleaseAll> for LeaseActor {
    type Result = ResponseFuture<()>;

    fn handle(&mut self, _: ReleaseAll, _ctx: &mut Self::Context) -> Self::Result {
        self.stopped = true;
        let (db, node, ownership) = (self.db.clone(), self.node.clone(), self.ownership.clone());
        Box::pin(async move {
            let held = ownership.held();
            match leases::release(&db, &node, &held).await {
                Ok(n) => tracing::info!(released = n, "buckets handed back at stop"),
                Err(e) => tracing::warn!(error = %e, "could not hand buckets back; they lapse"),
            }
            ownership.forget(&held);
            if let Err(e) = leases::leave(&db, &node, FORGET_NODE_MS).await {
                tracing::warn!(error = %e, "could not remove this node's row");
            }
        })
    }
}

#[cfg(test)]
mod tests {
    //! Bucket ownership on paused time against a model of the lease table (the semantics of
    //! `store/leases.rs`, on a simulated database clock): N nodes with skewed clocks run the
    //! real lease rounds and [`Ownership`], record fires under fencing and dispatch them under
    //! dispatch marks (through the real [`Ring`]), while random nodes crash, stall past their
    //! leases, restart and fail to write a dispatch mark.
    use super::*;
    use crate::actors::ring::Ring;
    use crate::fire::Fire;
    use crate::model::TriggerType;
    use crate::store::leases::{
        BUCKETS, Lease, LeaseStore, Nodes, RECENT_LAPSE_MS, Renewal, Taken, bucket_of,
    };
    use proptest::prelude::*;
    use std::cell::RefCell;
    use std::collections::{BTreeMap, HashMap};

    /// A lease row of the model.
    #[derive(Clone, Debug, Default)]
    struct Row {
        owner: Option<String>,
        epoch: i64,
        through: i64,
    }

    /// The shared database: lease and node tables, and the fires (one job per bucket, firing
    /// every second; a fire is (bucket, nominal second in ms)).
    #[derive(Default)]
    struct Db {
        now: i64,
        leases: Vec<Row>,
        nodes: HashMap<String, i64>,
        /// Per bucket: the next nominal time not yet recorded (the job's trigger_next_time).
        next: Vec<i64>,
        /// Pending fires: (bucket, t) → the epoch that recorded it.
        pending: BTreeMap<(i32, i64), i64>,
        /// Fires no node sends again (recorded at or before a dispatch mark, found pending).
        handed_over: Vec<(i32, i64)>,
        /// Fires sent, by which node.
        sent: HashMap<(i32, i64), Vec<String>>,
        /// A fire was late past the misfire threshold when taken over.
        misfired: Vec<(i32, i64)>,
    }

    struct Model(RefCell<Db>);

    impl Model {
        fn new(start: i64) -> Self {
            Model(RefCell::new(Db {
                now: start,
                leases: vec![Row::default(); BUCKETS as usize],
                next: vec![start + 1_000; BUCKETS as usize],
                ..Default::default()
            }))
        }
        fn held_by(&self, node: &str, l: &Lease) -> bool {
            let db = self.0.borrow();
            let r = &db.leases[l.bucket as usize];
            r.owner.as_deref() == Some(node) && r.epoch == l.epoch && db.valid(node, 0)
        }
    }

    impl Db {
        /// Whether `node`'s lease is valid at `now - slack`.
        fn valid(&self, node: &str, slack: i64) -> bool {
            self.nodes
                .get(node)
                .is_some_and(|&until| until > self.now - slack)
        }
    }

    impl LeaseStore for Model {
        async fn renew(&self, node: &str, _: &str, lease_ms: i64) -> crate::Result<Renewal> {
            let mut db = self.0.borrow_mut();
            let now = db.now;
            if db.valid(node, 0) {
                db.nodes.insert(node.to_string(), now + lease_ms);
                return Ok(Renewal::Renewed);
            }
            for r in db.leases.iter_mut() {
                if r.owner.as_deref() == Some(node) {
                    r.owner = None;
                }
            }
            db.nodes.insert(node.to_string(), now + lease_ms);
            Ok(Renewal::Rejoined)
        }
        async fn nodes(&self, rescue_after_ms: i64) -> crate::Result<Nodes> {
            let db = self.0.borrow();
            let mut out = Nodes::default();
            let mut ids: Vec<(&String, &i64)> = db.nodes.iter().collect();
            ids.sort();
            for (id, until) in ids {
                let left = until - db.now;
                if left > 0 {
                    out.live.push(id.clone());
                } else if left <= -rescue_after_ms && left > -RECENT_LAPSE_MS {
                    out.lapsed.push(id.clone());
                }
            }
            Ok(out)
        }
        async fn held(&self, node: &str) -> crate::Result<Vec<Lease>> {
            let db = self.0.borrow();
            if !db.valid(node, 0) {
                return Ok(vec![]);
            }
            Ok(db
                .leases
                .iter()
                .enumerate()
                .filter(|(_, r)| r.owner.as_deref() == Some(node))
                .map(|(b, r)| Lease {
                    bucket: b as i32,
                    epoch: r.epoch,
                })
                .collect())
        }
        async fn acquire(
            &self,
            node: &str,
            n: usize,
            rescue_after_ms: i64,
        ) -> crate::Result<Vec<Taken>> {
            let mut db = self.0.borrow_mut();
            if !db.valid(node, 0) {
                return Ok(vec![]);
            }
            let owners: Vec<(bool, bool)> = db
                .leases
                .iter()
                .map(|r| match r.owner.as_deref() {
                    None => (true, false),
                    Some(o) => (!db.valid(o, 0), !db.valid(o, rescue_after_ms)),
                })
                .collect();
            let mut out = vec![];
            let mut free = 0;
            for (b, r) in db.leases.iter_mut().enumerate() {
                let (lapsed, orphan) = owners[b];
                let take = orphan || (lapsed && free < n);
                if lapsed && !orphan && free < n {
                    free += 1;
                }
                if take {
                    r.owner = Some(node.to_string());
                    r.epoch += 1;
                    out.push(Taken {
                        lease: Lease {
                            bucket: b as i32,
                            epoch: r.epoch,
                        },
                        dispatched_through: r.through,
                    });
                }
            }
            Ok(out)
        }
        async fn release(&self, node: &str, leases: &[Lease]) -> crate::Result<u64> {
            let mut db = self.0.borrow_mut();
            let mut n = 0;
            for l in leases {
                let r = &mut db.leases[l.bucket as usize];
                if r.owner.as_deref() == Some(node) && r.epoch == l.epoch {
                    r.owner = None;
                    n += 1;
                }
            }
            Ok(n)
        }
    }

    /// One node of the simulation.
    struct Node {
        id: String,
        ownership: Ownership,
        /// Its clock's offset from the database's.
        skew: i64,
        /// Fires waiting for their second, as the node's ring actor holds them.
        ring: Ring,
        /// Fires the ring answered due at once, sent at the next tick.
        now_due: Vec<Fire>,
        /// Stalled until this database time (its state kept, as a `kill -STOP`).
        stalled_until: i64,
        /// The next tick with fires to send fails to write their dispatch mark.
        mark_fails: bool,
    }

    /// The fire of `bucket` at `t`, recorded under `epoch` (its log id names both).
    fn fire_of(bucket: i32, t: i64, epoch: i64) -> Fire {
        Fire {
            log_id: i64::from(bucket) * 1_000_000_000 + t,
            job_id: job_of(bucket),
            fire_time: t,
            trigger_type: TriggerType::Cron,
            job: None,
            read_ms: 0,
            epoch,
        }
    }

    /// A job of `bucket` (the model's fires are per bucket; ownership checks take job ids).
    fn job_of(bucket: i32) -> i32 {
        (1..).find(|&id| bucket_of(id) == bucket).unwrap_or(0)
    }

    const PRE_READ: i64 = 5_000;
    const MISFIRE: i64 = 5_000;

    /// A scan pass of `n` at database time `now`: takes over, records under the fence.
    fn scan(model: &Model, n: &mut Node, jobs: &[i32], now: i64, sent: Instant) {
        let local = now + n.skew;
        let set = n.ownership.scan_set(sent, local);
        if set.is_empty() && set.takeovers.is_empty() {
            return;
        }
        let mut all: Vec<Lease> = set.leases.clone();
        all.extend(set.takeovers.iter().map(|(l, _)| *l));
        // fenced: the whole pass commits only while every lease is still this node's
        if !all.iter().all(|l| model.held_by(&n.id, l)) {
            return;
        }
        let mut db = model.0.borrow_mut();
        let mut recorded = Vec::new();
        for (l, through) in &set.takeovers {
            let fires: Vec<((i32, i64), i64)> = db
                .pending
                .range((l.bucket, i64::MIN)..=(l.bucket, i64::MAX))
                .map(|(k, e)| (*k, *e))
                .collect();
            for ((b, t), _) in fires {
                db.pending.remove(&(b, t));
                if t <= *through {
                    db.handed_over.push((b, t));
                } else if local > t + MISFIRE {
                    db.misfired.push((b, t));
                } else {
                    db.pending.insert((b, t), l.epoch);
                    recorded.push(fire_of(b, t, l.epoch));
                }
            }
        }
        for l in &set.leases {
            let b = l.bucket as usize;
            let cap = set
                .cap_of(jobs[b])
                .unwrap_or(i64::MAX)
                .min(local + PRE_READ);
            while db.next[b] <= cap {
                let t = db.next[b];
                if local > t + MISFIRE {
                    db.misfired.push((l.bucket, t));
                } else {
                    db.pending.insert((l.bucket, t), l.epoch);
                    recorded.push(fire_of(l.bucket, t, l.epoch));
                }
                db.next[b] += 1_000;
            }
        }
        drop(db);
        let now_due = n.ring.push(recorded, local);
        n.now_due.extend(now_due);
        n.ownership.took_over(&set.takeovers);
    }

    /// The ring's tick of `n` at database time `now`: sends the due fires it may, under a
    /// dispatch mark written while it holds their leases; when the mark cannot be written, it
    /// gives those leases up and sends nothing, as the trigger pool does.
    fn tick(model: &Model, n: &mut Node, jobs: &[i32], now: i64, sent: Instant) {
        let local = now + n.skew;
        let mut due = std::mem::take(&mut n.now_due);
        due.extend(n.ring.take_due(local));
        let mut by_lease: BTreeMap<Lease, Vec<i64>> = BTreeMap::new();
        for f in due {
            let b = bucket_of(f.job_id);
            if n.ownership.dispatchable(jobs[b as usize], f.epoch, sent) {
                by_lease
                    .entry(Lease {
                        bucket: b,
                        epoch: f.epoch,
                    })
                    .or_default()
                    .push(f.fire_time);
            }
        }
        if n.mark_fails && !by_lease.is_empty() {
            n.mark_fails = false;
            n.ownership
                .give_up(&by_lease.keys().copied().collect::<Vec<_>>());
            return;
        }
        for (l, ts) in by_lease {
            // the mark: conditional on the lease, in the database
            if !model.held_by(&n.id, &l) {
                n.ownership.forget(&[l]);
                continue;
            }
            let mut db = model.0.borrow_mut();
            let through = ts.iter().copied().max().unwrap_or(0);
            let r = &mut db.leases[l.bucket as usize];
            r.through = r.through.max(through);
            for t in ts {
                // sent: the row is no longer pending
                db.pending.remove(&(l.bucket, t));
                db.sent.entry((l.bucket, t)).or_default().push(n.id.clone());
            }
        }
    }

    #[derive(Clone, Debug)]
    enum Event {
        Crash(usize),
        Stall(usize, i64),
        Restart(usize),
        /// The node's next dispatch mark cannot be written (its connection broke).
        MarkFails(usize),
    }

    fn events() -> impl Strategy<Value = Vec<(i64, Event)>> {
        let event = prop_oneof![
            (0..3usize).prop_map(Event::Crash),
            (0..3usize, 1_000..6_000i64).prop_map(|(n, d)| Event::Stall(n, d)),
            (0..3usize).prop_map(Event::Restart),
            (0..3usize).prop_map(Event::MarkFails),
        ];
        prop::collection::vec((8_000..40_000i64, event), 0..6)
    }

    /// On PostgreSQL and MySQL/MariaDB: a node's first round takes every bucket; a later round
    /// renews all of them with one update of the node's own row and one read of the nodes'
    /// table (on PostgreSQL one statement), writing no bucket row; a node whose lease lapsed
    /// rejoins holding nothing and takes its buckets again at new epochs, and so does a row of
    /// another build; a live node of other lease rules (renewing per bucket, or later ones)
    /// keeps a new node out, and a running node takes and hands back nothing while one is
    /// live.
    #[tokio::test]
    async fn a_round_renews_every_lease_with_one_update_of_the_nodes_row() {
        use sea_orm::{ConnectionTrait, DbBackend, Statement};
        for (db, seen) in crate::store::tests::servers_recording().await {
            let b = db.get_database_backend();
            let (ownership, metrics) = (Ownership::leased(), Metrics::default());
            let of = RoundOf {
                node: "n1",
                address: "http://n1/",
                ownership: &ownership,
                drain_ms: PRE_READ,
                metrics: &metrics,
                reconcile: false,
            };
            let store = leases::Sql(&db);
            let taken = round(&store, &of, Instant::now(), 0).await.unwrap();
            assert_eq!(taken, BUCKETS as usize, "{b:?}");
            // the rows as stored, with PostgreSQL's row version: an update writes a new one
            let rows_sql = match b {
                DbBackend::Postgres => {
                    "SELECT string_agg(bucket || ':' || owner || ':' || epoch || ':' || xmin::text, ',' \
                     ORDER BY bucket) AS s FROM xjob_lease"
                }
                _ => {
                    "SELECT GROUP_CONCAT(CONCAT(bucket, ':', owner, ':', epoch) ORDER BY bucket \
                     SEPARATOR ',') AS s FROM xjob_lease"
                }
            };
            let rows = |db: &sea_orm::DatabaseConnection| {
                let db = db.clone();
                async move {
                    db.query_one_raw(Statement::from_string(b, rows_sql))
                        .await
                        .unwrap()
                        .unwrap()
                        .try_get::<String>("", "s")
                        .unwrap()
                }
            };
            let before = rows(&db).await;
            seen.lock().unwrap().clear();
            let taken = round(&store, &of, Instant::now(), 0).await.unwrap();
            let statements = std::mem::take(&mut *seen.lock().unwrap());
            assert_eq!(taken, 0);
            if b == DbBackend::Postgres {
                // the update and the read in one statement
                assert_eq!(statements.len(), 1, "{b:?}: {statements:#?}");
                assert!(
                    statements[0].starts_with("WITH r AS (UPDATE xjob_node"),
                    "{statements:?}"
                );
            } else {
                assert_eq!(statements.len(), 2, "{b:?}: {statements:#?}");
                assert!(
                    statements[0].starts_with("UPDATE xjob_node"),
                    "{statements:?}"
                );
                assert!(statements[1].starts_with("SELECT id"), "{statements:?}");
            }
            assert_eq!(ownership.counts().1, 0, "{b:?}: nothing handed back");
            assert_eq!(
                rows(&db).await,
                before,
                "{b:?}: a renewal wrote bucket rows"
            );
            assert_eq!(ownership.counts().0, BUCKETS as usize);
            // the node's lease lapses (a stall): its next round holds nothing, then takes every
            // bucket again, each at its next epoch
            db.execute_raw(Statement::from_string(
                b,
                "UPDATE xjob_node SET lease_until_ms = 1 WHERE id = 'n1'",
            ))
            .await
            .unwrap();
            let epochs = leases::held(&db, "n1").await.unwrap();
            assert!(epochs.is_empty(), "a lapsed node holds nothing");
            let taken = round(&store, &of, Instant::now(), 0).await.unwrap();
            assert_eq!(taken, BUCKETS as usize);
            let held = leases::held(&db, "n1").await.unwrap();
            assert_eq!(held.len(), BUCKETS as usize);
            assert!(held.iter().all(|l| l.epoch == 2), "{:?}", &held[..3]);
            // the node's row as a build of other lease rules left it, its lease still valid
            // (that build restarted under the same id): the row rejoins, not renews
            let rules_of = |db: &sea_orm::DatabaseConnection| {
                let db = db.clone();
                async move {
                    db.query_one_raw(Statement::from_string(
                        b,
                        "SELECT lease_rules FROM xjob_node WHERE id = 'n1'",
                    ))
                    .await
                    .unwrap()
                    .unwrap()
                    .try_get::<i32>("", "lease_rules")
                    .unwrap()
                }
            };
            assert_eq!(rules_of(&db).await, leases::LEASE_RULES);
            db.execute_raw(Statement::from_string(
                b,
                "UPDATE xjob_node SET lease_rules = 0 WHERE id = 'n1'",
            ))
            .await
            .unwrap();
            let taken = round(&store, &of, Instant::now(), 0).await.unwrap();
            assert_eq!(taken, BUCKETS as usize, "{b:?}: the row rejoined");
            let held = leases::held(&db, "n1").await.unwrap();
            assert!(held.iter().all(|l| l.epoch == 3), "{:?}", &held[..3]);
            assert_eq!(rules_of(&db).await, leases::LEASE_RULES);
            // a node of other rules arrives (live): this node takes nothing and hands nothing
            // back, though its share of two live nodes is half
            db.execute_raw(Statement::from_string(
                b,
                format!(
                    "INSERT INTO xjob_node (id, address, started_ms, heartbeat_ms, lease_until_ms, \
                     lease_rules) VALUES ('later', '', 0, {now}, {now} + 60000, {})",
                    leases::LEASE_RULES + 1,
                    now = leases::db_now_ms(b)
                ),
            ))
            .await
            .unwrap();
            let reconciling = RoundOf {
                reconcile: true,
                ..of
            };
            let taken = round(&store, &reconciling, Instant::now(), 0)
                .await
                .unwrap();
            assert_eq!(taken, 0);
            assert_eq!(ownership.counts(), (BUCKETS as usize, 0), "{b:?}");
            let other = Ownership::leased();
            let of2 = RoundOf {
                node: "n2",
                ownership: &other,
                ..of
            };
            // and keeps a new node out, saying why
            let err = round(&store, &of2, Instant::now(), 0).await.unwrap_err();
            assert!(err.to_string().contains("another xjob version"), "{err}");
            assert!(err.to_string().contains("lease rules 2"), "{err}");
            db.execute_raw(Statement::from_string(
                b,
                "DELETE FROM xjob_node WHERE id = 'later'",
            ))
            .await
            .unwrap();
            // a live node of the earlier version keeps a new node out, saying why
            db.execute_raw(Statement::from_string(
                b,
                format!(
                    "INSERT INTO xjob_node (id, address, started_ms, heartbeat_ms, lease_until_ms) \
                     VALUES ('old', '', 0, {}, 0)",
                    leases::db_now_ms(b)
                ),
            ))
            .await
            .unwrap();
            let err = round(&store, &of2, Instant::now(), 0).await.unwrap_err();
            assert!(err.to_string().contains("another xjob version"), "{err}");
            assert!(err.to_string().contains("lease rules 0"), "{err}");
            db.close().await.unwrap();
        }
    }

    /// A round's failure is logged when it is new, and the same one again only every
    /// `RECONCILE_EVERY` rounds; a different one at once.
    #[test]
    fn a_repeated_failure_is_logged_every_ten_seconds() {
        let mut logged = None;
        let logs: Vec<u64> = (1..=45)
            .filter(|&r| log_again(&mut logged, "kept out", r))
            .collect();
        assert_eq!(logs, vec![1, 21, 41]);
        assert!(log_again(&mut logged, "database down", 42));
        assert!(!log_again(&mut logged, "database down", 43));
        assert!(log_again(&mut logged, "kept out", 44));
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 16, ..ProptestConfig::default() })]

        /// Whatever nodes crash, stall past their leases, restart (one staying up) and fail to
        /// write a dispatch mark, with clocks up to 0.5 s apart: no fire is sent twice, every fire of the window is sent once or handed over
        /// (a crash between its mark and its send), none misses its threshold, and a node
        /// sends a bucket's fire only while the database says it holds the bucket.
        #[test]
        fn every_fire_is_sent_once_by_the_holder_of_its_bucket(
            skews in prop::collection::vec(-500..500i64, 3),
            mut plan in events(),
        ) {
            plan.sort_by_key(|(t, _)| *t);
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_time()
                .start_paused(true)
                .build()
                .unwrap();
            rt.block_on(async {
                let start = 1_000_000;
                let model = Model::new(start);
                let jobs: Vec<i32> = (0..BUCKETS).map(job_of).collect();
                let metrics = Metrics::default();
                let mut generation = 0;
                let spawn = |k: usize, generation: &mut usize| {
                    *generation += 1;
                    Some(Node {
                        id: format!("n{k}-{generation}"),
                        ownership: Ownership::leased(),
                        skew: skews[k],
                        ring: Ring::new(0),
                        now_due: vec![],
                        stalled_until: 0,
                        mark_fails: false,
                    })
                };
                let mut nodes: Vec<Option<Node>> =
                    (0..3).map(|k| spawn(k, &mut generation)).collect();
                let end = start + 50_000;
                let mut step = 0i64;
                while model.0.borrow().now < end {
                    tokio::time::advance(Duration::from_millis(100)).await;
                    step += 1;
                    let now = start + step * 100;
                    model.0.borrow_mut().now = now;
                    let sent = tokio::time::Instant::now().into_std();
                    while plan.first().is_some_and(|(t, _)| start + t <= now) {
                        let (_, e) = plan.remove(0);
                        // some node stays up: with none, fires are late by definition
                        let others_up = |k: usize| {
                            nodes.iter().enumerate().any(|(j, n)| {
                                j != k && n.as_ref().is_some_and(|n| now >= n.stalled_until)
                            })
                        };
                        match e {
                            Event::Crash(k) | Event::Stall(k, _) if !others_up(k) => {}
                            Event::Crash(k) => nodes[k] = None,
                            Event::Stall(k, d) => {
                                if let Some(n) = nodes[k].as_mut() {
                                    n.stalled_until = now + d;
                                }
                            }
                            Event::Restart(k) => {
                                if nodes[k].is_none() {
                                    nodes[k] = spawn(k, &mut generation);
                                }
                            }
                            Event::MarkFails(k) => {
                                if let Some(n) = nodes[k].as_mut() {
                                    n.mark_fails = true;
                                }
                            }
                        }
                    }
                    for n in nodes.iter_mut().flatten() {
                        if now < n.stalled_until {
                            continue;
                        }
                        let local = now + n.skew;
                        let mut woken = false;
                        if step % 5 == 0 {
                            // taking buckets wakes the scan at once, as the keeper does
                            let of = RoundOf {
                                node: &n.id,
                                address: "",
                                ownership: &n.ownership,
                                drain_ms: PRE_READ,
                                metrics: &metrics,
                                // as the lease actor's tick decides
                                reconcile: n.ownership.take_gave_up() || step % 100 == 0,
                            };
                            woken = round(&model, &of, sent, local)
                                .await
                                .unwrap()
                                > 0;
                        }
                        if woken || (local / 100) % 10 == 5 {
                            scan(&model, n, &jobs, now, sent);
                        }
                        tick(&model, n, &jobs, now, sent);
                    }
                }
                let db = model.0.borrow();
                // the window: after a warm-up, before the tail
                for b in 0..BUCKETS {
                    let mut t = start + 3_000;
                    while t <= end - 8_000 {
                        let sent = db.sent.get(&(b, t)).map_or(0, Vec::len);
                        let handed = db.handed_over.contains(&(b, t));
                        prop_assert!(sent <= 1, "bucket {b} at {t} sent {sent} times");
                        prop_assert!(
                            sent == 1 || handed,
                            "bucket {b} at {t} lost (misfired: {})",
                            db.misfired.contains(&(b, t))
                        );
                        t += 1_000;
                    }
                }
                Ok(())
            })?;
        }
    }
}
