//! What the server functions share on the server: the signed-in operator and their role,
//! the reader's words, errors as the browser reads them, and the rows several pages show.

use claimcheck_core::auth::{AccessRefused, Role, SignedIn};
use claimcheck_core::money::LedgerKind;
use claimcheck_core::{ClaimView, OrderView, Store, StoreError, StripeRequestView};
use leptos::prelude::*;

use super::{ClaimRow, KeyRow, LedgerRow, OrderDetail};
use crate::i18n::{Locale, names, reader, td_string};

/// The language of the request being answered.
pub fn locale() -> Locale {
    reader().locale()
}

/// A server function's error in the reader's words.
pub fn error(text: impl std::fmt::Display) -> ServerFnError {
    ServerFnError::new(text.to_string())
}

fn status(code: http::StatusCode) {
    if let Some(response) = use_context::<leptos_axum::ResponseOptions>() {
        response.set_status(code);
    }
}

/// The store and the operator, if signed in with at least `needed`; otherwise an error
/// (401 or 403) that says what to do.
pub async fn require(needed: Role) -> Result<(Store, SignedIn), ServerFnError> {
    let parts: http::request::Parts = leptos_axum::extract().await?;
    let store = use_context::<Store>()
        .ok_or_else(|| error(td_string!(locale(), messages.not_connected_db)))?;
    match claimcheck_core::auth::require(parts.extensions.get::<SignedIn>(), needed) {
        Ok(operator) => Ok((store, operator.clone())),
        Err(AccessRefused::SignIn) => {
            status(http::StatusCode::UNAUTHORIZED);
            Err(error(td_string!(locale(), messages.sign_in)))
        }
        Err(AccessRefused::Role { needed, have }) => {
            status(http::StatusCode::FORBIDDEN);
            let locale = locale();
            let (needed, role) = (names::role(locale, needed), names::role(locale, have));
            Err(error(td_string!(locale, messages.needs_role, needed, role)))
        }
    }
}

pub fn unavailable(cause: StoreError) -> ServerFnError {
    tracing::error!(
        error = &cause as &dyn std::error::Error,
        "dashboard: storage"
    );
    status(http::StatusCode::SERVICE_UNAVAILABLE);
    error(td_string!(locale(), messages.db_unavailable))
}

/// Input that cannot be read: 400, with what was wrong.
pub fn bad_input(what: impl std::fmt::Display) -> ServerFnError {
    status(http::StatusCode::BAD_REQUEST);
    error(what)
}

/// A claim state from a filter: pending, running, stale, processed or failed.
pub fn claim_state(text: &str) -> Result<claimcheck_core::ClaimState, ServerFnError> {
    text.parse()
        .map_err(|_| bad_input(td_string!(locale(), messages.not_a_claim_state, text)))
}

pub fn not_found(what: String) -> ServerFnError {
    status(http::StatusCode::NOT_FOUND);
    ServerFnError::new(what)
}

/// A date (YYYY-MM-DD, in the reader's time zone) as unix ms: its first instant, or with
/// `end` the first instant of the next day; empty is no bound.
pub fn day(s: &str, end: bool) -> Result<Option<i64>, ServerFnError> {
    reader()
        .day_bound(s, end)
        .map_err(|_| bad_input(td_string!(locale(), messages.not_a_date, s)))
}

/// A moment in the reader's time zone and words.
pub fn time(ms: i64) -> String {
    reader().time(ms)
}

pub fn claim_row(c: ClaimView) -> ClaimRow {
    let reader = reader();
    ClaimRow {
        for_a_newer_version: c.waits_for_a_newer_version(),
        age: reader.age(c.received_at),
        received_at: reader.time(c.received_at),
        received_ms: c.received_at,
        event_id: c.event_id,
        event_type: c.event_type,
        object_id: c.object_id,
        status: c.status,
        attempts: c.attempts,
        last_error: c.last_error,
        source: c.source,
        // Only a claim waiting out its backoff has a next attempt worth naming.
        next_attempt: (c.status == claimcheck_core::ClaimState::Pending && c.attempts > 0)
            .then(|| reader.time(c.next_attempt_at)),
        resolved_by: c.resolved_by,
        resolution: c.resolution,
        customer: None,
        order_id: None,
        amount: None,
    }
}

/// `rows` with whose each claim is and what was paid, as their payloads say.
pub async fn with_summaries(
    store: &Store,
    mut rows: Vec<ClaimRow>,
) -> Result<Vec<ClaimRow>, StoreError> {
    let ids: Vec<String> = rows.iter().map(|r| r.event_id.clone()).collect();
    let mut summaries = store.claims().summaries(&ids).await?;
    let reader = reader();
    for row in &mut rows {
        if let Some(summary) = summaries.remove(&row.event_id) {
            row.amount = summary
                .amount
                .map(|amount| reader.money(amount, summary.currency.as_deref().unwrap_or("chf")));
            row.customer = summary.customer_email;
            row.order_id = summary.order_id;
        }
    }
    Ok(rows)
}

pub fn key_row(r: StripeRequestView) -> KeyRow {
    KeyRow {
        idempotency_key: r.idempotency_key,
        operation: r.operation,
        order_id: r.order_id,
        status: r.status,
        http_status: r.http_status,
        attempts: r.attempts,
        object_id: r.object_id,
        error: r.error,
        at: time(r.updated_at),
    }
}

pub fn order_line(o: claimcheck_core::OrderLine) -> super::OrderListRow {
    let reader = reader();
    let currency = o.currency.clone().unwrap_or_else(|| "chf".into());
    super::OrderListRow {
        amount: o.amount.map(|a| reader.money(a, &currency)),
        created_at: reader.time(o.created_at),
        order_id: o.order_id,
        status: o.status,
        package: o.package,
        customer_email: o.customer_email,
        credits: o.credits,
        credits_granted: o.credits_granted,
    }
}

/// The order the reader asked for by its id (as typed, trimmed); a 404 in their words when
/// the id cannot be one or no such order exists.
pub async fn order(store: &Store, order_id: &str) -> Result<OrderView, ServerFnError> {
    let id =
        claimcheck_core::OrderId::parse(order_id.trim()).map_err(|e| not_found(e.to_string()))?;
    store
        .orders()
        .get(&id)
        .await
        .map_err(unavailable)?
        .ok_or_else(|| not_found(td_string!(locale(), messages.no_order, id = id.clone())))
}

pub fn order_detail(o: OrderView) -> OrderDetail {
    let reader = reader();
    let locale = reader.locale();
    let currency = o.currency.clone().unwrap_or_else(|| "chf".into());
    let money = |minor: i64| reader.money(minor, &currency);
    let refundable = o.refundable().ok().filter(|left| *left > 0).map(money);
    // Revokes and restores carry the refunded total after them; each step's own money is
    // the difference to the one before.
    let mut refunded_before = 0;
    let ledger = o
        .ledger
        .into_iter()
        .map(|e| {
            let words = match (e.kind, e.amount) {
                (LedgerKind::Unlock, _) => o
                    .amount
                    .map(|a| td_string!(locale, messages.ledger_paid, amount = money(a))),
                (LedgerKind::Revoke, Some(total)) => {
                    let step = money(total - refunded_before);
                    refunded_before = total;
                    let total = money(total);
                    Some(td_string!(locale, messages.ledger_refund, step, total))
                }
                (LedgerKind::Restore, Some(total)) => {
                    let step = money(refunded_before - total);
                    refunded_before = total;
                    let total = money(total);
                    Some(td_string!(
                        locale,
                        messages.ledger_refund_failed,
                        step,
                        total
                    ))
                }
                (LedgerKind::DisputeHold, Some(a)) => Some(td_string!(
                    locale,
                    messages.ledger_dispute,
                    amount = money(a)
                )),
                (LedgerKind::DisputeRelease, _) => {
                    Some(td_string!(locale, messages.ledger_dispute_won).to_string())
                }
                _ => None,
            };
            LedgerRow {
                kind: e.kind,
                delta: e.delta,
                money: words.unwrap_or_default(),
                source_is_event: e.event_id.is_some(),
                source: e.event_id.or(e.idempotency_key).unwrap_or_default(),
                at: reader.time(e.created_at),
                at_ms: e.created_at,
            }
        })
        .collect();
    OrderDetail {
        paid: o.amount.map(money),
        refunded: (o.amount_refunded > 0).then(|| money(o.amount_refunded)),
        refundable,
        dispute: o
            .dispute_status
            .as_deref()
            .and_then(claimcheck_core::money::DisputeStatus::parse),
        ledger,
        requests: o.stripe_requests.into_iter().map(key_row).collect(),
        created_at: reader.time(o.created_at),
        order_id: o.order_id,
        status: o.status,
        payment_status: o.payment_status,
        package: o.package,
        customer_email: o.customer_email,
        credits: o.credits,
        credits_granted: o.credits_granted,
        payment_intent_id: o.payment_intent_id,
        checkout_session_id: o.checkout_session_id,
        history: None,
    }
}
