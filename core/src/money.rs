//! What an order's money says about its credits, decided from the facts alone (no I/O).
//!
//! The facts only grow — the largest cumulative refunded amount seen, each failed refund,
//! the dispute and how it closed — so whatever order their events are fulfilled in, twice or
//! once, the credits they entitle to come out the same. The store writes the difference
//! between this target and the ledger, under the order's row lock.
//!
//! ```text
//!                       unlock (paid)
//!  awaiting_payment ──────────────────▶ paid ──refund──▶ partially_refunded ──▶ refunded
//!        │                               │  ▲                  │
//!        └─ async failed ─▶ payment_failed  └─ refund failed ──┘
//!  paid / partially_refunded ──dispute opened──▶ disputed ──won──▶ (back, credits restored)
//!                                                           └─lost─▶ chargeback
//! ```

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::language::{Language, group_thousands};

/// An order's place in its life, as stored in `orders.status`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OrderStatus {
    AwaitingPayment,
    PaymentFailed,
    Paid,
    PartiallyRefunded,
    Refunded,
    Disputed,
    Chargeback,
}

impl OrderStatus {
    pub const ALL: [OrderStatus; 7] = [
        OrderStatus::AwaitingPayment,
        OrderStatus::PaymentFailed,
        OrderStatus::Paid,
        OrderStatus::PartiallyRefunded,
        OrderStatus::Refunded,
        OrderStatus::Disputed,
        OrderStatus::Chargeback,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            OrderStatus::AwaitingPayment => "awaiting_payment",
            OrderStatus::PaymentFailed => "payment_failed",
            OrderStatus::Paid => "paid",
            OrderStatus::PartiallyRefunded => "partially_refunded",
            OrderStatus::Refunded => "refunded",
            OrderStatus::Disputed => "disputed",
            OrderStatus::Chargeback => "chargeback",
        }
    }

    /// Paid at some point: the order has (or had) its credits, and its money may move on.
    pub fn is_paid(self) -> bool {
        !matches!(
            self,
            OrderStatus::AwaitingPayment | OrderStatus::PaymentFailed
        )
    }

    /// Its money may be refunded: paid, and not held by a dispute.
    pub fn accepts_refunds(self) -> bool {
        self.is_paid() && !matches!(self, OrderStatus::Disputed | OrderStatus::Chargeback)
    }

    /// Nothing is left to pay: asking for the order again must not open a new session.
    pub fn is_settled(self) -> bool {
        self != OrderStatus::AwaitingPayment
    }
}

impl fmt::Display for OrderStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for OrderStatus {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        OrderStatus::ALL
            .into_iter()
            .find(|status| status.as_str() == s)
            .ok_or_else(|| format!("unknown order status '{s}'"))
    }
}

/// Where the order's dispute (chargeback) stands, as stored in `orders.dispute_status`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DisputeStatus {
    /// Opened: the remaining credits are held.
    Open,
    /// Closed in the shop's favour (or an inquiry closed): the hold is released.
    Won,
    /// The money went back to the customer: the credits stay revoked.
    Lost,
}

impl DisputeStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            DisputeStatus::Open => "open",
            DisputeStatus::Won => "won",
            DisputeStatus::Lost => "lost",
        }
    }

    pub fn parse(value: &str) -> Option<DisputeStatus> {
        match value {
            "open" => Some(DisputeStatus::Open),
            "won" => Some(DisputeStatus::Won),
            "lost" => Some(DisputeStatus::Lost),
            _ => None,
        }
    }
}

/// The kinds of ledger entry. Each order has at most one unlock; the others are steps, one
/// row per (order, kind, step), the step naming the event or Idempotency-Key behind it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LedgerKind {
    /// The order was paid: its credits (positive).
    Unlock,
    /// Money went back: credits in proportion (negative).
    Revoke,
    /// A refund failed: the credits revoked for it come back (positive).
    Restore,
    /// A dispute opened: the remaining credits are held (negative).
    DisputeHold,
    /// The dispute was won: the held credits come back (positive).
    DisputeRelease,
}

impl LedgerKind {
    pub const ALL: [LedgerKind; 5] = [
        LedgerKind::Unlock,
        LedgerKind::Revoke,
        LedgerKind::Restore,
        LedgerKind::DisputeHold,
        LedgerKind::DisputeRelease,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            LedgerKind::Unlock => "unlock",
            LedgerKind::Revoke => "revoke",
            LedgerKind::Restore => "restore",
            LedgerKind::DisputeHold => "dispute_hold",
            LedgerKind::DisputeRelease => "dispute_release",
        }
    }
}

impl FromStr for LedgerKind {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        LedgerKind::ALL
            .into_iter()
            .find(|kind| kind.as_str() == s)
            .ok_or_else(|| format!("unknown ledger entry kind '{s}'"))
    }
}

impl fmt::Display for LedgerKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Arithmetic on amounts from Stripe that would overflow.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("an amount from Stripe is out of range")]
pub struct OutOfRange;

/// The facts about an order's money, as the store holds them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MoneyFacts {
    /// Credits the order sells.
    pub credits: i64,
    /// What was charged, in minor units; `None` when no event or order said.
    pub amount: Option<i64>,
    /// The largest cumulative refunded amount seen (`charge.refunded`'s `amount_refunded`,
    /// or the total after a refund Claimcheck made).
    pub refunded: i64,
    /// The sum of refunds that failed (each counted once, by refund id).
    pub refund_failed: i64,
    pub dispute: Option<DisputeStatus>,
}

/// How many of an order's credits its money takes back, by cause.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Withheld {
    /// Revoked for money refunded: `floor(credits × refunded ÷ amount)`.
    pub refunded: i64,
    /// Held by an open dispute, or lost to a chargeback: whatever refunds left.
    pub disputed: i64,
}

impl MoneyFacts {
    /// Money refunded and not failed, within what was charged.
    pub fn net_refunded(&self) -> i64 {
        let net = self.refunded.saturating_sub(self.refund_failed).max(0);
        match self.amount {
            Some(amount) => net.min(amount.max(0)),
            None => net,
        }
    }

    /// The credits withheld from a paid order. A refund of an order whose amount is unknown
    /// or zero counts as a full one.
    pub fn withheld(&self) -> Result<Withheld, OutOfRange> {
        let net = self.net_refunded();
        let credits = self.credits.max(0);
        let refunded = match self.amount {
            _ if net == 0 => 0,
            Some(amount) if amount > 0 => {
                let share = i128::from(credits) * i128::from(net) / i128::from(amount);
                i64::try_from(share).map_err(|_| OutOfRange)?
            }
            _ => credits,
        };
        let disputed = match self.dispute {
            Some(DisputeStatus::Open | DisputeStatus::Lost) => {
                credits.checked_sub(refunded).ok_or(OutOfRange)?
            }
            Some(DisputeStatus::Won) | None => 0,
        };
        Ok(Withheld { refunded, disputed })
    }

    /// The status of a paid order with these facts.
    pub fn paid_status(&self) -> OrderStatus {
        let net = self.net_refunded();
        match self.dispute {
            Some(DisputeStatus::Open) => OrderStatus::Disputed,
            Some(DisputeStatus::Lost) => OrderStatus::Chargeback,
            Some(DisputeStatus::Won) | None => match self.amount {
                _ if net == 0 => OrderStatus::Paid,
                Some(amount) if amount > 0 && net < amount => OrderStatus::PartiallyRefunded,
                _ => OrderStatus::Refunded,
            },
        }
    }

    /// What may still be refunded, when the amount is known.
    pub fn refundable(&self) -> Option<i64> {
        self.amount
            .map(|amount| amount.saturating_sub(self.net_refunded()).max(0))
    }
}

/// Currencies Stripe counts in whole units (no minor unit).
const ZERO_DECIMAL: [&str; 16] = [
    "bif", "clp", "djf", "gnf", "jpy", "kmf", "krw", "mga", "pyg", "rwf", "ugx", "vnd", "vuv",
    "xaf", "xof", "xpf",
];

fn decimals(currency: &str) -> u32 {
    if ZERO_DECIMAL.contains(&currency.to_ascii_lowercase().as_str()) {
        0
    } else {
        2
    }
}

/// An amount in minor units as people read it in English: `CHF 1,234.50`.
pub fn format_money(minor: i64, currency: &str) -> String {
    format_money_in(minor, currency, Language::English)
}

/// An amount in minor units as people read it in `language`: `CHF 1’234.50` in Swiss
/// German, `CHF 1,234.50` in English (both write the decimal point).
pub fn format_money_in(minor: i64, currency: &str, language: Language) -> String {
    let code = currency.to_ascii_uppercase();
    let sign = if minor < 0 { "-" } else { "" };
    let abs = minor.unsigned_abs();
    let separator = language.thousands_separator();
    match decimals(currency) {
        0 => format!(
            "{code} {sign}{}",
            group_thousands(&abs.to_string(), separator)
        ),
        _ => format!(
            "{code} {sign}{}.{:02}",
            group_thousands(&(abs / 100).to_string(), separator),
            abs % 100
        ),
    }
}

/// Reads an amount typed in the currency's major unit (`24.50`, `24`, `24,5`) into minor
/// units (2450).
pub fn parse_money(text: &str, currency: &str) -> Result<i64, String> {
    let text = text.trim().replace(['\'', '’', ' '], "");
    let bad = || format!("'{text}' is not an amount like 24.50");
    let (whole, fraction) = match text.split_once(['.', ',']) {
        Some((whole, fraction)) => (whole, fraction),
        None => (text.as_str(), ""),
    };
    let places = decimals(currency) as usize;
    if whole.is_empty()
        || !whole.chars().all(|c| c.is_ascii_digit())
        || !fraction.chars().all(|c| c.is_ascii_digit())
        || fraction.len() > places
    {
        return Err(bad());
    }
    let whole: i64 = whole.parse().map_err(|_| bad())?;
    let fraction: i64 = if fraction.is_empty() {
        0
    } else {
        format!("{fraction:0<places$}").parse().map_err(|_| bad())?
    };
    whole
        .checked_mul(10i64.pow(places as u32))
        .and_then(|w| w.checked_add(fraction))
        .ok_or_else(bad)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn money_is_written_and_read_in_major_units() {
        assert_eq!(format_money(2450, "chf"), "CHF 24.50");
        assert_eq!(format_money(123_450, "chf"), "CHF 1,234.50");
        assert_eq!(
            format_money_in(123_450, "chf", Language::SwissGerman),
            "CHF 1’234.50"
        );
        assert_eq!(
            format_money_in(-100_000_000, "chf", Language::SwissGerman),
            "CHF -1’000’000.00"
        );
        assert_eq!(
            format_money_in(1_234_567, "jpy", Language::English),
            "JPY 1,234,567"
        );
        assert_eq!(format_money(5, "eur"), "EUR 0.05");
        assert_eq!(format_money(500, "jpy"), "JPY 500");
        assert_eq!(parse_money("24.50", "chf"), Ok(2450));
        assert_eq!(parse_money("24,5", "chf"), Ok(2450));
        assert_eq!(parse_money(" 1'234 ", "chf"), Ok(123_400));
        assert_eq!(parse_money("500", "jpy"), Ok(500));
        assert!(parse_money("24.505", "chf").is_err());
        assert!(parse_money("-3", "chf").is_err());
        assert!(parse_money("", "chf").is_err());
        assert!(parse_money("5.5", "jpy").is_err());
        assert!(parse_money("99999999999999999999", "chf").is_err());
    }

    fn facts(refunded: i64, failed: i64, dispute: Option<DisputeStatus>) -> MoneyFacts {
        MoneyFacts {
            credits: 40,
            amount: Some(4900),
            refunded,
            refund_failed: failed,
            dispute,
        }
    }

    #[test]
    fn refunds_withhold_in_proportion_rounded_down() {
        assert_eq!(facts(0, 0, None).withheld().unwrap().refunded, 0);
        assert_eq!(facts(2450, 0, None).withheld().unwrap().refunded, 20);
        assert_eq!(facts(1000, 0, None).withheld().unwrap().refunded, 8);
        assert_eq!(facts(4900, 0, None).withheld().unwrap().refunded, 40);
        // More than was charged never takes more than the credits.
        assert_eq!(facts(9999, 0, None).withheld().unwrap().refunded, 40);
        assert_eq!(
            facts(2450, 0, None).paid_status(),
            OrderStatus::PartiallyRefunded
        );
        assert_eq!(facts(4900, 0, None).paid_status(), OrderStatus::Refunded);
        assert_eq!(facts(4900, 0, None).refundable(), Some(0));
        assert_eq!(facts(1000, 0, None).refundable(), Some(3900));
    }

    #[test]
    fn failed_refunds_give_their_share_back() {
        assert_eq!(facts(4900, 2450, None).withheld().unwrap().refunded, 20);
        assert_eq!(facts(2450, 2450, None).withheld().unwrap().refunded, 0);
        // The failure seen before the refund it belongs to: nothing is withheld.
        assert_eq!(facts(0, 2450, None).withheld().unwrap().refunded, 0);
        assert_eq!(facts(2450, 2450, None).paid_status(), OrderStatus::Paid);
    }

    #[test]
    fn disputes_hold_what_refunds_left() {
        let open = facts(1000, 0, Some(DisputeStatus::Open))
            .withheld()
            .unwrap();
        assert_eq!(
            open,
            Withheld {
                refunded: 8,
                disputed: 32
            }
        );
        let lost = facts(0, 0, Some(DisputeStatus::Lost));
        assert_eq!(lost.withheld().unwrap().disputed, 40);
        assert_eq!(lost.paid_status(), OrderStatus::Chargeback);
        let won = facts(0, 0, Some(DisputeStatus::Won));
        assert_eq!(won.withheld().unwrap(), Withheld::default());
        assert_eq!(won.paid_status(), OrderStatus::Paid);
        assert_eq!(
            facts(0, 0, Some(DisputeStatus::Open)).paid_status(),
            OrderStatus::Disputed
        );
    }

    #[test]
    fn unknown_amounts_count_a_refund_as_full_and_huge_ones_do_not_overflow() {
        let unknown = MoneyFacts {
            amount: None,
            ..facts(1, 0, None)
        };
        assert_eq!(unknown.withheld().unwrap().refunded, 40);
        assert_eq!(unknown.paid_status(), OrderStatus::Refunded);
        let huge = MoneyFacts {
            credits: i64::MAX,
            amount: Some(i64::MAX),
            refunded: i64::MAX,
            refund_failed: 0,
            dispute: None,
        };
        assert_eq!(huge.withheld().unwrap().refunded, i64::MAX);
    }

    #[test]
    fn statuses_round_trip_and_know_what_is_settled() {
        for status in OrderStatus::ALL {
            assert_eq!(status.as_str().parse::<OrderStatus>(), Ok(status));
        }
        assert!(!OrderStatus::AwaitingPayment.is_settled());
        assert!(OrderStatus::PaymentFailed.is_settled());
        assert!(!OrderStatus::PaymentFailed.is_paid());
        assert!(OrderStatus::Chargeback.is_paid());
    }
}
