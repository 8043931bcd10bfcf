//! What Claimcheck tells operators without being asked: the conditions it watches, the
//! messages an alert sends and the channels they go out on. The words only; the checks and
//! their storage are in `alerts` (engine side). Compiles for the browser too.
//!
//! ```text
//!  (none) ──condition holds──▶ open ──still holds, repeat interval over──▶ open (reminder)
//!                               │
//!                               └──condition clears──▶ resolved (one message)
//! ```
//!
//! While it is open, operators handle it ([`Handling`]; the rules are in `alert_handling`).

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::auth::Role;

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
    /// The database refused writes for lack of space (a full disk).
    StorageFull,
    /// Holds ran past their expiry (the shop neither captured nor released them), many of
    /// them lately: the shop's code leaks holds, or the server's upkeep is behind.
    ExpiredHolds,
    /// Customers owe credits: a refund or a dispute took back credits they had spent.
    CreditsOwed,
    /// Claims of a type this version does not fulfil waited too long: the newer version that
    /// claimed them is not running (rolled back, or stopped).
    NewerVersionWaiting,
    /// A subscription's renewal failed and is still unpaid: its period grants nothing until
    /// the customer pays (Stripe retries; the shop may have to ask for another card).
    PastDueSubscriptions,
}

impl AlertCondition {
    pub const ALL: [AlertCondition; 11] = [
        AlertCondition::FailedClaims,
        AlertCondition::StaleClaims,
        AlertCondition::DeliveriesStopped,
        AlertCondition::SignatureFailures,
        AlertCondition::IndeterminateRequests,
        AlertCondition::ReconcileFindings,
        AlertCondition::StorageFull,
        AlertCondition::ExpiredHolds,
        AlertCondition::CreditsOwed,
        AlertCondition::NewerVersionWaiting,
        AlertCondition::PastDueSubscriptions,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            AlertCondition::FailedClaims => "failed_claims",
            AlertCondition::StaleClaims => "stale_claims",
            AlertCondition::DeliveriesStopped => "deliveries_stopped",
            AlertCondition::SignatureFailures => "signature_failures",
            AlertCondition::IndeterminateRequests => "indeterminate_requests",
            AlertCondition::ReconcileFindings => "reconcile_findings",
            AlertCondition::StorageFull => "storage_full",
            AlertCondition::ExpiredHolds => "expired_holds",
            AlertCondition::CreditsOwed => "credits_owed",
            AlertCondition::NewerVersionWaiting => "newer_version_waiting",
            AlertCondition::PastDueSubscriptions => "past_due_subscriptions",
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
/// them with. Words come from whoever reads it (the engine's `AlertWording`).
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
        /// The run's number, whose recovered events the alert links to (`None` in alerts
        /// recorded before runs had numbers here).
        #[serde(default)]
        run: Option<i64>,
    },
    /// Writes were refused for lack of space from `since`, the last at `last_at`; `ongoing`
    /// while the last write found the disk still full.
    StorageFull {
        since: i64,
        last_at: i64,
        ongoing: bool,
    },
    /// Holds whose expiry fell within the window ran out uncaptured and unreleased; the
    /// customer of the latest of them.
    ExpiredHolds {
        count: i64,
        window_secs: u64,
        customer: Option<String>,
    },
    /// Customers whose balance is below zero, the credits they owe together, and the one
    /// who owes the most.
    CreditsOwed {
        customers: i64,
        credits: i64,
        customer: Option<String>,
    },
    /// Claims of types this version does not fulfil, waiting longer than the threshold; the
    /// oldest of them and its type.
    NewerVersionWaiting {
        count: i64,
        after_secs: u64,
        event_id: Option<String>,
        event_type: Option<String>,
    },
    /// Subscriptions whose failed renewal has stayed unpaid longer than the threshold; the
    /// oldest of them and its customer.
    PastDueSubscriptions {
        count: i64,
        after_secs: u64,
        subscription: Option<String>,
        customer: Option<String>,
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
            AlertDetail::StorageFull { .. } => AlertCondition::StorageFull,
            AlertDetail::ExpiredHolds { .. } => AlertCondition::ExpiredHolds,
            AlertDetail::CreditsOwed { .. } => AlertCondition::CreditsOwed,
            AlertDetail::NewerVersionWaiting { .. } => AlertCondition::NewerVersionWaiting,
            AlertDetail::PastDueSubscriptions { .. } => AlertCondition::PastDueSubscriptions,
        }
    }
}

/// What operators did with an open alert. A snooze that has ended handles nothing: the
/// alert is open again ([`Handling::at`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum Handling {
    /// Nobody has acted on it: reminders as configured.
    Open,
    /// Someone is on it: no reminders while it stays open; it still resolves (with its
    /// message) when the condition clears.
    Acknowledged { by: String, at: i64 },
    /// No message about it at all before `until`; then reminders resume.
    Snoozed { by: String, at: i64, until: i64 },
}

impl Handling {
    /// As it stands at `now`: a snooze that has ended is open again.
    pub fn at(&self, now: i64) -> &Handling {
        match self {
            Handling::Snoozed { until, .. } if *until <= now => &Handling::Open,
            handling => handling,
        }
    }

    /// Whether reminders wait at `now`.
    pub fn holds_reminders(&self, now: i64) -> bool {
        !matches!(self.at(now), Handling::Open)
    }

    /// Whether every message waits at `now`, the resolution's included.
    pub fn silences(&self, now: i64) -> bool {
        matches!(self.at(now), Handling::Snoozed { .. })
    }
}

/// How long a snooze lasts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum SnoozeFor {
    #[serde(rename = "1h")]
    Hour,
    #[serde(rename = "1d")]
    Day,
}

impl SnoozeFor {
    pub const ALL: [SnoozeFor; 2] = [SnoozeFor::Hour, SnoozeFor::Day];

    /// The name a form sends: `1h`, `1d`.
    pub fn as_str(self) -> &'static str {
        match self {
            SnoozeFor::Hour => "1h",
            SnoozeFor::Day => "1d",
        }
    }

    pub fn millis(self) -> i64 {
        match self {
            SnoozeFor::Hour => 3_600_000,
            SnoozeFor::Day => 86_400_000,
        }
    }
}

impl FromStr for SnoozeFor {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        SnoozeFor::ALL
            .into_iter()
            .find(|f| f.as_str() == s)
            .ok_or_else(|| format!("unknown snooze '{s}'"))
    }
}

/// What an operator may do with an open alert.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum HandlingAction {
    /// Take it: no reminders while it stays open.
    Acknowledge,
    /// Silence it for a while: no message at all until the snooze ends.
    Snooze(SnoozeFor),
    /// Close it now, with a note; a condition still holding opens a new alert.
    Resolve,
}

impl HandlingAction {
    /// The role it needs: support staff take and silence alerts, only admins close them.
    pub fn needs(self) -> Role {
        match self {
            HandlingAction::Acknowledge | HandlingAction::Snooze(_) => Role::Support,
            HandlingAction::Resolve => Role::Admin,
        }
    }

    /// Whether `role` may take it.
    pub fn allowed_for(self, role: Role) -> bool {
        role.allows(self.needs())
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
        for f in SnoozeFor::ALL {
            assert_eq!(f.as_str().parse::<SnoozeFor>(), Ok(f));
        }
    }

    #[test]
    fn support_takes_and_silences_alerts_and_only_admins_close_them() {
        let snooze = HandlingAction::Snooze(SnoozeFor::Hour);
        for action in [HandlingAction::Acknowledge, snooze] {
            assert!(!action.allowed_for(Role::Viewer));
            assert!(action.allowed_for(Role::Support));
            assert!(action.allowed_for(Role::Admin));
        }
        assert!(!HandlingAction::Resolve.allowed_for(Role::Support));
        assert!(HandlingAction::Resolve.allowed_for(Role::Admin));
    }

    #[test]
    fn a_snooze_holds_messages_until_it_ends_and_an_acknowledgement_only_reminders() {
        let snoozed = Handling::Snoozed {
            by: "sam".into(),
            at: 0,
            until: 1000,
        };
        assert!(snoozed.silences(999) && snoozed.holds_reminders(999));
        assert_eq!(snoozed.at(1000), &Handling::Open);
        assert!(!snoozed.silences(1000) && !snoozed.holds_reminders(1000));
        let acknowledged = Handling::Acknowledged {
            by: "sam".into(),
            at: 0,
        };
        assert!(acknowledged.holds_reminders(i64::MAX) && !acknowledged.silences(0));
        assert!(!Handling::Open.holds_reminders(0) && !Handling::Open.silences(0));
    }
}
