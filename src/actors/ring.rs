//! RingActor: 60 one-second slots of recorded fires (log id, job id, nominal time).
//!
//! Receives [`PushRing`] from the scan and sends [`FireBatch`] to the trigger pool. It ticks at
//! every second boundary of the engine clock and drains every slot since the last second it
//! processed, so a stall of any length loses nothing (after a stall longer than the ring, every
//! slot is drained). Fire times are whole seconds (cron is second-grained and fixed rates are
//! aligned), so a fire is due at the tick of its second; a fire pushed for a second the ring has
//! already processed is sent at once. A log id is held at most once, and the pool's claim makes a
//! second dispatch of the same fire impossible anyway. A fire pushed again while held (its bucket
//! was taken over, by this node too after it gave the bucket up) takes the newer lease epoch it
//! comes with: under the old one no node would ever send it.
//! [`DrainRing`] hands back what is left on shutdown (those rows stay pending in the database).

use foldhash::HashSet;

use actix::prelude::*;

use crate::actors::trigger_pool::FireBatch;
use crate::clock::Clock;
use crate::fire::Fire;

/// Slots in the ring: one per second of a minute.
pub(crate) const SLOTS: usize = 60;

/// Adds recorded fires to the ring.
#[derive(Message, Debug)]
#[rtype(result = "()")]
pub struct PushRing(pub Vec<Fire>);

/// Removes and returns every fire still waiting (shutdown); the ring stops ticking.
#[derive(Message, Debug)]
#[rtype(result = "Vec<Fire>")]
pub struct DrainRing;

/// Answers once every held fire due by the given epoch ms has been sent (at its own tick);
/// at once when none is held. A graceful stop lets the fires of the next moments go out.
#[derive(Message, Debug)]
#[rtype(result = "()")]
pub struct DispatchDue(pub i64);

/// How many fires wait in the ring.
#[derive(Message, Debug)]
#[rtype(result = "usize")]
pub struct GetRingSize;

/// The ring's data: pure and synchronous, so it can be tested and benchmarked without an actor.
#[derive(Debug)]
pub struct Ring {
    slots: Vec<Vec<Fire>>,
    held: HashSet<i64>,
    last_sec: i64,
}

impl Ring {
    /// An empty ring that has processed every second before the one containing `now_ms`.
    pub fn new(now_ms: i64) -> Self {
        Ring {
            slots: (0..SLOTS).map(|_| Vec::new()).collect(),
            held: HashSet::default(),
            last_sec: now_ms.div_euclid(1000) - 1,
        }
    }

    fn slot_of(ms: i64) -> usize {
        ms.div_euclid(1000).rem_euclid(SLOTS as i64) as usize
    }

    /// Holds `fires` for their seconds; answers those already due at `now_ms` (to send at once).
    /// A log id already held is not held twice: the held fire takes the newer of the two lease
    /// epochs.
    pub fn push(&mut self, fires: Vec<Fire>, now_ms: i64) -> Vec<Fire> {
        let mut now_due = Vec::new();
        let mut again = Vec::new();
        for f in fires {
            if !self.held.insert(f.log_id) {
                again.push(f);
                continue;
            }
            let sec = f.fire_time.div_euclid(1000);
            if f.fire_time <= now_ms || sec <= self.last_sec {
                self.held.remove(&f.log_id);
                now_due.push(f);
            } else {
                self.slots[Self::slot_of(f.fire_time)].push(f);
            }
        }
        if !again.is_empty() {
            self.take_newer_epochs(&again);
        }
        now_due
    }

    /// Held fires pushed `again` take the newer lease epoch. A takeover (rare) is what pushes a
    /// held fire again, so this looks through the slots of their seconds only then.
    fn take_newer_epochs(&mut self, again: &[Fire]) {
        let newer: foldhash::HashMap<i64, i64> =
            again.iter().map(|f| (f.log_id, f.epoch)).collect();
        let mut slots: Vec<usize> = again.iter().map(|f| Self::slot_of(f.fire_time)).collect();
        slots.sort_unstable();
        slots.dedup();
        for s in slots {
            for f in &mut self.slots[s] {
                if let Some(&epoch) = newer.get(&f.log_id) {
                    f.epoch = f.epoch.max(epoch);
                }
            }
        }
    }

    /// Takes every held fire due by `now_ms` from the slots of the seconds not yet processed.
    pub fn take_due(&mut self, now_ms: i64) -> Vec<Fire> {
        let now_sec = now_ms.div_euclid(1000);
        let span = (now_sec - self.last_sec).clamp(0, SLOTS as i64);
        let mut due = Vec::new();
        for s in (now_sec - span + 1)..=now_sec {
            let slot = &mut self.slots[s.rem_euclid(SLOTS as i64) as usize];
            let is_due = |f: &Fire| f.fire_time.div_euclid(1000) <= now_sec;
            if slot.iter().all(is_due) {
                // the slot's buffer goes with its fires: a drained slot keeps no capacity (60
                // slots each keeping room for one second's fires held ≈ 20 MB at 5,000 fires/s
                // when 5 s of fires are live, BENCHMARKS.md, 2026-11-27, 6375f86)
                let taken = std::mem::take(slot);
                if due.is_empty() {
                    due = taken;
                } else {
                    due.extend(taken);
                }
            } else {
                // an entry a whole ring-turn ahead stays for its own second
                let (d, keep): (Vec<Fire>, Vec<Fire>) = slot.drain(..).partition(is_due);
                *slot = keep;
                due.extend(d);
            }
        }
        self.last_sec = self.last_sec.max(now_sec);
        for f in &due {
            self.held.remove(&f.log_id);
        }
        due
    }

    /// The latest nominal second (epoch s) of a held fire due by `until_ms`.
    pub fn last_due_sec(&self, until_ms: i64) -> Option<i64> {
        self.slots
            .iter()
            .flatten()
            .filter(|f| f.fire_time <= until_ms)
            .map(|f| f.fire_time.div_euclid(1000))
            .max()
    }

    /// The last second processed.
    pub fn last_sec(&self) -> i64 {
        self.last_sec
    }

    /// Removes and returns everything held, by nominal time.
    pub fn drain(&mut self) -> Vec<Fire> {
        self.held.clear();
        let mut left: Vec<Fire> = self.slots.iter_mut().flat_map(std::mem::take).collect();
        left.sort_by_key(|f| f.fire_time);
        left
    }

    /// How many fires are held.
    pub fn len(&self) -> usize {
        self.held.len()
    }

    /// Whether no fire is held.
    pub fn is_empty(&self) -> bool {
        self.held.is_empty()
    }
}

/// The time ring actor.
pub struct RingActor {
    clock: Clock,
    out: Recipient<FireBatch>,
    ring: Ring,
    draining: bool,
    /// [`DispatchDue`] callers: answered once the ring has processed their second.
    waiters: Vec<(i64, tokio::sync::oneshot::Sender<()>)>,
    /// Whether the tick thread runs (it outlives a supervised restart).
    ticker: bool,
}

/// The tick of a second, from the tick thread.
#[derive(Message, Debug)]
#[rtype(result = "()")]
struct Tick;

/// Microseconds since the Unix epoch, from the system clock.
fn system_us() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_micros() as i64)
}

/// Starts the thread that ticks `ring` on every whole second of the system clock. A tokio timer
/// wakes up to a millisecond after its deadline (its wheel counts whole milliseconds and rounds
/// up), and every fire of the second waited with it; the thread's sleep ends within tens of
/// microseconds of the second, and never before it. It ends once the ring has stopped.
fn spawn_ticker(ring: Addr<RingActor>) -> bool {
    std::thread::Builder::new()
        .name("xjob-tick".into())
        .spawn(move || {
            while ring.connected() {
                let target = (system_us().div_euclid(1_000_000) + 1) * 1_000_000;
                // never early: a tick before the second would leave its fires to the next one
                loop {
                    let left = target - system_us();
                    if left <= 0 {
                        break;
                    }
                    std::thread::sleep(std::time::Duration::from_micros(left as u64));
                }
                ring.do_send(Tick);
            }
        })
        .is_ok()
}

impl RingActor {
    /// A ring that sends due fires to `out`.
    pub fn new(clock: Clock, out: Recipient<FireBatch>) -> Self {
        let ring = Ring::new(clock.now_ms());
        RingActor {
            clock,
            out,
            ring,
            draining: false,
            waiters: Vec::new(),
            ticker: false,
        }
    }

    fn send(&self, mut fires: Vec<Fire>) {
        if fires.is_empty() {
            return;
        }
        fires.sort_by_key(|f| (f.fire_time, f.log_id));
        self.out.do_send(FireBatch(fires));
    }

    /// A tick on a tokio timer (a test's clock), rescheduling itself.
    fn tick(&mut self, ctx: &mut Context<Self>) {
        if self.draining {
            return;
        }
        self.take_due();
        ctx.run_later(self.clock.until_next_second(), |a, ctx| a.tick(ctx));
    }

    fn take_due(&mut self) {
        if self.draining {
            return;
        }
        let due = self.ring.take_due(self.clock.now_ms());
        self.send(due);
        self.answer_waiters();
    }
}

impl Handler<Tick> for RingActor {
    type Result = ();

    fn handle(&mut self, _: Tick, _ctx: &mut Self::Context) {
        self.take_due();
    }
}

impl RingActor {
    fn answer_waiters(&mut self) {
        let done = self.ring.last_sec();
        let (ready, waiting): (Vec<_>, Vec<_>) = std::mem::take(&mut self.waiters)
            .into_iter()
            .partition(|(s, _)| *s <= done);
        self.waiters = waiting;
        for (_, tx) in ready {
            let _ = tx.send(());
        }
    }
}

impl Handler<DispatchDue> for RingActor {
    type Result = ResponseFuture<()>;

    fn handle(&mut self, msg: DispatchDue, _ctx: &mut Self::Context) -> Self::Result {
        let Some(sec) = self.ring.last_due_sec(msg.0).filter(|_| !self.draining) else {
            return Box::pin(async {});
        };
        let (tx, rx) = tokio::sync::oneshot::channel();
        self.waiters.push((sec, tx));
        Box::pin(async move {
            let _ = rx.await;
        })
    }
}

impl actix::Supervised for RingActor {
    fn restarting(&mut self, _ctx: &mut Self::Context) {
        tracing::warn!(actor = "ring", "actor stopped; restarting it");
    }
}

impl Actor for RingActor {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Self::Context) {
        // the system clock: ticks from a thread of their own, on the second; a test's clock
        // (paused tokio time): tokio timers, which that time drives
        if self.ticker || (self.clock.is_system() && spawn_ticker(ctx.address())) {
            self.ticker = true;
            return;
        }
        ctx.run_later(self.clock.until_next_second(), |a, ctx| a.tick(ctx));
    }
}

impl Handler<PushRing> for RingActor {
    type Result = ();

    fn handle(&mut self, msg: PushRing, _ctx: &mut Self::Context) {
        let now_due = self.ring.push(msg.0, self.clock.now_ms());
        self.send(now_due);
    }
}

impl Handler<DrainRing> for RingActor {
    type Result = MessageResult<DrainRing>;

    fn handle(&mut self, _: DrainRing, _ctx: &mut Self::Context) -> Self::Result {
        self.draining = true;
        MessageResult(self.ring.drain())
    }
}

impl Handler<GetRingSize> for RingActor {
    type Result = usize;

    fn handle(&mut self, _: GetRingSize, _ctx: &mut Self::Context) -> usize {
        self.ring.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::TriggerType;

    fn fire(log_id: i64, fire_time: i64) -> Fire {
        Fire {
            log_id,
            job_id: 1,
            fire_time,
            trigger_type: TriggerType::Cron,
            job: None,
            read_ms: 0,
            epoch: 0,
        }
    }

    /// The ring hands out each pushed fire once (a repeated log id is ignored), and a stalled tick catches up without losing a slot.
    #[test]
    fn the_ring_holds_each_fire_once_and_a_stall_loses_nothing() {
        let t0 = 1_000_000;
        let mut r = Ring::new(t0);
        let now = r.push(
            vec![fire(1, t0), fire(2, t0 + 1000), fire(2, t0 + 1000)],
            t0,
        );
        assert_eq!(
            now,
            vec![fire(1, t0)],
            "due at once; the duplicate id is ignored"
        );
        r.push(vec![fire(3, t0 + 3000), fire(4, t0 + 61_000)], t0);
        assert_eq!(r.len(), 3);
        assert!(r.take_due(t0 + 500).is_empty());
        // a stall of three seconds: every slot since the last tick is drained
        let due: Vec<i64> = r.take_due(t0 + 3_200).iter().map(|f| f.log_id).collect();
        assert_eq!(due, vec![2, 3]);
        // a fire a whole ring-turn ahead waits for its own second
        assert!(r.take_due(t0 + 4_000).is_empty());
        assert_eq!(r.drain(), vec![fire(4, t0 + 61_000)]);
        assert!(r.is_empty());
    }

    /// A held fire pushed again (its bucket taken over) is still held once, and goes out under
    /// the newer of its two lease epochs: under the older one no node would send it.
    #[test]
    fn a_fire_pushed_again_takes_the_newer_epoch() {
        let t0 = 1_000_000;
        let mut r = Ring::new(t0);
        let at = |log_id, fire_time, epoch| Fire {
            epoch,
            ..fire(log_id, fire_time)
        };
        r.push(vec![at(1, t0 + 1_000, 3), at(2, t0 + 2_000, 3)], t0);
        // a takeover at epoch 4 of the first fire's bucket; a stale push of the second at 2
        let now = r.push(vec![at(1, t0 + 1_000, 4), at(2, t0 + 2_000, 2)], t0 + 100);
        assert!(now.is_empty());
        assert_eq!(r.len(), 2);
        let due: Vec<(i64, i64)> = r
            .take_due(t0 + 2_000)
            .iter()
            .map(|f| (f.log_id, f.epoch))
            .collect();
        assert_eq!(due, vec![(1, 4), (2, 3)]);
    }

    /// A slot gives its buffer away with its fires: after a minute of 1,000 fires a second the
    /// ring keeps room only for the fires it still holds, not one second's worth in every slot.
    #[test]
    fn drained_slots_keep_no_room() {
        let t0 = 1_000_000;
        let mut r = Ring::new(t0);
        let mut id = 0;
        for sec in 1..=SLOTS as i64 {
            let fires = (0..1_000).map(|_| {
                id += 1;
                fire(id, t0 + sec * 1_000)
            });
            r.push(fires.collect(), t0 + (sec - 1) * 1_000);
            let due = r.take_due(t0 + (sec - 1) * 1_000);
            assert_eq!(due.len(), if sec == 1 { 0 } else { 1_000 });
        }
        let room: usize = r.slots.iter().map(Vec::capacity).sum();
        assert!(
            room < 2 * 1_000 + 1_000,
            "one second's fires are held, room for {room}"
        );
        assert_eq!(r.take_due(t0 + SLOTS as i64 * 1_000).len(), 1_000);
        assert_eq!(r.slots.iter().map(Vec::capacity).sum::<usize>(), 0);
    }

    /// Collects the batches a ring sends, with the system time each arrived at.
    struct Sink(tokio::sync::mpsc::UnboundedSender<(i64, Vec<i64>)>);

    impl Actor for Sink {
        type Context = Context<Self>;
    }

    impl Handler<FireBatch> for Sink {
        type Result = ();
        fn handle(&mut self, msg: FireBatch, _: &mut Self::Context) {
            let ids = msg.0.iter().map(|f| f.log_id).collect();
            let _ = self.0.send((system_us() / 1000, ids));
        }
    }

    /// On the system clock the ring ticks from its own thread: a fire goes out on its second,
    /// never before it, and within a few milliseconds after (real time, about two seconds).
    #[actix_rt::test]
    async fn on_the_system_clock_fires_go_out_on_their_second() {
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        let sink = Sink(tx).start();
        let clock = Clock::system();
        let ring = RingActor::new(clock.clone(), sink.recipient()).start();
        // two seconds ahead: the push itself cannot straddle the first
        let at = (clock.now_ms() / 1000 + 2) * 1000;
        ring.send(PushRing(vec![fire(7, at)])).await.unwrap();
        let (got_at, ids) = tokio::time::timeout(std::time::Duration::from_secs(5), rx.recv())
            .await
            .expect("the fire went out")
            .unwrap();
        assert_eq!(ids, vec![7]);
        assert!(got_at >= at, "not before its second: {got_at} < {at}");
        // a loaded test machine may be late, but never by a whole tick
        assert!(got_at - at < 500, "on its second: {} ms late", got_at - at);
    }
}
