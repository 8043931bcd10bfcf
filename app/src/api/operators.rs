//! The operators page (admins).

use super::*;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OperatorRow {
    pub username: String,
    pub role: Role,
    pub created_at: String,
    pub disabled: bool,
}

/// Operators (admins only).
#[server(prefix = "/dashboard/fn", endpoint = "operators")]
pub async fn list_operators() -> Result<Vec<OperatorRow>, ServerFnError> {
    let (store, _) = server::require(Role::Admin).await?;
    let operators = store
        .operators()
        .list()
        .await
        .map_err(server::unavailable)?;
    Ok(operators
        .into_iter()
        .map(|o| OperatorRow {
            username: o.username,
            role: o.role,
            created_at: server::time(o.created_at),
            disabled: o.disabled_at.is_some(),
        })
        .collect())
}
