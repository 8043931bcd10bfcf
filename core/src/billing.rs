//! Subscriptions' money, decided from one Stripe invoice alone (no I/O): the plans a shop
//! sells, what a paid invoice pays for (its subscription, the periods on its lines, the plans
//! of those lines) and how many credits it grants.
//!
//! `invoice.paid` is the one event that grants. An invoice made for a subscription
//! (`subscription_create`, `subscription_cycle`, `subscription_update`) grants by its lines:
//! - a line that bills a plan for a whole period (the first invoice, a renewal, a change that
//!   starts a new period) grants the plan's credits for that period; a free trial's line
//!   charges nothing and grants nothing;
//! - the proration lines of a change inside a period (the unused time on the old price,
//!   negative, and the remaining time on the new one) grant the credits the new plan gives
//!   beyond the old one, in proportion to what was paid for them,
//!   `floor(Δcredits × paid ÷ Δprice)`;
//! - and a period's grants never pass the highest plan it has seen ([`Entitlement::capped`]).
//!
//! Any other invoice (`manual`, `subscription_threshold`, `quote_accept`…) is recorded and
//! grants nothing by itself.
//!
//! Periods are told apart by their end: every invoice of one billing period (the first or
//! renewal invoice, and each proration inside the period) has lines that end when the period
//! ends, while a proration's lines start at the change, not at the period's start. Plans are
//! found by the unit price of a line, since an invoice names a price, not a plan.

use std::collections::BTreeMap;
use std::str::FromStr;

use serde::Deserialize;

mod schedules;

pub use schedules::{
    NextPhase, PhaseItem, ScheduleFacts, ScheduledPhase, expanded_price, read_schedule,
};

use crate::fulfilment::{
    MAX_CREDITS, Price, expandable_id, metadata_value, parse_credits, parse_price,
};

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

    pub fn parse(text: &str) -> Option<Self> {
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

    /// No plan is on sale: the shop sells no subscriptions, and Billing's events grant
    /// nothing.
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
    let credits = parse_credits(entry, credits)?;
    let price = parse_price(entry, amount, currency)?;
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
        price,
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
    /// `None` when the line does not say (it then grants nothing).
    pub period: Option<Period>,
    pub quantity: i64,
    /// Unused or remaining time after a plan change, not a whole period.
    pub proration: bool,
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
    pub customer_id: Option<String>,
    /// The payment intent that paid it, where the payload names one (`payment_intent` before
    /// 2025-03-31; after, `payments.data[].payment.payment_intent` when included): a refund
    /// or dispute of it then finds the invoice.
    pub payment_intent: Option<String>,
    pub lines: Vec<InvoiceLine>,
}

/// Why an invoice cannot be read or granted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BillingError {
    #[error("the stored payload is not a Stripe invoice: {0}")]
    Payload(String),
    #[error(
        "invoice {invoice_id}: no plan in CLAIMCHECK_PLANS costs {amount} {currency} (the unit price of its line, Stripe price '{price_id}')"
    )]
    UnknownPrice {
        invoice_id: String,
        amount: i64,
        currency: String,
        price_id: String,
    },
    #[error(
        "invoice {invoice_id}: its line (Stripe price '{price_id}') carries no whole unit amount in minor units to find its plan by"
    )]
    NoUnitAmount {
        invoice_id: String,
        price_id: String,
    },
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
    customer: Option<serde_json::Value>,
    #[serde(default)]
    payment_intent: Option<serde_json::Value>,
    #[serde(default)]
    payments: Option<Payments>,
    #[serde(default)]
    lines: Option<Lines>,
}

#[derive(Deserialize)]
struct Payments {
    #[serde(default)]
    data: Vec<InvoicePayment>,
}

#[derive(Deserialize)]
struct InvoicePayment {
    #[serde(default)]
    payment: Option<PaymentRef>,
    #[serde(default)]
    status: Option<String>,
}

#[derive(Deserialize)]
struct PaymentRef {
    #[serde(default)]
    payment_intent: Option<serde_json::Value>,
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
    #[serde(default)]
    period: Option<Period>,
    #[serde(default)]
    quantity: Option<i64>,
    /// Earlier versions: whether the line is a proration.
    #[serde(default)]
    proration: Option<bool>,
    /// 2025-03-31 and later: `parent.subscription_item_details.proration` (or
    /// `invoice_item_details` for a pending invoice item).
    #[serde(default)]
    parent: Option<LineParent>,
    /// 2025-03-31 and later: `pricing.unit_amount_decimal`, `pricing.price_details.price`.
    #[serde(default)]
    pricing: Option<Pricing>,
    /// Earlier versions: the price object itself.
    #[serde(default)]
    price: Option<RawPrice>,
}

#[derive(Deserialize)]
struct LineParent {
    #[serde(default)]
    subscription_item_details: Option<ProrationFlag>,
    #[serde(default)]
    invoice_item_details: Option<ProrationFlag>,
}

#[derive(Deserialize)]
struct ProrationFlag {
    #[serde(default)]
    proration: Option<bool>,
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
    #[serde(default)]
    unit_amount_decimal: Option<String>,
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
        .filter_map(|(key, value)| Some((key, metadata_value(&value)?)))
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
                (None, Some(price)) => (
                    price.unit_amount.or_else(|| {
                        price
                            .unit_amount_decimal
                            .as_deref()
                            .and_then(whole_minor_units)
                    }),
                    price.id,
                ),
                (None, None) => (None, None),
            };
            let proration = line
                .parent
                .and_then(|parent| {
                    parent
                        .subscription_item_details
                        .or(parent.invoice_item_details)
                })
                .and_then(|details| details.proration)
                .or(line.proration)
                .unwrap_or(false);
            InvoiceLine {
                amount: line.amount,
                period: line.period,
                quantity: line.quantity.unwrap_or(1),
                proration,
                unit_amount,
                price_id,
            }
        })
        .collect();
    Ok(Invoice {
        invoice_id: raw.id,
        subscription_id: from_details
            .or_else(|| expandable_id(raw.subscription))
            .filter(|id| !id.is_empty()),
        metadata,
        billing_reason: BillingReason::parse(raw.billing_reason.as_deref().unwrap_or("")),
        amount_paid: raw.amount_paid,
        currency: raw.currency.to_ascii_lowercase(),
        customer_email: raw
            .customer_email
            .map(|email| email.trim().to_lowercase())
            .filter(|email| !email.is_empty()),
        customer_id: expandable_id(raw.customer),
        payment_intent: expandable_id(raw.payment_intent).or_else(|| {
            raw.payments?
                .data
                .into_iter()
                .filter(|p| p.status.as_deref().is_none_or(|s| s == "paid"))
                .find_map(|p| expandable_id(p.payment?.payment_intent))
        }),
        lines,
    })
}

/// Which part of an invoice an entitlement comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// A period's plan credits: a line that bills the plan for a whole period (the first
    /// invoice, a renewal, or a change that starts a new period).
    Period,
    /// A plan change inside a period: the proration lines (the unused time on the old price,
    /// negative; the remaining time on the new one).
    Proration,
}

/// What a paid invoice entitles its subscription to for one period, before the period's cap.
/// One invoice may carry two: a renewal that also bills a change made late in the period
/// before (Stripe's default `create_prorations` puts those lines on the next invoice).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entitlement {
    pub step: Step,
    /// The plan the credits come from (after a change, the new one).
    pub plan: String,
    /// A proration's plan before the change; `None` for a period, or a change from nothing.
    pub from: Option<String>,
    /// Told apart from other periods by its end.
    pub period: Period,
    pub credits: i64,
    /// The most credits a plan of this invoice gives the period (credits × quantity): with
    /// the period's other grants, what the period may never pass.
    pub ceiling: i64,
}

/// What the period of an entitlement was granted by the other invoices before it. The
/// caller grants each invoice once (its grants are keyed by invoice); the cap does not
/// deduplicate.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PeriodSoFar {
    pub granted: i64,
    /// The highest `ceiling` among the period's earlier grants.
    pub ceiling: i64,
}

impl Entitlement {
    /// The credits to grant now: never so many that the period's grants pass the highest
    /// plan it has seen (a downgrade-then-upgrade loop inside one period grants nothing past
    /// the highest plan, however often it is paid).
    pub fn capped(&self, so_far: PeriodSoFar) -> i64 {
        let cap = so_far.ceiling.max(self.ceiling);
        self.credits.min(cap - so_far.granted).max(0)
    }
}

/// What a paid invoice grants.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// One entitlement per period the invoice pays for; empty when it pays for nothing that
    /// grants (a free trial's line, a downgrade's credit, nothing paid for a change).
    Grants(Vec<Entitlement>),
    /// An invoice that grants nothing by itself (`manual`, `subscription_threshold`…): shown,
    /// and an operator may grant by adjustment.
    Nothing { reason: BillingReason },
}

/// What a paid `invoice` entitles its subscription to, by period:
/// - each line that bills a plan for a whole period (not a proration) and charges for it
///   (a free trial's line charges nothing and grants nothing) gives the plan's credits ×
///   quantity for that period;
/// - the proration lines of one period give the credits the new plan adds over the old one,
///   in proportion to what was paid for them: `floor(Δcredits × paid ÷ Δprice)`, where paid
///   is their net amount, at most what the invoice was paid beyond its whole-period lines.
///
/// Lines whose price is no plan (an add-on, a one-off fee) are left out; an invoice whose
/// granting lines match no plan at all is an error that names the price, so that the
/// operator can add the plan and re-drive it.
pub fn decide(invoice: &Invoice, plans: &Plans) -> Result<Decision, BillingError> {
    match invoice.billing_reason {
        BillingReason::SubscriptionCreate
        | BillingReason::SubscriptionCycle
        | BillingReason::SubscriptionUpdate => {}
        BillingReason::Other(ref reason) => {
            return Ok(Decision::Nothing {
                reason: BillingReason::Other(reason.clone()),
            });
        }
    }
    let mut unknown = None;
    let mut plan_of = |line: &InvoiceLine| -> Option<Plan> {
        let found = line
            .unit_amount
            .and_then(|amount| plans.by_price(amount, &invoice.currency));
        if found.is_none() && unknown.is_none() {
            unknown = Some(line.clone());
        }
        found.cloned()
    };
    let mut grants = Vec::new();
    let mut whole_period_amount = 0i64;
    let mut matched_any = false;
    for line in invoice.lines.iter().filter(|line| !line.proration) {
        let Some(period) = line.period else { continue };
        if line.amount <= 0 || line.quantity <= 0 {
            continue;
        }
        whole_period_amount = whole_period_amount.saturating_add(line.amount);
        let Some(plan) = plan_of(line) else { continue };
        matched_any = true;
        let credits = plan.credits.saturating_mul(line.quantity).min(MAX_CREDITS);
        // Two plans billed for one period (two items of one subscription) are one
        // entitlement: their credits together, named after the larger.
        match grants
            .iter_mut()
            .find(|g: &&mut Entitlement| g.step == Step::Period && g.period == period)
        {
            Some(grant) => {
                if credits > grant.credits {
                    grant.plan = plan.name;
                }
                grant.credits = grant.credits.saturating_add(credits).min(MAX_CREDITS);
                grant.ceiling = grant.credits;
            }
            None => grants.push(Entitlement {
                step: Step::Period,
                plan: plan.name,
                from: None,
                period,
                credits,
                ceiling: credits,
            }),
        }
    }
    // What the invoice paid beyond its whole-period lines is what paid for its prorations.
    let mut paid_for_prorations = invoice
        .amount_paid
        .saturating_sub(whole_period_amount)
        .max(0);
    // Proration lines, grouped by the period they end with.
    let mut by_end: BTreeMap<i64, Vec<(Period, &InvoiceLine)>> = BTreeMap::new();
    for line in invoice.lines.iter().filter(|line| line.proration) {
        if let Some(period) = line.period {
            by_end.entry(period.end).or_default().push((period, line));
        }
    }
    for lines in by_end.values() {
        let net: i64 = lines.iter().map(|(_, line)| line.amount).sum();
        // The remaining time on the new price: the positive line that starts last.
        let Some(&(period, new)) = lines
            .iter()
            .filter(|(_, line)| line.amount > 0)
            .max_by_key(|(period, _)| period.start)
        else {
            // A downgrade, or a change to a free price: a credit, no credits.
            continue;
        };
        if net <= 0 || paid_for_prorations <= 0 {
            continue;
        }
        let Some(to) = plan_of(new) else { continue };
        // The unused time on the old price: the negative line that starts first.
        let old = lines
            .iter()
            .filter(|(_, line)| line.amount < 0)
            .min_by_key(|(period, _)| period.start);
        let old = match old {
            Some(&(_, line)) => match plan_of(line) {
                Some(plan) => Some((plan, line.quantity.max(0))),
                None => continue,
            },
            None => None,
        };
        // Both plans known (an old one unknown would leave the share unknown: an error
        // below, unless another line of the invoice grants).
        matched_any = true;
        let new_credits = to.credits.saturating_mul(new.quantity.max(0));
        let new_price = to.price.amount.saturating_mul(new.quantity.max(0));
        let (from, old_credits, old_price) = match &old {
            Some((plan, quantity)) => (
                Some(plan.name.clone()),
                plan.credits.saturating_mul(*quantity),
                plan.price.amount.saturating_mul(*quantity),
            ),
            None => (None, 0, 0),
        };
        let added = new_credits - old_credits;
        let price_difference = new_price - old_price;
        let paid = net.min(paid_for_prorations);
        paid_for_prorations -= paid;
        let credits = if added <= 0 || price_difference <= 0 {
            0
        } else {
            let share = i128::from(added) * i128::from(paid.min(price_difference))
                / i128::from(price_difference);
            i64::try_from(share).unwrap_or(added).min(MAX_CREDITS)
        };
        grants.push(Entitlement {
            step: Step::Proration,
            plan: to.name,
            from,
            period,
            credits,
            ceiling: new_credits.max(old_credits).min(MAX_CREDITS),
        });
    }
    if !matched_any && let Some(line) = unknown {
        return Err(match line.unit_amount {
            Some(amount) => BillingError::UnknownPrice {
                invoice_id: invoice.invoice_id.clone(),
                amount,
                currency: invoice.currency.clone(),
                price_id: line.price_id.unwrap_or_default(),
            },
            None => BillingError::NoUnitAmount {
                invoice_id: invoice.invoice_id.clone(),
                price_id: line.price_id.unwrap_or_default(),
            },
        });
    }
    Ok(Decision::Grants(grants))
}

/// Stripe's status of a subscription.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SubscriptionStatus {
    Incomplete,
    IncompleteExpired,
    Trialing,
    Active,
    PastDue,
    Canceled,
    Unpaid,
    Paused,
}

impl SubscriptionStatus {
    pub const ALL: [SubscriptionStatus; 8] = [
        SubscriptionStatus::Incomplete,
        SubscriptionStatus::IncompleteExpired,
        SubscriptionStatus::Trialing,
        SubscriptionStatus::Active,
        SubscriptionStatus::PastDue,
        SubscriptionStatus::Canceled,
        SubscriptionStatus::Unpaid,
        SubscriptionStatus::Paused,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            SubscriptionStatus::Incomplete => "incomplete",
            SubscriptionStatus::IncompleteExpired => "incomplete_expired",
            SubscriptionStatus::Trialing => "trialing",
            SubscriptionStatus::Active => "active",
            SubscriptionStatus::PastDue => "past_due",
            SubscriptionStatus::Canceled => "canceled",
            SubscriptionStatus::Unpaid => "unpaid",
            SubscriptionStatus::Paused => "paused",
        }
    }

    pub fn parse(text: &str) -> Option<SubscriptionStatus> {
        SubscriptionStatus::ALL
            .into_iter()
            .find(|status| status.as_str() == text)
    }
}

/// A subscription's state as one of its `customer.subscription.*` events tells it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SubscriptionState {
    pub status: SubscriptionStatus,
    /// The plan its items' prices are, if one of them is one of the shop's plans.
    pub plan: Option<String>,
    /// With no plan among its items: the first item's price (what its renewal will bill and
    /// no plan grants for).
    pub unmatched_price: Option<Price>,
    /// The end of the current period (Stripe's seconds): on the items from 2025-03-31, on the
    /// subscription before.
    pub current_period_end: Option<i64>,
    pub cancel_at_period_end: bool,
    /// Stripe's `created` of the event: an older state never overwrites a newer one.
    pub as_of: i64,
}

/// What an event says about one subscription: who it belongs to and, from its status events,
/// its state. A Checkout Session in `subscription` mode names only the owner.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SubscriptionFacts {
    pub subscription_id: String,
    /// The shop's reference, `metadata.subscription_ref` (the order API puts it there).
    pub subscription_ref: Option<String>,
    pub customer_id: Option<String>,
    pub customer_email: Option<String>,
    pub state: Option<SubscriptionState>,
}

/// The metadata key under which the shop's reference of a subscription travels.
pub const REF_KEY: &str = "subscription_ref";

#[derive(Deserialize)]
struct SubscriptionEvent {
    created: i64,
    data: SubscriptionData,
}

#[derive(Deserialize)]
struct SubscriptionData {
    object: RawSubscription,
}

#[derive(Deserialize)]
struct RawSubscription {
    id: String,
    #[serde(default)]
    status: Option<String>,
    #[serde(default)]
    customer: Option<serde_json::Value>,
    #[serde(default)]
    metadata: BTreeMap<String, serde_json::Value>,
    #[serde(default)]
    cancel_at_period_end: Option<bool>,
    #[serde(default)]
    current_period_end: Option<i64>,
    #[serde(default)]
    items: Option<Items>,
}

#[derive(Deserialize)]
struct Items {
    #[serde(default)]
    data: Vec<RawItem>,
}

#[derive(Deserialize)]
struct RawItem {
    #[serde(default)]
    current_period_end: Option<i64>,
    #[serde(default)]
    price: Option<ItemPrice>,
    #[serde(default)]
    quantity: Option<i64>,
}

#[derive(Deserialize)]
struct ItemPrice {
    #[serde(default)]
    unit_amount: Option<i64>,
    #[serde(default)]
    currency: Option<String>,
}

/// The plan a subscription's (or a schedule phase's) priced items bill, and with none, the
/// first item's price. Items whose price is no plan (an add-on) are left out; of two plans,
/// the one that grants more names it, as its invoices' grants are.
pub(crate) fn plan_of_items(
    items: &[(Price, i64)],
    plans: &Plans,
) -> (Option<String>, Option<Price>) {
    let plan = items
        .iter()
        .filter_map(|(price, quantity)| {
            let plan = plans.by_price(price.amount, &price.currency)?;
            Some((plan.credits.saturating_mul(*quantity), plan))
        })
        .max_by_key(|(credits, _)| *credits)
        .map(|(_, plan)| plan.name.clone());
    let unmatched = match plan {
        Some(_) => None,
        None => items.first().map(|(price, _)| price.clone()),
    };
    (plan, unmatched)
}

/// Reads the subscription of a `customer.subscription.*` event.
pub fn read_subscription(payload: &str, plans: &Plans) -> Result<SubscriptionFacts, BillingError> {
    let event: SubscriptionEvent =
        serde_json::from_str(payload).map_err(|e| BillingError::Payload(e.to_string()))?;
    let raw = event.data.object;
    let status_text = raw.status.unwrap_or_default();
    let status = SubscriptionStatus::parse(&status_text).ok_or_else(|| {
        BillingError::Payload(format!("unknown subscription status '{status_text}'"))
    })?;
    let items = raw.items.map(|items| items.data).unwrap_or_default();
    let item_period_end = items.iter().find_map(|item| item.current_period_end);
    let priced: Vec<(Price, i64)> = items
        .iter()
        .filter_map(|item| {
            let price = item.price.as_ref()?;
            Some((
                Price {
                    amount: price.unit_amount?,
                    currency: price.currency.as_deref()?.to_ascii_lowercase(),
                },
                item.quantity.unwrap_or(1),
            ))
        })
        .collect();
    let (plan, unmatched_price) = plan_of_items(&priced, plans);
    Ok(SubscriptionFacts {
        subscription_id: raw.id,
        subscription_ref: raw.metadata.get(REF_KEY).and_then(metadata_value),
        customer_id: expandable_id(raw.customer),
        customer_email: None,
        state: Some(SubscriptionState {
            status,
            plan,
            unmatched_price,
            current_period_end: item_period_end.or(raw.current_period_end),
            cancel_at_period_end: raw.cancel_at_period_end.unwrap_or(false),
            as_of: event.created,
        }),
    })
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

    fn grants(invoice: &Invoice) -> Vec<Entitlement> {
        match decide(invoice, &plans()).unwrap() {
            Decision::Grants(grants) => grants,
            other => panic!("{other:?}"),
        }
    }

    fn event(name: &str) -> serde_json::Value {
        serde_json::from_str(&fixture(name)).unwrap()
    }

    fn lines(event: &mut serde_json::Value) -> &mut Vec<serde_json::Value> {
        event["data"]["object"]["lines"]["data"]
            .as_array_mut()
            .unwrap()
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
        let grants = grants(&invoice);
        assert_eq!(
            grants,
            [Entitlement {
                step: Step::Period,
                plan: "thesis-monthly".into(),
                from: None,
                period: FIRST,
                credits: 40,
                ceiling: 40,
            }]
        );
        assert_eq!(grants[0].capped(PeriodSoFar::default()), 40);
        // Its twin and `invoice.payment_succeeded` describe the same invoice: the caller
        // grants per invoice, once.
        let twin = read_invoice(&fixture("invoice.paid.subscription_create.twin")).unwrap();
        assert_eq!(twin.invoice_id, invoice.invoice_id);
    }

    #[test]
    fn a_paid_upgrade_grants_its_share_and_a_loop_never_passes_the_highest_plan() {
        let upgrade = grants(&read_invoice(&fixture("invoice.paid.subscription_update")).unwrap());
        let [proration] = upgrade.as_slice() else {
            panic!("{upgrade:?}")
        };
        assert_eq!(proration.step, Step::Proration);
        assert_eq!(proration.from.as_deref(), Some("thesis-monthly"));
        assert_eq!(proration.plan, "thesis-pro");
        assert_eq!(proration.period.end, 1_769_584_000);
        // 60 more credits, 2500 paid of the 5000 the prices differ by: 30.
        assert_eq!((proration.credits, proration.ceiling), (30, 100));
        let so_far = |granted, ceiling| PeriodSoFar { granted, ceiling };
        assert_eq!(proration.capped(so_far(40, 40)), 30);
        // The same upgrade paid again after a downgrade: 30 more reach the cap, then nothing.
        assert_eq!(proration.capped(so_far(70, 100)), 30);
        assert_eq!(proration.capped(so_far(100, 100)), 0);

        // In the other order, the renewal decided after the upgrade: the same 70.
        let cycle = grants(&read_invoice(&fixture("invoice.paid.subscription_cycle")).unwrap());
        assert_eq!(cycle[0].period.end, proration.period.end);
        let first = proration.capped(PeriodSoFar::default());
        assert_eq!(
            first + cycle[0].capped(so_far(first, proration.ceiling)),
            70
        );
    }

    #[test]
    fn a_renewal_paid_on_retry_grants_the_new_plan_for_its_period() {
        let invoice = read_invoice(&fixture("invoice.paid.subscription_cycle.retry")).unwrap();
        let grants = grants(&invoice);
        assert_eq!(grants.len(), 1);
        assert_eq!(
            (grants[0].plan.as_str(), grants[0].credits),
            ("thesis-pro", 100)
        );
        assert_eq!(
            grants[0].period,
            Period {
                start: 1_769_584_000,
                end: 1_772_176_000
            }
        );
    }

    #[test]
    fn a_renewal_that_carries_the_last_periods_change_grants_both() {
        // Stripe's default `create_prorations` bills a change on the next renewal.
        let mut renewal = event("invoice.paid.subscription_cycle.retry");
        let upgrade = event("invoice.paid.subscription_update");
        let prorations = upgrade["data"]["object"]["lines"]["data"].clone();
        lines(&mut renewal).splice(0..0, prorations.as_array().unwrap().iter().cloned());
        renewal["data"]["object"]["amount_paid"] = 11_400.into();
        let grants = grants(&read_invoice(&renewal.to_string()).unwrap());
        let summary: Vec<_> = grants
            .iter()
            .map(|g| (g.step, g.period.end, g.credits))
            .collect();
        assert_eq!(
            summary,
            [
                (Step::Period, 1_772_176_000, 100),
                (Step::Proration, 1_769_584_000, 30)
            ]
        );
    }

    #[test]
    fn a_trial_a_downgrade_and_quantities() {
        // A free trial's line charges nothing: no credits.
        let mut trial = event("invoice.paid.subscription_create");
        lines(&mut trial)[0]["amount"] = 0.into();
        trial["data"]["object"]["amount_paid"] = 0.into();
        assert_eq!(grants(&read_invoice(&trial.to_string()).unwrap()), []);

        // A downgrade: the unused time on the dearer plan is a credit; no credits.
        let mut downgrade = event("invoice.paid.subscription_update");
        for line in lines(&mut downgrade).iter_mut() {
            let amount = line["amount"].as_i64().unwrap();
            line["amount"] = (-amount).into();
        }
        downgrade["data"]["object"]["amount_paid"] = 0.into();
        assert_eq!(grants(&read_invoice(&downgrade.to_string()).unwrap()), []);

        // Two seats, twice the credits; none, none.
        let mut seats = event("invoice.paid.subscription_cycle");
        lines(&mut seats)[0]["quantity"] = 2.into();
        let two = grants(&read_invoice(&seats.to_string()).unwrap());
        assert_eq!((two[0].credits, two[0].ceiling), (80, 80));
        lines(&mut seats)[0]["quantity"] = 0.into();
        assert_eq!(grants(&read_invoice(&seats.to_string()).unwrap()), []);
    }

    #[test]
    fn the_older_payload_shape_reads_the_same() {
        let shaped = fixture("invoice.paid.subscription_update");
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
            let pricing = line.remove("pricing").unwrap();
            line.remove("parent");
            line.insert("proration".into(), true.into());
            line.insert(
                "price".into(),
                serde_json::json!({
                    "id": pricing["price_details"]["price"],
                    "unit_amount": null,
                    "unit_amount_decimal": pricing["unit_amount_decimal"],
                }),
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
        let error = decide(&invoice, &none).unwrap_err().to_string();
        assert!(error.contains("3900 chf"), "{error}");
        assert!(error.contains("price_1QfixSmall40"), "{error}");
        let mut manual = invoice.clone();
        manual.billing_reason = BillingReason::parse("manual");
        assert_eq!(
            decide(&manual, &plans()).unwrap(),
            Decision::Nothing {
                reason: BillingReason::Other("manual".into())
            }
        );
        assert!(read_invoice("{\"data\":{}}").is_err());
    }

    #[test]
    fn a_subscription_event_reads_its_state_in_both_shapes() {
        let facts = read_subscription(&fixture("customer.subscription.updated.past_due"), &plans())
            .unwrap();
        assert_eq!(facts.subscription_id, "sub_1Qfix0001Plan");
        assert_eq!(facts.subscription_ref.as_deref(), Some("subref_0001"));
        assert_eq!(facts.customer_id.as_deref(), Some("cus_Qfix0001"));
        let state = facts.state.unwrap();
        assert_eq!(state.status, SubscriptionStatus::PastDue);
        // The item's price is the plan, not the metadata's (stale) name.
        assert_eq!(state.plan.as_deref(), Some("thesis-pro"));
        assert_eq!(state.current_period_end, Some(1_772_176_000));
        assert_eq!(state.as_of, 1_769_587_601);
        // Before 2025-03-31 the period's end is on the subscription itself.
        let mut older = event("customer.subscription.created");
        let object = &mut older["data"]["object"];
        object["current_period_end"] = 1_766_992_000.into();
        object["items"]["data"][0]
            .as_object_mut()
            .unwrap()
            .remove("current_period_end");
        let state = read_subscription(&older.to_string(), &plans())
            .unwrap()
            .state
            .unwrap();
        assert_eq!(state.current_period_end, Some(1_766_992_000));
        assert_eq!(state.plan.as_deref(), Some("thesis-monthly"));
        // An add-on item first, and two plans: named after the plan that grants more.
        let items = &mut older["data"]["object"]["items"]["data"];
        let plan_item = items[0].clone();
        let mut add_on = plan_item.clone();
        add_on["price"]["unit_amount"] = 500.into();
        let mut pro = plan_item.clone();
        pro["price"]["unit_amount"] = 8900.into();
        let mut monthlies = plan_item;
        monthlies["quantity"] = 3.into();
        *items = serde_json::json!([add_on.clone(), pro, monthlies]);
        let state = read_subscription(&older.to_string(), &plans())
            .unwrap()
            .state
            .unwrap();
        assert_eq!(
            state.plan.as_deref(),
            Some("thesis-monthly"),
            "3 × 40 > 100"
        );
        older["data"]["object"]["items"]["data"][2]["quantity"] = 2.into();
        let state = read_subscription(&older.to_string(), &plans())
            .unwrap()
            .state
            .unwrap();
        assert_eq!(state.plan.as_deref(), Some("thesis-pro"), "100 > 2 × 40");
        older["data"]["object"]["items"]["data"] = serde_json::json!([add_on]);
        let state = read_subscription(&older.to_string(), &plans())
            .unwrap()
            .state
            .unwrap();
        assert_eq!(state.plan, None, "an add-on alone is no plan");
        assert_eq!(
            state.unmatched_price,
            Some(Price {
                amount: 500,
                currency: "chf".into()
            })
        );
        // A status Stripe does not have is an error, not a guess.
        older["data"]["object"]["status"] = "dormant".into();
        assert!(matches!(
            read_subscription(&older.to_string(), &plans()),
            Err(BillingError::Payload(_))
        ));
    }

    #[test]
    fn an_invoice_names_the_payment_that_paid_it_when_it_says() {
        let mut paid = event("invoice.paid.subscription_create");
        assert_eq!(
            read_invoice(&paid.to_string()).unwrap().payment_intent,
            None
        );
        paid["data"]["object"]["payments"] = serde_json::json!({"data": [
            {"status": "canceled", "payment": {"payment_intent": "pi_failed"}},
            {"status": "paid", "payment": {"payment_intent": {"id": "pi_paid"}}},
        ]});
        assert_eq!(
            read_invoice(&paid.to_string())
                .unwrap()
                .payment_intent
                .as_deref(),
            Some("pi_paid")
        );
        paid["data"]["object"]["payment_intent"] = "pi_older_shape".into();
        let invoice = read_invoice(&paid.to_string()).unwrap();
        assert_eq!(invoice.payment_intent.as_deref(), Some("pi_older_shape"));
        assert_eq!(invoice.customer_id.as_deref(), Some("cus_Qfix0001"));
    }

    #[test]
    fn two_plans_billed_for_one_period_are_one_entitlement() {
        let mut paid = event("invoice.paid.subscription_cycle");
        let mut second = lines(&mut paid)[0].clone();
        second["amount"] = 8900.into();
        second["pricing"]["unit_amount_decimal"] = "8900".into();
        lines(&mut paid).push(second);
        paid["data"]["object"]["amount_paid"] = (3900 + 8900).into();
        let invoice = read_invoice(&paid.to_string()).unwrap();
        let grants = grants(&invoice);
        assert_eq!(grants.len(), 1, "{grants:?}");
        assert_eq!(grants[0].credits, 140);
        assert_eq!(grants[0].ceiling, 140);
        assert_eq!(grants[0].plan, "thesis-pro");
    }
}
