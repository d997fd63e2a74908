//! The one place that reads the wall clock.
//!
//! Every "now" in the engine goes through a [`Clock`]. [`Clock::system`] reads the system clock;
//! [`Clock::tokio_at`] starts at a given epoch millisecond and advances with tokio's clock, so a
//! test on paused tokio time can advance an hour in microseconds and know exactly what "now" is.
//! Timers in actors are tokio timers, so both kinds of clock and the timers agree.

use std::sync::Arc;
use std::time::Duration;

#[derive(Debug)]
enum Source {
    System,
    Tokio {
        base_ms: i64,
        base: tokio::time::Instant,
    },
}

/// A shared source of the current time in epoch milliseconds.
#[derive(Clone, Debug)]
pub struct Clock(Arc<Source>);

impl Clock {
    /// The system wall clock.
    pub fn system() -> Self {
        Clock(Arc::new(Source::System))
    }

    /// Whether this is the system clock (not a test's tokio-driven one): timers of any runtime
    /// agree with it, so work may run on other threads.
    pub fn is_system(&self) -> bool {
        matches!(*self.0, Source::System)
    }

    /// A clock that reads `epoch_ms` now and then advances with tokio's clock (paused or not).
    /// Must be created inside a tokio runtime for paused time to apply.
    pub fn tokio_at(epoch_ms: i64) -> Self {
        Clock(Arc::new(Source::Tokio {
            base_ms: epoch_ms,
            base: tokio::time::Instant::now(),
        }))
    }

    /// Milliseconds since the Unix epoch.
    pub fn now_ms(&self) -> i64 {
        match &*self.0 {
            // straight from the system clock (chrono's `Utc::now` builds a calendar date first)
            Source::System => std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_millis() as i64),
            Source::Tokio { base_ms, base } => {
                base_ms
                    + tokio::time::Instant::now()
                        .duration_since(*base)
                        .as_millis() as i64
            }
        }
    }

    /// Microseconds since the Unix epoch (for timers that must land on a whole second).
    fn now_us(&self) -> i64 {
        match &*self.0 {
            Source::System => std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_micros() as i64),
            Source::Tokio { base_ms, base } => {
                base_ms * 1000
                    + tokio::time::Instant::now()
                        .duration_since(*base)
                        .as_micros() as i64
            }
        }
    }

    /// Now as a UTC date-time (the unit stored in DATETIME columns).
    pub fn now_naive(&self) -> chrono::NaiveDateTime {
        ms_to_naive(self.now_ms())
    }

    /// How long until the next whole second (never zero: a full second when exactly on one).
    pub fn until_next_second(&self) -> Duration {
        // to the microsecond: counted in whole milliseconds, the wait ended up to 1 ms past
        // the second (plus the timer's own rounding up), and every fire of the second with it
        let rem = self.now_us().rem_euclid(1_000_000);
        Duration::from_micros((1_000_000 - rem) as u64)
    }

    /// How long until the clock next reads `phase_ms` past a whole second (0 ≤ phase < 1000;
    /// a full second when it reads that now).
    pub fn until_phase(&self, phase_ms: i64) -> Duration {
        let rem = (self.now_ms() - phase_ms).rem_euclid(1000);
        Duration::from_millis((1000 - rem) as u64)
    }

    /// How long until `deadline_ms` (zero if it has passed).
    pub fn until(&self, deadline_ms: i64) -> Duration {
        Duration::from_millis((deadline_ms - self.now_ms()).max(0) as u64)
    }
}

/// Epoch ms to a UTC `NaiveDateTime` (DATETIME columns hold UTC).
pub fn ms_to_naive(ms: i64) -> chrono::NaiveDateTime {
    chrono::DateTime::from_timestamp_millis(ms)
        .unwrap_or_default()
        .naive_utc()
}

/// A UTC `NaiveDateTime` to epoch ms.
pub(crate) fn naive_to_ms(t: chrono::NaiveDateTime) -> i64 {
    t.and_utc().timestamp_millis()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The tokio clock moves only when paused time is advanced.
    #[tokio::test(start_paused = true)]
    async fn tokio_clock_follows_paused_time() {
        let c = Clock::tokio_at(1_000_500);
        assert_eq!(c.now_ms(), 1_000_500);
        assert_eq!(c.until_next_second(), Duration::from_millis(500));
        tokio::time::advance(Duration::from_millis(1500)).await;
        assert_eq!(c.now_ms(), 1_002_000);
        assert_eq!(c.until_next_second(), Duration::from_millis(1000));
        assert_eq!(c.until(1_001_000), Duration::ZERO);
    }

    /// Epoch milliseconds survive the round trip through a UTC NaiveDateTime.
    #[test]
    fn naive_round_trip() {
        let ms = 1_795_269_600_123;
        assert_eq!(naive_to_ms(ms_to_naive(ms)), ms);
    }
}
