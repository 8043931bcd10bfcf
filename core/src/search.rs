//! The one search box: whatever id support staff paste (an order id, an e-mail, an event
//! id, a Checkout Session, PaymentIntent, charge, refund or dispute id, a customer id) is
//! looked up everywhere it can stand, and either names one thing to open or is shown
//! grouped by kind.

use crate::error::StoreError;
use crate::fulfilment::{Packages, Plan, plan};
use crate::ids::{EventId, OrderId};
use crate::store::{ClaimView, CustomerView, OrderView, Store};

/// Hits of one kind shown at most.
pub const SHOWN_PER_KIND: i64 = 20;

/// What a search found, by kind.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SearchResults {
    pub term: String,
    /// The customer, when the term is an e-mail or customer id with orders.
    pub customer: Option<CustomerView>,
    /// Orders the term names directly, or through an event or a request about them.
    pub orders: Vec<OrderView>,
    /// Claims whose event id or object id (session, charge, refund, dispute) is the term.
    pub events: Vec<ClaimView>,
}

/// The one thing a search names, when it names one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Found {
    Customer(String),
    Order(String),
    Event(String),
}

impl Found {
    /// Where the dashboard shows it.
    pub fn href(&self) -> String {
        match self {
            Found::Customer(who) => format!("/orders?q={}", query_escape(who)),
            Found::Order(id) => format!("/orders/{}", query_escape(id)),
            Found::Event(id) => format!("/events/{}", query_escape(id)),
        }
    }
}

impl SearchResults {
    pub fn is_empty(&self) -> bool {
        self.customer.is_none() && self.orders.is_empty() && self.events.is_empty()
    }

    /// The one match to open straight away: the event whose id was typed, the customer whose
    /// e-mail or id was typed, the one order everything found belongs to, or the one event.
    pub fn only(&self) -> Option<Found> {
        if let Some(event) = self.events.iter().find(|e| e.event_id == self.term) {
            return Some(Found::Event(event.event_id.clone()));
        }
        if let Some(customer) = &self.customer {
            return Some(Found::Customer(customer.customer.clone()));
        }
        match (self.orders.as_slice(), self.events.as_slice()) {
            ([order], _) => Some(Found::Order(order.order_id.clone())),
            ([], [event]) => Some(Found::Event(event.event_id.clone())),
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
    };
    if term.is_empty() {
        return Ok(results);
    }
    if term.contains('@') || term.starts_with("cus_") {
        let customer = store.orders().customer(term).await?;
        if !customer.orders.is_empty() {
            results.customer = Some(customer);
        }
    }
    results.orders = store.orders().find(term, SHOWN_PER_KIND).await?;
    results.events = store.claims().find(term, now, SHOWN_PER_KIND).await?;
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

/// The order an event is about: the session's order id, or the order its payment intent
/// paid.
async fn order_of_event(store: &Store, event: &ClaimView) -> Result<Option<OrderId>, StoreError> {
    let Ok(id) = EventId::parse(event.event_id.as_str()) else {
        return Ok(None);
    };
    let Some(payload) = store.claims().payload(&id).await? else {
        return Ok(None);
    };
    match plan(&event.event_type, &payload, &Packages::default()) {
        Ok(Plan::Session { order, .. }) => Ok(Some(order.order_id)),
        Ok(Plan::Money { payment_intent, .. }) => Ok(store
            .orders()
            .by_payment_intent(&payment_intent)
            .await?
            .and_then(|o| OrderId::parse(o.order_id).ok())),
        // A pruned payload or a type that acts on nothing: the event stands alone.
        Err(_) => Ok(None),
    }
}

/// Percent-encodes what is not safe in a path segment or query value.
fn query_escape(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for byte in value.bytes() {
        match byte {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' | b'@' => {
                out.push(byte as char)
            }
            _ => out.push_str(&format!("%{byte:02X}")),
        }
    }
    out
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
        }
    }

    fn results(term: &str, orders: Vec<OrderView>, events: Vec<ClaimView>) -> SearchResults {
        SearchResults {
            term: term.into(),
            customer: None,
            orders,
            events,
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
        assert_eq!(charge.only().unwrap().href(), "/orders/ord_1");
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
        });
        assert_eq!(found.only().unwrap().href(), "/orders?q=lea@example.ch");
        assert_eq!(
            Found::Customer("a b+c@x".into()).href(),
            "/orders?q=a%20b%2Bc@x"
        );
    }
}
