//! The audit log.

use super::*;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AuditRow {
    pub id: i64,
    pub at: String,
    pub actor: String,
    pub action: String,
    pub target: String,
    pub reason: String,
    pub outcome: String,
}

/// The audit log, newest first, 100 per page before the entry id `before`.
#[server(prefix = "/dashboard/fn", endpoint = "audit")]
pub async fn get_audit(before: Option<i64>) -> Result<Vec<AuditRow>, ServerFnError> {
    let (store, _) = server::require(Role::Viewer).await?;
    let entries = store
        .audit()
        .newest(before, 100)
        .await
        .map_err(server::unavailable)?;
    Ok(entries
        .into_iter()
        .map(|a| AuditRow {
            id: a.id,
            at: server::time(a.at),
            actor: a.actor,
            action: a.action,
            target: a.target,
            reason: a.reason,
            outcome: a.outcome,
        })
        .collect())
}
