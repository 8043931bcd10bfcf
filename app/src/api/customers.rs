//! One customer: everything support staff need when someone calls with their e-mail.

use super::*;

/// A customer's page: their orders and balance, every claim whose payload names them (a
/// payment that never became an order is there too), and their credit history.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CustomerDetail {
    /// The e-mail (lowercased) or Stripe customer id.
    pub customer: String,
    pub balance: i64,
    pub orders: Vec<OrderDetail>,
    /// Claims that did not (yet) fulfil: pending, running, stale or failed, newest first.
    pub waiting: Vec<ClaimRow>,
    /// Every claim naming the customer, newest first.
    pub events: Vec<ClaimRow>,
    /// Every ledger entry of their orders, newest first.
    pub history: Vec<CustomerLedgerRow>,
    /// Their credits, when the customer is an e-mail: what is available, held, owed, the
    /// lots, and what support may change.
    pub credits: Option<CreditsDetail>,
    /// Spends, expiries and adjustments, newest first (at most [`MOVEMENTS_SHOWN`]).
    pub movements: Vec<MovementRow>,
    /// Their subscriptions (a plan's credits come from its paid invoices, each an order
    /// above), the latest first.
    pub subscriptions: Vec<super::SubscriptionRow>,
    /// Subscriptions the shop asked for whose Checkout Session is not paid yet.
    pub asked: Vec<super::AskedRow>,
}

/// Spends, expiries and adjustments a customer page shows at most.
pub const MOVEMENTS_SHOWN: i64 = 200;

/// The most credits a support operator may adjust at once (`CLAIMCHECK_SUPPORT_ADJUST_LIMIT`),
/// given to the pages as context.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AdjustLimit(pub i64);

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CreditsDetail {
    pub available: i64,
    pub held: i64,
    pub owed: i64,
    /// The next credits to expire and when.
    pub expiring: Option<(i64, String)>,
    pub lots: Vec<LotRow>,
    /// The adjustment form, for support (up to `limit`) and admins (`limit` `None`).
    pub adjust: Option<AdjustForm>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AdjustForm {
    pub limit: Option<i64>,
    /// The form's Idempotency-Key: sending the same form twice adjusts once.
    pub key: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LotRow {
    pub lot_id: String,
    pub order_id: Option<String>,
    pub credits: i64,
    pub remaining: i64,
    pub spent: i64,
    pub expires: Option<String>,
    pub expired: bool,
}

/// A change of the balance that is not an order's money.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MovementRow {
    /// spend, capture (a hold's spend), expire, adjust.
    pub kind: String,
    pub movement_id: String,
    pub delta: i64,
    pub hold_id: Option<String>,
    pub reference: Option<String>,
    pub lot_id: Option<String>,
    /// The order of the lot an expiry took from.
    pub order_id: Option<String>,
    pub actor: Option<String>,
    pub reason: Option<String>,
    pub idempotency_key: Option<String>,
    pub at: String,
    pub at_ms: i64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CustomerLedgerRow {
    pub order_id: String,
    pub entry: LedgerRow,
}

/// The customer `who` names (an e-mail, case-insensitively, or a `cus_…` id); 404 when no
/// order and no claim names them.
#[server(prefix = "/dashboard/fn", endpoint = "customer")]
pub async fn get_customer(who: String) -> Result<CustomerDetail, ServerFnError> {
    use claimcheck_core::{ClaimState, now_ms};

    let (store, operator) = server::require(Role::Viewer).await?;
    let who = claimcheck_core::webhook::terms::normalise_query(&who);
    let found = claimcheck_core::search::customer(&store, &who, now_ms())
        .await
        .map_err(server::unavailable)?;
    let (credits, movements) = match claimcheck_core::spending::customer_email(&who) {
        Ok(email) => credits_of(&store, &email, operator.role).await?,
        Err(_) => (None, Vec::new()),
    };
    let (subscriptions, asked) = match claimcheck_core::spending::customer_email(&who) {
        Ok(email) => super::subscriptions::of_customer(&store, &email).await?,
        Err(_) => (Vec::new(), Vec::new()),
    };
    let no_lots = credits.as_ref().is_none_or(|c| c.lots.is_empty());
    if found.orders.is_empty()
        && found.claims.is_empty()
        && no_lots
        && subscriptions.is_empty()
        && asked.is_empty()
    {
        return Err(server::not_found(td_string!(
            server::locale(),
            messages.no_customer,
            who
        )));
    }
    let orders: Vec<OrderDetail> = found.orders.into_iter().map(server::order_detail).collect();
    let mut history: Vec<CustomerLedgerRow> = orders
        .iter()
        .flat_map(|o| {
            o.ledger.iter().map(|entry| CustomerLedgerRow {
                order_id: o.order_id.clone(),
                entry: entry.clone(),
            })
        })
        .collect();
    history.sort_by_key(|row| std::cmp::Reverse(row.entry.at_ms));
    let events: Vec<ClaimRow> = found.claims.into_iter().map(server::claim_row).collect();
    Ok(CustomerDetail {
        customer: found.customer,
        balance: found.balance,
        waiting: events
            .iter()
            .filter(|c| c.status != ClaimState::Processed)
            .cloned()
            .collect(),
        events,
        orders,
        history,
        credits,
        movements,
        subscriptions,
        asked,
    })
}

/// `email`'s credits and the changes of them that are not an order's money.
#[cfg(feature = "ssr")]
async fn credits_of(
    store: &claimcheck_core::Store,
    email: &str,
    role: Role,
) -> Result<(Option<CreditsDetail>, Vec<MovementRow>), ServerFnError> {
    use claimcheck_core::now_ms;

    let packages = use_context::<std::sync::Arc<claimcheck_core::worker::WorkerConfig>>()
        .map(|w| w.packages.clone())
        .unwrap_or_default();
    let view = store
        .credits()
        .balance(email, &packages, now_ms())
        .await
        .map_err(server::unavailable)?;
    let page = store
        .credits()
        .ledger(email, None, MOVEMENTS_SHOWN)
        .await
        .map_err(server::unavailable)?;
    let movements = page
        .rows
        .into_iter()
        .filter_map(|r| {
            let movement_id = r.movement_id?;
            let kind = match (r.kind.as_str(), &r.hold_id) {
                ("spend", Some(_)) => "capture".to_owned(),
                (kind, _) => kind.to_owned(),
            };
            Some(MovementRow {
                kind,
                movement_id,
                delta: r.delta,
                hold_id: r.hold_id,
                reference: r.reference,
                lot_id: r.lot_id,
                order_id: r.order_id,
                actor: r.actor,
                reason: r.reason,
                idempotency_key: r.idempotency_key,
                at: server::time(r.created_at),
                at_ms: r.created_at,
            })
        })
        .collect();
    let limit = use_context::<AdjustLimit>().unwrap_or(AdjustLimit(0)).0;
    let adjust = match role {
        Role::Admin => Some(None),
        Role::Support if limit > 0 => Some(Some(limit)),
        _ => None,
    };
    let adjust = match adjust {
        Some(limit) => Some(AdjustForm {
            limit,
            key: claimcheck_core::token::random_id("adjust")
                .map_err(|e| server::error(e.to_string()))?,
        }),
        None => None,
    };
    let credits = CreditsDetail {
        available: view.available,
        held: view.held,
        owed: view.owed,
        expiring: view.expiring.map(|e| (e.credits, server::time(e.at))),
        lots: view
            .lots
            .into_iter()
            .map(|l| LotRow {
                spent: l.credits - l.remaining,
                lot_id: l.lot_id,
                order_id: l.order_id,
                credits: l.credits,
                remaining: l.remaining,
                expires: l.expires_at.map(server::time),
                expired: l.expired,
            })
            .collect(),
        adjust,
    };
    Ok((Some(credits), movements))
}
