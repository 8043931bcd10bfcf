//! The claims page: how many claims wait in each state, for its tabs.

use super::*;

/// Claims per state that is not done, for the claims page's tabs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WaitingCounts {
    pub counts: Vec<(ClaimState, i64)>,
}

#[server(prefix = "/dashboard/fn", endpoint = "claim_tabs")]
pub async fn claim_tabs() -> Result<WaitingCounts, ServerFnError> {
    use claimcheck_core::now_ms;

    let (store, _) = server::require(Role::Viewer).await?;
    let counts = store
        .claims()
        .waiting_counts(now_ms())
        .await
        .map_err(server::unavailable)?;
    Ok(WaitingCounts {
        counts: ClaimState::ALL
            .into_iter()
            .filter(|state| *state != ClaimState::Processed)
            .map(|state| (state, counts.get(state)))
            .collect(),
    })
}
