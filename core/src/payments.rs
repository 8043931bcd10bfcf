//! What Claimcheck asks Stripe to do: open a Checkout Session for an order, refund an order
//! in full or in part; open and cancel a subscription (`subscriptions`). Each goes through
//! [`StripeApi::send`], so each has an Idempotency-Key derived from the order (or the
//! subscription's reference), recorded before it is sent.

mod subscriptions;

pub use subscriptions::{
    AskedSubscription, Cancelled, SubscriptionRequest, asked_subscription, cancel_subscription,
    open_subscription_checkout,
};

use std::collections::HashMap;
use std::str::FromStr;

use stripe_checkout::CheckoutSessionMode;
use stripe_checkout::checkout_session::{
    CreateCheckoutSession, CreateCheckoutSessionLineItems, CreateCheckoutSessionLineItemsPriceData,
    ProductData, RetrieveCheckoutSession,
};
use stripe_core::refund::{CreateRefund, CreateRefundReason};
use stripe_types::Currency;

use crate::audit::{Actor, AuditAction, AuditRecord};
use crate::clock::now_ms;
use crate::error::StoreError;
use crate::fulfilment::Packages;
use crate::ids::{IdError, OrderId, SubscriptionRef};
use crate::money::{OrderStatus, format_money};
use crate::store::{
    NewOrder, NotRefundable, OrderCreation, OrderView, RequestStatus, Store, StripeRequestView,
    SubscriptionView,
};
use crate::stripe::{CallError, Operation, Sent, StripeApi};
use crate::token::{RandomError, random_id};

/// Where Stripe Checkout sends the customer back to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckoutUrls {
    pub success_url: String,
    pub cancel_url: String,
}

/// The shop asks for an order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OrderRequest {
    /// The shop's own id; one is made up when absent.
    pub order_id: Option<String>,
    pub package: String,
    pub customer_email: String,
}

#[derive(Debug, thiserror::Error)]
pub enum PaymentError {
    #[error("unknown package '{0}' (CLAIMCHECK_PACKAGES lists the packages on sale)")]
    UnknownPackage(String),
    #[error("unknown plan '{0}' (CLAIMCHECK_PLANS lists the plans on sale)")]
    UnknownPlan(String),
    #[error(
        "'{0}' cannot be a subscription reference: it may neither contain ':' nor start with \
         sub_ (Stripe's ids)"
    )]
    BadReference(String),
    #[error("subscription {0} was asked for with another plan or customer")]
    SubscriptionConflict(SubscriptionRef),
    /// Stripe told of the subscription: no new Checkout Session is opened for its reference.
    #[error(
        "subscription {} is {} ({}): a new subscription needs a new reference",
        .0.subscription_ref.as_deref().unwrap_or_default(),
        .0.status.as_deref().unwrap_or("started"),
        .0.subscription_id
    )]
    Subscribed(Box<SubscriptionView>),
    #[error("no subscription {0}")]
    NoSuchSubscription(String),
    #[error("subscription {0} has not started: its Checkout Session is not paid yet")]
    NotSubscribed(String),
    #[error("subscription {} is canceled already", .0.subscription_id)]
    SubscriptionCanceled(Box<SubscriptionView>),
    #[error("package '{0}' has no price (CLAIMCHECK_PACKAGES: NAME=CREDITS:AMOUNT:CURRENCY)")]
    NoPrice(String),
    #[error("'{0}' is not an email address")]
    BadEmail(String),
    #[error(transparent)]
    BadOrderId(#[from] IdError),
    #[error("order {0} exists for another package or customer")]
    OrderConflict(OrderId),
    #[error("no order {0}")]
    NoSuchOrder(OrderId),
    #[error("{0} (it is kept in the audit log)")]
    Reason(#[from] crate::audit::ReasonError),
    #[error("order {order_id} is {status}: only a paid order can be refunded")]
    NotRefundable {
        order_id: OrderId,
        status: OrderStatus,
    },
    #[error("order {0} has no payment intent on record: refund it in the Stripe Dashboard")]
    NoPaymentIntent(OrderId),
    #[error("order {0} has no amount on record: refund it in the Stripe Dashboard")]
    NoAmount(OrderId),
    /// Nothing, or more than is left: amounts in minor units of `currency`.
    #[error(
        "order {order_id}: {} is not a refundable amount ({} to {} are left)",
        format_money(*.requested, .currency),
        format_money(1, .currency),
        format_money(*.refundable, .currency)
    )]
    BadAmount {
        order_id: OrderId,
        requested: i64,
        refundable: i64,
        currency: String,
    },
    #[error(
        "order {order_id}: the refund {key} has no answer yet; asking again without --amount \
         (or with its amount, {}) sends it again under the same key",
        format_money(*.amount, .currency)
    )]
    RefundUnanswered {
        order_id: OrderId,
        key: String,
        amount: i64,
        currency: String,
    },
    /// Its Checkout Session is past its `expires_at` here, but Stripe says it was completed:
    /// its payment is on its way (the event not processed yet, or a bank debit still
    /// clearing), and a new session could be paid twice.
    #[error(
        "{0}: Stripe says its Checkout Session {1} was completed; its payment is on its way (the \
         event not processed yet, or a bank debit still clearing), so no new session is opened"
    )]
    CheckoutCompleted(String, String),
    /// The order is paid, refunded, disputed or failed: no new Checkout Session is opened.
    #[error("order {} is {}: nothing is left to pay", .0.order_id, .0.status)]
    Settled(Box<OrderView>),
    #[error(transparent)]
    Call(#[from] CallError),
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Random(#[from] RandomError),
}

/// An order and whether this request created it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Checkout {
    pub order: OrderView,
    pub created: bool,
}

pub(crate) fn check_email(email: &str) -> Result<String, PaymentError> {
    crate::spending::customer_email(email)
        .map_err(|_| PaymentError::BadEmail(email.trim().to_lowercase()))
}

/// Stripe expires an unpaid Checkout Session after 24 hours (`expires_at`). A new one is
/// opened only this long after that, so that a payment finishing at the last second is never
/// made twice.
pub(crate) const EXPIRY_MARGIN_MS: i64 = 10 * 60 * 1000;

/// Whether the Checkout Session of `subject` recorded to expire at `expires_at` (ms) must be
/// replaced by a new one. Only once its time (and the margin) is past, and only on Stripe's
/// word: a GET of the session must say `expired`. A session Stripe says was completed is
/// [`PaymentError::CheckoutCompleted`] (its event is on its way: a new session would let the
/// customer pay twice); one Stripe still calls open is kept. Stripe unreachable is an error,
/// and nothing is replaced. A session Stripe answers 404 `resource_missing` for (the shop
/// moved to another account or mode) is replaced, unless a payment of it is recorded
/// (`paid_on_its_way`: its completion came with a bank debit still clearing).
pub(crate) async fn session_needs_replacing(
    api: &StripeApi,
    subject: &str,
    session_id: Option<&str>,
    expires_at: Option<i64>,
    paid_on_its_way: bool,
    now: i64,
) -> Result<bool, PaymentError> {
    use stripe_checkout::CheckoutSessionStatus;

    if expires_at.is_none_or(|at| now <= at.saturating_add(EXPIRY_MARGIN_MS)) {
        return Ok(false);
    }
    let Some(session_id) = session_id else {
        return Ok(true);
    };
    let Some(session) = api.retrieve_checkout_session(session_id).await? else {
        if paid_on_its_way {
            return Err(PaymentError::CheckoutCompleted(
                subject.to_owned(),
                session_id.to_owned(),
            ));
        }
        // Stripe holds no such session (the account or its mode changed): nobody can pay it.
        tracing::warn!(
            subject,
            session_id,
            "Stripe does not know the checkout session past its expiry; opening the next one"
        );
        return Ok(true);
    };
    match session.status {
        Some(CheckoutSessionStatus::Expired) => Ok(true),
        Some(CheckoutSessionStatus::Complete) => Err(PaymentError::CheckoutCompleted(
            subject.to_owned(),
            session_id.to_owned(),
        )),
        _ => Ok(false),
    }
}

/// Records the order (unless it exists) and opens its Checkout Session (unless it has one).
/// Asking again for the same order returns the same session: the key is
/// `checkout-session:<order_id>` and a succeeded request is never sent twice. An order that
/// is paid, refunded, disputed or failed is [`PaymentError::Settled`]; an open order whose
/// session expired gets a new one under the next key (`checkout-session:<order_id>:2`).
pub async fn open_checkout(
    store: &Store,
    api: &StripeApi,
    packages: &Packages,
    urls: &CheckoutUrls,
    request: &OrderRequest,
) -> Result<Checkout, PaymentError> {
    let package = packages
        .get(&request.package)
        .ok_or_else(|| PaymentError::UnknownPackage(request.package.clone()))?;
    let price = package
        .price
        .clone()
        .ok_or_else(|| PaymentError::NoPrice(request.package.clone()))?;
    let customer_email = check_email(&request.customer_email)?;
    let order_id = match &request.order_id {
        Some(id) => OrderId::parse(id.trim())?,
        None => OrderId::parse(random_id("ord")?)?,
    };
    let new = NewOrder {
        order_id: order_id.clone(),
        package: request.package.clone(),
        credits: package.credits,
        amount: price.amount,
        currency: price.currency.clone(),
        customer_email,
    };
    let created = match store.orders().create(&new, now_ms()).await? {
        OrderCreation::Created => true,
        OrderCreation::Existing => false,
        OrderCreation::Conflict => return Err(PaymentError::OrderConflict(order_id)),
    };
    let mut order = existing_order(store, &order_id).await?;
    if order.status.is_settled() {
        return Err(PaymentError::Settled(Box::new(order)));
    }
    let now = now_ms();
    let expired = session_needs_replacing(
        api,
        order_id.as_str(),
        order.checkout_session_id.as_deref(),
        order.checkout_expires_at,
        order.payment_intent_id.is_some(),
        now,
    )
    .await?;
    if expired {
        // Of two callers at once, one moves the order to the next generation; both then send
        // that generation's key.
        store
            .orders()
            .expire_checkout(&order_id, order.checkout_generation, now)
            .await?;
        order = existing_order(store, &order_id).await?;
        if order.status.is_settled() {
            return Err(PaymentError::Settled(Box::new(order)));
        }
    }
    if order.checkout_url.is_some() {
        return Ok(Checkout { order, created });
    }

    // The order's own price and credits, not today's configuration: a retry sends the
    // same parameters under the same key.
    let amount = order.amount.unwrap_or(price.amount);
    let currency = order.currency.clone().unwrap_or(price.currency);
    let package_name = order.package.clone().unwrap_or_default();
    let mut price_data = CreateCheckoutSessionLineItemsPriceData::new(
        Currency::from_str(&currency).unwrap_or_else(|never| match never {}),
    );
    price_data.unit_amount = Some(amount);
    price_data.product_data = Some(ProductData::new(package_name.clone()));
    let mut item = CreateCheckoutSessionLineItems::new();
    item.price_data = Some(price_data);
    item.quantity = Some(1);
    let metadata = HashMap::from([
        ("order_id".to_owned(), order_id.to_string()),
        ("credits".to_owned(), order.credits.to_string()),
        ("package".to_owned(), package_name),
    ]);
    let mut session = CreateCheckoutSession::new()
        .mode(CheckoutSessionMode::Payment)
        .client_reference_id(order_id.as_str())
        .metadata(metadata)
        .success_url(urls.success_url.as_str())
        .cancel_url(urls.cancel_url.as_str())
        .line_items(vec![item]);
    if let Some(email) = &order.customer_email {
        session = session.customer_email(email.as_str());
    }

    let operation = Operation::CheckoutSession {
        generation: order.checkout_generation,
    };
    let (session_id, url, expires_at) =
        send_session(store, api, operation, &order_id, &session).await?;
    store
        .orders()
        .set_checkout_session(
            &order_id,
            &session_id,
            url.as_deref(),
            expires_at.saturating_mul(1000),
            now_ms(),
        )
        .await?;
    Ok(Checkout {
        order: existing_order(store, &order_id).await?,
        created,
    })
}

/// Sends `session` for `subject` under `operation`'s key: the session's id, URL and expiry
/// (unix seconds). A session created before whose caller stopped before it learnt the URL is
/// read back (a GET, nothing is created).
pub(crate) async fn send_session(
    store: &Store,
    api: &StripeApi,
    operation: Operation,
    subject: &impl AsRef<str>,
    session: &CreateCheckoutSession,
) -> Result<(String, Option<String>, i64), PaymentError> {
    let sent = api
        .send(store, operation, subject, session, |s| {
            s.id.as_str().to_owned()
        })
        .await?;
    Ok(match sent {
        Sent::Answered(session) => (
            session.id.as_str().to_owned(),
            session.url,
            session.expires_at,
        ),
        Sent::AlreadySucceeded(record) => {
            let id = record.object_id.ok_or_else(|| {
                StoreError::Inconsistent(format!(
                    "{} succeeded without an object",
                    record.idempotency_key
                ))
            })?;
            let session = api.retrieve_checkout_session(&id).await?.ok_or_else(|| {
                CallError::Indeterminate {
                    key: record.idempotency_key.clone(),
                    attempts: 1,
                    last: format!("Stripe does not know checkout session {id}"),
                }
            })?;
            (id, session.url, session.expires_at)
        }
    })
}

async fn existing_order(store: &Store, order_id: &OrderId) -> Result<OrderView, PaymentError> {
    store
        .orders()
        .get(order_id)
        .await?
        .ok_or_else(|| PaymentError::NoSuchOrder(order_id.clone()))
}

/// How a refund ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refunded {
    pub order: OrderView,
    /// Stripe's refund id, when Claimcheck made the refund.
    pub refund_id: Option<String>,
    /// The refund's amount in minor units (`None` for one nobody asked for now).
    pub amount: Option<i64>,
    /// Whether this call wrote the revoke (false: the `charge.refunded` event or an earlier
    /// call had).
    pub revoked_now: bool,
    /// The order was refunded in full before this call.
    pub already_refunded: bool,
}

/// A refund request of the order that has no final answer (its caller died or timed out).
fn unanswered_refund(order: &OrderView) -> Option<&StripeRequestView> {
    order
        .stripe_requests
        .iter()
        .find(|r| r.operation == "refund" && r.status.is_unanswered())
}

/// The attempt a new refund leaving `total` refunded goes out as: 1, or one past the last
/// that Stripe refused (a refusal is final under its key, and nothing was made under it; a
/// changed-parameters error is not a refusal and stays in the way, to be looked into).
fn next_refund_attempt(order: &OrderView, total: i64) -> i64 {
    order
        .stripe_requests
        .iter()
        .filter(|r| r.operation == "refund" && r.is_refused())
        .filter_map(|r| Operation::refund_key_parts(&order.order_id, &r.idempotency_key))
        .filter(|(refunded_after, _)| *refunded_after == total)
        .map(|(_, attempt)| attempt)
        .max()
        .map_or(1, |attempt| attempt.saturating_add(1))
}

/// What of `order` a refund could still return, in minor units (0: all of it is refunded),
/// or why Claimcheck cannot refund it.
pub fn refundable(order: &OrderView) -> Result<i64, PaymentError> {
    let why = match order.refundable() {
        Ok(left) => return Ok(left),
        Err(why) => why,
    };
    let order_id = OrderId::parse(order.order_id.as_str())?;
    Err(match why {
        NotRefundable::Status(status) => PaymentError::NotRefundable { order_id, status },
        NotRefundable::NoAmount => PaymentError::NoAmount(order_id),
        NotRefundable::NoPaymentIntent => PaymentError::NoPaymentIntent(order_id),
    })
}

/// Whether `amount` (minor units) may be refunded of `order` now: more than nothing and no
/// more than is left. The dashboard's form asks this before it sends anything, and
/// [`refund`] asks it again.
pub fn check_refund_amount(order: &OrderView, amount: i64) -> Result<(), PaymentError> {
    let refundable = refundable(order)?;
    if amount < 1 || amount > refundable {
        return Err(PaymentError::BadAmount {
            order_id: OrderId::parse(order.order_id.as_str())?,
            requested: amount,
            refundable,
            currency: order.currency.clone().unwrap_or_else(|| "chf".into()),
        });
    }
    Ok(())
}

/// Refunds `amount` of a paid order (what is left when `None`) and revokes its credits in
/// proportion, once; audited as `actor` with `reason`. The key names the refunded total after
/// this refund (`refund:<order>:<total>`): a retry (a second operator, a crash) sends the same
/// key and gets the same refund back, a further partial refund is a new operation. A refund
/// without an answer yet is sent again before any new one; one Stripe refused is asked again
/// under the next key (`refund:<order>:<total>:2`), the refusal kept in the order's history.
pub async fn refund(
    store: &Store,
    api: &StripeApi,
    order_id: &OrderId,
    amount: Option<i64>,
    actor: &Actor,
    reason: &str,
) -> Result<Refunded, PaymentError> {
    let reason = crate::audit::reason(reason)?;
    let order = existing_order(store, order_id).await?;
    // Amounts are written with their currency wherever people read them (the audit log,
    // the errors); the key keeps minor units, as Stripe's API does.
    let currency = order.currency.clone().unwrap_or_else(|| "chf".into());
    let money = |minor: i64| format_money(minor, &currency);
    let (amount, total, attempt) = match unanswered_refund(&order) {
        Some(pending) => {
            let pending_amount = pending.amount.unwrap_or_default();
            let sent = Operation::refund_key_parts(order_id.as_str(), &pending.idempotency_key);
            match (sent, amount) {
                (Some((total, attempt)), None) => (pending_amount, total, attempt),
                (Some((total, attempt)), Some(asked)) if asked == pending_amount => {
                    (asked, total, attempt)
                }
                _ => {
                    return Err(PaymentError::RefundUnanswered {
                        order_id: order_id.clone(),
                        key: pending.idempotency_key.clone(),
                        amount: pending_amount,
                        currency: currency.clone(),
                    });
                }
            }
        }
        None => {
            let refundable = refundable(&order)?;
            if refundable == 0 && amount.is_none() {
                let refund_id = order
                    .stripe_requests
                    .iter()
                    .rev()
                    .find(|r| r.operation == "refund" && r.status == RequestStatus::Succeeded)
                    .and_then(|r| r.object_id.clone());
                return Ok(Refunded {
                    order,
                    refund_id,
                    amount: None,
                    revoked_now: false,
                    already_refunded: true,
                });
            }
            let amount = amount.unwrap_or(refundable);
            check_refund_amount(&order, amount)?;
            // The gross total (failed refunds included) only grows, so every new refund has
            // a key no earlier one had.
            let total = order
                .gross_refunded
                .checked_add(amount)
                .ok_or_else(|| StoreError::OutOfRange(format!("order {order_id}")))?;
            (amount, total, next_refund_attempt(&order, total))
        }
    };
    let payment_intent = order
        .payment_intent_id
        .clone()
        .ok_or_else(|| PaymentError::NoPaymentIntent(order_id.clone()))?;
    let operation = Operation::Refund {
        amount,
        refunded_after: total,
        attempt,
    };
    let key = operation.key(order_id);
    let audit = |outcome: String| {
        let key = key.clone();
        async move {
            store
                .audit()
                .record(
                    &AuditRecord {
                        actor,
                        action: AuditAction::Refund,
                        target: order_id.as_str(),
                        reason,
                        outcome: &format!("{key}: {outcome}"),
                    },
                    now_ms(),
                )
                .await
        }
    };
    audit(format!("requested {}", money(amount))).await?;
    let request = CreateRefund::new()
        .payment_intent(payment_intent.as_str())
        .amount(amount)
        .reason(CreateRefundReason::RequestedByCustomer)
        .metadata(HashMap::from([(
            "order_id".to_owned(),
            order_id.to_string(),
        )]));
    let sent = api
        .send(store, operation, order_id, &request, |r| {
            r.id.as_str().to_owned()
        })
        .await;
    let refund_id = match sent {
        Ok(Sent::Answered(refund)) => Some(refund.id.as_str().to_owned()),
        Ok(Sent::AlreadySucceeded(record)) => record.object_id,
        Err(error) => {
            audit(format!("not refunded: {error}")).await?;
            return Err(error.into());
        }
    };
    let revoked_now = store
        .orders()
        .record_refund(order_id, &key, total, now_ms())
        .await?;
    audit(format!(
        "refunded {} ({}); credits {}",
        money(amount),
        refund_id.as_deref().unwrap_or("refund id unknown"),
        if revoked_now {
            "revoked in proportion"
        } else {
            "were already revoked"
        }
    ))
    .await?;
    Ok(Refunded {
        order: existing_order(store, order_id).await?,
        refund_id,
        amount: Some(amount),
        revoked_now,
        already_refunded: false,
    })
}

impl StripeApi {
    /// Reads a Checkout Session (a GET: no key, nothing created); `None` when Stripe answers
    /// 404 `resource_missing`: it holds no such session (any other 404, a wrong API base say,
    /// is an error).
    pub async fn retrieve_checkout_session(
        &self,
        id: &str,
    ) -> Result<Option<stripe_checkout::CheckoutSession>, CallError> {
        use stripe_client_core::StripeRequest;
        let answer = RetrieveCheckoutSession::new(id)
            .customize()
            .send(self.client())
            .await;
        self.observer().stripe_answered(
            "retrieve_checkout_session",
            crate::stripe::answer_of(&answer),
        );
        match answer {
            Ok(session) => Ok(Some(session)),
            Err(::stripe::StripeError::Stripe(api, 404))
                if api.code.as_ref().map(|c| c.as_str()) == Some("resource_missing") =>
            {
                Ok(None)
            }
            Err(e) => Err(CallError::Indeterminate {
                key: format!("GET checkout session {id}"),
                attempts: 1,
                last: e.to_string(),
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn emails_are_trimmed_lowercased_and_checked() {
        assert_eq!(check_email(" Anna@Example.CH ").unwrap(), "anna@example.ch");
        assert!(check_email("anna").is_err());
        assert!(check_email("@example.ch").is_err());
        assert!(check_email("anna@localhost").is_err());
        assert!(check_email("an na@example.ch").is_err());
        assert!(check_email("anna\u{202E}hc.elpmaxe@evil.example").is_err());
        assert!(check_email("an\u{200B}na@example.ch").is_err());
    }
}
