//! The states a claim on a Stripe event goes through, as operators see them.
//!
//! The table stores `processing`, `processed` or `failed`; a `processing` claim is pending,
//! running or stale depending on its lease, and a failed one an admin set aside
//! (`resolved_at`) is resolved:
//!
//! ```text
//!  (none) ──INSERT──▶ pending ──lease taken──▶ running ──fulfilled──▶ processed
//!                       ▲  ▲                    │   │
//!                       │  └── lease expired ── stale (rescued or re-driven)
//!                       └──── backoff ◀── error ┘   └── max attempts ──▶ failed
//!                                                                      │   ▲
//!                                        resolved (by an admin, reason) ▼   │ (reopened)
//!                                                                    resolved
//! ```

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// A claim's state as derived from its status and lease at a given instant.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ClaimState {
    /// Claimed, waiting for a worker (no lease).
    Pending,
    /// Leased by a worker whose lease has not expired.
    Running,
    /// Leased, but the lease expired: the worker died between claim and completion.
    Stale,
    /// Fulfilled; nothing left to do.
    Processed,
    /// Gave up after the maximum number of attempts; waits for an operator.
    Failed,
    /// Failed, and set aside by an admin as one that can never succeed: no alert counts it
    /// and no re-drive takes it, until it is reopened.
    Resolved,
}

impl ClaimState {
    pub const ALL: [ClaimState; 6] = [
        ClaimState::Pending,
        ClaimState::Running,
        ClaimState::Stale,
        ClaimState::Failed,
        ClaimState::Resolved,
        ClaimState::Processed,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            ClaimState::Pending => "pending",
            ClaimState::Running => "running",
            ClaimState::Stale => "stale",
            ClaimState::Processed => "processed",
            ClaimState::Failed => "failed",
            ClaimState::Resolved => "resolved",
        }
    }

    /// Whether an operator may re-drive a claim in this state: it waits (pending), its
    /// worker died (stale) or it gave up (failed). A running claim belongs to its worker and
    /// a processed or resolved one is done. The store's compare-and-set (`TAKE_FOR_REDRIVE`)
    /// is this rule in SQL; a store test holds the two together state by state.
    pub fn is_redrivable(self) -> bool {
        matches!(
            self,
            ClaimState::Pending | ClaimState::Stale | ClaimState::Failed
        )
    }

    /// Whether an admin may resolve a claim in this state without re-driving it: only one
    /// that gave up. Its inverse (reopening) takes only a resolved one.
    pub fn is_resolvable(self) -> bool {
        self == ClaimState::Failed
    }
}

impl TryFrom<String> for ClaimState {
    type Error = String;

    fn try_from(value: String) -> Result<Self, Self::Error> {
        value.parse()
    }
}

impl fmt::Display for ClaimState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for ClaimState {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        ClaimState::ALL
            .into_iter()
            .find(|state| state.as_str() == s)
            .ok_or_else(|| format!("unknown claim state '{s}'"))
    }
}

/// Where a claim (and the delivery row logging it) came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ClaimSource {
    /// Stripe delivered the event to the webhook.
    #[default]
    Webhook,
    /// The reconciler fetched it from Stripe's API after deliveries failed.
    Reconcile,
}

impl ClaimSource {
    pub const ALL: [ClaimSource; 2] = [ClaimSource::Webhook, ClaimSource::Reconcile];

    pub fn as_str(self) -> &'static str {
        match self {
            ClaimSource::Webhook => "webhook",
            ClaimSource::Reconcile => "reconcile",
        }
    }
}

impl FromStr for ClaimSource {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        ClaimSource::ALL
            .into_iter()
            .find(|source| source.as_str() == s)
            .ok_or_else(|| format!("unknown claim source '{s}'"))
    }
}

impl TryFrom<String> for ClaimSource {
    type Error = String;

    fn try_from(value: String) -> Result<Self, Self::Error> {
        value.parse()
    }
}

/// How many claims are in each state.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ClaimCounts {
    pub pending: i64,
    pub running: i64,
    pub stale: i64,
    pub processed: i64,
    pub failed: i64,
    pub resolved: i64,
}

impl ClaimCounts {
    pub fn get(&self, state: ClaimState) -> i64 {
        match state {
            ClaimState::Pending => self.pending,
            ClaimState::Running => self.running,
            ClaimState::Stale => self.stale,
            ClaimState::Processed => self.processed,
            ClaimState::Failed => self.failed,
            ClaimState::Resolved => self.resolved,
        }
    }

    #[cfg(feature = "store")]
    pub(crate) fn add(&mut self, state: ClaimState, n: i64) {
        let slot = match state {
            ClaimState::Pending => &mut self.pending,
            ClaimState::Running => &mut self.running,
            ClaimState::Stale => &mut self.stale,
            ClaimState::Processed => &mut self.processed,
            ClaimState::Failed => &mut self.failed,
            ClaimState::Resolved => &mut self.resolved,
        };
        *slot += n;
    }

    pub fn total(&self) -> i64 {
        ClaimState::ALL.into_iter().map(|s| self.get(s)).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_state_round_trips_through_its_name() {
        for state in ClaimState::ALL {
            assert_eq!(state.as_str().parse::<ClaimState>(), Ok(state));
        }
        assert!("processing".parse::<ClaimState>().is_err());
    }

    #[test]
    fn only_waiting_stale_and_failed_claims_are_redrivable() {
        let redrivable: Vec<_> = ClaimState::ALL
            .into_iter()
            .filter(|s| s.is_redrivable())
            .collect();
        assert_eq!(
            redrivable,
            [ClaimState::Pending, ClaimState::Stale, ClaimState::Failed]
        );
    }

    #[test]
    fn states_serialize_as_their_names() {
        assert_eq!(
            serde_json::to_string(&ClaimState::Stale).unwrap(),
            "\"stale\""
        );
    }

    #[test]
    fn counts_add_up() {
        let mut counts = ClaimCounts::default();
        counts.add(ClaimState::Stale, 2);
        counts.add(ClaimState::Processed, 3);
        assert_eq!(counts.get(ClaimState::Stale), 2);
        assert_eq!(counts.total(), 5);
    }
}
