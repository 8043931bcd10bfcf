//! What a payload names that support staff may search by: the customer's e-mail, the shop's
//! order id, and the Stripe objects it refers to. Read once, at claim time, from the same
//! bytes the claim stores; written beside the claim so that a stuck, failed or never
//! fulfilled payment is found by the e-mail the customer gives on the phone.
//!
//! Leniency is the rule: a field of another shape (an expanded object, a number, null) is
//! skipped, never an error. Stripe's ids are case-sensitive and kept as sent; e-mails are
//! compared case-insensitively and kept lowercased.

use serde::Deserialize;
use serde_json::Value;

/// What a search term is in the payload.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum TermKind {
    Email,
    /// The shop's own order id (`metadata.order_id`, `client_reference_id`).
    Order,
    Session,
    PaymentIntent,
    Charge,
    Refund,
    Dispute,
    Customer,
    Invoice,
    Subscription,
    /// The event's object, when its id has no prefix above.
    Object,
}

impl TermKind {
    pub const ALL: [TermKind; 11] = [
        TermKind::Email,
        TermKind::Order,
        TermKind::Session,
        TermKind::PaymentIntent,
        TermKind::Charge,
        TermKind::Refund,
        TermKind::Dispute,
        TermKind::Customer,
        TermKind::Invoice,
        TermKind::Subscription,
        TermKind::Object,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            TermKind::Email => "email",
            TermKind::Order => "order",
            TermKind::Session => "session",
            TermKind::PaymentIntent => "payment_intent",
            TermKind::Charge => "charge",
            TermKind::Refund => "refund",
            TermKind::Dispute => "dispute",
            TermKind::Customer => "customer",
            TermKind::Invoice => "invoice",
            TermKind::Subscription => "subscription",
            TermKind::Object => "object",
        }
    }

    /// The kind of a Stripe object by its id's prefix, if it is one search knows.
    pub fn of_stripe_id(id: &str) -> Option<TermKind> {
        let (prefix, _) = id.split_once('_')?;
        Some(match prefix {
            "cs" => TermKind::Session,
            "pi" => TermKind::PaymentIntent,
            "ch" | "py" => TermKind::Charge,
            "re" | "pyr" => TermKind::Refund,
            "dp" | "du" => TermKind::Dispute,
            "cus" => TermKind::Customer,
            "in" => TermKind::Invoice,
            "sub" => TermKind::Subscription,
            _ => return None,
        })
    }
}

impl std::str::FromStr for TermKind {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        TermKind::ALL
            .into_iter()
            .find(|k| k.as_str() == s)
            .ok_or_else(|| format!("unknown search term kind {s:?}"))
    }
}

/// One thing a payload names.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Term {
    pub kind: TermKind,
    /// Lowercased for an e-mail, as sent for an id.
    pub text: String,
}

/// Longest term kept: an e-mail address may have 254 characters, ids are far shorter.
pub const MAX_TERM_BYTES: usize = 255;

impl Term {
    /// `text` as a term of `kind`, if it is one: trimmed, not empty, not too long, no
    /// control or format characters; e-mails lowercased.
    pub fn new(kind: TermKind, text: &str) -> Option<Term> {
        let text = text.trim();
        if text.is_empty()
            || text.len() > MAX_TERM_BYTES
            || crate::text::has_hidden_characters(text, false)
        {
            return None;
        }
        let text = match kind {
            TermKind::Email if !text.contains('@') => return None,
            TermKind::Email => text.to_lowercase(),
            _ => text.to_owned(),
        };
        Some(Term { kind, text })
    }
}

/// What the search looks for when someone types `typed`: e-mails case-insensitively, ids
/// as typed (Stripe's are case-sensitive).
pub fn normalise_query(typed: &str) -> String {
    let typed = typed.trim();
    if typed.contains('@') {
        typed.to_lowercase()
    } else {
        typed.to_owned()
    }
}

/// The bounds of every term that starts with `prefix`, in byte order (UTF-8's byte order
/// is code point order): `term >= low AND term < high`, one range of the index.
pub fn prefix_bounds(prefix: &str) -> (String, String) {
    let mut high: Vec<char> = prefix.chars().collect();
    while let Some(last) = high.pop() {
        if let Some(next) = (u32::from(last) + 1..=u32::from(char::MAX)).find_map(char::from_u32) {
            high.push(next);
            return (prefix.to_owned(), high.into_iter().collect());
        }
    }
    (prefix.to_owned(), format!("{prefix}{}", char::MAX))
}

/// The fields of `data.object` that name something, every one optional and of any shape.
#[derive(Deserialize, Default)]
#[serde(default)]
pub(super) struct NamedFields {
    customer_email: Value,
    receipt_email: Value,
    email: Value,
    customer_details: Value,
    billing_details: Value,
    metadata: Value,
    client_reference_id: Value,
    payment_intent: Value,
    charge: Value,
    latest_charge: Value,
    customer: Value,
    invoice: Value,
    subscription: Value,
}

/// A string, or the `id` of an expanded object.
fn id_of(value: &Value) -> Option<&str> {
    match value {
        Value::String(s) => Some(s),
        Value::Object(map) => map.get("id").and_then(Value::as_str),
        _ => None,
    }
}

impl NamedFields {
    /// The terms these fields and the object's own id name, each once.
    pub(super) fn terms(&self, object_id: Option<&str>) -> Vec<Term> {
        let mut found: Vec<Term> = Vec::new();
        let mut add = |kind: TermKind, text: Option<&str>| {
            if let Some(term) = text.and_then(|t| Term::new(kind, t))
                && !found.iter().any(|f| f.text == term.text)
            {
                found.push(term);
            }
        };
        let email = TermKind::Email;
        add(email, self.customer_email.as_str());
        add(email, self.receipt_email.as_str());
        add(email, self.email.as_str());
        add(
            email,
            self.customer_details.get("email").and_then(Value::as_str),
        );
        add(
            email,
            self.billing_details.get("email").and_then(Value::as_str),
        );
        add(
            TermKind::Order,
            self.metadata.get("order_id").and_then(Value::as_str),
        );
        add(TermKind::Order, self.client_reference_id.as_str());
        add(TermKind::PaymentIntent, id_of(&self.payment_intent));
        add(TermKind::Charge, id_of(&self.charge));
        add(TermKind::Charge, id_of(&self.latest_charge));
        add(TermKind::Customer, id_of(&self.customer));
        add(email, self.customer.get("email").and_then(Value::as_str));
        add(TermKind::Invoice, id_of(&self.invoice));
        add(TermKind::Subscription, id_of(&self.subscription));
        if let Some(id) = object_id {
            add(
                TermKind::of_stripe_id(id).unwrap_or(TermKind::Object),
                Some(id),
            );
        }
        found
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn terms(object: serde_json::Value) -> Vec<(TermKind, String)> {
        let id = object.get("id").and_then(Value::as_str).map(str::to_owned);
        let fields: NamedFields = serde_json::from_value(object).unwrap();
        fields
            .terms(id.as_deref())
            .into_iter()
            .map(|t| (t.kind, t.text))
            .collect()
    }

    #[test]
    fn a_checkout_session_names_its_customer_order_and_payment() {
        let found = terms(serde_json::json!({
            "id": "cs_test_1",
            "customer_email": null,
            "customer_details": {"email": "Crash@Demo.Example", "name": "Lea"},
            "metadata": {"order_id": "ord_demo_crash_d1", "package": "thesis-40"},
            "client_reference_id": "ord_demo_crash_d1",
            "payment_intent": "pi_1",
            "customer": {"id": "cus_9", "email": "crash@demo.example"},
        }));
        assert_eq!(
            found,
            vec![
                (TermKind::Email, "crash@demo.example".into()),
                (TermKind::Order, "ord_demo_crash_d1".into()),
                (TermKind::PaymentIntent, "pi_1".into()),
                (TermKind::Customer, "cus_9".into()),
                (TermKind::Session, "cs_test_1".into()),
            ]
        );
    }

    #[test]
    fn fields_of_another_shape_are_skipped_not_errors() {
        let found = terms(serde_json::json!({
            "id": "ch_1",
            "receipt_email": 42,
            "billing_details": "nope",
            "metadata": [1, 2],
            "payment_intent": {"no_id": true},
            "charge": null,
            "customer": "   ",
        }));
        assert_eq!(found, vec![(TermKind::Charge, "ch_1".into())]);
    }

    #[test]
    fn unusable_text_is_no_term() {
        assert_eq!(Term::new(TermKind::Email, "not-an-email"), None);
        assert_eq!(Term::new(TermKind::Order, "ord\u{0}1"), None);
        assert_eq!(Term::new(TermKind::Order, "ord\u{200b}1"), None);
        assert_eq!(Term::new(TermKind::Order, &"x".repeat(256)), None);
        assert_eq!(
            Term::new(TermKind::Email, " A@B.ch ").map(|t| t.text),
            Some("a@b.ch".into())
        );
        assert_eq!(TermKind::of_stripe_id("evt_1"), None);
        assert_eq!(TermKind::of_stripe_id("dp_1"), Some(TermKind::Dispute));
        for kind in TermKind::ALL {
            assert_eq!(kind.as_str().parse::<TermKind>(), Ok(kind));
        }
    }

    #[test]
    fn a_prefix_is_one_range() {
        assert_eq!(
            prefix_bounds("ord_d1_000"),
            ("ord_d1_000".into(), "ord_d1_001".into())
        );
        assert_eq!(
            prefix_bounds("a\u{d7ff}"),
            ("a\u{d7ff}".into(), "a\u{e000}".into())
        );
        let (low, high) = prefix_bounds("ord_1");
        for inside in ["ord_1", "ord_1\u{10ffff}", "ord_10", "ord_1z"] {
            assert!(low.as_str() <= inside && inside < high.as_str(), "{inside}");
        }
        for outside in ["ord_0", "ord_2", "ord_"] {
            assert!(
                !(low.as_str() <= outside && outside < high.as_str()),
                "{outside}"
            );
        }
    }

    #[test]
    fn queries_are_normalised_like_terms() {
        assert_eq!(normalise_query(" Lea@Example.CH "), "lea@example.ch");
        assert_eq!(normalise_query(" cs_Test_AbC "), "cs_Test_AbC");
    }
}
