//! The README speaks of the event types as the engine knows them: the webhook's action-key
//! table, the telemetry list and the types an endpoint subscribes to are held to `EventKind`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use claimcheck_core::EventKind;
use claimcheck_core::event_kind::{ActionStep, Role};

const README: &str = include_str!("../../README.md");

/// Why an acting type's action is named as it is; one arm per kind, so a new kind asks for
/// its line.
fn why(kind: EventKind) -> Option<&'static str> {
    match kind {
        EventKind::CheckoutSessionCompleted
        | EventKind::CheckoutSessionAsyncPaymentSucceeded
        | EventKind::CheckoutSessionAsyncPaymentFailed => Some("happens once per session"),
        EventKind::ChargeRefunded => Some(
            "sent once per refund, partial ones included, always on the same charge; twins of \
             one refund carry the same cumulative amount, the next refund a larger one",
        ),
        EventKind::RefundFailed => Some("a refund fails once"),
        EventKind::ChargeDisputeCreated | EventKind::ChargeDisputeClosed => {
            Some("once per dispute")
        }
        EventKind::InvoicePaid => {
            Some("an invoice is paid once; its twins and `invoice.payment_succeeded` grant nothing")
        }
        EventKind::InvoicePaymentFailed => Some("the first failure marks the period unpaid"),
        EventKind::CustomerSubscriptionCreated
        | EventKind::CustomerSubscriptionUpdated
        | EventKind::CustomerSubscriptionDeleted => Some(
            "each is a new state of one subscription; twins share the event's `created` and the \
             state it carries (two changes in one second do not), and a late older state never \
             overwrites a newer one",
        ),
        EventKind::SubscriptionScheduleCreated
        | EventKind::SubscriptionScheduleUpdated
        | EventKind::SubscriptionScheduleReleased
        | EventKind::SubscriptionScheduleCanceled
        | EventKind::SubscriptionScheduleCompleted
        | EventKind::SubscriptionScheduleAborted => Some(
            "each is a new state of one schedule (its status and phases); twins share the \
             event's `created` and that state, and a late older state never overwrites a newer \
             one",
        ),
        EventKind::PaymentIntentSucceeded
        | EventKind::ChargeSucceeded
        | EventKind::RefundCreated
        | EventKind::PaymentIntentPaymentFailed
        | EventKind::ChargeFailed
        | EventKind::InvoicePaymentSucceeded
        | EventKind::InvoiceCreated
        | EventKind::SubscriptionScheduleExpiring => None,
    }
}

/// The lines that follow `marker` in the README, up to the first blank line.
fn block_after(marker: &str) -> Vec<&'static str> {
    let start = README
        .find(marker)
        .unwrap_or_else(|| panic!("the README has no {marker}"));
    README[start..]
        .lines()
        .skip(1)
        .take_while(|line| !line.trim().is_empty())
        .collect()
}

fn code_list(kinds: impl Iterator<Item = EventKind>) -> Vec<String> {
    kinds.map(|kind| format!("`{kind}`")).collect()
}

#[test]
fn the_action_key_table_is_the_enums() {
    let mut expected = vec![
        "| event type | action key | why |".to_owned(),
        "|---|---|---|".to_owned(),
    ];
    for kind in EventKind::acting() {
        let object = match kind.object() {
            "checkout.session" => "session",
            other => other,
        };
        let key = match kind.action_step().unwrap() {
            ActionStep::OncePerObject => format!("`<type>:<{object} id>`"),
            ActionStep::AmountRefunded => format!("`<type>:<{object} id>:<amount_refunded>`"),
            ActionStep::EventCreated => {
                format!("`<type>:<{object} id>:<event created>:<state digest>`")
            }
        };
        expected.push(format!("| `{kind}` | {key} | {} |", why(kind).unwrap()));
    }
    let table = block_after("<!-- acting types: generated from EventKind");
    assert_eq!(table, expected, "README's action-key table");
}

#[test]
fn the_telemetry_list_is_the_enums() {
    let list = block_after("<!-- telemetry types: generated from EventKind").join(" ");
    let expected = code_list(
        EventKind::ALL
            .iter()
            .copied()
            .filter(|kind| kind.role() == Role::Telemetry),
    )
    .join(", ");
    assert!(list.starts_with(&format!("{expected}. ")), "{list}");
    for &kind in EventKind::ALL {
        assert_eq!(why(kind).is_some(), kind.is_acting(), "{kind}");
    }
}

#[test]
fn every_subscription_list_names_exactly_the_acting_types() {
    let acting = code_list(EventKind::acting());
    let (last, rest) = acting.split_last().unwrap();
    let expected = format!("{} and {last}", rest.join(", "));
    let flat = README.split_whitespace().collect::<Vec<_>>().join(" ");
    let lists: Vec<&str> = flat
        .match_indices("subscribe")
        .map(|(at, _)| &flat[at..])
        .filter(|text| text.contains("`checkout.session.completed`"))
        .collect();
    assert!(
        lists.len() >= 2,
        "the webhook section and the production steps"
    );
    for text in lists {
        assert!(text.contains(&expected), "{}", &text[..300.min(text.len())]);
    }
}
