//! LeaseActor: this node's share of the buckets on a shared database (PostgreSQL, MySQL).
//!
//! Every [`RENEW`]: refreshes the node's heartbeat in `xjob_node` and reads the live nodes;
//! renews the leases it holds (on the database's clock); takes free or expired buckets up to
//! its fair share ([`fair_share`]); when its share shrank (a node joined) starts handing back
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
/// Taken off the lease time for the local deadline: covers the renewal's round trip after it
/// was sent and the time to stop dispatching.
const MARGIN_MS: i64 = 500;
/// How long a silent node's row stays before any node deletes it.
const FORGET_NODE_MS: i64 = 3_600_000;

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
}

impl LeaseActor {
    /// The keeper of node `node`'s leases (`address` is shown to operators).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn new(
        db: DatabaseConnection,
        node: String,
        address: String,
        ownership: Ownership,
        clock: Clock,
        pre_read_ms: i64,
        metrics: Metrics,
        activity: Activity,
    ) -> Self {
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
        }
    }

    /// Wakes `scan` when buckets are taken.
    pub(crate) fn wake(mut self, scan: Addr<ScanActor>) -> Self {
        self.scan = Some(scan);
        self
    }

    /// One round: heartbeat, renew, balance. Answers how many buckets were taken.
    async fn round(
        db: &DatabaseConnection,
        node: &str,
        address: &str,
        ownership: &Ownership,
        clock: &Clock,
        drain_ms: i64,
        metrics: &Metrics,
    ) -> crate::Result<usize> {
        let sent = Instant::now();
        let valid = sent + Duration::from_millis((LEASE_MS - MARGIN_MS) as u64);
        let nodes = leases::heartbeat(db, node, address, LEASE_MS).await?;
        let held = leases::renew(db, node, LEASE_MS).await?;
        let (before, _) = ownership.counts();
        let unknown = ownership.renewed(&held, valid);
        if !unknown.is_empty() {
            leases::release(db, node, &unknown).await?;
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
        let share = fair_share(&nodes, node);
        let (owned, releasing) = ownership.counts();
        let keeping = owned - releasing;
        let mut taken = 0;
        if keeping < share {
            // first take back buckets this node was handing back, then free ones
            let kept = ownership.keep_releasing(share - keeping);
            let want = share - keeping - kept;
            if want > 0 {
                let t = leases::acquire(db, node, want, LEASE_MS).await?;
                taken = t.len();
                ownership.taken(&t, valid);
            }
        } else if keeping > share {
            let n = ownership.start_releasing(keeping - share, clock.now_ms() + drain_ms);
            tracing::info!(
                buckets = n,
                share,
                nodes = nodes.len(),
                "handing buckets back to the other nodes"
            );
        }
        // released a second before the cutoff: every fire up to the cutoff is recorded by then
        // (the scan reads jobs due within half its window, once a second); the ones not sent
        // yet go out from the next holder, which takes them over at once (this node can no
        // longer mark them sent), and it records from the cutoff on, so none is late
        let ready = ownership.drained(clock.now_ms() + 1_000);
        if !ready.is_empty() {
            let n = leases::release(db, node, &ready).await?;
            ownership.forget(&ready);
            tracing::info!(released = n, "buckets handed back");
        }
        let (owned, _) = ownership.counts();
        metrics.buckets_owned(owned);
        if taken > 0 {
            tracing::info!(taken, owned, share, nodes = nodes.len(), "buckets taken");
        }
        Ok(taken)
    }

    fn tick(&mut self, ctx: &mut Context<Self>) {
        if self.busy || self.stopped {
            return;
        }
        self.busy = true;
        let (db, node, address) = (self.db.clone(), self.node.clone(), self.address.clone());
        let (ownership, metrics) = (self.ownership.clone(), self.metrics.clone());
        let (clock, drain_ms) = (self.clock.clone(), self.drain_ms);
        let guard = self.activity.enter();
        ctx.spawn(
            async move {
                let _guard = guard;
                Self::round(&db, &node, &address, &ownership, &clock, drain_ms, &metrics).await
            }
            .into_actor(self)
            .map(|res, act, _| {
                act.busy = false;
                match res {
                    Ok(taken) if taken > 0 => {
                        if let Some(scan) = &act.scan {
                            scan.do_send(ScanNow);
                        }
                    }
                    Ok(_) => {}
                    Err(e) => tracing::warn!(error = %e, "lease round failed; retrying"),
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
