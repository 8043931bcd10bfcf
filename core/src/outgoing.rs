//! Where an outgoing Stripe request stands, in the words the store, the CLI and the dashboard
//! share. Compiles for the browser too.
//!
//! ```text
//!            answer 2xx
//!  pending ─────────────▶ succeeded
//!     │   ──answer 4xx──▶ failed (the same key gets the same refusal)
//!     └── timeout, lost connection, 409, 429, 5xx ──▶ indeterminate ──same key again──▶ …
//! ```

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// Whether a recorded operation is about a subscription (`subscription_checkout`,
/// `subscription_cancel`): its subject is the shop's reference of the subscription, not an
/// order.
pub fn is_subscription_operation(operation: &str) -> bool {
    operation.starts_with("subscription_")
}

/// Where a recorded Stripe request stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RequestStatus {
    /// Recorded, no answer yet (the sender may have died while waiting).
    Pending,
    /// Timed out, connection lost or 5xx: Stripe may have acted; only a retry with the same
    /// key tells.
    Indeterminate,
    Succeeded,
    /// Stripe refused it (4xx); the same key will get the same refusal.
    Failed,
}

impl RequestStatus {
    /// The ones that may need somebody first.
    pub const ALL: [RequestStatus; 4] = [
        RequestStatus::Indeterminate,
        RequestStatus::Pending,
        RequestStatus::Failed,
        RequestStatus::Succeeded,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            RequestStatus::Pending => "pending",
            RequestStatus::Indeterminate => "indeterminate",
            RequestStatus::Succeeded => "succeeded",
            RequestStatus::Failed => "failed",
        }
    }

    /// Whether Stripe's answer is still unknown: asking again under the same key is the way
    /// to learn it.
    pub fn is_unanswered(self) -> bool {
        matches!(self, RequestStatus::Pending | RequestStatus::Indeterminate)
    }
}

impl fmt::Display for RequestStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for RequestStatus {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        RequestStatus::ALL
            .into_iter()
            .find(|status| status.as_str() == s)
            .ok_or_else(|| format!("unknown stripe request status '{s}'"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_status_reads_back_as_written() {
        for status in RequestStatus::ALL {
            assert_eq!(status.as_str().parse::<RequestStatus>(), Ok(status));
            assert_eq!(
                serde_json::to_string(&status).unwrap(),
                format!("\"{status}\"")
            );
        }
        assert!("answered".parse::<RequestStatus>().is_err());
    }
}
