//! What fulfilling a claimed event means, decided from the event alone (no I/O): unlock an
//! order's credits, let it wait for payment, mark its payment failed, or record what later
//! happened to its money (a refund, a failed refund, a dispute). The store applies the plan;
//! every effect there is keyed by the order, not the event, so applying it twice or from a
//! twin changes nothing.

use std::collections::HashMap;
use std::str::FromStr;

use serde::Deserialize;

use crate::billing::{
    self, BillingError, BillingReason, Decision, Entitlement, Invoice, NextPhase, Plans,
    ScheduledPhase, SubscriptionFacts,
};
use crate::event_kind::EventKind;
use crate::ids::{IdError, OrderId};
use crate::money::DisputeStatus;

/// What a package sells: credits, and the price the order API asks Stripe to charge.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Package {
    pub credits: i64,
    pub price: Option<Price>,
    /// How long the credits of one purchase last, in milliseconds from the unlock; `None`:
    /// they never expire.
    pub lasts_ms: Option<i64>,
}

/// A price in the currency's minor unit (4900 chf = CHF 49.00).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Price {
    pub amount: i64,
    /// Lowercase ISO 4217 code, as Stripe writes it.
    pub currency: String,
}

/// The packages a shop sells (`CLAIMCHECK_PACKAGES=thesis-40=40:4900:chf:365d,thesis-100=100`):
/// name → credits, and optionally the price in minor units and currency, and after it how
/// long the credits last. Sessions whose
/// metadata names a package but no credits get the package's credits; the order API sells
/// only packages with a price.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Packages(HashMap<String, Package>);

impl Packages {
    pub fn credits(&self, package: &str) -> Option<i64> {
        self.0.get(package).map(|p| p.credits)
    }

    pub fn get(&self, package: &str) -> Option<&Package> {
        self.0.get(package)
    }

    /// How long the credits of `package` last (ms); `None` for a package that does not say
    /// or is not configured.
    pub fn lasts_ms(&self, package: Option<&str>) -> Option<i64> {
        package.and_then(|p| self.0.get(p)).and_then(|p| p.lasts_ms)
    }
}

impl FromStr for Packages {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let mut packages = HashMap::new();
        for entry in s.split(',').map(str::trim).filter(|e| !e.is_empty()) {
            let (name, rest) = entry.split_once('=').ok_or_else(|| {
                format!("'{entry}' is not NAME=CREDITS[:AMOUNT:CURRENCY[:LASTS]]")
            })?;
            let mut parts = rest.split(':').map(str::trim);
            let credits = parse_credits(entry, parts.next().unwrap_or(""))?;
            const SHAPE: &str = "NAME=CREDITS[:AMOUNT:CURRENCY[:LASTS]]";
            let (price, lasts_ms) = match (parts.next(), parts.next(), parts.next(), parts.next()) {
                (None, _, _, _) => (None, None),
                (Some(amount), Some(currency), lasts, None) => {
                    let price = parse_price(entry, amount, currency)?;
                    let lasts_ms = match lasts {
                        None => None,
                        Some(text) => Some(
                            crate::text::duration_ms(text)
                                .filter(|ms| *ms > 0)
                                .ok_or_else(|| {
                                    format!("'{entry}': how long the credits last is a duration like 365d or 30d")
                                })?,
                        ),
                    };
                    (Some(price), lasts_ms)
                }
                _ => return Err(format!("'{entry}' is not {SHAPE}")),
            };
            packages.insert(
                name.trim().to_owned(),
                Package {
                    credits,
                    price,
                    lasts_ms,
                },
            );
        }
        Ok(Packages(packages))
    }
}

/// The credits of a configuration entry (`entry`, for the message): 1 to [`MAX_CREDITS`].
pub(crate) fn parse_credits(entry: &str, text: &str) -> Result<i64, String> {
    text.parse()
        .ok()
        .filter(|c| (1..=MAX_CREDITS).contains(c))
        .ok_or_else(|| format!("'{entry}': credits are a whole number from 1 to {MAX_CREDITS}"))
}

/// The price of a configuration entry (`entry`, for the message): a positive amount of minor
/// units and a three-letter currency.
pub(crate) fn parse_price(entry: &str, amount: &str, currency: &str) -> Result<Price, String> {
    let amount: i64 = amount.parse().ok().filter(|a| *a > 0).ok_or_else(|| {
        format!("'{entry}': the amount is a positive whole number of minor units (4900 for 49.00)")
    })?;
    let currency = currency.to_ascii_lowercase();
    if currency.len() != 3 || !currency.chars().all(|c| c.is_ascii_lowercase()) {
        return Err(format!(
            "'{entry}': the currency is a three-letter ISO code (chf)"
        ));
    }
    Ok(Price { amount, currency })
}

/// The most credits one order may unlock: a larger number from Stripe's metadata is a
/// mistake (or worse), not a purchase.
pub const MAX_CREDITS: i64 = 1_000_000;

/// What a checkout session event asks of its order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SessionAction {
    /// Paid (or nothing to pay): grant the credits.
    Unlock,
    /// Completed, but the payment is still pending (e.g. SEPA): wait for the async result.
    AwaitPayment,
    /// The delayed payment failed: nothing is granted.
    PaymentFailed,
}

/// The order as a checkout session describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OrderFacts {
    pub order_id: OrderId,
    pub session_id: String,
    pub payment_intent: Option<String>,
    pub customer_id: Option<String>,
    pub customer_email: Option<String>,
    pub package: Option<String>,
    pub credits: i64,
    pub payment_status: String,
    /// The session's `amount_total` and `currency`, when it says.
    pub amount: Option<i64>,
    pub currency: Option<String>,
}

/// What happened to a paid order's money, as one event tells it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MoneyEvent {
    /// `charge.refunded`: the charge's amount and its cumulative refunded amount (each refund
    /// of the charge sends one, partial ones included).
    Refunded {
        charge_amount: Option<i64>,
        amount_refunded: i64,
    },
    /// `refund.failed`: the refund's money came back.
    RefundFailed { refund_id: String, amount: i64 },
    /// `charge.dispute.created`: the customer's bank disputes the charge.
    DisputeOpened { dispute_id: String },
    /// `charge.dispute.closed`: won (or an inquiry closed) or lost.
    DisputeClosed {
        dispute_id: String,
        status: DisputeStatus,
    },
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Plan {
    Session {
        order: OrderFacts,
        action: SessionAction,
    },
    /// A fact about the money of the order its payment intent paid.
    Money {
        payment_intent: String,
        event: MoneyEvent,
    },
    /// A paid subscription invoice and what it grants: the invoice is its order.
    Invoice(Box<PaidInvoice>),
    /// A subscription invoice's payment failed: its period is unpaid until it is paid.
    InvoiceUnpaid(UnpaidInvoice),
    /// What an event says of a subscription: its new state, or (its Checkout Session) whose
    /// it is.
    Subscription(SubscriptionFacts),
    /// What a subscription schedule's event says comes next for its subscription.
    Schedule(ScheduleChange),
    /// Recorded, no effect: a Billing event when no plan is on sale, a failed payment of an
    /// invoice that belongs to no subscription.
    Record { why: &'static str },
}

/// Why a Billing event grants nothing when `CLAIMCHECK_PLANS` is empty.
pub const NO_PLANS: &str = "no plan is on sale (CLAIMCHECK_PLANS is empty)";

/// A paid subscription invoice, read and decided ([`billing::decide`]); its grants are capped
/// against the period's earlier ones when they are written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PaidInvoice {
    pub invoice: Invoice,
    /// One per period it pays for; empty for an invoice that grants nothing (a trial, a
    /// downgrade's credit, a `manual` invoice: see `nothing`).
    pub grants: Vec<Entitlement>,
    /// Why it grants nothing by itself, for an invoice not made by a subscription's cycle.
    pub nothing: Option<BillingReason>,
    /// When its credits lapse (unix ms): the end of the last period it pays for, when every
    /// plan it grants from says `reset`; `None` when they carry over.
    pub lapses_at: Option<i64>,
}

/// A subscription schedule's latest state, as one of its events tells it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScheduleChange {
    pub schedule_id: String,
    pub subscription_id: String,
    /// Stripe's `created` of the event: an older state never overwrites a newer one.
    pub as_of: i64,
    pub next: PhaseToCome,
}

/// The phase a schedule moves its subscription to next.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PhaseToCome {
    /// Nothing more (the schedule released, canceled, completed or aborted, or its last
    /// phase running).
    Nothing,
    /// The next phase, what it bills named in the shop's plans.
    Named(ScheduledPhase),
    /// The next phase names a price by id only: the worker reads it from Stripe
    /// ([`ScheduleChange::priced`]); until then the store writes nothing and the claim is
    /// retried.
    Unpriced(NextPhase),
}

impl ScheduleChange {
    /// The price ids still to read from Stripe.
    pub fn unpriced(&self) -> Vec<String> {
        match &self.next {
            PhaseToCome::Unpriced(phase) => phase.unpriced(),
            PhaseToCome::Nothing | PhaseToCome::Named(_) => Vec::new(),
        }
    }

    /// Records what `price_id` costs; once every price of the next phase is known, the phase
    /// is named.
    pub fn priced(&mut self, price_id: &str, price: &Price, plans: &Plans) {
        if let PhaseToCome::Unpriced(phase) = &mut self.next {
            phase.price(price_id, price);
            if let Some(named) = phase.named(plans) {
                self.next = PhaseToCome::Named(named);
            }
        }
    }
}

/// A failed payment of a subscription's invoice.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnpaidInvoice {
    pub invoice_id: String,
    pub subscription_id: String,
    pub customer_id: Option<String>,
    pub customer_email: Option<String>,
    /// Stripe's `created` of the event, unix seconds.
    pub failed_at: i64,
}

/// The order an event is about, as its payload names it: a session names its order; a
/// refund or a dispute names the payment intent that paid for one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OrderRef {
    Order(OrderId),
    PaidBy(String),
}

/// Which order an event touches: the one rule search, the event page and the bulk preview
/// follow. It reads only the reference (no credits, no packages), so an event that cannot be
/// fulfilled as it stands still names its order; `None` for a type that acts on nothing or a
/// payload that names none.
pub fn order_ref(event_type: &str, payload: &str) -> Option<OrderRef> {
    #[derive(Deserialize)]
    struct Named {
        #[serde(default)]
        id: Option<String>,
        #[serde(default)]
        mode: Option<String>,
        #[serde(default)]
        metadata: HashMap<String, serde_json::Value>,
        #[serde(default)]
        client_reference_id: Option<String>,
        #[serde(default)]
        payment_intent: Option<serde_json::Value>,
    }
    let object = serde_json::from_str::<Event<Named>>(payload)
        .ok()?
        .data
        .object;
    match EventKind::parse(event_type)? {
        EventKind::CheckoutSessionCompleted
        | EventKind::CheckoutSessionAsyncPaymentSucceeded
        | EventKind::CheckoutSessionAsyncPaymentFailed => {
            // A subscription's session names its subscription, not an order.
            if object.mode.as_deref() == Some("subscription") {
                return None;
            }
            session_order_id(&object.metadata, object.client_reference_id)
                .and_then(|id| OrderId::parse(id).ok())
                .map(OrderRef::Order)
        }
        EventKind::ChargeRefunded
        | EventKind::RefundFailed
        | EventKind::ChargeDisputeCreated
        | EventKind::ChargeDisputeClosed => {
            expandable_id(object.payment_intent).map(OrderRef::PaidBy)
        }
        // A paid invoice is its own order.
        EventKind::InvoicePaid => object
            .id
            .and_then(|id| OrderId::parse(id).ok())
            .map(OrderRef::Order),
        EventKind::PaymentIntentSucceeded
        | EventKind::ChargeSucceeded
        | EventKind::RefundCreated
        | EventKind::PaymentIntentPaymentFailed
        | EventKind::ChargeFailed
        | EventKind::InvoicePaymentFailed
        | EventKind::CustomerSubscriptionCreated
        | EventKind::CustomerSubscriptionUpdated
        | EventKind::CustomerSubscriptionDeleted
        | EventKind::SubscriptionScheduleCreated
        | EventKind::SubscriptionScheduleUpdated
        | EventKind::SubscriptionScheduleReleased
        | EventKind::SubscriptionScheduleCanceled
        | EventKind::SubscriptionScheduleCompleted
        | EventKind::SubscriptionScheduleAborted
        | EventKind::SubscriptionScheduleExpiring
        | EventKind::InvoicePaymentSucceeded
        | EventKind::InvoiceCreated => None,
    }
}

/// The shop's order id a Checkout Session names: `metadata.order_id`, else a non-blank
/// `client_reference_id`.
fn session_order_id(
    metadata: &HashMap<String, serde_json::Value>,
    client_reference_id: Option<String>,
) -> Option<String> {
    metadata_text(metadata, "order_id").or(client_reference_id.filter(|s| !s.trim().is_empty()))
}

/// Why an event cannot be fulfilled. Each is a failed attempt with this message on the claim.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PlanError {
    #[error("the stored payload is not the expected Stripe object: {0}")]
    Payload(String),
    #[error("the session has neither metadata.order_id nor client_reference_id")]
    NoOrderId,
    #[error("the session's order id is unusable: {0}")]
    BadOrderId(#[from] IdError),
    #[error(
        "order {order_id}: no credit amount (metadata.credits, or a package known to CLAIMCHECK_PACKAGES)"
    )]
    NoCredits { order_id: String },
    #[error(
        "order {order_id}: metadata.credits '{value}' is not a whole number from 1 to {MAX_CREDITS}"
    )]
    BadCredits { order_id: String, value: String },
    #[error("the session's payment_status '{0}' is unknown")]
    UnknownPaymentStatus(String),
    #[error("the {0} has no payment_intent to find its order by")]
    NoPaymentIntent(&'static str),
    #[error("the {object} has no usable {field}")]
    MissingField {
        object: &'static str,
        field: &'static str,
    },
    #[error("the closed dispute's status '{0}' is neither won, warning_closed nor lost")]
    UnknownDisputeStatus(String),
    #[error("Claimcheck does not fulfil {0} events")]
    NotActing(String),
    #[error(transparent)]
    Billing(#[from] BillingError),
    #[error("invoice {0} grants credits but names no subscription")]
    NoSubscription(String),
    #[error("the session is in subscription mode but names no subscription")]
    SessionWithoutSubscription,
}

#[derive(Deserialize)]
struct Event<T> {
    data: Data<T>,
}

#[derive(Deserialize)]
struct Data<T> {
    object: T,
}

#[derive(Deserialize)]
struct Session {
    id: String,
    #[serde(default)]
    client_reference_id: Option<String>,
    #[serde(default)]
    metadata: HashMap<String, serde_json::Value>,
    #[serde(default)]
    payment_status: Option<String>,
    #[serde(default)]
    payment_intent: Option<serde_json::Value>,
    #[serde(default)]
    customer: Option<serde_json::Value>,
    #[serde(default)]
    customer_email: Option<String>,
    #[serde(default)]
    customer_details: Option<CustomerDetails>,
    #[serde(default)]
    amount_total: Option<i64>,
    #[serde(default)]
    currency: Option<String>,
    /// `payment`, `setup` or `subscription`.
    #[serde(default)]
    mode: Option<String>,
    #[serde(default)]
    subscription: Option<serde_json::Value>,
}

#[derive(Deserialize)]
struct CustomerDetails {
    #[serde(default)]
    email: Option<String>,
}

#[derive(Deserialize)]
struct Charge {
    #[serde(default)]
    payment_intent: Option<serde_json::Value>,
    #[serde(default)]
    amount: Option<i64>,
    #[serde(default)]
    amount_refunded: Option<i64>,
}

/// A refund or a dispute: an id, an amount, the payment intent it belongs to.
#[derive(Deserialize)]
struct MoneyObject {
    id: String,
    #[serde(default)]
    payment_intent: Option<serde_json::Value>,
    #[serde(default)]
    amount: Option<i64>,
    #[serde(default)]
    status: Option<String>,
}

/// An expandable Stripe field: an id string, or the expanded object with an `id`.
pub(crate) fn expandable_id(value: Option<serde_json::Value>) -> Option<String> {
    match value? {
        serde_json::Value::String(id) => Some(id),
        serde_json::Value::Object(object) => object.get("id")?.as_str().map(str::to_owned),
        _ => None,
    }
}

fn metadata_text(metadata: &HashMap<String, serde_json::Value>, key: &str) -> Option<String> {
    metadata_value(metadata.get(key)?)
}

/// A metadata value as text: a non-blank string, trimmed, or a number as written.
pub(crate) fn metadata_value(value: &serde_json::Value) -> Option<String> {
    match value {
        serde_json::Value::String(s) if !s.trim().is_empty() => Some(s.trim().to_owned()),
        serde_json::Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

/// What fulfilling an event of `event_type` with `payload` does, with the shop's packages
/// and plans.
pub fn plan(
    event_type: &str,
    payload: &str,
    packages: &Packages,
    plans: &Plans,
) -> Result<Plan, PlanError> {
    let not_acting = || PlanError::NotActing(event_type.to_owned());
    let kind = EventKind::parse(event_type).ok_or_else(not_acting)?;
    match kind {
        // A shop that sells no plan may still receive Billing's events (an endpoint that
        // takes every type, an upgrade adopting what an earlier version ignored).
        EventKind::InvoicePaid
        | EventKind::InvoicePaymentFailed
        | EventKind::CustomerSubscriptionCreated
        | EventKind::CustomerSubscriptionUpdated
        | EventKind::CustomerSubscriptionDeleted
        | EventKind::SubscriptionScheduleCreated
        | EventKind::SubscriptionScheduleUpdated
        | EventKind::SubscriptionScheduleReleased
        | EventKind::SubscriptionScheduleCanceled
        | EventKind::SubscriptionScheduleCompleted
        | EventKind::SubscriptionScheduleAborted
            if plans.is_empty() =>
        {
            Ok(Plan::Record { why: NO_PLANS })
        }
        EventKind::InvoicePaid => plan_paid_invoice(payload, plans),
        EventKind::InvoicePaymentFailed => plan_unpaid_invoice(payload),
        EventKind::CustomerSubscriptionCreated
        | EventKind::CustomerSubscriptionUpdated
        | EventKind::CustomerSubscriptionDeleted => Ok(Plan::Subscription(
            billing::read_subscription(payload, plans)?,
        )),
        EventKind::SubscriptionScheduleCreated
        | EventKind::SubscriptionScheduleUpdated
        | EventKind::SubscriptionScheduleReleased
        | EventKind::SubscriptionScheduleCanceled
        | EventKind::SubscriptionScheduleCompleted
        | EventKind::SubscriptionScheduleAborted => plan_schedule(payload, plans),
        EventKind::CheckoutSessionCompleted => plan_session(payload, None, packages),
        EventKind::CheckoutSessionAsyncPaymentSucceeded => {
            plan_session(payload, Some(SessionAction::Unlock), packages)
        }
        EventKind::CheckoutSessionAsyncPaymentFailed => {
            plan_session(payload, Some(SessionAction::PaymentFailed), packages)
        }
        EventKind::ChargeRefunded => plan_refund(payload),
        EventKind::RefundFailed => plan_refund_failed(payload),
        EventKind::ChargeDisputeCreated => plan_dispute_opened(payload),
        EventKind::ChargeDisputeClosed => plan_dispute_closed(payload),
        EventKind::PaymentIntentSucceeded
        | EventKind::ChargeSucceeded
        | EventKind::RefundCreated
        | EventKind::PaymentIntentPaymentFailed
        | EventKind::ChargeFailed
        | EventKind::InvoicePaymentSucceeded
        | EventKind::InvoiceCreated
        | EventKind::SubscriptionScheduleExpiring => Err(not_acting()),
    }
}

/// Why a schedule's event changes nothing: it has not started its subscription.
const SCHEDULE_NOT_STARTED: &str = "the subscription schedule has not started its subscription yet";

fn plan_schedule(payload: &str, plans: &Plans) -> Result<Plan, PlanError> {
    let facts = billing::read_schedule(payload)?;
    let Some(subscription_id) = facts.subscription_id else {
        return Ok(Plan::Record {
            why: SCHEDULE_NOT_STARTED,
        });
    };
    let next = match facts.next {
        None => PhaseToCome::Nothing,
        Some(phase) => match phase.named(plans) {
            Some(named) => PhaseToCome::Named(named),
            None => PhaseToCome::Unpriced(phase),
        },
    };
    Ok(Plan::Schedule(ScheduleChange {
        schedule_id: facts.schedule_id,
        subscription_id,
        as_of: facts.as_of,
        next,
    }))
}

fn plan_paid_invoice(payload: &str, plans: &Plans) -> Result<Plan, PlanError> {
    let invoice = billing::read_invoice(payload)?;
    let (grants, nothing) = match billing::decide(&invoice, plans)? {
        Decision::Grants(grants) => (grants, None),
        Decision::Nothing { reason } => (Vec::new(), Some(reason)),
    };
    if invoice.subscription_id.is_none() && grants.iter().any(|g| g.credits > 0) {
        return Err(PlanError::NoSubscription(invoice.invoice_id));
    }
    let lapses = !grants.is_empty()
        && grants
            .iter()
            .all(|g| plans.get(&g.plan).is_some_and(|plan| plan.reset));
    let lapses_at = grants
        .iter()
        .map(|g| g.period.end.saturating_mul(1000))
        .max()
        .filter(|_| lapses);
    Ok(Plan::Invoice(Box::new(PaidInvoice {
        invoice,
        grants,
        nothing,
        lapses_at,
    })))
}

fn plan_unpaid_invoice(payload: &str) -> Result<Plan, PlanError> {
    #[derive(Deserialize)]
    struct Created {
        created: i64,
    }
    let created: Created =
        serde_json::from_str(payload).map_err(|e| PlanError::Payload(e.to_string()))?;
    let invoice = billing::read_invoice(payload)?;
    let Some(subscription_id) = invoice.subscription_id else {
        return Ok(Plan::Record {
            why: "the invoice belongs to no subscription",
        });
    };
    Ok(Plan::InvoiceUnpaid(UnpaidInvoice {
        invoice_id: invoice.invoice_id,
        subscription_id,
        customer_id: invoice.customer_id,
        customer_email: invoice.customer_email,
        failed_at: created.created,
    }))
}

/// A Checkout Session's order and what its event does to it (`None`: as the session's
/// payment status says).
fn plan_session(
    payload: &str,
    action: Option<SessionAction>,
    packages: &Packages,
) -> Result<Plan, PlanError> {
    let event: Event<Session> =
        serde_json::from_str(payload).map_err(|e| PlanError::Payload(e.to_string()))?;
    let session = event.data.object;
    if session.mode.as_deref() == Some("subscription") {
        // Its invoice grants (`invoice.paid`); the session only names whose it is.
        return Ok(Plan::Subscription(SubscriptionFacts {
            subscription_id: expandable_id(session.subscription)
                .ok_or(PlanError::SessionWithoutSubscription)?,
            subscription_ref: metadata_text(&session.metadata, billing::REF_KEY)
                .or(session.client_reference_id.filter(|s| !s.trim().is_empty())),
            customer_id: expandable_id(session.customer),
            customer_email: session
                .customer_details
                .and_then(|d| d.email)
                .or(session.customer_email)
                .map(|e| e.trim().to_lowercase()),
            state: None,
        }));
    }
    let payment_status = session.payment_status.unwrap_or_default();
    let action = match action {
        Some(action) => action,
        None => match payment_status.as_str() {
            "paid" | "no_payment_required" => SessionAction::Unlock,
            "unpaid" => SessionAction::AwaitPayment,
            other => return Err(PlanError::UnknownPaymentStatus(other.to_owned())),
        },
    };
    let order_id = session_order_id(&session.metadata, session.client_reference_id)
        .ok_or(PlanError::NoOrderId)?;
    let order_id = OrderId::parse(order_id)?;
    let package = metadata_text(&session.metadata, "package");
    let credits = match metadata_text(&session.metadata, "credits") {
        Some(value) => value
            .parse::<i64>()
            .ok()
            .filter(|c| (1..=MAX_CREDITS).contains(c))
            .ok_or_else(|| PlanError::BadCredits {
                order_id: order_id.to_string(),
                value,
            })?,
        None => package
            .as_deref()
            .and_then(|p| packages.credits(p))
            .ok_or_else(|| PlanError::NoCredits {
                order_id: order_id.to_string(),
            })?,
    };
    let customer_email = session
        .customer_details
        .and_then(|d| d.email)
        .or(session.customer_email)
        .map(|e| e.trim().to_lowercase());
    Ok(Plan::Session {
        order: OrderFacts {
            order_id,
            session_id: session.id,
            payment_intent: expandable_id(session.payment_intent),
            customer_id: expandable_id(session.customer),
            customer_email,
            package,
            credits,
            payment_status,
            amount: session.amount_total.filter(|a| *a >= 0),
            currency: session.currency.map(|c| c.to_ascii_lowercase()),
        },
        action,
    })
}

fn plan_refund(payload: &str) -> Result<Plan, PlanError> {
    let event: Event<Charge> =
        serde_json::from_str(payload).map_err(|e| PlanError::Payload(e.to_string()))?;
    let charge = event.data.object;
    let amount_refunded =
        charge
            .amount_refunded
            .filter(|a| *a >= 0)
            .ok_or(PlanError::MissingField {
                object: "refunded charge",
                field: "amount_refunded",
            })?;
    let payment_intent = expandable_id(charge.payment_intent)
        .ok_or(PlanError::NoPaymentIntent("refunded charge"))?;
    Ok(Plan::Money {
        payment_intent,
        event: MoneyEvent::Refunded {
            charge_amount: charge.amount.filter(|a| *a >= 0),
            amount_refunded,
        },
    })
}

/// A refund or dispute object, with its payment intent; `what` names it in errors.
fn money_object(payload: &str, what: &'static str) -> Result<(String, MoneyObject), PlanError> {
    let event: Event<MoneyObject> =
        serde_json::from_str(payload).map_err(|e| PlanError::Payload(e.to_string()))?;
    let mut object = event.data.object;
    let payment_intent =
        expandable_id(object.payment_intent.take()).ok_or(PlanError::NoPaymentIntent(what))?;
    Ok((payment_intent, object))
}

fn plan_refund_failed(payload: &str) -> Result<Plan, PlanError> {
    let what = "failed refund";
    let (payment_intent, object) = money_object(payload, what)?;
    let amount = object
        .amount
        .filter(|a| *a >= 0)
        .ok_or(PlanError::MissingField {
            object: what,
            field: "amount",
        })?;
    Ok(Plan::Money {
        payment_intent,
        event: MoneyEvent::RefundFailed {
            refund_id: object.id,
            amount,
        },
    })
}

fn plan_dispute_opened(payload: &str) -> Result<Plan, PlanError> {
    let (payment_intent, object) = money_object(payload, "dispute")?;
    Ok(Plan::Money {
        payment_intent,
        event: MoneyEvent::DisputeOpened {
            dispute_id: object.id,
        },
    })
}

fn plan_dispute_closed(payload: &str) -> Result<Plan, PlanError> {
    let (payment_intent, object) = money_object(payload, "dispute")?;
    let status = object.status.unwrap_or_default();
    let status = match status.as_str() {
        "won" | "warning_closed" => DisputeStatus::Won,
        "lost" => DisputeStatus::Lost,
        _ => return Err(PlanError::UnknownDisputeStatus(status)),
    };
    Ok(Plan::Money {
        payment_intent,
        event: MoneyEvent::DisputeClosed {
            dispute_id: object.id,
            status,
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture(name: &str) -> String {
        let path = format!(
            "{}/../fixtures/stripe/events/{name}.json",
            env!("CARGO_MANIFEST_DIR")
        );
        std::fs::read_to_string(&path).unwrap()
    }

    fn plan_fixture(event_type: &str, name: &str) -> Result<Plan, PlanError> {
        plan(
            event_type,
            &fixture(name),
            &Packages::default(),
            &Plans::default(),
        )
    }

    #[test]
    fn a_paid_session_unlocks_its_order() {
        let Plan::Session { order, action } = plan_fixture(
            "checkout.session.completed",
            "checkout.session.completed.paid",
        )
        .unwrap() else {
            panic!("not a session plan");
        };
        assert_eq!(action, SessionAction::Unlock);
        assert_eq!(order.order_id.as_str(), "ord_pub_0001");
        assert_eq!(order.credits, 40);
        assert_eq!(order.customer_email.as_deref(), Some("student1@example.ch"));
        assert_eq!(
            order.payment_intent.as_deref(),
            Some("pi_pub00013Mxc9vLkdIwHu7ix")
        );
    }

    #[test]
    fn each_session_event_has_its_action() {
        let cases = [
            (
                "checkout.session.completed",
                "checkout.session.completed.free",
                SessionAction::Unlock,
            ),
            (
                "checkout.session.completed",
                "checkout.session.completed.unpaid",
                SessionAction::AwaitPayment,
            ),
            (
                "checkout.session.async_payment_succeeded",
                "checkout.session.async_payment_succeeded",
                SessionAction::Unlock,
            ),
            (
                "checkout.session.async_payment_failed",
                "checkout.session.async_payment_failed",
                SessionAction::PaymentFailed,
            ),
        ];
        for (event_type, name, expected) in cases {
            match plan_fixture(event_type, name).unwrap() {
                Plan::Session { action, .. } => assert_eq!(action, expected, "{name}"),
                other => panic!("{name}: {other:?}"),
            }
        }
    }

    #[test]
    fn a_refund_names_the_payment_intent_and_the_cumulative_amount() {
        assert_eq!(
            plan_fixture("charge.refunded", "charge.refunded").unwrap(),
            Plan::Money {
                payment_intent: "pi_pub00013Mxc9vLkdIwHu7ix".into(),
                event: MoneyEvent::Refunded {
                    charge_amount: Some(4900),
                    amount_refunded: 4900,
                }
            }
        );
        let partial = r#"{"data":{"object":{"id":"ch_1","object":"charge","amount":4900,
            "amount_refunded":2450,"refunded":false,"payment_intent":{"id":"pi_1"}}}}"#;
        assert_eq!(
            plan(
                "charge.refunded",
                partial,
                &Packages::default(),
                &Plans::default()
            )
            .unwrap(),
            Plan::Money {
                payment_intent: "pi_1".into(),
                event: MoneyEvent::Refunded {
                    charge_amount: Some(4900),
                    amount_refunded: 2450,
                }
            }
        );
    }

    #[test]
    fn failed_refunds_and_disputes_name_their_order_and_outcome() {
        let refund = r#"{"data":{"object":{"id":"re_1","object":"refund","amount":2450,
            "payment_intent":"pi_1","status":"failed"}}}"#;
        assert_eq!(
            plan(
                "refund.failed",
                refund,
                &Packages::default(),
                &Plans::default()
            )
            .unwrap(),
            Plan::Money {
                payment_intent: "pi_1".into(),
                event: MoneyEvent::RefundFailed {
                    refund_id: "re_1".into(),
                    amount: 2450
                }
            }
        );
        let dispute = |status: &str| {
            format!(
                r#"{{"data":{{"object":{{"id":"dp_1","object":"dispute","amount":4900,
                "payment_intent":"pi_1","status":"{status}"}}}}}}"#
            )
        };
        let closed = |status: &str| {
            plan(
                "charge.dispute.closed",
                &dispute(status),
                &Packages::default(),
                &Plans::default(),
            )
        };
        assert!(matches!(
            closed("won").unwrap(),
            Plan::Money {
                event: MoneyEvent::DisputeClosed {
                    status: DisputeStatus::Won,
                    ..
                },
                ..
            }
        ));
        assert!(matches!(
            closed("lost").unwrap(),
            Plan::Money {
                event: MoneyEvent::DisputeClosed {
                    status: DisputeStatus::Lost,
                    ..
                },
                ..
            }
        ));
        assert_eq!(
            closed("needs_response"),
            Err(PlanError::UnknownDisputeStatus("needs_response".into()))
        );
        assert!(matches!(
            plan(
                "charge.dispute.created",
                &dispute("needs_response"),
                &Packages::default(),
                &Plans::default(),
            )
            .unwrap(),
            Plan::Money {
                event: MoneyEvent::DisputeOpened { .. },
                ..
            }
        ));
        let orphan =
            r#"{"data":{"object":{"id":"dp_2","object":"dispute","payment_intent":null}}}"#;
        assert_eq!(
            plan(
                "charge.dispute.created",
                orphan,
                &Packages::default(),
                &Plans::default()
            ),
            Err(PlanError::NoPaymentIntent("dispute"))
        );
    }

    #[test]
    fn credits_come_from_metadata_else_the_package_table() {
        let payload = r#"{"data":{"object":{"id":"cs_1","payment_status":"paid",
            "client_reference_id":"ord_9","metadata":{"package":"thesis-100"}}}}"#;
        let packages: Packages = "thesis-40=40, thesis-100=100".parse().unwrap();
        match plan(
            "checkout.session.completed",
            payload,
            &packages,
            &Plans::default(),
        )
        .unwrap()
        {
            Plan::Session { order, .. } => {
                assert_eq!(order.credits, 100);
                assert_eq!(order.order_id.as_str(), "ord_9");
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(
            plan(
                "checkout.session.completed",
                payload,
                &Packages::default(),
                &Plans::default()
            ),
            Err(PlanError::NoCredits {
                order_id: "ord_9".into()
            })
        );
    }

    #[test]
    fn a_paid_invoice_is_planned_with_its_grants_and_when_they_lapse() {
        let payload = fixture("billing/invoice.paid.subscription_create");
        let carried: Plans = "thesis-monthly=40:3900:chf:month".parse().unwrap();
        let reset: Plans = "thesis-monthly=40:3900:chf:month:reset".parse().unwrap();
        let Plan::Invoice(paid) =
            plan("invoice.paid", &payload, &Packages::default(), &carried).unwrap()
        else {
            panic!("not an invoice plan");
        };
        assert_eq!(paid.grants.len(), 1);
        assert_eq!(paid.grants[0].credits, 40);
        assert_eq!(paid.lapses_at, None);
        let Plan::Invoice(paid) =
            plan("invoice.paid", &payload, &Packages::default(), &reset).unwrap()
        else {
            panic!("not an invoice plan");
        };
        assert_eq!(paid.lapses_at, Some(1_766_992_000_000));
        // A price no plan has is the claim's error, naming it.
        let other: Plans = "thesis-pro=100:8900:chf:month".parse().unwrap();
        let error = plan("invoice.paid", &payload, &Packages::default(), &other)
            .unwrap_err()
            .to_string();
        assert!(error.contains("3900 chf"), "{error}");
        // No plan on sale at all: recorded, never an error.
        assert_eq!(
            plan(
                "invoice.paid",
                &payload,
                &Packages::default(),
                &Plans::default()
            ),
            Ok(Plan::Record { why: NO_PLANS })
        );
        // A failed payment names its invoice and subscription.
        let failed = fixture("billing/invoice.payment_failed.subscription_cycle");
        match plan(
            "invoice.payment_failed",
            &failed,
            &Packages::default(),
            &carried,
        ) {
            Ok(Plan::InvoiceUnpaid(unpaid)) => {
                assert_eq!(unpaid.invoice_id, "in_1Qfix0004Invoice");
                assert_eq!(unpaid.subscription_id, "sub_1Qfix0001Plan");
                assert_eq!(unpaid.failed_at, 1_769_587_600);
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_subscription_session_names_its_owner_and_grants_nothing() {
        let payload = r#"{"data":{"object":{"id":"cs_1","mode":"subscription",
            "payment_status":"paid","subscription":"sub_1","customer":"cus_1",
            "customer_details":{"email":" Abo@Example.CH "},"client_reference_id":"ord_7",
            "metadata":{"subscription_ref":"ref-7","credits":"40"}}}}"#;
        let plans = Plans::default();
        // It names no order, whatever its client_reference_id says.
        assert_eq!(order_ref("checkout.session.completed", payload), None);
        match plan(
            "checkout.session.completed",
            payload,
            &Packages::default(),
            &plans,
        ) {
            Ok(Plan::Subscription(facts)) => {
                assert_eq!(facts.subscription_id, "sub_1");
                assert_eq!(facts.subscription_ref.as_deref(), Some("ref-7"));
                assert_eq!(facts.customer_email.as_deref(), Some("abo@example.ch"));
                assert_eq!(facts.state, None);
            }
            other => panic!("{other:?}"),
        }
        let without = payload.replace(r#""subscription":"sub_1","#, "");
        assert_eq!(
            plan(
                "checkout.session.completed",
                &without,
                &Packages::default(),
                &plans
            ),
            Err(PlanError::SessionWithoutSubscription)
        );
    }

    #[test]
    fn unmappable_sessions_are_clear_errors() {
        let no_order = r#"{"data":{"object":{"id":"cs_1","payment_status":"paid","metadata":{"credits":"5"}}}}"#;
        assert_eq!(
            plan(
                "checkout.session.completed",
                no_order,
                &Packages::default(),
                &Plans::default()
            ),
            Err(PlanError::NoOrderId)
        );
        for credits in ["1000001", "99999999999999999999", "0"] {
            let payload = format!(
                r#"{{"data":{{"object":{{"id":"cs_1","payment_status":"paid","metadata":{{"order_id":"o","credits":"{credits}"}}}}}}}}"#
            );
            assert!(
                matches!(
                    plan(
                        "checkout.session.completed",
                        &payload,
                        &Packages::default(),
                        &Plans::default()
                    ),
                    Err(PlanError::BadCredits { .. })
                ),
                "{credits}"
            );
        }
        let bad_credits = r#"{"data":{"object":{"id":"cs_1","payment_status":"paid","metadata":{"order_id":"o","credits":"-3"}}}}"#;
        assert!(matches!(
            plan(
                "checkout.session.completed",
                bad_credits,
                &Packages::default(),
                &Plans::default(),
            ),
            Err(PlanError::BadCredits { .. })
        ));
        assert!("x=0".parse::<Packages>().is_err());
        let priced: Packages = "thesis-40=40:4900:CHF".parse().unwrap();
        assert_eq!(
            priced.get("thesis-40"),
            Some(&Package {
                credits: 40,
                price: Some(Price {
                    amount: 4900,
                    currency: "chf".into()
                }),
                lasts_ms: None,
            })
        );
        let lasting: Packages = "thesis-40=40:4900:chf:365d".parse().unwrap();
        assert_eq!(lasting.lasts_ms(Some("thesis-40")), Some(365 * 86_400_000));
        assert_eq!(lasting.lasts_ms(Some("other")), None);
        assert!("x=1:100:chf:0d".parse::<Packages>().is_err());
        assert!("x=1:100:chf:a year".parse::<Packages>().is_err());
        assert!("x=1:100:chf:1d:more".parse::<Packages>().is_err());
        assert!("x=1:0:chf".parse::<Packages>().is_err());
        assert!("x=1:100:swissfranc".parse::<Packages>().is_err());
        assert!("x=1:100".parse::<Packages>().is_err());
        assert!("nonsense".parse::<Packages>().is_err());
    }
}
