//! Counts the engine's asynchronous work in flight (scan passes, claims, triggers, results).
//!
//! Production code only increments and decrements an atomic; tests on paused time use
//! [`Activity::is_idle`] to wait until the engine has settled after advancing the clock, instead
//! of sleeping on real time.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

/// A shared in-flight counter.
#[derive(Clone, Debug, Default)]
pub struct Activity(Arc<AtomicUsize>);

/// Holds one unit of activity until dropped.
#[derive(Debug)]
pub struct ActivityGuard(Arc<AtomicUsize>);

impl Activity {
    /// Marks work as started until the guard drops.
    pub fn enter(&self) -> ActivityGuard {
        self.0.fetch_add(1, Ordering::SeqCst);
        ActivityGuard(self.0.clone())
    }

    /// Whether no work is in flight.
    pub fn is_idle(&self) -> bool {
        self.0.load(Ordering::SeqCst) == 0
    }
}

impl Drop for ActivityGuard {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}
