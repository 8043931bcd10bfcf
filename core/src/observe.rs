//! How the engine tells whoever counts (the server's metrics) what its worker, its outgoing
//! Stripe client and its reconciler did. Every hook does nothing unless an observer overrides it; each is
//! called on a hot path (up to thousands of attempts a second), so an observer keeps to a few
//! atomic increments and never blocks.

use std::fmt;

pub use crate::report::StripeAnswer;
use crate::report::{Attempt, ReconcileReport};
use crate::store::LeasedClaim;

/// Receives what the worker, the Stripe client and the reconciler report.
pub trait Observer: fmt::Debug + Send + Sync {
    /// A fulfilment attempt on `claim` ended as `attempt` (re-drives included).
    fn attempt_ended(&self, _claim: &LeasedClaim, _attempt: &Attempt) {}

    /// One HTTP request to Stripe for `operation` (`checkout_session`, `refund`,
    /// `list_events`, `retrieve_checkout_session`) came back as `answer`. A call retried
    /// under its Idempotency-Key reports each attempt.
    fn stripe_answered(&self, _operation: &'static str, _answer: StripeAnswer) {}

    /// A reconcile run ended, with what it found or why it failed. Dry runs and runs that
    /// found another under way are not reported: they changed nothing.
    fn reconcile_ended(&self, _outcome: Result<&ReconcileReport, &dyn std::error::Error>) {}
}

/// The observer of a worker or client nobody watches.
#[derive(Debug, Clone, Copy, Default)]
pub struct Unobserved;

impl Observer for Unobserved {}
