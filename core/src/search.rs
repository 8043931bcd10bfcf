//! The one search box: whatever id support staff paste (an order id, an e-mail, an event
//! id, a Checkout Session, PaymentIntent, charge, refund or dispute id, a customer id, a
//! spend or hold id, a spend's reference or Idempotency-Key, a subscription's id or
//! reference) is looked up everywhere it can stand, and either names one thing to open or is shown
//! grouped by kind. What was found, not where the dashboard shows it: the app makes links.

use crate::error::StoreError;
use crate::fulfilment::order_ref;
use crate::ids::{EventId, OrderId};
use crate::store::{ClaimView, CustomerView, LoggedDelivery, OrderView, Store, SubscriptionView};
use crate::webhook::terms::normalise_query;

/// Hits of one kind shown at most.
pub const SHOWN_PER_KIND: i64 = 20;

/// What a search found, by kind.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SearchResults {
    pub term: String,
    /// The customer, when the term is an e-mail or customer id that an order or a claim's
    /// payload names.
    pub customer: Option<CustomerView>,
    /// Orders the term names directly, or through an event or a request about them.
    pub orders: Vec<OrderView>,
    /// Claims whose event id or object id is the term, or whose payload names something
    /// starting with it (e-mail, order id, payment intent, charge, customer, …).
    pub events: Vec<ClaimView>,
    /// Deliveries recorded without a claim (a type this version ignores, a refused
    /// delivery) whose event id or type is the term.
    pub deliveries: Vec<LoggedDelivery>,
    /// The subscription whose Stripe id (`sub_…`) or shop reference is the term.
    pub subscription: Option<SubscriptionView>,
    /// Else the reference the order API was asked for, whose Checkout Session is not paid.
    pub asked_subscription: Option<String>,
}

/// The one thing a search names, when it names one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Found {
    Customer(String),
    Order(String),
    Event(String),
    Subscription(String),
}

impl SearchResults {
    pub fn is_empty(&self) -> bool {
        self.customer.is_none()
            && self.orders.is_empty()
            && self.events.is_empty()
            && self.deliveries.is_empty()
            && self.subscription.is_none()
            && self.asked_subscription.is_none()
    }

    /// The one match to open straight away: the event whose id was typed, the subscription
    /// whose id or reference was typed, the customer whose e-mail or id was typed, the one order everything found belongs to, or the one event.
    pub fn only(&self) -> Option<Found> {
        if let Some(event) = self.events.iter().find(|e| e.event_id == self.term) {
            return Some(Found::Event(event.event_id.clone()));
        }
        if let Some(subscription) = &self.subscription {
            return Some(Found::Subscription(subscription.subscription_id.clone()));
        }
        if let Some(reference) = &self.asked_subscription {
            return Some(Found::Subscription(reference.clone()));
        }
        if let Some(customer) = &self.customer {
            return Some(Found::Customer(customer.customer.clone()));
        }
        match (
            self.orders.as_slice(),
            self.events.as_slice(),
            self.deliveries.is_empty(),
        ) {
            ([order], _, _) => Some(Found::Order(order.order_id.clone())),
            ([], [event], true) => Some(Found::Event(event.event_id.clone())),
            _ => None,
        }
    }
}

/// Looks `term` up as every kind of id. `now` (unix ms) dates the claims' states.
pub async fn search(store: &Store, term: &str, now: i64) -> Result<SearchResults, StoreError> {
    let term = term.trim();
    let mut results = SearchResults {
        term: term.to_owned(),
        customer: None,
        orders: Vec::new(),
        events: Vec::new(),
        deliveries: Vec::new(),
        subscription: None,
        asked_subscription: None,
    };
    // Nothing is stored with an invisible character in it (see `Term::new`).
    if term.is_empty() || crate::text::has_hidden_characters(term, true) {
        return Ok(results);
    }
    if term.contains('@') || term.starts_with("cus_") {
        let customer = customer(store, term, now).await?;
        // Someone who only asked for a subscription (its Checkout Session not paid) too.
        if !customer.orders.is_empty()
            || !customer.claims.is_empty()
            || !store
                .subscriptions()
                .asked_by(&customer.customer)
                .await?
                .is_empty()
        {
            results.customer = Some(customer);
        }
    }
    // A spend, hold or adjustment id, a reference or an Idempotency-Key of the spend API
    // names the customer whose credits it moved.
    if results.customer.is_none()
        && let Some(email) = store.credits().customer_of(term).await?
    {
        results.customer = Some(customer(store, &email, now).await?);
    }
    results.subscription = store.subscriptions().get(term).await?;
    if results.subscription.is_none()
        && let Ok(reference) = crate::SubscriptionRef::parse(term)
        && store.subscriptions().checkout(&reference).await?.is_some()
    {
        results.asked_subscription = Some(reference.to_string());
    }
    results.orders = store.orders().find(term, SHOWN_PER_KIND).await?;
    results.events = store.claims().find(term, now, SHOWN_PER_KIND).await?;
    results.deliveries = store
        .claims()
        .unclaimed_deliveries(term, SHOWN_PER_KIND)
        .await?;
    // A charge, refund or dispute id names events (and our own refund requests), not the
    // order: follow them to it.
    let mut related: Vec<OrderId> = store.stripe_requests().orders_of_object(term).await?;
    for event in &results.events {
        if let Some(order) = order_of_event(store, event).await? {
            related.push(order);
        }
    }
    for order_id in related {
        if results
            .orders
            .iter()
            .any(|o| o.order_id == order_id.as_str())
        {
            continue;
        }
        if let Some(order) = store.orders().get(&order_id).await? {
            results.orders.push(order);
        }
    }
    Ok(results)
}

/// Everything about the customer `who` (an e-mail, case-insensitively, or a Stripe customer
/// id): their orders and balance, and every claim whose payload names them, so that a
/// payment that never became an order is there too.
pub async fn customer(store: &Store, who: &str, now: i64) -> Result<CustomerView, StoreError> {
    let who = normalise_query(who);
    let mut customer = store.orders().customer(&who).await?;
    customer.customer = who.clone();
    customer.claims = store
        .claims()
        .naming(&who, now, crate::store::CUSTOMER_CLAIMS)
        .await?;
    Ok(customer)
}

/// The order an event is about ([`order_ref`]), if it is known.
async fn order_of_event(store: &Store, event: &ClaimView) -> Result<Option<OrderId>, StoreError> {
    let Ok(id) = EventId::parse(event.event_id.as_str()) else {
        return Ok(None);
    };
    // A pruned payload, or a type that acts on nothing: the event stands alone.
    let Some(reference) = store
        .claims()
        .payload(&id)
        .await?
        .and_then(|payload| order_ref(&event.event_type, &payload))
    else {
        return Ok(None);
    };
    Ok(store
        .orders()
        .of_ref(&reference)
        .await?
        .and_then(|o| OrderId::parse(o.order_id).ok()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ClaimState;

    fn order(id: &str) -> OrderView {
        OrderView {
            order_id: id.into(),
            status: crate::money::OrderStatus::Paid,
            payment_status: "paid".into(),
            credits_granted: 40,
            credits: 40,
            package: None,
            customer_email: None,
            customer_id: None,
            checkout_session_id: None,
            payment_intent_id: None,
            amount: None,
            currency: None,
            amount_refunded: 0,
            gross_refunded: 0,
            refund_failed: 0,
            dispute_status: None,
            dispute_id: None,
            checkout_url: None,
            checkout_expires_at: None,
            checkout_generation: 1,
            ledger: Vec::new(),
            stripe_requests: Vec::new(),
            created_at: 0,
            updated_at: 0,
        }
    }

    fn event(id: &str, object: &str) -> ClaimView {
        ClaimView {
            event_id: id.into(),
            event_type: "charge.refunded".into(),
            object_id: object.into(),
            status: ClaimState::Processed,
            attempts: 1,
            last_error: None,
            lease_owner: None,
            lease_expires_at: None,
            next_attempt_at: 0,
            deliveries: 1,
            livemode: false,
            received_at: 0,
            processed_at: Some(1),
            source: crate::ClaimSource::Webhook,
            source_run: None,
            resolved_at: None,
            resolved_by: None,
            resolution: None,
        }
    }

    fn results(term: &str, orders: Vec<OrderView>, events: Vec<ClaimView>) -> SearchResults {
        SearchResults {
            term: term.into(),
            customer: None,
            orders,
            events,
            deliveries: Vec::new(),
            subscription: None,
            asked_subscription: None,
        }
    }

    #[test]
    fn one_order_behind_several_events_is_the_one_match() {
        let charge = results(
            "ch_1",
            vec![order("ord_1")],
            vec![event("evt_a", "ch_1"), event("evt_b", "ch_1")],
        );
        assert_eq!(charge.only(), Some(Found::Order("ord_1".into())));
    }

    #[test]
    fn a_typed_event_id_opens_the_event_even_with_its_order() {
        let typed = results("evt_a", vec![order("ord_1")], vec![event("evt_a", "cs_1")]);
        assert_eq!(typed.only(), Some(Found::Event("evt_a".into())));
    }

    #[test]
    fn several_orders_or_events_without_an_order_are_a_list() {
        let two = results("x", vec![order("ord_1"), order("ord_2")], Vec::new());
        assert_eq!(two.only(), None);
        let lone = results("dp_1", Vec::new(), vec![event("evt_d", "dp_1")]);
        assert_eq!(lone.only(), Some(Found::Event("evt_d".into())));
        let many = results(
            "dp_1",
            Vec::new(),
            vec![event("e1", "dp_1"), event("e2", "dp_1")],
        );
        assert_eq!(many.only(), None);
        assert!(results("nothing", Vec::new(), Vec::new()).is_empty());
    }

    #[test]
    fn a_customer_opens_the_customer_page() {
        let mut found = results(
            "lea@example.ch",
            vec![order("ord_1"), order("ord_2")],
            Vec::new(),
        );
        found.customer = Some(CustomerView {
            customer: "lea@example.ch".into(),
            balance: 80,
            orders: Vec::new(),
            claims: Vec::new(),
        });
        assert_eq!(found.only(), Some(Found::Customer("lea@example.ch".into())));
    }
}
