//! RingActor: 60 one-second slots of recorded fires (log id, job id, nominal time).
//!
//! Receives [`PushRing`] from the scan and sends [`FireBatch`] to the trigger pool. It ticks at
//! every second boundary of the engine clock and drains every slot since the last second it
//! processed, so a stall of any length loses nothing (after a stall longer than the ring, every
//! slot is drained). Fire times are whole seconds (cron is second-grained and fixed rates are
//! aligned), so a fire is due at the tick of its second; a fire pushed for a second the ring has
//! already processed is sent at once. A log id is held at most once, and the pool's claim makes a
//! second dispatch of the same fire impossible anyway.
//! [`DrainRing`] hands back what is left on shutdown (those rows stay pending in the database).

use std::collections::HashSet;

use actix::prelude::*;

use crate::actors::trigger_pool::FireBatch;
use crate::clock::Clock;
use crate::store::logs::Fire;

/// Slots in the ring: one per second of a minute.
pub const SLOTS: usize = 60;

/// Adds recorded fires to the ring.
#[derive(Message, Debug)]
#[rtype(result = "()")]
pub struct PushRing(pub Vec<Fire>);

/// Removes and returns every fire still waiting (shutdown); the ring stops ticking.
#[derive(Message, Debug)]
#[rtype(result = "Vec<Fire>")]
pub struct DrainRing;

/// How many fires wait in the ring.
#[derive(Message, Debug)]
#[rtype(result = "usize")]
pub struct GetRingSize;

/// The time ring.
pub struct RingActor {
    clock: Clock,
    out: Recipient<FireBatch>,
    slots: Vec<Vec<Fire>>,
    held: HashSet<i64>,
    last_sec: i64,
    draining: bool,
}

impl RingActor {
    /// A ring that sends due fires to `out`.
    pub fn new(clock: Clock, out: Recipient<FireBatch>) -> Self {
        let last_sec = clock.now_ms().div_euclid(1000) - 1;
        RingActor {
            clock,
            out,
            slots: (0..SLOTS).map(|_| Vec::new()).collect(),
            held: HashSet::new(),
            last_sec,
            draining: false,
        }
    }

    fn slot_of(ms: i64) -> usize {
        ms.div_euclid(1000).rem_euclid(SLOTS as i64) as usize
    }

    /// Takes every held fire due by `now_ms` from the slots of the seconds not yet processed.
    fn take_due(&mut self, now_ms: i64) -> Vec<Fire> {
        let now_sec = now_ms.div_euclid(1000);
        let span = (now_sec - self.last_sec).clamp(0, SLOTS as i64);
        let mut due = Vec::new();
        for s in (now_sec - span + 1)..=now_sec {
            let slot = &mut self.slots[s.rem_euclid(SLOTS as i64) as usize];
            let is_due = |f: &Fire| f.fire_time.div_euclid(1000) <= now_sec;
            if slot.iter().all(is_due) {
                due.append(slot);
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

    fn send(&self, mut fires: Vec<Fire>) {
        if fires.is_empty() {
            return;
        }
        fires.sort_by_key(|f| (f.fire_time, f.log_id));
        self.out.do_send(FireBatch(fires));
    }

    fn tick(&mut self, ctx: &mut Context<Self>) {
        if self.draining {
            return;
        }
        let due = self.take_due(self.clock.now_ms());
        self.send(due);
        ctx.run_later(self.clock.until_next_second(), |a, ctx| a.tick(ctx));
    }
}

impl Actor for RingActor {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Self::Context) {
        ctx.run_later(self.clock.until_next_second(), |a, ctx| a.tick(ctx));
    }
}

impl Handler<PushRing> for RingActor {
    type Result = ();

    fn handle(&mut self, msg: PushRing, _ctx: &mut Self::Context) {
        let now = self.clock.now_ms();
        let mut now_due = Vec::new();
        for f in msg.0 {
            if !self.held.insert(f.log_id) {
                continue;
            }
            let sec = f.fire_time.div_euclid(1000);
            if f.fire_time <= now || sec <= self.last_sec {
                self.held.remove(&f.log_id);
                now_due.push(f);
            } else {
                self.slots[Self::slot_of(f.fire_time)].push(f);
            }
        }
        self.send(now_due);
    }
}

impl Handler<DrainRing> for RingActor {
    type Result = MessageResult<DrainRing>;

    fn handle(&mut self, _: DrainRing, _ctx: &mut Self::Context) -> Self::Result {
        self.draining = true;
        self.held.clear();
        let mut left: Vec<Fire> = self.slots.iter_mut().flat_map(std::mem::take).collect();
        left.sort_by_key(|f| f.fire_time);
        MessageResult(left)
    }
}

impl Handler<GetRingSize> for RingActor {
    type Result = usize;

    fn handle(&mut self, _: GetRingSize, _ctx: &mut Self::Context) -> usize {
        self.held.len()
    }
}
