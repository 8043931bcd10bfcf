//! What Claimcheck asks Stripe for a subscription the shop sells: its Checkout Session
//! (`mode=subscription`, the shop's reference in `subscription_data.metadata`, so every later
//! invoice names its customer without the session) and its cancellation. Both go through
//! [`StripeApi::send`] under keys derived from the reference.

use std::collections::HashMap;
use std::str::FromStr;

use stripe_checkout::CheckoutSessionMode;
use stripe_checkout::checkout_session::{
    CreateCheckoutSession, CreateCheckoutSessionLineItems, CreateCheckoutSessionLineItemsPriceData,
    CreateCheckoutSessionLineItemsPriceDataRecurring,
    CreateCheckoutSessionLineItemsPriceDataRecurringInterval as StripeInterval,
    CreateCheckoutSessionSubscriptionData, ProductData,
};
use stripe_client_core::{RequestBuilder, StripeMethod, StripeRequest};
use stripe_types::Currency;

use super::{CheckoutUrls, PaymentError, check_email, send_session, session_needs_replacing};
use crate::audit::{Actor, AuditAction, AuditRecord};
use crate::billing::{Interval, Plans};
use crate::clock::now_ms;
use crate::error::StoreError;
use crate::fulfilment::Price;
use crate::ids::SubscriptionRef;
use crate::store::{
    NewSubscriptionCheckout, OrderCreation, Store, StripeRequestView, SubscriptionCheckoutView,
    SubscriptionView,
};
use crate::stripe::{CallError, Operation, Sent, StripeApi};
use crate::token::random_id;

/// The shop asks for a subscription.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SubscriptionRequest {
    /// The shop's own reference; one is made up when absent.
    pub subscription_ref: Option<String>,
    pub plan: String,
    pub customer_email: String,
}

/// A subscription the shop asked for, as it stands: what the order API recorded, the Stripe
/// subscription once its events came, and the requests sent for it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AskedSubscription {
    pub checkout: SubscriptionCheckoutView,
    pub subscription: Option<SubscriptionView>,
    pub requests: Vec<StripeRequestView>,
    /// Whether this request recorded it.
    pub created: bool,
}

/// Reads what is known of `reference`: `None` if the shop never asked for it.
pub async fn asked_subscription(
    store: &Store,
    reference: &SubscriptionRef,
) -> Result<Option<AskedSubscription>, PaymentError> {
    let Some(checkout) = store.subscriptions().checkout(reference).await? else {
        return Ok(None);
    };
    Ok(Some(AskedSubscription {
        subscription: subscription_of(store, reference).await?,
        requests: store
            .stripe_requests()
            .for_subscription(reference.as_str())
            .await?,
        checkout,
        created: false,
    }))
}

/// The Stripe subscription whose metadata carries `reference`, once an event about it came.
async fn subscription_of(
    store: &Store,
    reference: &SubscriptionRef,
) -> Result<Option<SubscriptionView>, StoreError> {
    store.subscriptions().by_ref(reference.as_str()).await
}

/// Records the subscription (unless its reference exists) and opens its Checkout Session
/// (unless it has one). Asking again returns the same session: the key is
/// `subscription-checkout:<ref>` and a succeeded request is never sent twice. Once Stripe
/// told of a subscription with this reference, no new session is opened
/// ([`PaymentError::Subscribed`]); a session that expired unpaid is replaced under the next
/// key (`subscription-checkout:<ref>:2`).
pub async fn open_subscription_checkout(
    store: &Store,
    api: &StripeApi,
    plans: &Plans,
    urls: &CheckoutUrls,
    request: &SubscriptionRequest,
) -> Result<AskedSubscription, PaymentError> {
    let plan = plans
        .get(&request.plan)
        .ok_or_else(|| PaymentError::UnknownPlan(request.plan.clone()))?;
    let customer_email = check_email(&request.customer_email)?;
    let reference = match &request.subscription_ref {
        Some(reference) => SubscriptionRef::parse(reference.trim())?,
        None => SubscriptionRef::parse(random_id("subref")?)?,
    };
    // Keys are `…:<ref>:<n>`, and search reads `sub_…` as Stripe's id.
    if reference.as_str().contains(':') || reference.as_str().starts_with("sub_") {
        return Err(PaymentError::BadReference(reference.to_string()));
    }
    if let Some(subscription) = subscription_of(store, &reference).await? {
        return Err(PaymentError::Subscribed(Box::new(subscription)));
    }
    let new = NewSubscriptionCheckout {
        reference: reference.clone(),
        plan: plan.name.clone(),
        customer_email,
        credits: plan.credits,
        amount: plan.price.amount,
        currency: plan.price.currency.clone(),
        interval: plan.interval.as_str().to_owned(),
    };
    let created = match store.subscriptions().ask(&new, now_ms()).await? {
        OrderCreation::Created => true,
        OrderCreation::Existing => false,
        OrderCreation::Conflict => return Err(PaymentError::SubscriptionConflict(reference)),
    };
    let mut checkout = existing(store, &reference).await?;
    let now = now_ms();
    let expired = session_needs_replacing(
        api,
        reference.as_str(),
        checkout.checkout_session_id.as_deref(),
        checkout.checkout_expires_at,
        // A paid subscription session starts its subscription: answered 409 before this.
        false,
        now,
    )
    .await?;
    if expired {
        store
            .subscriptions()
            .expire_checkout(&reference, checkout.checkout_generation, now)
            .await?;
        checkout = existing(store, &reference).await?;
    }
    if checkout.checkout_url.is_none() {
        open_session(store, api, urls, &reference, &checkout).await?;
    }
    Ok(AskedSubscription {
        created,
        ..asked_subscription(store, &reference)
            .await?
            .ok_or_else(|| StoreError::Missing(format!("subscription {reference}")))?
    })
}

async fn existing(
    store: &Store,
    reference: &SubscriptionRef,
) -> Result<SubscriptionCheckoutView, PaymentError> {
    store
        .subscriptions()
        .checkout(reference)
        .await?
        .ok_or_else(|| PaymentError::NoSuchSubscription(reference.to_string()))
}

/// Opens the session of `checkout`'s generation, from the plan as it was recorded (a retry
/// sends the same parameters under the same key).
async fn open_session(
    store: &Store,
    api: &StripeApi,
    urls: &CheckoutUrls,
    reference: &SubscriptionRef,
    checkout: &SubscriptionCheckoutView,
) -> Result<(), PaymentError> {
    let interval = match Interval::parse(&checkout.billing_interval) {
        Some(Interval::Day) => StripeInterval::Day,
        Some(Interval::Week) => StripeInterval::Week,
        Some(Interval::Month) => StripeInterval::Month,
        Some(Interval::Year) => StripeInterval::Year,
        None => {
            return Err(StoreError::UnknownValue(format!(
                "billing interval '{}'",
                checkout.billing_interval
            ))
            .into());
        }
    };
    let mut price_data = CreateCheckoutSessionLineItemsPriceData::new(
        Currency::from_str(&checkout.currency).unwrap_or_else(|never| match never {}),
    );
    price_data.unit_amount = Some(checkout.amount);
    price_data.product_data = Some(ProductData::new(checkout.plan.clone()));
    price_data.recurring = Some(CreateCheckoutSessionLineItemsPriceDataRecurring::new(
        interval,
    ));
    let mut item = CreateCheckoutSessionLineItems::new();
    item.price_data = Some(price_data);
    item.quantity = Some(1);
    let tags = HashMap::from([
        ("subscription_ref".to_owned(), reference.to_string()),
        ("plan".to_owned(), checkout.plan.clone()),
    ]);
    let mut subscription_data = CreateCheckoutSessionSubscriptionData::new();
    subscription_data.metadata = Some(tags.clone());
    let session = CreateCheckoutSession::new()
        .mode(CheckoutSessionMode::Subscription)
        .client_reference_id(reference.as_str())
        .metadata(tags)
        .subscription_data(subscription_data)
        .customer_email(checkout.customer_email.as_str())
        .success_url(urls.success_url.as_str())
        .cancel_url(urls.cancel_url.as_str())
        .line_items(vec![item]);
    let operation = Operation::SubscriptionCheckout {
        generation: checkout.checkout_generation,
    };
    let (session_id, url, expires_at) =
        send_session(store, api, operation, reference, &session).await?;
    store
        .subscriptions()
        .set_checkout_session(
            reference,
            &session_id,
            url.as_deref(),
            expires_at.saturating_mul(1000),
            now_ms(),
        )
        .await?;
    Ok(())
}

/// `POST /v1/subscriptions/{id}` with `cancel_at_period_end=true`, or `DELETE
/// /v1/subscriptions/{id}` to cancel now. async-stripe's Billing crate would add a large
/// generated crate to the build for these two calls.
struct CancelRequest {
    subscription_id: String,
    at_period_end: bool,
}

impl StripeRequest for CancelRequest {
    type Output = miniserde::json::Value;

    fn build(&self) -> RequestBuilder {
        let path = format!("/subscriptions/{}", self.subscription_id);
        if self.at_period_end {
            let mut request = RequestBuilder::new(StripeMethod::Post, path);
            request.body = Some("cancel_at_period_end=true".into());
            request
        } else {
            RequestBuilder::new(StripeMethod::Delete, path)
        }
    }
}

/// A GET of one object (`/subscriptions/{id}`, `/prices/{id}`: a read, no key), answered as
/// JSON.
struct Retrieve {
    path: String,
}

impl StripeRequest for Retrieve {
    type Output = miniserde::json::Value;

    fn build(&self) -> RequestBuilder {
        RequestBuilder::new(StripeMethod::Get, self.path.clone())
    }
}

impl StripeApi {
    /// The order API's reference in a subscription's metadata at Stripe (`subscription_ref`),
    /// for an invoice that carries neither it nor an e-mail. `None` when Stripe's
    /// subscription has none.
    pub async fn subscription_reference(
        &self,
        subscription_id: &str,
    ) -> Result<Option<String>, CallError> {
        let subscription = self
            .retrieve("subscriptions", subscription_id, "retrieve_subscription")
            .await?;
        Ok(subscription["metadata"][crate::billing::REF_KEY]
            .as_str()
            .map(str::trim)
            .filter(|r| !r.is_empty())
            .map(str::to_owned))
    }

    /// What a price costs (`GET /v1/prices/{id}`), for a subscription schedule's phase that
    /// names it by id only.
    pub async fn price(&self, price_id: &str) -> Result<Price, CallError> {
        let price = self.retrieve("prices", price_id, "retrieve_price").await?;
        crate::billing::expanded_price(&price).ok_or_else(|| CallError::Indeterminate {
            key: format!("GET prices {price_id}"),
            attempts: 1,
            last: "the price has no unit_amount and currency".into(),
        })
    }

    /// `GET /v1/{collection}/{id}`, as JSON; `operation` names it in the metrics.
    async fn retrieve(
        &self,
        collection: &str,
        id: &str,
        operation: &'static str,
    ) -> Result<serde_json::Value, CallError> {
        let unreadable = |last: String| CallError::Indeterminate {
            key: format!("GET {collection} {id}"),
            attempts: 1,
            last,
        };
        // An id from a payload goes into a path: Stripe's ids are letters, digits and `_`.
        if id.is_empty() || !id.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
            return Err(unreadable(format!("not a Stripe id: {id:?}")));
        }
        let answer = Retrieve {
            path: format!("/{collection}/{id}"),
        }
        .customize()
        .send(self.client())
        .await;
        self.observer()
            .stripe_answered(operation, crate::stripe::answer_of(&answer));
        let answer = answer.map_err(|e| unreadable(e.to_string()))?;
        serde_json::from_str(&miniserde::json::to_string(&answer))
            .map_err(|e| unreadable(e.to_string()))
    }
}

/// How a cancellation ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cancelled {
    pub subscription: SubscriptionView,
    pub at_period_end: bool,
    /// The request's Idempotency-Key.
    pub key: String,
    /// Whether this call sent it (false: an earlier one had, and it succeeded).
    pub sent_now: bool,
}

/// Cancels a subscription (by `sub_…` or the shop's reference) at the end of its period, or
/// now; audited as `actor` with `reason`. One key per kind
/// (`subscription-cancel:<ref>:period-end`, `…:now`): a retry, a second operator, a crash
/// send the same key and get Stripe's same answer. What changes is learnt from Stripe's
/// `customer.subscription.updated|deleted` events, like any other change.
pub async fn cancel_subscription(
    store: &Store,
    api: &StripeApi,
    id_or_ref: &str,
    at_period_end: bool,
    actor: &Actor,
    reason: &str,
) -> Result<Cancelled, PaymentError> {
    let reason = crate::audit::reason(reason)?;
    let Some(subscription) = store.subscriptions().get(id_or_ref.trim()).await? else {
        let asked = match SubscriptionRef::parse(id_or_ref.trim()) {
            Ok(reference) => store.subscriptions().checkout(&reference).await?,
            Err(_) => None,
        };
        return Err(match asked {
            Some(_) => PaymentError::NotSubscribed(id_or_ref.trim().to_owned()),
            None => PaymentError::NoSuchSubscription(id_or_ref.trim().to_owned()),
        });
    };
    // The shop's reference names the request when there is one; else Stripe's id.
    let subject = subscription
        .subscription_ref
        .clone()
        .unwrap_or_else(|| subscription.subscription_id.clone());
    // Earlier requests of this kind: a succeeded one is asked again under its key (Stripe's
    // answer is replayed); each refusal moves to the next key, so that a cancellation refused
    // for a reason since mended (a wrong API key) can be asked again.
    let kind = Operation::CancelSubscription {
        at_period_end,
        attempt: 1,
    }
    .key(&subject);
    let earlier: Vec<StripeRequestView> = store
        .stripe_requests()
        .for_subscription(&subject)
        .await?
        .into_iter()
        .filter(|r| r.idempotency_key == kind || r.idempotency_key.starts_with(&format!("{kind}:")))
        .collect();
    let succeeded = earlier
        .iter()
        .any(|r| r.status == crate::store::RequestStatus::Succeeded);
    if subscription.status.as_deref() == Some("canceled") && !succeeded {
        return Err(PaymentError::SubscriptionCanceled(Box::new(subscription)));
    }
    // A changed-parameters error is no refusal: it stays in the way, to be looked into.
    let refused = earlier.iter().filter(|r| r.is_refused()).count();
    let operation = Operation::CancelSubscription {
        at_period_end,
        attempt: i64::try_from(refused).unwrap_or(i64::MAX - 1) + 1,
    };
    let key = operation.key(&subject);
    let audit = |outcome: String| {
        let key = key.clone();
        let target = subscription.subscription_id.clone();
        async move {
            store
                .audit()
                .record(
                    &AuditRecord {
                        actor,
                        action: AuditAction::SubscriptionCancel,
                        target: &target,
                        reason,
                        outcome: &format!("{key}: {outcome}"),
                    },
                    now_ms(),
                )
                .await
        }
    };
    let when = if at_period_end {
        "at the period's end"
    } else {
        "now"
    };
    audit(format!("requested {when}")).await?;
    let request = CancelRequest {
        subscription_id: subscription.subscription_id.clone(),
        at_period_end,
    };
    let sent = api
        .send(
            store,
            operation,
            &subject,
            &request,
            |answer| match answer {
                miniserde::json::Value::Object(object) => match object.get("id") {
                    Some(miniserde::json::Value::String(id)) => id.clone(),
                    _ => String::new(),
                },
                _ => String::new(),
            },
        )
        .await;
    let sent_now = match sent {
        Ok(Sent::Answered(_)) => true,
        Ok(Sent::AlreadySucceeded(_)) => false,
        Err(error) => {
            audit(format!("failed: {error}")).await?;
            return Err(error.into());
        }
    };
    audit(if sent_now {
        "succeeded".into()
    } else {
        "sent before under this key".into()
    })
    .await?;
    Ok(Cancelled {
        subscription,
        at_period_end,
        key,
        sent_now,
    })
}
