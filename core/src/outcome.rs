//! What became of a delivery: the label in the delivery log, the metrics and the response.
//! Vocabulary: the browser bundle compiles it too.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DeliveryOutcome {
    /// A new claim was made durable.
    Claimed,
    /// The event id was claimed before: a retry or a resend.
    DuplicateEvent,
    /// Another event id already claimed the same (object, type): a twin Event object.
    DuplicateAction,
    /// A type Claimcheck does not act on; recorded and acknowledged.
    Ignored,
    /// Missing, malformed, stale or non-matching signature. Counted, never stored.
    BadSignature,
    /// Signed, but not a Stripe event we can read.
    BadPayload,
    /// A live event at a test endpoint or the other way round.
    LivemodeMismatch,
    /// Larger than the configured body limit.
    TooLarge,
    /// The database could not make the claim durable; Stripe will retry.
    StorageError,
    /// No signing secret is configured, so nothing can be verified; Stripe will retry.
    NotConfigured,
    /// More deliveries (or bytes of body) at once than the webhook's limits: answered 503 at
    /// once, unread; Stripe will retry. Counted, never stored.
    Overloaded,
    /// The body did not arrive within `CLAIMCHECK_BODY_TIMEOUT`: answered 408, dropped
    /// unread. Counted, never stored.
    BodyTimeout,
}

impl DeliveryOutcome {
    pub const ALL: [DeliveryOutcome; 12] = [
        DeliveryOutcome::Claimed,
        DeliveryOutcome::DuplicateEvent,
        DeliveryOutcome::DuplicateAction,
        DeliveryOutcome::Ignored,
        DeliveryOutcome::BadSignature,
        DeliveryOutcome::BadPayload,
        DeliveryOutcome::LivemodeMismatch,
        DeliveryOutcome::TooLarge,
        DeliveryOutcome::StorageError,
        DeliveryOutcome::NotConfigured,
        DeliveryOutcome::Overloaded,
        DeliveryOutcome::BodyTimeout,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            DeliveryOutcome::Claimed => "claimed",
            DeliveryOutcome::DuplicateEvent => "duplicate_event",
            DeliveryOutcome::DuplicateAction => "duplicate_action",
            DeliveryOutcome::Ignored => "ignored",
            DeliveryOutcome::BadSignature => "bad_signature",
            DeliveryOutcome::BadPayload => "bad_payload",
            DeliveryOutcome::LivemodeMismatch => "livemode_mismatch",
            DeliveryOutcome::TooLarge => "too_large",
            DeliveryOutcome::StorageError => "storage_error",
            DeliveryOutcome::NotConfigured => "not_configured",
            DeliveryOutcome::Overloaded => "overloaded",
            DeliveryOutcome::BodyTimeout => "body_timeout",
        }
    }
}

impl FromStr for DeliveryOutcome {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        DeliveryOutcome::ALL
            .into_iter()
            .find(|o| o.as_str() == s)
            .ok_or_else(|| format!("unknown delivery outcome '{s}'"))
    }
}

impl TryFrom<String> for DeliveryOutcome {
    type Error = String;

    fn try_from(value: String) -> Result<Self, Self::Error> {
        value.parse()
    }
}

impl fmt::Display for DeliveryOutcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}
