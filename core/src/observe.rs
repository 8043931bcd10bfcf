//! How the engine tells whoever counts (the server's metrics) what its worker, its outgoing
//! Stripe client and its reconciler did. Every hook does nothing unless an observer overrides it; each is
//! called on a hot path (up to thousands of attempts a second), so an observer keeps to a few
//! atomic increments and never blocks.

use std::fmt;

use crate::reconcile::{ReconcileError, ReconcileReport};
use crate::store::LeasedClaim;
use crate::worker::Attempt;

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
    fn reconcile_ended(&self, _outcome: Result<&ReconcileReport, &ReconcileError>) {}
}

/// The observer of a worker or client nobody watches.
#[derive(Debug, Clone, Copy, Default)]
pub struct Unobserved;

impl Observer for Unobserved {}

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
