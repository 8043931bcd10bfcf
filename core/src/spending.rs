//! Spending credits: what the shop asks (spend, hold, capture, release) and support does
//! (adjust), checked once at the edge, and what the store answers. Every request runs under
//! an Idempotency-Key: the answer is written in the transaction that moves the credits, so a
//! retry after a timeout or a crash gets the first answer and never moves them twice.
//!
//! The rules the store keeps:
//! - a customer's credits come in **lots** (one per unlocked order, one per positive
//!   adjustment), each with an optional expiry; spends draw from the soonest-to-expire lot
//!   first, then the oldest;
//! - `balance` is the sum of the order ledger and of the movements (spends, expiries,
//!   adjustments); `available = balance − active holds`;
//! - a spend never takes more than is available and never happens while the balance is ≤ 0; a
//!   refund or dispute may take back credits already spent, and only that makes the balance
//!   negative (the customer then **owes** credits).

use serde::Serialize;
use sha2::{Digest, Sha256};

use crate::fulfilment::MAX_CREDITS;

/// How long a hold lasts unless the request says.
pub const DEFAULT_HOLD_MS: i64 = 15 * 60 * 1000;
/// The longest a hold may last.
pub const MAX_HOLD_MS: i64 = 24 * 60 * 60 * 1000;
/// Idempotency-Keys and their answers are kept at least this long.
pub const KEYS_KEPT_MS: i64 = 30 * 24 * 60 * 60 * 1000;
/// The largest metadata object a spend or hold may carry (serialised).
pub const MAX_METADATA_BYTES: usize = 4096;

/// Why a request cannot be carried out as written; nothing was recorded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SpendError {
    #[error(
        "send an Idempotency-Key header of 1 to 255 printable ASCII characters (a new one per \
         attempt that should act, the same one for a retry)"
    )]
    BadKey,
    #[error("'{0}' is not an e-mail address")]
    BadEmail(String),
    #[error("credits are a whole number from 1 to {MAX_CREDITS}")]
    BadCredits,
    #[error(
        "an adjustment is a whole number of credits other than 0, at most {MAX_CREDITS} either way"
    )]
    BadAdjustment,
    #[error("the reference is 1 to 255 characters without invisible or control characters")]
    BadReference,
    #[error("the reason is 1 to 500 characters without invisible or control characters")]
    BadReason,
    #[error("metadata is a JSON object of at most {MAX_METADATA_BYTES} bytes")]
    BadMetadata,
    #[error("expires_in is a duration from 1s to 24h (15m, 2h)")]
    BadHoldExpiry,
    #[error("an adjustment's credits last a duration of at least one minute (90d)")]
    BadLotExpiry,
    #[error("'{0}' is not a hold id")]
    BadHoldId(String),
}

/// The key a request is made under: 1–255 printable ASCII characters, as Stripe's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IdempotencyKey(String);

impl IdempotencyKey {
    pub fn parse(value: &str) -> Result<IdempotencyKey, SpendError> {
        let printable = value.bytes().all(|b| (0x20..=0x7e).contains(&b));
        if value.is_empty() || value.len() > 255 || !printable {
            return Err(SpendError::BadKey);
        }
        Ok(IdempotencyKey(value.to_owned()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// Where a key was sent from: each has its own keys.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum KeyScope {
    /// The shop's backend, with any of its API tokens.
    Api,
    /// The dashboard's forms.
    Dashboard,
    /// The command line.
    Cli,
}

impl KeyScope {
    pub fn as_str(self) -> &'static str {
        match self {
            KeyScope::Api => "api",
            KeyScope::Dashboard => "dashboard",
            KeyScope::Cli => "cli",
        }
    }
}

/// A customer's e-mail, trimmed and lowercased, as orders record it.
pub fn customer_email(email: &str) -> Result<String, SpendError> {
    let email = email.trim().to_lowercase();
    let valid = email.len() <= 254
        && !crate::text::has_hidden_characters(&email, false)
        && email
            .split_once('@')
            .is_some_and(|(local, domain)| !local.is_empty() && domain.contains('.'));
    if valid {
        Ok(email)
    } else {
        Err(SpendError::BadEmail(email))
    }
}

fn credits(n: i64) -> Result<i64, SpendError> {
    if (1..=MAX_CREDITS).contains(&n) {
        Ok(n)
    } else {
        Err(SpendError::BadCredits)
    }
}

fn reference(text: &str) -> Result<String, SpendError> {
    let text = text.trim();
    if text.is_empty()
        || text.len() > 255
        || text.chars().any(char::is_control)
        || crate::text::has_hidden_characters(text, true)
    {
        return Err(SpendError::BadReference);
    }
    Ok(text.to_owned())
}

fn metadata(value: Option<serde_json::Value>) -> Result<Option<serde_json::Value>, SpendError> {
    match value {
        None | Some(serde_json::Value::Null) => Ok(None),
        Some(value @ serde_json::Value::Object(_)) => {
            let size = serde_json::to_vec(&value).map_or(usize::MAX, |v| v.len());
            if size <= MAX_METADATA_BYTES {
                Ok(Some(value))
            } else {
                Err(SpendError::BadMetadata)
            }
        }
        Some(_) => Err(SpendError::BadMetadata),
    }
}

/// One change the caller asks for, checked.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum CreditRequest {
    Spend {
        customer_email: String,
        credits: i64,
        reference: String,
        metadata: Option<serde_json::Value>,
    },
    Hold {
        customer_email: String,
        credits: i64,
        reference: String,
        metadata: Option<serde_json::Value>,
        expires_in_ms: i64,
    },
    Capture {
        hold_id: String,
        /// `None`: everything held.
        credits: Option<i64>,
    },
    Release {
        hold_id: String,
    },
    Adjust {
        customer_email: String,
        credits: i64,
        reason: String,
        /// The audit log's actor (`cli:…`, `dashboard:…`).
        actor: String,
        /// How long a positive adjustment's credits last (ms); `None`: for good.
        lasts_ms: Option<i64>,
    },
}

impl CreditRequest {
    pub fn spend(
        email: &str,
        n: i64,
        reference_text: &str,
        meta: Option<serde_json::Value>,
    ) -> Result<CreditRequest, SpendError> {
        Ok(CreditRequest::Spend {
            customer_email: customer_email(email)?,
            credits: credits(n)?,
            reference: reference(reference_text)?,
            metadata: metadata(meta)?,
        })
    }

    pub fn hold(
        email: &str,
        n: i64,
        reference_text: &str,
        meta: Option<serde_json::Value>,
        expires_in_ms: Option<i64>,
    ) -> Result<CreditRequest, SpendError> {
        let expires_in_ms = expires_in_ms.unwrap_or(DEFAULT_HOLD_MS);
        if !(1000..=MAX_HOLD_MS).contains(&expires_in_ms) {
            return Err(SpendError::BadHoldExpiry);
        }
        Ok(CreditRequest::Hold {
            customer_email: customer_email(email)?,
            credits: credits(n)?,
            reference: reference(reference_text)?,
            metadata: metadata(meta)?,
            expires_in_ms,
        })
    }

    pub fn capture(hold_id: &str, n: Option<i64>) -> Result<CreditRequest, SpendError> {
        Ok(CreditRequest::Capture {
            hold_id: hold(hold_id)?,
            credits: n.map(credits).transpose()?,
        })
    }

    pub fn release(hold_id: &str) -> Result<CreditRequest, SpendError> {
        Ok(CreditRequest::Release {
            hold_id: hold(hold_id)?,
        })
    }

    pub fn adjust(
        email: &str,
        n: i64,
        reason: &str,
        actor: &str,
        lasts_ms: Option<i64>,
    ) -> Result<CreditRequest, SpendError> {
        if n == 0 || !(-MAX_CREDITS..=MAX_CREDITS).contains(&n) {
            return Err(SpendError::BadAdjustment);
        }
        let reason = reason.trim();
        if reason.is_empty()
            || reason.chars().count() > 500
            || reason.chars().any(char::is_control)
            || crate::text::has_hidden_characters(reason, true)
        {
            return Err(SpendError::BadReason);
        }
        if lasts_ms.is_some_and(|ms| ms < 60_000) {
            return Err(SpendError::BadLotExpiry);
        }
        Ok(CreditRequest::Adjust {
            customer_email: customer_email(email)?,
            credits: n,
            reason: reason.to_owned(),
            actor: actor.to_owned(),
            lasts_ms: if n > 0 { lasts_ms } else { None },
        })
    }

    /// The customer whose credits the request moves, when the request names one (a capture
    /// or a release names only its hold).
    pub fn customer(&self) -> Option<&str> {
        match self {
            CreditRequest::Spend { customer_email, .. }
            | CreditRequest::Hold { customer_email, .. }
            | CreditRequest::Adjust { customer_email, .. } => Some(customer_email),
            CreditRequest::Capture { .. } | CreditRequest::Release { .. } => None,
        }
    }

    /// The operation, as metrics and logs name it.
    pub fn operation(&self) -> &'static str {
        match self {
            CreditRequest::Spend { .. } => "spend",
            CreditRequest::Hold { .. } => "hold",
            CreditRequest::Capture { .. } => "capture",
            CreditRequest::Release { .. } => "release",
            CreditRequest::Adjust { .. } => "adjust",
        }
    }

    /// What makes two requests under one key the same request: SHA-256 (hex) of the
    /// operation and its parameters (metadata compared as JSON, whatever its spacing).
    pub fn fingerprint(&self) -> String {
        let text = serde_json::to_string(self).unwrap_or_default();
        let digest = Sha256::digest(text.as_bytes());
        digest.iter().map(|b| format!("{b:02x}")).collect()
    }
}

fn hold(id: &str) -> Result<String, SpendError> {
    let id = id.trim();
    let valid = id.len() <= 64
        && id
            .strip_prefix("hold_")
            .is_some_and(|rest| !rest.is_empty() && rest.bytes().all(|b| b.is_ascii_hexdigit()));
    if valid {
        Ok(id.to_owned())
    } else {
        Err(SpendError::BadHoldId(id.to_owned()))
    }
}

/// Credits taken from one lot.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Draw {
    pub lot_id: String,
    pub credits: i64,
}

/// A spend, as it was made.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SpendView {
    pub spend_id: String,
    pub customer_email: String,
    pub credits: i64,
    pub reference: Option<String>,
    pub metadata: Option<serde_json::Value>,
    /// The hold it captured, if any.
    pub hold_id: Option<String>,
    pub lots: Vec<Draw>,
    pub balance_after: i64,
    pub available_after: i64,
    /// Unix ms.
    pub created_at: i64,
}

/// Where a hold stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum HoldStatus {
    Active,
    Captured,
    Released,
    Expired,
}

impl HoldStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            HoldStatus::Active => "active",
            HoldStatus::Captured => "captured",
            HoldStatus::Released => "released",
            HoldStatus::Expired => "expired",
        }
    }

    pub fn parse(text: &str) -> Option<HoldStatus> {
        [
            HoldStatus::Active,
            HoldStatus::Captured,
            HoldStatus::Released,
            HoldStatus::Expired,
        ]
        .into_iter()
        .find(|s| s.as_str() == text)
    }
}

/// A hold and, after an action on it, the customer's figures.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct HoldView {
    pub hold_id: String,
    pub customer_email: String,
    pub credits: i64,
    pub reference: String,
    pub metadata: Option<serde_json::Value>,
    pub status: HoldStatus,
    /// Credits the capture spent.
    pub captured: Option<i64>,
    pub spend_id: Option<String>,
    /// Unix ms.
    pub expires_at: i64,
    pub created_at: i64,
    pub settled_at: Option<i64>,
    pub balance_after: i64,
    pub available_after: i64,
}

/// An adjustment support made.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AdjustmentView {
    pub adjustment_id: String,
    pub customer_email: String,
    pub credits: i64,
    pub reason: String,
    pub actor: String,
    /// The lot a positive adjustment created.
    pub lot_id: Option<String>,
    /// The lots a negative one drew from.
    pub lots: Vec<Draw>,
    pub expires_at: Option<i64>,
    pub balance_after: i64,
    pub available_after: i64,
    pub created_at: i64,
}

/// What a request came to. Refusals are answers too: they are kept under the key like
/// successes (a new attempt uses a new key).
#[derive(Debug, Clone, PartialEq)]
pub enum CreditOutcome {
    Spent(SpendView),
    Held(HoldView),
    Captured {
        hold: HoldView,
        spend: SpendView,
    },
    Released(HoldView),
    Adjusted(AdjustmentView),
    /// Not enough available credits, or a balance at or below zero: nothing was written.
    Insufficient {
        balance: i64,
        available: i64,
    },
    /// The hold was captured, released or expired before.
    HoldSettled(HoldView),
    /// More than the hold holds.
    OverCapture(HoldView),
    NoSuchHold(String),
}

impl CreditOutcome {
    /// What the request came to, as metrics name it: done, or the refusal's reason.
    pub fn result(&self) -> &'static str {
        match self {
            CreditOutcome::Spent(_)
            | CreditOutcome::Held(_)
            | CreditOutcome::Captured { .. }
            | CreditOutcome::Released(_)
            | CreditOutcome::Adjusted(_) => "done",
            CreditOutcome::Insufficient { .. } => "insufficient_credits",
            CreditOutcome::HoldSettled(_) => "hold_settled",
            CreditOutcome::OverCapture(_) => "capture_exceeds_hold",
            CreditOutcome::NoSuchHold(_) => "no_such_hold",
        }
    }
}

/// The answer a caller got, as it is replayed: its status and its body, byte for byte.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Answer {
    pub status: u16,
    pub body: String,
}

/// What a request under a key came to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Keyed {
    /// Carried out now.
    Fresh(Answer),
    /// The key's first answer.
    Replayed(Answer),
    /// The key was used for another request.
    KeyReused,
    /// The key's first request is still running.
    KeyInUse,
    /// The API token the request came with is unknown or revoked: nothing was claimed or
    /// written.
    Unauthorized,
}

impl Keyed {
    /// What it came to, as metrics name it: `fresh` (the outcome's [`CreditOutcome::result`])
    /// when carried out now, else replayed, key_reused, key_in_use or unauthorized.
    pub fn result(&self, fresh: &'static str) -> &'static str {
        match self {
            Keyed::Fresh(_) => fresh,
            Keyed::Replayed(_) => "replayed",
            Keyed::KeyReused => "key_reused",
            Keyed::KeyInUse => "key_in_use",
            Keyed::Unauthorized => "unauthorized",
        }
    }
}

/// A request under its key, as [`crate::store::CreditWriter`] carries it.
#[derive(Debug, Clone)]
pub struct CreditWrite {
    /// The hash of the API token the request came with, checked in the write's own
    /// transaction (a revoked token writes nothing); `None` for a caller checked before.
    pub token_hash: Option<String>,
    pub scope: KeyScope,
    pub key: IdempotencyKey,
    pub request: CreditRequest,
    pub now: i64,
    /// The answer a caller gets for what the request came to; stored for replays.
    pub render: fn(&CreditOutcome) -> Answer,
}

/// What a [`CreditWrite`] came to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Applied {
    pub keyed: Keyed,
    /// [`CreditOutcome::result`] when carried out now, else empty.
    pub result: &'static str,
}

impl Applied {
    /// What it came to, as metrics name it ([`Keyed::result`]).
    pub fn metric(&self) -> &'static str {
        self.keyed.result(self.result)
    }
}

/// One lot of a customer's credits.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LotView {
    pub lot_id: String,
    pub order_id: Option<String>,
    /// What the lot holds after the order's money: unlocked, less revoked.
    pub credits: i64,
    /// What is left: below zero when a refund took back credits already spent.
    pub remaining: i64,
    pub expires_at: Option<i64>,
    pub expired: bool,
    pub created_at: i64,
}

/// The next credits to expire.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Expiring {
    pub credits: i64,
    pub at: i64,
}

/// A customer's credits.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct BalanceView {
    pub customer_email: String,
    pub balance: i64,
    pub available: i64,
    pub held: i64,
    /// Credits spent that a refund or dispute took back: `max(0, −balance)`.
    pub owed: i64,
    pub expiring: Option<Expiring>,
    pub lots: Vec<LotView>,
}

/// Why a row of the ledger was written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Cause {
    Order,
    Refund,
    Dispute,
    Spend,
    Hold,
    Adjustment,
    Expiry,
}

impl Cause {
    pub fn of(kind: &str, hold_id: Option<&str>) -> Cause {
        match kind {
            "revoke" | "restore" => Cause::Refund,
            "dispute_hold" | "dispute_release" => Cause::Dispute,
            "spend" if hold_id.is_some() => Cause::Hold,
            "spend" => Cause::Spend,
            "adjust" => Cause::Adjustment,
            "expire" => Cause::Expiry,
            _ => Cause::Order,
        }
    }
}

/// One change of a customer's balance.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LedgerRow {
    pub kind: String,
    pub cause: Cause,
    pub delta: i64,
    pub order_id: Option<String>,
    /// The spend, expiry or adjustment (`sp_…`, `expire:…`, `adj_…`).
    pub movement_id: Option<String>,
    pub hold_id: Option<String>,
    pub lot_id: Option<String>,
    pub reference: Option<String>,
    pub actor: Option<String>,
    pub reason: Option<String>,
    pub event_id: Option<String>,
    pub idempotency_key: Option<String>,
    pub created_at: i64,
}

/// A page of the ledger, newest first, and where the next one starts.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LedgerPage {
    pub customer_email: String,
    pub rows: Vec<LedgerRow>,
    pub next_cursor: Option<String>,
}

/// Where a ledger page starts: after the row `(created_at, source, id)` (source 0: the order
/// ledger, 1: the movements), written `at.source.id`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LedgerCursor {
    pub at: i64,
    pub source: i64,
    pub id: i64,
}

impl LedgerCursor {
    pub fn parse(text: &str) -> Option<LedgerCursor> {
        let mut parts = text.split('.').map(|p| p.parse::<i64>().ok());
        match (parts.next(), parts.next(), parts.next(), parts.next()) {
            (Some(Some(at)), Some(Some(source)), Some(Some(id)), None) => {
                Some(LedgerCursor { at, source, id })
            }
            _ => None,
        }
    }
}

impl std::fmt::Display for LedgerCursor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}.{}.{}", self.at, self.source, self.id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_printable_ascii_of_at_most_255() {
        assert!(IdempotencyKey::parse("run-8812:1").is_ok());
        assert!(IdempotencyKey::parse(&"k".repeat(255)).is_ok());
        for bad in ["", "tab\tkey", "ümlaut", &"k".repeat(256)] {
            assert_eq!(IdempotencyKey::parse(bad), Err(SpendError::BadKey), "{bad}");
        }
    }

    #[test]
    fn requests_are_checked_and_fingerprinted() {
        let a = CreditRequest::spend(" Anna@Example.ch ", 3, "run-1", None).unwrap();
        let b = CreditRequest::spend("anna@example.ch", 3, "run-1", None).unwrap();
        assert_eq!(a.fingerprint(), b.fingerprint());
        let c = CreditRequest::spend("anna@example.ch", 4, "run-1", None).unwrap();
        assert_ne!(a.fingerprint(), c.fingerprint());
        assert_eq!(
            CreditRequest::spend("anna@example.ch", 0, "r", None),
            Err(SpendError::BadCredits)
        );
        assert_eq!(
            CreditRequest::spend("anna", 1, "r", None),
            Err(SpendError::BadEmail("anna".into()))
        );
        assert_eq!(
            CreditRequest::spend("a@b.ch", 1, "r\u{202E}", None),
            Err(SpendError::BadReference)
        );
        assert_eq!(
            CreditRequest::spend("a@b.ch", 1, "r", Some(serde_json::json!([1]))),
            Err(SpendError::BadMetadata)
        );
        assert_eq!(
            CreditRequest::hold("a@b.ch", 1, "r", None, Some(MAX_HOLD_MS + 1)),
            Err(SpendError::BadHoldExpiry)
        );
        assert!(CreditRequest::capture("hold_0a1b", Some(2)).is_ok());
        assert!(CreditRequest::capture("sp_0a1b", None).is_err());
        assert_eq!(
            CreditRequest::adjust("a@b.ch", 0, "why", "cli:x", None),
            Err(SpendError::BadAdjustment)
        );
        assert_eq!(
            CreditRequest::adjust("a@b.ch", i64::MIN, "why", "cli:x", None),
            Err(SpendError::BadAdjustment)
        );
        assert_eq!(
            CreditRequest::adjust("a@b.ch", 5, "why\0", "cli:x", None),
            Err(SpendError::BadReason)
        );
    }

    #[test]
    fn cursors_round_trip() {
        let cursor = LedgerCursor {
            at: 1_764_400_000_000,
            source: 1,
            id: 42,
        };
        assert_eq!(LedgerCursor::parse(&cursor.to_string()), Some(cursor));
        assert_eq!(LedgerCursor::parse("1.2"), None);
        assert_eq!(LedgerCursor::parse("a.b.c"), None);
    }
}
