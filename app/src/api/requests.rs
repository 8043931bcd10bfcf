//! Outgoing Stripe requests by status.

use super::*;

/// Outgoing Stripe requests in one status.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RequestsPage {
    pub status: RequestStatus,
    /// How many there are; `rows` holds the most recently updated of them.
    pub total: i64,
    pub rows: Vec<KeyRow>,
}

/// The outgoing Stripe requests in `status` (indeterminate when empty), the most recently
/// updated 200.
#[server(prefix = "/dashboard/fn", endpoint = "requests")]
pub async fn list_requests(status: String) -> Result<RequestsPage, ServerFnError> {
    let (store, _) = server::require(Role::Viewer).await?;
    let status = match status.trim() {
        "" => RequestStatus::Indeterminate,
        text => text.parse().map_err(|_| {
            server::bad_input(td_string!(server::locale(), messages.not_a_request_status))
        })?,
    };
    let (total, rows) = store
        .stripe_requests()
        .in_status(status, 200)
        .await
        .map_err(server::unavailable)?;
    Ok(RequestsPage {
        status,
        total,
        rows: rows.into_iter().map(server::key_row).collect(),
    })
}
