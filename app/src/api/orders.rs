//! Orders: the search by customer or id, one order's page with its ledger and Idempotency-Keys.

use super::*;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LedgerRow {
    pub kind: LedgerKind,
    pub delta: i64,
    /// The money behind the step, in words (`refund of CHF 24.50`).
    pub money: String,
    /// The event (or, for a refund Claimcheck made, the request) behind the entry.
    pub source: String,
    pub source_is_event: bool,
    pub at: String,
    pub at_ms: i64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct KeyRow {
    pub idempotency_key: String,
    pub operation: String,
    pub order_id: String,
    pub status: RequestStatus,
    pub http_status: Option<i64>,
    pub attempts: i64,
    pub object_id: Option<String>,
    pub error: Option<String>,
    pub at: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OrderDetail {
    pub order_id: String,
    pub status: OrderStatus,
    pub payment_status: String,
    pub package: Option<String>,
    pub customer_email: Option<String>,
    pub credits: i64,
    pub credits_granted: i64,
    pub payment_intent_id: Option<String>,
    pub checkout_session_id: Option<String>,
    pub created_at: String,
    /// What was paid, formatted (`CHF 49.00`), when known.
    pub paid: Option<String>,
    /// Refunded and not failed, formatted.
    pub refunded: Option<String>,
    /// What an admin may still refund, formatted; `None` when nothing can be refunded.
    pub refundable: Option<String>,
    /// The dispute, when there is one: open, won or lost.
    pub dispute: Option<claimcheck_core::money::DisputeStatus>,
    pub ledger: Vec<LedgerRow>,
    pub requests: Vec<KeyRow>,
    /// What one order's page shows besides (empty in lists): when Stripe says it was paid,
    /// why its payment failed, its timeline, and where it is in Stripe's dashboard.
    pub history: Option<OrderHistoryView>,
}

/// One order's history, for its page.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OrderHistoryView {
    /// When the payment was made, as Stripe dates the event that unlocked the order.
    pub paid_at: Option<String>,
    /// Stripe's reason for the latest failed payment.
    pub failure: Option<String>,
    pub timeline: Vec<TimelineItem>,
    /// The payment and the customer in Stripe's dashboard (test or live, as the events
    /// say), when known.
    pub stripe_payment: Option<String>,
    pub stripe_customer: Option<String>,
    /// How much of the credits it unlocked were spent (or expired), once its customer's
    /// credits were first read or moved.
    pub lot: Option<LotRow>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OrderSearch {
    pub orders: Vec<OrderDetail>,
    /// The balance of the customer, when the term was an email with orders.
    pub balance: Option<i64>,
}

/// Orders by id, customer email or id, session or payment intent.
#[server(prefix = "/dashboard/fn", endpoint = "orders")]
pub async fn search_orders(term: String) -> Result<OrderSearch, ServerFnError> {
    let (store, _) = server::require(Role::Viewer).await?;
    let term = term.trim().to_owned();
    if term.is_empty() {
        return Ok(OrderSearch {
            orders: Vec::new(),
            balance: None,
        });
    }
    let orders: Vec<OrderDetail> = store
        .orders()
        .find(&term, 100)
        .await
        .map_err(server::unavailable)?
        .into_iter()
        .map(server::order_detail)
        .collect();
    let balance = (term.contains('@') && !orders.is_empty())
        .then(|| orders.iter().map(|o| o.credits_granted).sum());
    Ok(OrderSearch { orders, balance })
}

#[server(prefix = "/dashboard/fn", endpoint = "order")]
pub async fn get_order(order_id: String) -> Result<OrderDetail, ServerFnError> {
    use claimcheck_core::now_ms;

    let (store, _) = server::require(Role::Viewer).await?;
    let order = server::order(&store, &order_id).await?;
    let history = store
        .orders()
        .history(&order, now_ms())
        .await
        .map_err(server::unavailable)?;
    let mut detail = server::order_detail(order.clone());
    let timeline = order_timeline(&store, &order, &history, &detail.ledger)
        .await
        .map_err(server::unavailable)?;
    // Test or live, as the order's events say; nothing to link to without one.
    let dashboard = history.claims.first().map(|claim| {
        if claim.livemode {
            "https://dashboard.stripe.com"
        } else {
            "https://dashboard.stripe.com/test"
        }
    });
    let lot = store
        .credits()
        .lot_of_order(&order.order_id, now_ms())
        .await
        .map_err(server::unavailable)?
        .map(|l| LotRow {
            spent: l.credits - l.remaining,
            lot_id: l.lot_id,
            order_id: l.order_id,
            credits: l.credits,
            remaining: l.remaining,
            expires: l.expires_at.map(server::time),
            expired: l.expired,
        });
    let reader = crate::i18n::reader();
    detail.history = Some(OrderHistoryView {
        lot,
        paid_at: history.paid_at.map(|at| reader.time(at)),
        failure: history.failure.clone(),
        timeline,
        stripe_payment: dashboard
            .zip(order.payment_intent_id.as_deref())
            .map(|(base, intent)| format!("{base}/payments/{}", crate::links::encode(intent))),
        stripe_customer: dashboard
            .zip(order.customer_id.as_deref())
            .map(|(base, customer)| format!("{base}/customers/{}", crate::links::encode(customer))),
    });
    Ok(detail)
}

/// One line of the orders list.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OrderListRow {
    pub order_id: String,
    pub status: OrderStatus,
    pub package: Option<String>,
    pub customer_email: Option<String>,
    pub credits: i64,
    pub credits_granted: i64,
    /// What was charged, formatted (`CHF 49.00`), when known.
    pub amount: Option<String>,
    pub created_at: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OrdersList {
    pub rows: Vec<OrderListRow>,
    /// The cursor of the next page (`created_ms:order_id`), if there is one.
    pub next: Option<String>,
}

/// Orders in a list page, and in the CSV export.
pub const ORDERS_PAGE: i64 = 50;

/// An order status from a filter, by its stored name.
#[cfg(feature = "ssr")]
pub fn order_status_filter(text: &str) -> Result<Option<OrderStatus>, String> {
    let text = text.trim();
    if text.is_empty() {
        return Ok(None);
    }
    text.parse().map(Some)
}

/// Recent orders first, narrowed by status, package and the days they were created on (in
/// the reader's zone), a page at a time.
#[server(prefix = "/dashboard/fn", endpoint = "orders_list")]
pub async fn list_orders(
    status: String,
    package: String,
    from: String,
    to: String,
    after: String,
) -> Result<OrdersList, ServerFnError> {
    use claimcheck_core::OrderFilter;

    let (store, _) = server::require(Role::Viewer).await?;
    let status = order_status_filter(&status).map_err(|_| {
        server::bad_input(td_string!(
            server::locale(),
            messages.not_an_order_status,
            status
        ))
    })?;
    let filter = OrderFilter {
        status,
        package: Some(package.trim().to_owned()).filter(|p| !p.is_empty()),
        from: server::day(&from, false)?,
        to: server::day(&to, true)?,
    };
    let after = after
        .split_once(':')
        .and_then(|(at, id)| Some((at.parse::<i64>().ok()?, id.to_owned())));
    let mut lines = store
        .orders()
        .list(&filter, after, ORDERS_PAGE + 1)
        .await
        .map_err(server::unavailable)?;
    let more = lines.len() as i64 > ORDERS_PAGE;
    lines.truncate(ORDERS_PAGE as usize);
    let next = more
        .then(|| {
            lines
                .last()
                .map(|o| format!("{}:{}", o.created_at, o.order_id))
        })
        .flatten();
    Ok(OrdersList {
        rows: lines.into_iter().map(server::order_line).collect(),
        next,
    })
}
