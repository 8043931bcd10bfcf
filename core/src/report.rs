//! What the engine's parts report when they finish something: a fulfilment attempt, a
//! reconcile run, one answer from Stripe. A leaf: the worker, the reconciler and the Stripe
//! client produce these, the observer (`observe.rs`) receives them, and none of them needs
//! the others for it.

use std::collections::BTreeMap;
use std::fmt;

use serde::Serialize;

use crate::ids::EventId;

/// What one attempt did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Attempt {
    Processed {
        event_id: EventId,
    },
    /// The attempt failed; the claim is retried later, or `failed` when `gave_up`.
    Failed {
        event_id: EventId,
        error: String,
        gave_up: bool,
    },
    /// Another worker took the lease over; nothing was written.
    LeaseLost {
        event_id: EventId,
    },
    /// The database was unavailable throughout; the claim was given back, its attempt not
    /// counted.
    Deferred {
        event_id: EventId,
    },
}

/// What one run found, per event type and in all.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct ReconcileReport {
    /// Unix seconds: events created since this were listed.
    pub since: i64,
    pub dry_run: bool,
    pub listed: u64,
    pub already_claimed: u64,
    /// Claimed by this run (a dry run: would have been).
    pub claimed: u64,
    /// Events of the other mode or unreadable: counted, never claimed.
    pub skipped: u64,
    pub pages: u32,
    pub per_type: BTreeMap<String, TypeCounts>,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct TypeCounts {
    pub listed: u64,
    pub already_claimed: u64,
    pub claimed: u64,
}

/// What one HTTP request to Stripe came back with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StripeAnswer {
    /// An HTTP status. async-stripe does not report the status of a success; Stripe answers
    /// those 200, so a success is `Status(200)`.
    Status(u16),
    /// No answer within the timeout.
    Timeout,
    /// The connection failed, or the answer could not be read.
    Error,
}

impl fmt::Display for StripeAnswer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StripeAnswer::Status(status) => write!(f, "{status}"),
            StripeAnswer::Timeout => f.write_str("timeout"),
            StripeAnswer::Error => f.write_str("error"),
        }
    }
}
