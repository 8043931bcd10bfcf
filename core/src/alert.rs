//! What Claimcheck tells operators without being asked: the conditions it watches, the
//! messages an alert sends and the channels they go out on. The words only; the checks and
//! their storage are in `alerts` (engine side). Compiles for the browser too.
//!
//! ```text
//!  (none) ──condition holds──▶ open ──still holds, repeat interval over──▶ open (reminder)
//!                               │
//!                               └──condition clears──▶ resolved (one message)
//! ```

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// A condition that opens an alert while it holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AlertCondition {
    /// Claims gave up after their attempts and wait for an operator.
    FailedClaims,
    /// Claims whose worker died stayed stale (auto-rescue off, or out of attempts).
    StaleClaims,
    /// Orders were opened through the order API, yet Stripe delivered nothing since.
    DeliveriesStopped,
    /// Deliveries fail the signature check and none passes (a secret rolled at Stripe only).
    SignatureFailures,
    /// Outgoing Stripe requests got no definite answer, even after their retries.
    IndeterminateRequests,
    /// The last reconcile run found events Stripe never delivered, or failed.
    ReconcileFindings,
}

impl AlertCondition {
    pub const ALL: [AlertCondition; 6] = [
        AlertCondition::FailedClaims,
        AlertCondition::StaleClaims,
        AlertCondition::DeliveriesStopped,
        AlertCondition::SignatureFailures,
        AlertCondition::IndeterminateRequests,
        AlertCondition::ReconcileFindings,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            AlertCondition::FailedClaims => "failed_claims",
            AlertCondition::StaleClaims => "stale_claims",
            AlertCondition::DeliveriesStopped => "deliveries_stopped",
            AlertCondition::SignatureFailures => "signature_failures",
            AlertCondition::IndeterminateRequests => "indeterminate_requests",
            AlertCondition::ReconcileFindings => "reconcile_findings",
        }
    }

    /// The dashboard page that shows what the alert is about.
    pub fn page(self) -> &'static str {
        match self {
            AlertCondition::FailedClaims => "/claims?status=failed",
            AlertCondition::StaleClaims => "/claims?status=stale",
            AlertCondition::DeliveriesStopped => "/events",
            AlertCondition::SignatureFailures | AlertCondition::ReconcileFindings => "/",
            AlertCondition::IndeterminateRequests => "/requests?status=indeterminate",
        }
    }
}

impl fmt::Display for AlertCondition {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for AlertCondition {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        AlertCondition::ALL
            .into_iter()
            .find(|c| c.as_str() == s)
            .ok_or_else(|| format!("unknown alert condition '{s}'"))
    }
}

/// What an alert is about, as data: the figures a check found and the settings it compared
/// them with. Words come from whoever reads it ([`crate::alerts::AlertWording`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum AlertDetail {
    /// Claims failed after their last attempt.
    FailedClaims { count: i64 },
    /// Claims stale for longer than the threshold.
    StaleClaims { count: i64, after_secs: u64 },
    /// Orders opened through the order API, and no delivery accepted for longer than the
    /// threshold; the last one accepted, if any.
    DeliveriesStopped {
        orders: i64,
        after_secs: u64,
        last_delivery_at: Option<i64>,
    },
    /// Signature failures and none passed within the window.
    SignatureFailures { count: i64, window_secs: u64 },
    /// Outgoing requests without a definite answer for longer than the threshold.
    IndeterminateRequests { count: i64, after_secs: u64 },
    /// The last reconcile run failed.
    ReconcileFailed {
        at: i64,
        actor: String,
        error: String,
    },
    /// The last reconcile run claimed events Stripe never delivered.
    ReconcileRecovered {
        at: i64,
        actor: String,
        claimed: i64,
    },
}

impl AlertDetail {
    /// The condition it is a detail of.
    pub fn condition(&self) -> AlertCondition {
        match self {
            AlertDetail::FailedClaims { .. } => AlertCondition::FailedClaims,
            AlertDetail::StaleClaims { .. } => AlertCondition::StaleClaims,
            AlertDetail::DeliveriesStopped { .. } => AlertCondition::DeliveriesStopped,
            AlertDetail::SignatureFailures { .. } => AlertCondition::SignatureFailures,
            AlertDetail::IndeterminateRequests { .. } => AlertCondition::IndeterminateRequests,
            AlertDetail::ReconcileFailed { .. } | AlertDetail::ReconcileRecovered { .. } => {
                AlertCondition::ReconcileFindings
            }
        }
    }
}

/// Why a message went out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MessageKind {
    /// The condition began to hold.
    Opened,
    /// It still holds, a repeat interval later.
    Reminder,
    /// It no longer holds.
    Resolved,
    /// `claimcheck alerts test`.
    Test,
}

impl MessageKind {
    pub const ALL: [MessageKind; 4] = [
        MessageKind::Opened,
        MessageKind::Reminder,
        MessageKind::Resolved,
        MessageKind::Test,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            MessageKind::Opened => "opened",
            MessageKind::Reminder => "reminder",
            MessageKind::Resolved => "resolved",
            MessageKind::Test => "test",
        }
    }
}

impl FromStr for MessageKind {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        MessageKind::ALL
            .into_iter()
            .find(|k| k.as_str() == s)
            .ok_or_else(|| format!("unknown alert message kind '{s}'"))
    }
}

/// Where messages go.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AlertChannel {
    /// E-mail over SMTP.
    Email,
    /// A chat incoming webhook (Slack, Mattermost, Rocket.Chat, Teams): JSON with `text`.
    Webhook,
}

impl AlertChannel {
    pub const ALL: [AlertChannel; 2] = [AlertChannel::Email, AlertChannel::Webhook];

    pub fn as_str(self) -> &'static str {
        match self {
            AlertChannel::Email => "email",
            AlertChannel::Webhook => "webhook",
        }
    }
}

impl fmt::Display for AlertChannel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for AlertChannel {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        AlertChannel::ALL
            .into_iter()
            .find(|c| c.as_str() == s)
            .ok_or_else(|| format!("unknown alert channel '{s}'"))
    }
}

/// One message on one channel: waiting (first try or a retry), sent, given up, or replaced by
/// a newer message about the same alert before it could go out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DeliveryStatus {
    Pending,
    Sent,
    Failed,
    Superseded,
}

impl DeliveryStatus {
    pub const ALL: [DeliveryStatus; 4] = [
        DeliveryStatus::Pending,
        DeliveryStatus::Sent,
        DeliveryStatus::Failed,
        DeliveryStatus::Superseded,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            DeliveryStatus::Pending => "pending",
            DeliveryStatus::Sent => "sent",
            DeliveryStatus::Failed => "failed",
            DeliveryStatus::Superseded => "superseded",
        }
    }
}

impl FromStr for DeliveryStatus {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        DeliveryStatus::ALL
            .into_iter()
            .find(|d| d.as_str() == s)
            .ok_or_else(|| format!("unknown alert delivery status '{s}'"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_read_back() {
        for c in AlertCondition::ALL {
            assert_eq!(c.as_str().parse::<AlertCondition>(), Ok(c));
            assert!(c.page().starts_with('/'));
        }
        for k in MessageKind::ALL {
            assert_eq!(k.as_str().parse::<MessageKind>(), Ok(k));
        }
        for ch in AlertChannel::ALL {
            assert_eq!(ch.as_str().parse::<AlertChannel>(), Ok(ch));
        }
        for d in DeliveryStatus::ALL {
            assert_eq!(d.as_str().parse::<DeliveryStatus>(), Ok(d));
        }
        assert!("nope".parse::<AlertCondition>().is_err());
    }
}
