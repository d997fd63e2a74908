//! Counts the engine's asynchronous work in flight (scan passes, claims, triggers, results).
//!
//! Production code only increments and decrements an atomic (and wakes waiters when the count
//! reaches zero); [`Engine::stop`](crate::Engine::stop) waits for [`Activity::idle`], and tests
//! on paused time use [`Activity::is_idle`] to wait until the engine has settled after advancing
//! the clock, instead of sleeping on real time.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use tokio::sync::Notify;

#[derive(Debug, Default)]
struct Inner {
    count: AtomicUsize,
    idle: Notify,
    /// The engine is stopping: periodic upkeep starts no new round.
    halted: AtomicBool,
}

/// A shared in-flight counter.
#[derive(Clone, Debug, Default)]
pub struct Activity(Arc<Inner>);

/// Holds one unit of activity until dropped.
#[derive(Debug)]
pub struct ActivityGuard(Arc<Inner>);

impl Activity {
    /// Marks work as started until the guard drops.
    pub fn enter(&self) -> ActivityGuard {
        self.0.count.fetch_add(1, Ordering::SeqCst);
        ActivityGuard(self.0.clone())
    }

    /// Whether no work is in flight.
    pub fn is_idle(&self) -> bool {
        self.0.count.load(Ordering::SeqCst) == 0
    }

    /// Marks the engine as stopping: the actors' periodic upkeep (registry ticks, lost-run
    /// sweeps, the fail monitor's passes, log reports and cleanup) starts no new round, so
    /// nothing reads a database the embedding application may close once the stop returned.
    pub(crate) fn halt(&self) {
        self.0.halted.store(true, Ordering::SeqCst);
    }

    /// Whether [`Activity::halt`] was called.
    pub(crate) fn halted(&self) -> bool {
        self.0.halted.load(Ordering::SeqCst)
    }

    /// Waits until no work is in flight (at once if none is).
    pub async fn idle(&self) {
        loop {
            let woken = self.0.idle.notified();
            tokio::pin!(woken);
            // registered before the check, so a drop to zero in between is not missed
            woken.as_mut().enable();
            if self.is_idle() {
                return;
            }
            woken.await;
        }
    }
}

impl Drop for ActivityGuard {
    fn drop(&mut self) {
        if self.0.count.fetch_sub(1, Ordering::SeqCst) == 1 {
            self.0.idle.notify_waiters();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `idle` answers at once when nothing runs, and when the last guard drops otherwise.
    #[tokio::test]
    async fn idle_wakes_when_the_last_unit_ends() {
        let a = Activity::default();
        a.idle().await;
        let (g1, g2) = (a.enter(), a.enter());
        let waiter = tokio::spawn({
            let a = a.clone();
            async move { a.idle().await }
        });
        tokio::task::yield_now().await;
        drop(g1);
        tokio::task::yield_now().await;
        assert!(!waiter.is_finished(), "one unit still runs");
        drop(g2);
        tokio::time::timeout(std::time::Duration::from_secs(5), waiter)
            .await
            .expect("woken")
            .unwrap();
        assert!(a.is_idle());
    }
}
