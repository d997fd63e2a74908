//! Pairs each run's trigger outcome with its result so that one row update writes both, on
//! every backend: a dispatched outcome waits up to [`OUTCOME_HOLD`] for its result, and a
//! result of a run announced by [`LogWriter::dispatching`] waits up to [`RESULT_HOLD`] for its
//! outcome (measured at 5,000 remote fires/s on SQLite: the writer's CPU per fire 18.5 → 15 µs;
//! on PostgreSQL two updates of the same row were the two most expensive statements).
//!
//! [`Pairing::prepare`] turns the queued operations of a batch into what to write now (owned:
//! records move, nothing is copied) and holds the rest; [`Pairing::finish`] settles the batch
//! once its write succeeded or was given up (acknowledgements, what was answered alone).

use super::*;
use crate::store::audit::Entry;
use foldhash::{HashMap, HashSet};
use std::collections::VecDeque;
use std::time::Instant;

/// Entries waiting for a partner (an outcome for its result or the reverse), by log id, each
/// until it is due.
pub(super) struct Waiting<T> {
    by_id: HashMap<i64, T>,
    /// Log ids by when they stop waiting, oldest first (ids taken since are skipped).
    due: VecDeque<(Instant, i64)>,
}

impl<T> Default for Waiting<T> {
    fn default() -> Self {
        Waiting {
            by_id: HashMap::default(),
            due: VecDeque::new(),
        }
    }
}

impl<T> Waiting<T> {
    fn len(&self) -> usize {
        self.by_id.len()
    }

    fn contains(&self, id: &i64) -> bool {
        self.by_id.contains_key(id)
    }

    fn insert(&mut self, id: i64, value: T, due: Instant) {
        if self.by_id.insert(id, value).is_none() {
            self.due.push_back((due, id));
        }
    }

    fn remove(&mut self, id: &i64) -> Option<T> {
        self.by_id.remove(id)
    }

    /// When the oldest entry is due (`None`: nothing waits).
    fn deadline(&mut self) -> Option<Instant> {
        while let Some(&(at, id)) = self.due.front() {
            if self.by_id.contains_key(&id) {
                return Some(at);
            }
            self.due.pop_front();
        }
        None
    }

    /// Takes the entries due by `now`, or every one (`all`), into `out`.
    fn take_due(&mut self, now: Instant, all: bool, out: &mut Vec<T>) {
        if all {
            self.due.clear();
            out.extend(self.by_id.drain().map(|(_, v)| v));
            return;
        }
        while let Some(&(at, id)) = self.due.front() {
            if at > now {
                break;
            }
            self.due.pop_front();
            out.extend(self.by_id.remove(&id));
        }
    }
}

/// A result held for its run's outcome (or taken to be written).
pub(super) struct HeldResult {
    pub item: HandleResult,
    pub at_ms: i64,
    ack: Option<Arc<Ack>>,
    _activity: ActivityGuard,
}

/// What the writer holds between batches.
#[derive(Default)]
pub(super) struct Pairing {
    /// Dispatched runs' outcomes waiting for their results.
    outcomes: Waiting<(TriggerRecord, ActivityGuard)>,
    /// Results waiting for the outcome of a run being dispatched.
    results: Waiting<HeldResult>,
    /// Runs being dispatched whose outcome has not come yet.
    dispatching: Waiting<()>,
    /// Runs whose result was written before their outcome came: their outcome is written at
    /// once when it comes.
    answered: Waiting<()>,
    /// Buffers kept from one batch to the next.
    spare: Spare,
}

/// A batch's buffers, kept for the next batch (up to [`SPARE_ROWS`] rows each): freed memory
/// goes back to the system at once, and at a low rate every batch faulted fresh pages in for
/// them (at 1,000 fires/s a tenth of the SQLite writer's CPU, in the allocator and the kernel).
#[derive(Default)]
struct Spare {
    outcomes: Vec<TriggerRecord>,
    results: Vec<(HandleResult, i64)>,
    audits: Vec<Entry>,
    /// A batch's outcomes and results as queued, before pairing.
    queued_outcomes: Vec<TriggerRecord>,
    queued_results: Vec<(HandleResult, i64, Option<Arc<Ack>>)>,
}

/// The most rows per buffer [`Spare`] keeps.
const SPARE_ROWS: usize = 1024;

/// `v` emptied, holding at most [`SPARE_ROWS`] rows' room.
fn kept<T>(mut v: Vec<T>) -> Vec<T> {
    v.clear();
    v.shrink_to(SPARE_ROWS);
    v
}

/// One batch to write, owned: outcomes and results (at most one per run; a run with both gets
/// one update), audit entries, and what settles the batch afterwards.
#[derive(Default)]
pub(super) struct Batch {
    /// Outcomes to write.
    pub outcomes: Vec<TriggerRecord>,
    /// First result per run to write, with when it was received, oldest first.
    pub results: Vec<(HandleResult, i64)>,
    /// Audit entries to write.
    pub audits: Vec<Entry>,
    /// Work to run on the writer's own connection after the write (SQLite only).
    pub execs: Vec<Exec>,
    /// Waiters of the results written (told of a failure).
    acks: Vec<Arc<Ack>>,
    /// Flush callers (answered with the batch's outcome).
    flushes: Vec<oneshot::Sender<bool>>,
    /// Results written without their outcome: their outcome, when it comes, is written at once.
    answered_alone: Vec<i64>,
    /// Activity of everything in the batch (released when it is settled).
    guards: Vec<ActivityGuard>,
    /// Held entries taken into this batch.
    taken: Vec<HeldResult>,
    taken_outcome_guards: Vec<ActivityGuard>,
}

impl Pairing {
    /// Entries held now.
    pub(super) fn len(&self) -> usize {
        self.outcomes.len() + self.results.len()
    }

    /// When the oldest held entry is due (`None`: nothing waits).
    pub(super) fn deadline(&mut self) -> Option<Instant> {
        [
            self.outcomes.deadline(),
            self.results.deadline(),
            self.dispatching.deadline(),
            self.answered.deadline(),
        ]
        .into_iter()
        .flatten()
        .min()
    }

    /// The batch to write now from `ops`, with the held entries they complete or that are
    /// due; holds what waits for a partner (unless `flush`): a dispatched outcome without its
    /// result, a result of a run being dispatched without its outcome.
    pub(super) fn prepare(
        &mut self,
        ops: Vec<Queued>,
        now: Instant,
        flush: bool,
        activity: &Activity,
    ) -> Batch {
        let due = now + OUTCOME_HOLD;
        let results_due = now + RESULT_HOLD;
        let spare = &mut self.spare;
        let mut batch = Batch {
            outcomes: std::mem::take(&mut spare.outcomes),
            results: std::mem::take(&mut spare.results),
            audits: std::mem::take(&mut spare.audits),
            ..Batch::default()
        };
        let mut batch_outcomes = std::mem::take(&mut spare.queued_outcomes);
        // the batch's results: the first per run, with its op's ack
        let mut batch_results = std::mem::take(&mut spare.queued_results);
        let mut seen = HashSet::default();
        for q in ops {
            batch.guards.push(q._activity);
            match q.op {
                Op::Dispatching(ids) => {
                    for id in ids {
                        self.dispatching.insert(id, (), results_due);
                    }
                }
                Op::Outcomes(records) => batch_outcomes.extend(records),
                Op::Results { items, at_ms, ack } => {
                    for i in items {
                        if seen.insert(i.log_id) {
                            batch_results.push((i, at_ms, ack.clone()));
                        }
                    }
                }
                Op::Audit(e) => batch.audits.push(*e),
                // the listed entries are taken by the SQLite writer itself
                Op::AuditsListed => {}
                Op::Exec(f) => batch.execs.push(f),
                Op::Flush(tx) => batch.flushes.push(tx),
            }
        }
        let mut expired = Vec::new();
        self.dispatching.take_due(now, flush, &mut expired);
        self.answered.take_due(now, flush, &mut expired);
        // the results to write: held ones first (they came earlier), then the batch's
        for r in &batch_outcomes {
            self.dispatching.remove(&r.log_id);
            batch.taken.extend(self.results.remove(&r.log_id));
        }
        self.results.take_due(now, flush, &mut batch.taken);
        let mut with_result: HashSet<i64> = HashSet::default();
        for h in &batch.taken {
            if with_result.insert(h.item.log_id) {
                batch.results.push((h.item.clone(), h.at_ms));
                batch.acks.extend(h.ack.clone());
            }
        }
        let mut holding_results = 0;
        for (item, at_ms, ack) in batch_results.drain(..) {
            let id = item.log_id;
            if with_result.contains(&id) || self.results.contains(&id) {
                // the run's first result is already here or held: it wins
                continue;
            }
            let may_wait = !flush && self.len() + holding_results < MAX_HELD;
            if may_wait && self.dispatching.contains(&id) {
                let h = HeldResult {
                    item,
                    at_ms,
                    ack,
                    _activity: activity.enter(),
                };
                self.results.insert(id, h, results_due);
                holding_results += 1;
                continue;
            }
            with_result.insert(id);
            batch.acks.extend(ack);
            batch.results.push((item, at_ms));
        }
        // the outcomes to write: held ones whose result came or that are due, then the
        // batch's that do not wait for their result
        let mut taken_outcomes = Vec::new();
        for (item, _) in &batch.results {
            taken_outcomes.extend(self.outcomes.remove(&item.log_id));
        }
        self.outcomes.take_due(now, flush, &mut taken_outcomes);
        for (r, guard) in taken_outcomes {
            batch.outcomes.push(r);
            batch.taken_outcome_guards.push(guard);
        }
        for r in batch_outcomes.drain(..) {
            let wait = !flush
                && r.trigger_code == SUCCESS_CODE
                && !with_result.contains(&r.log_id)
                && self.answered.remove(&r.log_id).is_none()
                && self.len() < MAX_HELD;
            if wait {
                let id = r.log_id;
                self.outcomes.insert(id, (r, activity.enter()), due);
            } else {
                batch.outcomes.push(r);
            }
        }
        let with_outcome: HashSet<i64> = batch.outcomes.iter().map(|r| r.log_id).collect();
        self.spare.queued_outcomes = kept(batch_outcomes);
        self.spare.queued_results = kept(batch_results);
        batch.answered_alone = batch
            .results
            .iter()
            .map(|(i, _)| i.log_id)
            .filter(|id| !with_outcome.contains(id))
            .collect();
        batch
    }

    /// Keeps the buffers of a batch's rows, once written, for the next batch.
    pub(super) fn recycle(&mut self, rows: super::batches::Rows) {
        self.spare.outcomes = kept(rows.outcomes);
        self.spare.results = kept(rows.results);
        self.spare.audits = kept(rows.audits);
    }

    /// Settles `batch` after its write (`ok`: written): its waiters hear of a failure (their
    /// results are re-sent), results written alone mark their run answered, the batch's work
    /// for the writer's own connection runs (`exec`), then flush callers get the outcome.
    pub(super) fn finish(
        &mut self,
        mut batch: Batch,
        ok: bool,
        now: Instant,
        held_count: &AtomicUsize,
        exec: &mut dyn FnMut(Exec),
    ) {
        if !ok {
            for a in &batch.acks {
                a.failed();
            }
        }
        let results_due = now + RESULT_HOLD;
        for id in std::mem::take(&mut batch.answered_alone) {
            self.answered.insert(id, (), results_due);
        }
        // counted before anyone queued behind this batch hears back: a caller that saw its
        // outcome handled then asks for `visible` must find it counted
        held_count.store(self.len(), Ordering::Release);
        for f in std::mem::take(&mut batch.execs) {
            exec(f);
        }
        for tx in std::mem::take(&mut batch.flushes) {
            let _ = tx.send(ok);
        }
    }
}
