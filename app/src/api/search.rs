//! The header search's results page.

use super::*;

/// What the header search found, by kind.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SearchView {
    pub term: String,
    /// The customer (e-mail or customer id), their balance and how many orders they have.
    pub customer: Option<CustomerHit>,
    pub orders: Vec<OrderDetail>,
    pub events: Vec<ClaimRow>,
    /// Deliveries recorded without a claim under the term (event id or type).
    pub deliveries: Vec<UnclaimedRow>,
}

/// A delivery the webhook recorded without claiming it: a type this version ignores, or a
/// refused delivery.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct UnclaimedRow {
    pub event_id: Option<String>,
    pub event_type: Option<String>,
    pub outcome: claimcheck_core::DeliveryOutcome,
    pub detail: Option<String>,
    pub received_at: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CustomerHit {
    pub customer: String,
    pub balance: i64,
    pub orders: usize,
}

/// Everything the header search finds for `term`, grouped by kind (`/search/go` opens the
/// one match straight away; this is the list when there is not exactly one).
#[server(prefix = "/dashboard/fn", endpoint = "search")]
pub async fn global_search(term: String) -> Result<SearchView, ServerFnError> {
    use claimcheck_core::now_ms;
    use claimcheck_core::search::search;

    let (store, _) = server::require(Role::Viewer).await?;
    let found = search(&store, &term, now_ms())
        .await
        .map_err(server::unavailable)?;
    Ok(SearchView {
        term: found.term,
        customer: found.customer.map(|c| CustomerHit {
            customer: c.customer,
            balance: c.balance,
            orders: c.orders.len(),
        }),
        orders: found.orders.into_iter().map(server::order_detail).collect(),
        events: found.events.into_iter().map(server::claim_row).collect(),
        deliveries: found
            .deliveries
            .into_iter()
            .map(|d| UnclaimedRow {
                event_id: d.event_id,
                event_type: d.event_type,
                outcome: d.outcome,
                detail: d.detail,
                received_at: server::time(d.received_at),
            })
            .collect(),
    })
}
