//! Whether the database takes writes, as this process's last writes found it. A database
//! whose disk is full still answers reads (and `SELECT 1`), so only a write can tell: the
//! ingestion lanes and the workers report each write they make here, and `/readyz`, the
//! overview and the alerts read it.
//!
//! A full disk does not refuse every write: PostgreSQL takes a row that fits in a page it
//! already has and refuses one that needs a new page. So one write that goes through does not
//! end an outage while others are still refused: writes count as accepted again once one went
//! through and none was refused for [`QUIET_MS`].

use std::sync::atomic::{AtomicI64, Ordering};

use crate::error::StoreError;

/// No refusal (or no write) on record.
const NEVER: i64 = 0;

/// How long after the last refusal a write that went through ends the outage.
pub const QUIET_MS: i64 = 2_000;

#[derive(Debug, Default)]
pub struct WriteHealth {
    /// Since when writes are refused for lack of space (unix ms), or [`NEVER`] once the
    /// outage was seen to end.
    full_since: AtomicI64,
    /// The first refusal of the latest outage, kept after it ended.
    outage_began_at: AtomicI64,
    /// The last refusal for lack of space, even after writes went through again.
    last_full_at: AtomicI64,
    /// The last write that went through.
    last_ok_at: AtomicI64,
}

/// What the last writes found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Writes {
    Accepted,
    /// Refused for lack of space (disk full) since this moment (unix ms).
    RefusedFull {
        since: i64,
    },
}

impl WriteHealth {
    /// Notes what a write came to at `now_ms`: a refusal for lack of space starts (or
    /// continues) the outage, a write that went through ends it once no refusal came for
    /// `QUIET_MS`; other errors say nothing about space.
    pub fn observe<T>(&self, result: &Result<T, StoreError>, now_ms: i64) {
        match result {
            Ok(_) => {
                self.last_ok_at.fetch_max(now_ms, Ordering::Relaxed);
                if self.full_since.load(Ordering::Relaxed) != NEVER
                    && self.ended(now_ms)
                    && self.full_since.swap(NEVER, Ordering::Relaxed) != NEVER
                {
                    tracing::warn!("the database takes writes again");
                }
            }
            Err(error) if error.is_storage_full() => {
                let since = self.full_since.load(Ordering::Relaxed);
                let begins = since == NEVER || self.ended(now_ms);
                if begins
                    && self
                        .full_since
                        .compare_exchange(since, now_ms, Ordering::Relaxed, Ordering::Relaxed)
                        .is_ok()
                {
                    self.outage_began_at.store(now_ms, Ordering::Relaxed);
                    tracing::error!(
                        "the database refuses writes: its disk is full; deliveries are answered \
                         503 until space is freed"
                    );
                }
                self.last_full_at.fetch_max(now_ms, Ordering::Relaxed);
            }
            Err(_) => {}
        }
    }

    /// Whether the outage on record is over at `now_ms`: a write went through after the last
    /// refusal, and that refusal is [`QUIET_MS`] old.
    fn ended(&self, now_ms: i64) -> bool {
        let last_full = self.last_full_at.load(Ordering::Relaxed);
        self.last_ok_at.load(Ordering::Relaxed) > last_full && now_ms - last_full >= QUIET_MS
    }

    pub fn writes(&self) -> Writes {
        self.writes_at(crate::clock::now_ms())
    }

    fn writes_at(&self, now_ms: i64) -> Writes {
        match self.full_since.load(Ordering::Relaxed) {
            NEVER => Writes::Accepted,
            _ if self.ended(now_ms) => Writes::Accepted,
            since => Writes::RefusedFull { since },
        }
    }

    /// The latest outage, if there was one: (first refusal, last refusal, still refused),
    /// unix ms.
    pub fn last_outage(&self) -> Option<(i64, i64, bool)> {
        let last = self.last_full_at.load(Ordering::Relaxed);
        (last != NEVER).then(|| {
            (
                self.outage_began_at.load(Ordering::Relaxed),
                last,
                self.writes() != Writes::Accepted,
            )
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn full() -> Result<(), StoreError> {
        // ENOSPC on the connection's own I/O.
        Err(StoreError::Query(sqlx::Error::Io(
            std::io::Error::from_raw_os_error(28),
        )))
    }

    #[test]
    fn a_write_that_fits_does_not_end_an_outage_while_others_are_refused() {
        let health = WriteHealth::default();
        health.observe(&full(), 10_000);
        health.observe(&Ok(()), 10_100);
        assert_eq!(
            health.writes_at(10_200),
            Writes::RefusedFull { since: 10_000 }
        );
        health.observe(&full(), 11_000);
        health.observe(&Ok(()), 12_000);
        assert_eq!(
            health.writes_at(12_500),
            Writes::RefusedFull { since: 10_000 }
        );
        // No refusal for QUIET_MS after a write went through: over, even with no new write.
        assert_eq!(health.writes_at(11_000 + QUIET_MS), Writes::Accepted);
        health.observe(&Ok(()), 13_100);
        assert_eq!(health.writes_at(13_100), Writes::Accepted);
        assert_eq!(
            health.last_outage().map(|o| (o.0, o.1)),
            Some((10_000, 11_000))
        );
    }

    #[test]
    fn refusals_alone_never_end_an_outage_and_a_new_one_starts_afresh() {
        let health = WriteHealth::default();
        health.observe(&full(), 10_000);
        assert_eq!(
            health.writes_at(60_000),
            Writes::RefusedFull { since: 10_000 }
        );
        health.observe(&Ok(()), 60_000);
        assert_eq!(health.writes_at(60_000), Writes::Accepted);
        health.observe(&full(), 70_000);
        assert_eq!(
            health.writes_at(70_000),
            Writes::RefusedFull { since: 70_000 }
        );
    }
}
