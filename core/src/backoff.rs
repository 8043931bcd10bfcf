//! How long to wait before trying again: the one doubling backoff every retry in Claimcheck
//! uses (claims, a database that is away, outgoing Stripe calls, the event listing, alert
//! messages), saturating, so no setting can make it overflow or panic.

use std::time::Duration;

/// A wait of `base` before the first retry, doubled for each further one, never more than
/// `max`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Backoff {
    pub base: Duration,
    pub max: Duration,
}

impl Backoff {
    pub const fn new(base: Duration, max: Duration) -> Backoff {
        Backoff { base, max }
    }

    /// The wait before retry number `retry` (0: the first retry).
    pub fn delay(&self, retry: u32) -> Duration {
        let doubled = self.base.saturating_mul(2u32.saturating_pow(retry.min(31)));
        doubled.min(self.max)
    }

    /// The wait before the retry that follows `attempts` attempts already made (1: the first
    /// retry), for counters that start at one.
    pub fn after_attempts(&self, attempts: i64) -> Duration {
        let retry = u32::try_from(attempts.saturating_sub(1).max(0)).unwrap_or(u32::MAX);
        self.delay(retry)
    }

    /// [`Backoff::after_attempts`] in milliseconds, as the store's timestamps count.
    pub fn after_attempts_ms(&self, attempts: i64) -> i64 {
        millis(self.after_attempts(attempts))
    }
}

/// A duration in whole milliseconds, saturating at what an `i64` timestamp can add.
pub fn millis(duration: Duration) -> i64 {
    i64::try_from(duration.as_millis()).unwrap_or(i64::MAX / 4)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn it_doubles_up_to_its_maximum_and_never_overflows() {
        let backoff = Backoff::new(Duration::from_secs(2), Duration::from_secs(3600));
        let waits: Vec<u64> = (0..5).map(|n| backoff.delay(n).as_secs()).collect();
        assert_eq!(waits, [2, 4, 8, 16, 32]);
        assert_eq!(backoff.delay(40), Duration::from_secs(3600));
        assert_eq!(backoff.after_attempts(1), Duration::from_secs(2));
        assert_eq!(backoff.after_attempts(0), Duration::from_secs(2));
        assert_eq!(backoff.after_attempts(i64::MAX), Duration::from_secs(3600));
        let huge = Backoff::new(Duration::from_millis(u64::MAX), Duration::MAX);
        assert_eq!(huge.delay(u32::MAX), Duration::MAX);
        assert_eq!(millis(Duration::MAX), i64::MAX / 4);
    }
}
