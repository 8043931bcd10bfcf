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

    let (store, _) = server::require(Role::Viewer).await?;
    let who = claimcheck_core::webhook::terms::normalise_query(&who);
    let found = claimcheck_core::search::customer(&store, &who, now_ms())
        .await
        .map_err(server::unavailable)?;
    if found.orders.is_empty() && found.claims.is_empty() {
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
    })
}
