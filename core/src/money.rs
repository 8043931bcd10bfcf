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
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
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

/// The facts about an order's money, as the store holds them. (They cross to the browser,
/// where the refund page previews a refund by the same rule.)
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
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
}

/// What a refund would do to the credits, by the rule the store then applies.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct RefundPreview {
    /// Credits the refund takes back (0 when its share rounds down to nothing).
    pub revoked: i64,
    /// The customer's balance now, and after the refund.
    pub balance_before: i64,
    pub balance_after: i64,
}

impl MoneyFacts {
    /// The credits a further refund of `amount` takes back: the difference between what
    /// these facts withhold and what they withhold once the refunded total has grown by
    /// `amount` — the same [`MoneyFacts::withheld`] the store settles the ledger with, so
    /// a preview and the refund cannot disagree. `balance` is the customer's balance now.
    pub fn preview_refund(&self, amount: i64, balance: i64) -> Result<RefundPreview, OutOfRange> {
        let after = MoneyFacts {
            refunded: self.refunded.checked_add(amount.max(0)).ok_or(OutOfRange)?,
            ..self.clone()
        };
        let total = |w: Withheld| w.refunded.checked_add(w.disputed).ok_or(OutOfRange);
        let revoked = total(after.withheld()?)?
            .checked_sub(total(self.withheld()?)?)
            .ok_or(OutOfRange)?;
        Ok(RefundPreview {
            revoked,
            balance_before: balance,
            balance_after: balance.checked_sub(revoked).ok_or(OutOfRange)?,
        })
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

/// Reads an amount typed in the currency's major unit into minor units: `24.50`, `24,5`,
/// `24`, `1'234.50`, with the order's currency code before or after it (`CHF 24.50`), and
/// the Swiss `24.–` (or `24.-`) for whole francs. Another currency's code, a sign, or more
/// decimals than the currency has are refused.
pub fn parse_money(text: &str, currency: &str) -> Result<i64, String> {
    let bad = || format!("'{}' is not an amount like 24.50", text.trim());
    let code = currency.trim();
    let mut text = text.trim();
    if !code.is_empty() {
        let starts = text
            .get(..code.len())
            .is_some_and(|head| head.eq_ignore_ascii_case(code));
        let ends = text.len() >= code.len()
            && text
                .get(text.len() - code.len()..)
                .is_some_and(|tail| tail.eq_ignore_ascii_case(code));
        if starts {
            text = &text[code.len()..];
        } else if ends {
            text = &text[..text.len() - code.len()];
        }
    }
    let text = text.replace(['\'', '’', ' ', '\u{a0}', '\u{202f}'], "");
    let (whole, fraction) = match text.split_once(['.', ',']) {
        // `24.–`: the dash stands for no cents.
        Some((whole, "–" | "-" | "—")) => (whole, ""),
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

/// An amount in minor units as it is typed back into a form: `24.50` (no code, no
/// separators), what [`parse_money`] reads.
pub fn money_input(minor: i64, currency: &str) -> String {
    let abs = minor.unsigned_abs();
    let sign = if minor < 0 { "-" } else { "" };
    match decimals(currency) {
        0 => format!("{sign}{abs}"),
        _ => format!("{sign}{}.{:02}", abs / 100, abs % 100),
    }
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

    #[test]
    fn amounts_are_read_as_people_write_them_in_switzerland() {
        for typed in ["CHF 24.50", "chf24.50", "24.50 CHF", "24,50", " 24.5 "] {
            assert_eq!(parse_money(typed, "chf"), Ok(2450), "{typed}");
        }
        for typed in ["24.–", "24.-", "CHF 24.—", "24"] {
            assert_eq!(parse_money(typed, "chf"), Ok(2400), "{typed}");
        }
        assert_eq!(parse_money("CHF 1’234.50", "chf"), Ok(123_450));
        for typed in ["EUR 24.50", "CHF", "24.50.1", "24.–5", "CHF -1", "–24"] {
            assert!(parse_money(typed, "chf").is_err(), "{typed}");
        }
        assert_eq!(money_input(2450, "chf"), "24.50");
        assert_eq!(money_input(5, "chf"), "0.05");
        assert_eq!(money_input(500, "jpy"), "500");
        assert_eq!(
            parse_money(&money_input(123_450, "chf"), "chf"),
            Ok(123_450)
        );
    }

    #[test]
    fn a_preview_takes_what_the_refund_will_take() {
        // Half of a 40-credit CHF 49.00 order: 20 credits.
        let paid = facts(0, 0, None);
        let half = paid.preview_refund(2450, 80).unwrap();
        assert_eq!(
            half,
            RefundPreview {
                revoked: 20,
                balance_before: 80,
                balance_after: 60
            }
        );
        // What the ledger ends at is what the preview said, step by step.
        let after_half = facts(2450, 0, None);
        assert_eq!(
            after_half.withheld().unwrap().refunded - paid.withheld().unwrap().refunded,
            half.revoked
        );
        // Rounded down on the total, not per step: 10.00 then 10.00 takes 8 then 8.
        assert_eq!(paid.preview_refund(1000, 40).unwrap().revoked, 8);
        assert_eq!(
            facts(1000, 0, None)
                .preview_refund(1000, 32)
                .unwrap()
                .revoked,
            8
        );
        // A cent takes nothing; the rest takes the rest.
        assert_eq!(paid.preview_refund(1, 40).unwrap().revoked, 0);
        assert_eq!(
            after_half.preview_refund(2450, 20).unwrap().balance_after,
            0
        );
        // After a failed refund its share was given back; a new refund counts from there.
        let failed = facts(4900, 4900, None);
        assert_eq!(failed.preview_refund(2450, 40).unwrap().revoked, 20);
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
