//! Subscriptions: the list support filters (status, plan, unpaid), and one subscription with
//! each period's grants and the invoices that paid them.

use super::*;

/// A subscription as its Billing events left it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SubscriptionRow {
    pub subscription_id: String,
    pub subscription_ref: Option<String>,
    pub customer: Option<String>,
    pub plan: Option<String>,
    /// Stripe's status (`active`, `past_due`…); `None` before a status event came.
    pub status: Option<String>,
    pub period_end: Option<String>,
    pub cancel_at_period_end: bool,
    /// A change of plan billed from the next renewal on: the plan, and from when; `plan` is
    /// the one in force until then.
    pub scheduled_plan: Option<String>,
    pub scheduled_at: Option<String>,
    /// The next renewal bills a price no plan has (formatted, `CHF 59.00`), from when: its
    /// invoice will grant nothing until such a plan is configured.
    pub unplanned_price: Option<String>,
    pub unplanned_at: Option<String>,
    /// The invoice whose payment failed and is not paid yet, and since when.
    pub unpaid_invoice: Option<String>,
    pub unpaid_since: Option<String>,
    pub credits_granted: i64,
    pub updated_at: String,
}

/// What one paid invoice granted one period.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GrantRow {
    pub period_start: String,
    pub period_end: String,
    /// `period` or `proration`.
    pub step: String,
    pub invoice_id: String,
    pub plan: String,
    pub from_plan: Option<String>,
    pub entitled: i64,
    pub credits: i64,
    /// What refunds and disputes took back from the invoice (≤ 0).
    pub revoked: i64,
    pub granted_at: String,
}

/// What the order API recorded when the shop asked for a subscription
/// (`POST /api/subscriptions`): the plan at its price, and the Checkout Session it opened.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AskedRow {
    pub subscription_ref: String,
    pub plan: String,
    pub customer: String,
    pub credits: i64,
    /// The price per interval, formatted (`CHF 39.00`).
    pub price: String,
    pub interval: String,
    pub checkout_session_id: Option<String>,
    pub checkout_url: Option<String>,
    pub checkout_expires_at: Option<String>,
    /// Its session's time is past (Stripe replaces nothing: the next ask opens a new one).
    pub checkout_expired: bool,
    /// 1 for the first session; each expired one moves to the next.
    pub checkout_generation: i64,
    pub asked_at: String,
}

/// A subscription Stripe told of (its status, grants), what the order API asked for it, or
/// both; at least one is there.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SubscriptionDetail {
    /// `None` while its Checkout Session is not paid: only the order API's ask is known.
    pub subscription: Option<SubscriptionRow>,
    pub asked: Option<AskedRow>,
    pub grants: Vec<GrantRow>,
    /// What Claimcheck asked Stripe for it (its Checkout Session, its cancellation), under
    /// which Idempotency-Keys.
    pub requests: Vec<super::KeyRow>,
}

/// The statuses a subscription can have, for the list's filter.
pub const SUBSCRIPTION_STATUSES: [&str; 8] = [
    "active",
    "past_due",
    "unpaid",
    "canceled",
    "trialing",
    "incomplete",
    "incomplete_expired",
    "paused",
];

/// Subscriptions shown at most.
pub const SUBSCRIPTIONS_SHOWN: i64 = 200;

#[cfg(feature = "ssr")]
fn subscription_row(s: claimcheck_core::SubscriptionView) -> SubscriptionRow {
    let seconds = |at: i64| server::time(at.saturating_mul(1000));
    SubscriptionRow {
        customer: s.customer_email.or(s.customer_id),
        period_end: s.current_period_end.map(seconds),
        cancel_at_period_end: s.cancel_at_period_end != 0,
        scheduled_plan: s.scheduled_change.as_ref().map(|c| c.to.clone()),
        scheduled_at: s.scheduled_change.as_ref().map(|c| seconds(c.at)),
        unplanned_price: s
            .unplanned_renewal
            .as_ref()
            .map(|u| crate::i18n::reader().money(u.amount, &u.currency)),
        unplanned_at: s.unplanned_renewal.as_ref().map(|u| seconds(u.at)),
        unpaid_since: s.unpaid_since.map(seconds),
        updated_at: server::time(s.updated_at),
        subscription_id: s.subscription_id,
        subscription_ref: s.subscription_ref,
        plan: s.plan,
        status: s.status,
        unpaid_invoice: s.unpaid_invoice,
        credits_granted: s.credits_granted,
    }
}

/// Subscriptions in `status` and of `plan` (all when empty), only the unpaid ones with
/// `past_due`; the most recently changed first.
#[server(prefix = "/dashboard/fn", endpoint = "subscriptions")]
pub async fn list_subscriptions(
    status: String,
    plan: String,
    past_due: bool,
) -> Result<Vec<SubscriptionRow>, ServerFnError> {
    let (store, _) = server::require(Role::Viewer).await?;
    let status = status.trim();
    if !status.is_empty() && !SUBSCRIPTION_STATUSES.contains(&status) {
        return Err(server::bad_input(td_string!(
            server::locale(),
            messages.not_a_subscription_status,
            status
        )));
    }
    let filter = claimcheck_core::SubscriptionFilter {
        status: Some(status.to_owned()).filter(|s| !s.is_empty()),
        plan: Some(plan.trim().to_owned()).filter(|p| !p.is_empty()),
        past_due,
        limit: SUBSCRIPTIONS_SHOWN,
    };
    let rows = store
        .subscriptions()
        .list(&filter)
        .await
        .map_err(server::unavailable)?;
    Ok(rows.into_iter().map(subscription_row).collect())
}

#[cfg(feature = "ssr")]
fn asked_row(a: claimcheck_core::SubscriptionCheckoutView) -> AskedRow {
    let reader = crate::i18n::reader();
    AskedRow {
        price: reader.money(a.amount, &a.currency),
        checkout_expires_at: a.checkout_expires_at.map(|at| reader.time(at)),
        checkout_expired: a
            .checkout_expires_at
            .is_some_and(|at| at < claimcheck_core::now_ms()),
        asked_at: reader.time(a.created_at),
        subscription_ref: a.subscription_ref,
        plan: a.plan,
        customer: a.customer_email,
        credits: a.credits,
        interval: a.billing_interval,
        checkout_session_id: a.checkout_session_id,
        checkout_url: a.checkout_url,
        checkout_generation: a.checkout_generation,
    }
}

/// The subscriptions of `email` and what was asked for them that has not started.
#[cfg(feature = "ssr")]
pub(super) async fn of_customer(
    store: &claimcheck_core::Store,
    email: &str,
) -> Result<(Vec<SubscriptionRow>, Vec<AskedRow>), ServerFnError> {
    let subscriptions = store.subscriptions();
    let started = subscriptions
        .of_customer(email)
        .await
        .map_err(server::unavailable)?;
    let asked = subscriptions
        .asked_by(email)
        .await
        .map_err(server::unavailable)?;
    Ok((
        started.into_iter().map(subscription_row).collect(),
        asked.into_iter().map(asked_row).collect(),
    ))
}

/// One subscription by its Stripe id or the shop's reference, with its grants; a reference
/// the order API was asked for but whose Checkout Session is not paid yet shows that ask.
#[server(prefix = "/dashboard/fn", endpoint = "subscription")]
pub async fn get_subscription(id: String) -> Result<SubscriptionDetail, ServerFnError> {
    let (store, _) = server::require(Role::Viewer).await?;
    let id = id.trim();
    let subscriptions = store.subscriptions();
    let found = subscriptions.get(id).await.map_err(server::unavailable)?;
    let reference = match &found {
        Some(found) => found.subscription_ref.clone(),
        None => Some(id.to_owned()),
    };
    let reference = reference.and_then(|r| claimcheck_core::SubscriptionRef::parse(r).ok());
    let asked = match &reference {
        Some(reference) => subscriptions
            .checkout(reference)
            .await
            .map_err(server::unavailable)?,
        None => None,
    };
    if found.is_none() && asked.is_none() {
        return Err(server::not_found(td_string!(
            server::locale(),
            messages.no_subscription,
            id
        )));
    }
    let grants = match &found {
        Some(found) => subscriptions
            .grants(&found.subscription_id)
            .await
            .map_err(server::unavailable)?,
        None => Vec::new(),
    };
    // Its requests are recorded under the reference as the order API took it.
    let recorded = found
        .as_ref()
        .and_then(|f| f.subscription_ref.clone())
        .or_else(|| reference.as_ref().map(|r| r.to_string()));
    let requests = match &recorded {
        Some(reference) => store
            .stripe_requests()
            .for_subscription(reference)
            .await
            .map_err(server::unavailable)?,
        None => Vec::new(),
    };
    let seconds = |at: i64| server::time(at.saturating_mul(1000));
    Ok(SubscriptionDetail {
        requests: requests.into_iter().map(server::key_row).collect(),
        subscription: found.map(subscription_row),
        asked: asked.map(asked_row),
        grants: grants
            .into_iter()
            .map(|g| GrantRow {
                period_start: seconds(g.period_start),
                period_end: seconds(g.period_end),
                step: g.step,
                invoice_id: g.invoice_id,
                plan: g.plan,
                from_plan: g.from_plan,
                entitled: g.entitled,
                credits: g.credits,
                revoked: g.revoked,
                granted_at: server::time(g.created_at),
            })
            .collect(),
    })
}
