//! Whether the database takes writes, as this process's last writes found it. A database
//! whose disk is full still answers reads (and `SELECT 1`), so only a write can tell: the
//! ingestion lanes and the workers report each write they make here, and `/readyz`, the
//! overview and the alerts read it.

use std::sync::atomic::{AtomicI64, Ordering};

use crate::error::StoreError;

/// No refusal on record.
const NEVER: i64 = 0;

#[derive(Debug, Default)]
pub struct WriteHealth {
    /// Since when writes are refused for lack of space (unix ms), or [`NEVER`] once one went
    /// through again.
    full_since: AtomicI64,
    /// The first refusal of the latest outage, kept after it ended.
    outage_began_at: AtomicI64,
    /// The last refusal for lack of space, even after writes went through again.
    last_full_at: AtomicI64,
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
    /// continues) the outage, a write that went through ends it; other errors say nothing
    /// about space.
    pub fn observe<T>(&self, result: &Result<T, StoreError>, now_ms: i64) {
        match result {
            Ok(_) => {
                if self.full_since.swap(NEVER, Ordering::Relaxed) != NEVER {
                    tracing::warn!("the database takes writes again");
                }
            }
            Err(error) if error.is_storage_full() => {
                if self
                    .full_since
                    .compare_exchange(NEVER, now_ms, Ordering::Relaxed, Ordering::Relaxed)
                    .is_ok()
                {
                    self.outage_began_at.store(now_ms, Ordering::Relaxed);
                    tracing::error!(
                        "the database refuses writes: its disk is full; deliveries are answered \
                         503 until space is freed"
                    );
                }
                self.last_full_at.store(now_ms, Ordering::Relaxed);
            }
            Err(_) => {}
        }
    }

    pub fn writes(&self) -> Writes {
        match self.full_since.load(Ordering::Relaxed) {
            NEVER => Writes::Accepted,
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
                self.full_since.load(Ordering::Relaxed) != NEVER,
            )
        })
    }
}
