//! Where the dashboard shows things: the one place a link is built and the one way a value
//! is encoded into it (path segment or query value alike), for the pages, the server's
//! redirects and the search. Ids may hold `/`, `?`, `#` or `%`: they are always encoded.

use claimcheck_core::alert::{AlertCondition, AlertDetail};

/// `text` percent-encoded for a path segment or a query value: RFC 3986's unreserved
/// characters and `@` stay (an e-mail reads as one), everything else is `%XX` per byte
/// (`+` too, which a form decoder would read as a space).
pub fn encode(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for byte in text.bytes() {
        match byte {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' | b'@' => {
                out.push(char::from(byte))
            }
            _ => out.push_str(&format!("%{byte:02X}")),
        }
    }
    out
}

/// `text` with its `%XX` escapes decoded ([`encode`]'s inverse); `None` when an escape is
/// broken or the bytes are not UTF-8.
pub fn decode(text: &str) -> Option<String> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = text.get(i + 1..i + 3)?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

/// An order's page.
pub fn order(order_id: &str) -> String {
    format!("/orders/{}", encode(order_id))
}

/// An order's refund page.
pub fn refund(order_id: &str) -> String {
    format!("{}/refund", order(order_id))
}

/// An event's (claim's) page.
pub fn event(event_id: &str) -> String {
    format!("/events/{}", encode(event_id))
}

/// The page that re-drives an event's claim.
pub fn redrive(event_id: &str) -> String {
    format!("{}/redrive", event(event_id))
}

/// A customer (by e-mail or Stripe customer id): what is waiting, their orders, balance
/// and credit history.
pub fn customer(who: &str) -> String {
    format!("/customers/{}", encode(who))
}

/// A subscription's page, by its Stripe id.
pub fn subscription(subscription_id: &str) -> String {
    format!("/subscriptions/{}", encode(subscription_id))
}

/// The grouped results of a search.
pub fn search(term: &str) -> String {
    format!("/search?q={}", encode(term))
}

/// A bulk re-drive batch's page.
pub fn batch(batch_id: &str) -> String {
    format!("/claims/redrive/{}", encode(batch_id))
}

/// The page that shows what an alert is about: for events a reconcile run recovered, exactly
/// those events.
pub fn alert(condition: AlertCondition, detail: Option<&AlertDetail>) -> String {
    match detail {
        Some(AlertDetail::ReconcileRecovered { run: Some(run), .. }) => {
            return format!("/events?run={run}");
        }
        Some(
            AlertDetail::ExpiredHolds {
                customer: Some(who),
                ..
            }
            | AlertDetail::CreditsOwed {
                customer: Some(who),
                ..
            },
        ) => return customer(who),
        Some(AlertDetail::NewerVersionWaiting {
            event_id: Some(id), ..
        }) => return event(id),
        Some(AlertDetail::PastDueSubscriptions {
            subscription: Some(id),
            ..
        }) => return subscription(id),
        _ => {}
    }
    match condition {
        AlertCondition::FailedClaims => "/claims?status=failed",
        AlertCondition::StaleClaims => "/claims?status=stale",
        AlertCondition::DeliveriesStopped => "/events",
        AlertCondition::SignatureFailures
        | AlertCondition::ReconcileFindings
        | AlertCondition::StorageFull
        | AlertCondition::ExpiredHolds
        | AlertCondition::CreditsOwed => "/",
        AlertCondition::NewerVersionWaiting => "/claims?status=pending",
        AlertCondition::PastDueSubscriptions => "/subscriptions?past_due=true",
        AlertCondition::IndeterminateRequests => "/requests?status=indeterminate",
    }
    .to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reconcile_alert_links_to_the_events_its_run_recovered() {
        let recovered = AlertDetail::ReconcileRecovered {
            at: 0,
            actor: "reconciler".into(),
            claimed: 3,
            run: Some(12),
        };
        let condition = AlertCondition::ReconcileFindings;
        assert_eq!(alert(condition, Some(&recovered)), "/events?run=12");
        // A failed run, or an alert from before runs had numbers: the overview.
        let older = AlertDetail::ReconcileRecovered {
            at: 0,
            actor: "reconciler".into(),
            claimed: 3,
            run: None,
        };
        assert_eq!(alert(condition, Some(&older)), "/");
        assert_eq!(
            alert(AlertCondition::FailedClaims, None),
            "/claims?status=failed"
        );
    }

    #[test]
    fn an_unpaid_renewal_alert_links_to_its_subscription() {
        let past_due = AlertDetail::PastDueSubscriptions {
            count: 2,
            after_secs: 3 * 86_400,
            subscription: Some("sub_1Pq".into()),
            customer: None,
        };
        assert_eq!(
            alert(AlertCondition::PastDueSubscriptions, Some(&past_due)),
            "/subscriptions/sub_1Pq"
        );
        assert_eq!(
            alert(AlertCondition::PastDueSubscriptions, None),
            "/subscriptions?past_due=true"
        );
    }

    #[test]
    fn a_credit_alert_links_to_the_customer_it_names() {
        let owed = AlertDetail::CreditsOwed {
            customers: 2,
            credits: 25,
            customer: Some("ada+1@example.ch".into()),
        };
        assert_eq!(
            alert(AlertCondition::CreditsOwed, Some(&owed)),
            "/customers/ada%2B1@example.ch"
        );
        let holds = AlertDetail::ExpiredHolds {
            count: 10,
            window_secs: 3600,
            customer: None,
        };
        assert_eq!(alert(AlertCondition::ExpiredHolds, Some(&holds)), "/");
    }

    #[test]
    fn values_are_encoded_one_way_everywhere() {
        assert_eq!(encode("a b+c@x"), "a%20b%2Bc@x");
        assert_eq!(encode("lea+shop@example.ch"), "lea%2Bshop@example.ch");
        assert_eq!(encode("Zürich"), "Z%C3%BCrich");
        assert_eq!(order("ord/1?x#y"), "/orders/ord%2F1%3Fx%23y");
        assert_eq!(customer("Lea@Example.ch"), "/customers/Lea@Example.ch");
        assert_eq!(redrive("evt_1"), "/events/evt_1/redrive");
        assert_eq!(refund("ord_1"), "/orders/ord_1/refund");
        for text in ["a b+c@x", "Zürich", "100%", "«x»; y=z"] {
            assert_eq!(decode(&encode(text)).as_deref(), Some(text));
        }
        assert_eq!(decode("%4"), None);
        assert_eq!(decode("%FF"), None);
    }
}
