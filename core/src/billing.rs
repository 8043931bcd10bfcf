//! Subscriptions' money, decided from one Stripe invoice alone (no I/O): the plans a shop
//! sells, what a paid invoice pays for (its subscription, the period on its lines, the plans
//! of those lines) and how many credits it grants.
//!
//! `invoice.paid` is the one event that grants. What it grants follows its `billing_reason`:
//! - `subscription_create`, `subscription_cycle`: the plan's credits for the period, once;
//! - `subscription_update` (a prorated plan change): the credits the new plan gives beyond the
//!   old one, in proportion to what was paid, `floor(Δcredits × amount_paid ÷ Δprice)`, and
//!   never so many that the period's grants pass the highest plan's credits;
//! - anything else (`manual`, `subscription_threshold`…): recorded, no credits.
//!
//! Periods are told apart by their end: every invoice of one billing period (the first or
//! renewal invoice, and each proration inside the period) has lines that end when the period
//! ends, while a proration's lines start at the change, not at the period's start.

use std::collections::BTreeMap;
use std::str::FromStr;

use serde::Deserialize;

use crate::fulfilment::{MAX_CREDITS, Price};

/// How often a plan bills.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Interval {
    Day,
    Week,
    Month,
    Year,
}

impl Interval {
    pub fn as_str(self) -> &'static str {
        match self {
            Interval::Day => "day",
            Interval::Week => "week",
            Interval::Month => "month",
            Interval::Year => "year",
        }
    }

    fn parse(text: &str) -> Option<Self> {
        match text {
            "day" => Some(Interval::Day),
            "week" => Some(Interval::Week),
            "month" => Some(Interval::Month),
            "year" => Some(Interval::Year),
            _ => None,
        }
    }
}

/// What a plan sells each period.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    pub name: String,
    pub credits: i64,
    pub price: Price,
    pub interval: Interval,
    /// Unused credits lapse at the period's end (`:reset`); otherwise they carry over.
    pub reset: bool,
}

/// The plans a shop sells (`CLAIMCHECK_PLANS=thesis-monthly=40:3900:chf:month,
/// thesis-pro=100:8900:chf:month:reset`). An invoice names prices, not plans: a line is
/// matched to the plan with its unit amount and currency, so no two plans may share both.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Plans(BTreeMap<String, Plan>);

impl Plans {
    pub fn get(&self, name: &str) -> Option<&Plan> {
        self.0.get(name)
    }

    pub fn iter(&self) -> impl Iterator<Item = &Plan> {
        self.0.values()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The plan an invoice line at this unit amount and currency bills for.
    pub fn by_price(&self, amount: i64, currency: &str) -> Option<&Plan> {
        self.0
            .values()
            .find(|plan| plan.price.amount == amount && plan.price.currency == currency)
    }
}

const PLAN_SHAPE: &str = "NAME=CREDITS:AMOUNT:CURRENCY:INTERVAL[:reset]";

impl FromStr for Plans {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let mut plans = BTreeMap::new();
        for entry in s.split(',').map(str::trim).filter(|e| !e.is_empty()) {
            let plan = parse_plan(entry)?;
            if let Some(twin) = plans
                .values()
                .find(|other: &&Plan| other.price == plan.price)
            {
                return Err(format!(
                    "'{entry}': plan '{}' has the same price; an invoice names its price, so \
                     two plans at {} {} cannot be told apart",
                    twin.name, plan.price.amount, plan.price.currency
                ));
            }
            if plans.insert(plan.name.clone(), plan).is_some() {
                return Err(format!("'{entry}': the plan is named twice"));
            }
        }
        Ok(Plans(plans))
    }
}

fn parse_plan(entry: &str) -> Result<Plan, String> {
    let (name, rest) = entry
        .split_once('=')
        .ok_or_else(|| format!("'{entry}' is not {PLAN_SHAPE}"))?;
    let name = name.trim();
    if name.is_empty() {
        return Err(format!("'{entry}': the plan has no name"));
    }
    let parts: Vec<&str> = rest.split(':').map(str::trim).collect();
    let (credits, amount, currency, interval, reset) = match parts.as_slice() {
        [credits, amount, currency, interval] => (credits, amount, currency, interval, None),
        [credits, amount, currency, interval, reset] => {
            (credits, amount, currency, interval, Some(*reset))
        }
        _ => return Err(format!("'{entry}' is not {PLAN_SHAPE}")),
    };
    let credits: i64 = credits
        .parse()
        .ok()
        .filter(|c| (1..=MAX_CREDITS).contains(c))
        .ok_or_else(|| format!("'{entry}': credits are a whole number from 1 to {MAX_CREDITS}"))?;
    let amount: i64 = amount.parse().ok().filter(|a| *a > 0).ok_or_else(|| {
        format!("'{entry}': the amount is a positive whole number of minor units (3900 for 39.00)")
    })?;
    let currency = currency.to_ascii_lowercase();
    if currency.len() != 3 || !currency.chars().all(|c| c.is_ascii_lowercase()) {
        return Err(format!(
            "'{entry}': the currency is a three-letter ISO code (chf)"
        ));
    }
    let interval = Interval::parse(interval)
        .ok_or_else(|| format!("'{entry}': the interval is day, week, month or year"))?;
    let reset = match reset {
        None => false,
        Some("reset") => true,
        Some(other) => {
            return Err(format!(
                "'{entry}': '{other}' after the interval can only be 'reset'"
            ));
        }
    };
    Ok(Plan {
        name: name.to_owned(),
        credits,
        price: Price { amount, currency },
        interval,
        reset,
    })
}

/// Why Stripe made an invoice.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BillingReason {
    SubscriptionCreate,
    SubscriptionCycle,
    SubscriptionUpdate,
    /// `manual`, `subscription_threshold`, `upcoming` and whatever Stripe adds: shown, never
    /// granting.
    Other(String),
}

impl BillingReason {
    pub fn parse(text: &str) -> Self {
        match text {
            "subscription_create" => BillingReason::SubscriptionCreate,
            "subscription_cycle" => BillingReason::SubscriptionCycle,
            "subscription_update" => BillingReason::SubscriptionUpdate,
            other => BillingReason::Other(other.to_owned()),
        }
    }

    pub fn as_str(&self) -> &str {
        match self {
            BillingReason::SubscriptionCreate => "subscription_create",
            BillingReason::SubscriptionCycle => "subscription_cycle",
            BillingReason::SubscriptionUpdate => "subscription_update",
            BillingReason::Other(other) => other,
        }
    }
}

/// A span of time in Stripe's seconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Deserialize)]
pub struct Period {
    pub start: i64,
    pub end: i64,
}

/// One line of an invoice: what it charges for which span, at which unit price.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InvoiceLine {
    /// Minor units; negative for unused time on an old price.
    pub amount: i64,
    pub period: Period,
    pub quantity: i64,
    /// The price's unit amount in minor units, when the line carries it.
    pub unit_amount: Option<i64>,
    pub price_id: Option<String>,
}

/// What an invoice says, read from either payload shape: the subscription under
/// `parent.subscription_details` (API 2025-03-31 and later) or at the top level with
/// `subscription_details` (earlier versions).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Invoice {
    pub invoice_id: String,
    pub subscription_id: Option<String>,
    /// The subscription's metadata as Stripe copied it onto the invoice (the order API puts
    /// `subscription_ref` and `plan` there); empty when the invoice does not carry it.
    pub metadata: BTreeMap<String, String>,
    pub billing_reason: BillingReason,
    pub amount_paid: i64,
    pub currency: String,
    pub customer_email: Option<String>,
    pub lines: Vec<InvoiceLine>,
}

/// Why an invoice cannot be read or granted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BillingError {
    #[error("the stored payload is not a Stripe invoice: {0}")]
    Payload(String),
    #[error("invoice {invoice_id} has no line to tell its period by")]
    NoPeriod { invoice_id: String },
    #[error(
        "invoice {invoice_id}: no plan in CLAIMCHECK_PLANS costs {amount} {currency} (the price of its line)"
    )]
    UnknownPrice {
        invoice_id: String,
        amount: i64,
        currency: String,
    },
    #[error("invoice {invoice_id}: its line carries no unit amount to find its plan by")]
    NoUnitAmount { invoice_id: String },
}

#[derive(Deserialize)]
struct Event {
    data: Data,
}

#[derive(Deserialize)]
struct Data {
    object: RawInvoice,
}

#[derive(Deserialize)]
struct RawInvoice {
    id: String,
    #[serde(default)]
    subscription: Option<serde_json::Value>,
    #[serde(default)]
    subscription_details: Option<SubscriptionDetails>,
    #[serde(default)]
    parent: Option<Parent>,
    #[serde(default)]
    billing_reason: Option<String>,
    #[serde(default)]
    amount_paid: i64,
    #[serde(default)]
    currency: String,
    #[serde(default)]
    customer_email: Option<String>,
    #[serde(default)]
    lines: Option<Lines>,
}

#[derive(Deserialize)]
struct Parent {
    #[serde(default)]
    subscription_details: Option<SubscriptionDetails>,
}

#[derive(Deserialize)]
struct SubscriptionDetails {
    #[serde(default)]
    subscription: Option<serde_json::Value>,
    #[serde(default)]
    metadata: Option<BTreeMap<String, serde_json::Value>>,
}

#[derive(Deserialize)]
struct Lines {
    #[serde(default)]
    data: Vec<RawLine>,
}

#[derive(Deserialize)]
struct RawLine {
    #[serde(default)]
    amount: i64,
    period: Period,
    #[serde(default)]
    quantity: Option<i64>,
    /// 2025-03-31 and later: `pricing.unit_amount_decimal`, `pricing.price_details.price`.
    #[serde(default)]
    pricing: Option<Pricing>,
    /// Earlier versions: the price object itself.
    #[serde(default)]
    price: Option<RawPrice>,
}

#[derive(Deserialize)]
struct Pricing {
    #[serde(default)]
    unit_amount_decimal: Option<String>,
    #[serde(default)]
    price_details: Option<PriceDetails>,
}

#[derive(Deserialize)]
struct PriceDetails {
    #[serde(default)]
    price: Option<serde_json::Value>,
}

#[derive(Deserialize)]
struct RawPrice {
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    unit_amount: Option<i64>,
}

fn expandable_id(value: Option<serde_json::Value>) -> Option<String> {
    match value? {
        serde_json::Value::String(id) if !id.is_empty() => Some(id),
        serde_json::Value::Object(object) => object.get("id")?.as_str().map(str::to_owned),
        _ => None,
    }
}

/// A whole number of minor units from Stripe's decimal string ("3900", "3900.000").
fn whole_minor_units(text: &str) -> Option<i64> {
    let (whole, fraction) = text.split_once('.').unwrap_or((text, ""));
    if !fraction.chars().all(|c| c == '0') {
        return None;
    }
    whole.parse().ok()
}

/// Reads the invoice of a Stripe `invoice.*` event.
pub fn read_invoice(payload: &str) -> Result<Invoice, BillingError> {
    let event: Event =
        serde_json::from_str(payload).map_err(|e| BillingError::Payload(e.to_string()))?;
    let raw = event.data.object;
    let details = raw
        .parent
        .and_then(|parent| parent.subscription_details)
        .or(raw.subscription_details);
    let (from_details, metadata) = match details {
        Some(details) => (
            expandable_id(details.subscription),
            details.metadata.unwrap_or_default(),
        ),
        None => (None, BTreeMap::new()),
    };
    let metadata = metadata
        .into_iter()
        .filter_map(|(key, value)| match value {
            serde_json::Value::String(text) => Some((key, text)),
            serde_json::Value::Number(number) => Some((key, number.to_string())),
            _ => None,
        })
        .collect();
    let lines = raw
        .lines
        .map(|lines| lines.data)
        .unwrap_or_default()
        .into_iter()
        .map(|line| {
            let (unit_amount, price_id) = match (line.pricing, line.price) {
                (Some(pricing), _) => (
                    pricing
                        .unit_amount_decimal
                        .as_deref()
                        .and_then(whole_minor_units),
                    pricing
                        .price_details
                        .and_then(|details| expandable_id(details.price)),
                ),
                (None, Some(price)) => (price.unit_amount, price.id),
                (None, None) => (None, None),
            };
            InvoiceLine {
                amount: line.amount,
                period: line.period,
                quantity: line.quantity.unwrap_or(1).max(1),
                unit_amount,
                price_id,
            }
        })
        .collect();
    Ok(Invoice {
        invoice_id: raw.id,
        subscription_id: from_details.or_else(|| expandable_id(raw.subscription)),
        metadata,
        billing_reason: BillingReason::parse(raw.billing_reason.as_deref().unwrap_or("")),
        amount_paid: raw.amount_paid,
        currency: raw.currency.to_ascii_lowercase(),
        customer_email: raw
            .customer_email
            .map(|email| email.trim().to_lowercase())
            .filter(|email| !email.is_empty()),
        lines,
    })
}

/// What a paid invoice grants.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Grant {
    /// A period's credits: the first invoice or a renewal.
    Period {
        plan: String,
        period: Period,
        credits: i64,
    },
    /// A paid plan change inside a period: its share of the credits the new plan adds.
    /// `credits` may be 0 (nothing paid, a downgrade, or the period's grants already at the
    /// highest plan's credits).
    Proration {
        from: String,
        to: String,
        period: Period,
        credits: i64,
    },
    /// An invoice that grants nothing by itself (`manual`, `subscription_threshold`…).
    Nothing { reason: BillingReason },
}

impl Grant {
    pub fn credits(&self) -> i64 {
        match self {
            Grant::Period { credits, .. } | Grant::Proration { credits, .. } => *credits,
            Grant::Nothing { .. } => 0,
        }
    }

    /// The period the grant belongs to; told apart from others by its end.
    pub fn period(&self) -> Option<Period> {
        match self {
            Grant::Period { period, .. } | Grant::Proration { period, .. } => Some(*period),
            Grant::Nothing { .. } => None,
        }
    }
}

/// What the period an invoice falls in has been granted so far (by other invoices).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PeriodSoFar {
    pub granted: i64,
    /// The most credits any plan of the period gives (its invoices' plans).
    pub highest_plan: i64,
}

/// The credits a paid `invoice` grants, given what its period was granted before.
pub fn grant(invoice: &Invoice, plans: &Plans, so_far: PeriodSoFar) -> Result<Grant, BillingError> {
    let plan_of = |line: &InvoiceLine| -> Result<&Plan, BillingError> {
        let amount = line.unit_amount.ok_or_else(|| BillingError::NoUnitAmount {
            invoice_id: invoice.invoice_id.clone(),
        })?;
        plans
            .by_price(amount, &invoice.currency)
            .ok_or_else(|| BillingError::UnknownPrice {
                invoice_id: invoice.invoice_id.clone(),
                amount,
                currency: invoice.currency.clone(),
            })
    };
    // The line that bills for the plan now: the last positive one (a proration lists the
    // unused time on the old price first, negative).
    let current = invoice.lines.iter().rev().find(|line| line.amount > 0);
    match invoice.billing_reason {
        BillingReason::SubscriptionCreate | BillingReason::SubscriptionCycle => {
            let line = current
                .or(invoice.lines.last())
                .ok_or_else(|| BillingError::NoPeriod {
                    invoice_id: invoice.invoice_id.clone(),
                })?;
            let plan = plan_of(line)?;
            let full = plan.credits.saturating_mul(line.quantity);
            let cap = so_far.highest_plan.max(full);
            Ok(Grant::Period {
                plan: plan.name.clone(),
                period: line.period,
                credits: full.min(cap - so_far.granted).max(0),
            })
        }
        BillingReason::SubscriptionUpdate => {
            let new = current.ok_or_else(|| BillingError::NoPeriod {
                invoice_id: invoice.invoice_id.clone(),
            })?;
            let old = invoice.lines.iter().find(|line| line.amount < 0);
            let to = plan_of(new)?;
            let (from, old_credits, old_price) = match old {
                Some(line) => {
                    let plan = plan_of(line)?;
                    (
                        plan.name.clone(),
                        plan.credits.saturating_mul(line.quantity),
                        plan.price.amount.saturating_mul(line.quantity),
                    )
                }
                // A change with nothing unused to credit (a trial's end, a free old price):
                // the new plan's credits against none.
                None => (String::new(), 0, 0),
            };
            let new_credits = to.credits.saturating_mul(new.quantity);
            let new_price = to.price.amount.saturating_mul(new.quantity);
            let added = new_credits - old_credits;
            let price_difference = new_price - old_price;
            let share = if added <= 0 || price_difference <= 0 || invoice.amount_paid <= 0 {
                0
            } else {
                let share = i128::from(added)
                    * i128::from(invoice.amount_paid.min(price_difference))
                    / i128::from(price_difference);
                i64::try_from(share).unwrap_or(added)
            };
            let cap = so_far.highest_plan.max(new_credits).max(old_credits);
            Ok(Grant::Proration {
                from,
                to: to.name.clone(),
                period: new.period,
                credits: share.min(cap - so_far.granted).max(0),
            })
        }
        BillingReason::Other(ref reason) => Ok(Grant::Nothing {
            reason: BillingReason::Other(reason.clone()),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture(name: &str) -> String {
        let path = format!(
            "{}/../fixtures/stripe/events/billing/{name}.json",
            env!("CARGO_MANIFEST_DIR")
        );
        std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
    }

    fn plans() -> Plans {
        "thesis-monthly=40:3900:chf:month, thesis-pro=100:8900:chf:month:reset"
            .parse()
            .unwrap()
    }

    const FIRST: Period = Period {
        start: 1_764_400_000,
        end: 1_766_992_000,
    };

    #[test]
    fn plans_parse_and_refuse_what_an_invoice_could_not_tell_apart() {
        let plans = plans();
        let pro = plans.get("thesis-pro").unwrap();
        assert_eq!(
            (pro.credits, pro.interval, pro.reset),
            (100, Interval::Month, true)
        );
        assert!(!plans.get("thesis-monthly").unwrap().reset);
        assert_eq!(plans.by_price(3900, "chf").unwrap().name, "thesis-monthly");
        assert!(plans.by_price(3900, "eur").is_none());
        for bad in [
            "a=40:3900:chf:month,b=80:3900:chf:year",
            "a=40:3900:chf",
            "a=40:3900:chf:fortnight",
            "a=0:3900:chf:month",
            "a=40:-1:chf:month",
            "a=40:3900:swissfrancs:month",
            "a=40:3900:chf:month:keep",
            "=40:3900:chf:month",
        ] {
            assert!(bad.parse::<Plans>().is_err(), "{bad} was taken");
        }
    }

    #[test]
    fn the_first_invoice_grants_its_plan_for_the_period_on_its_lines() {
        let invoice = read_invoice(&fixture("invoice.paid.subscription_create")).unwrap();
        assert_eq!(
            invoice.subscription_id.as_deref(),
            Some("sub_1Qfix0001Plan")
        );
        assert_eq!(invoice.metadata["subscription_ref"], "subref_0001");
        assert_eq!(invoice.billing_reason, BillingReason::SubscriptionCreate);
        let grant = grant(&invoice, &plans(), PeriodSoFar::default()).unwrap();
        assert_eq!(
            grant,
            Grant::Period {
                plan: "thesis-monthly".into(),
                period: FIRST,
                credits: 40
            }
        );
        // Its twin and `invoice.payment_succeeded` describe the same invoice.
        let twin = read_invoice(&fixture("invoice.paid.subscription_create.twin")).unwrap();
        assert_eq!(twin.invoice_id, invoice.invoice_id);
        // Granted before (a redrive): nothing more.
        let again = super::grant(
            &invoice,
            &plans(),
            PeriodSoFar {
                granted: 40,
                highest_plan: 40,
            },
        )
        .unwrap();
        assert_eq!(again.credits(), 0);
    }

    #[test]
    fn a_paid_upgrade_grants_its_share_and_a_loop_never_passes_the_highest_plan() {
        let invoice = read_invoice(&fixture("invoice.paid.subscription_update")).unwrap();
        let so_far = PeriodSoFar {
            granted: 40,
            highest_plan: 40,
        };
        // 60 more credits, 2500 paid of the 5000 the prices differ by: 30.
        let grant = grant(&invoice, &plans(), so_far).unwrap();
        let Grant::Proration {
            from,
            to,
            period,
            credits,
        } = &grant
        else {
            panic!("{grant:?}")
        };
        assert_eq!(
            (from.as_str(), to.as_str(), *credits),
            ("thesis-monthly", "thesis-pro", 30)
        );
        assert_eq!(period.end, 1_769_584_000);
        // The same upgrade again after a downgrade: 30 more reach the cap, then nothing.
        let second = super::grant(
            &invoice,
            &plans(),
            PeriodSoFar {
                granted: 70,
                highest_plan: 100,
            },
        )
        .unwrap();
        assert_eq!(second.credits(), 30);
        let third = super::grant(
            &invoice,
            &plans(),
            PeriodSoFar {
                granted: 100,
                highest_plan: 100,
            },
        )
        .unwrap();
        assert_eq!(third.credits(), 0);
    }

    #[test]
    fn a_renewal_paid_on_retry_grants_the_new_plan_for_its_period() {
        let invoice = read_invoice(&fixture("invoice.paid.subscription_cycle.retry")).unwrap();
        let grant = grant(&invoice, &plans(), PeriodSoFar::default()).unwrap();
        assert_eq!(grant.credits(), 100);
        assert_eq!(
            grant.period(),
            Some(Period {
                start: 1_769_584_000,
                end: 1_772_176_000
            })
        );
    }

    #[test]
    fn the_older_payload_shape_reads_the_same() {
        let shaped = fixture("invoice.paid.subscription_create");
        let mut event: serde_json::Value = serde_json::from_str(&shaped).unwrap();
        let object = event["data"]["object"].as_object_mut().unwrap();
        let details = object.remove("parent").unwrap()["subscription_details"].clone();
        object.insert("subscription".into(), details["subscription"].clone());
        object.insert(
            "subscription_details".into(),
            serde_json::json!({ "metadata": details["metadata"] }),
        );
        for line in object["lines"]["data"].as_array_mut().unwrap() {
            let line = line.as_object_mut().unwrap();
            line.remove("pricing");
            line.insert(
                "price".into(),
                serde_json::json!({ "id": "price_1QfixSmall40", "unit_amount": 3900 }),
            );
        }
        let older = read_invoice(&event.to_string()).unwrap();
        let newer = read_invoice(&shaped).unwrap();
        assert_eq!(older, newer);
    }

    #[test]
    fn an_unknown_price_or_reason_is_said_plainly() {
        let invoice = read_invoice(&fixture("invoice.paid.subscription_cycle")).unwrap();
        let none: Plans = "other=10:1000:chf:month".parse().unwrap();
        let error = grant(&invoice, &none, PeriodSoFar::default()).unwrap_err();
        assert!(error.to_string().contains("3900 chf"), "{error}");
        let mut manual = invoice.clone();
        manual.billing_reason = BillingReason::parse("manual");
        assert_eq!(
            grant(&manual, &plans(), PeriodSoFar::default()).unwrap(),
            Grant::Nothing {
                reason: BillingReason::Other("manual".into())
            }
        );
        assert!(read_invoice("{\"data\":{}}").is_err());
    }
}
