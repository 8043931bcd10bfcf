//! Resolving a claim that can never succeed (a session for an order the shop deleted, a
//! test event in live mode) without re-driving it, and reopening it: by an admin, with a
//! reason, audited. A resolved claim stays in the history, out of alerts and re-drives.

use super::Actor;
use crate::audit::{AuditAction, AuditRecord, ReasonError};
use crate::claim::ClaimState;
use crate::clock::now_ms;
use crate::error::StoreError;
use crate::ids::EventId;
use crate::store::Store;

/// Why a claim was not resolved or reopened.
#[derive(Debug, thiserror::Error)]
pub enum ResolveRefused {
    #[error("no claim has event id {0}")]
    NotFound(String),
    /// Resolving takes a failed claim, reopening a resolved one; this one is in `state`
    /// (another operator may have acted first).
    #[error("the claim is {0}")]
    WrongState(ClaimState),
    #[error(transparent)]
    Reason(#[from] ReasonError),
    #[error("the database is unavailable")]
    Store(#[from] StoreError),
}

/// Resolves the failed claim `event_id`.
pub async fn resolve_claim(
    store: &Store,
    actor: &Actor,
    event_id: &EventId,
    reason: &str,
) -> Result<(), ResolveRefused> {
    let reason = crate::audit::reason(reason)?;
    let done = store
        .claims()
        .resolve(event_id, &actor.to_string(), reason, now_ms())
        .await?;
    settle(
        store,
        actor,
        event_id,
        reason,
        done,
        AuditAction::ClaimResolve,
    )
    .await
}

/// Makes the resolved claim `event_id` failed again, waiting for an operator.
pub async fn reopen_claim(
    store: &Store,
    actor: &Actor,
    event_id: &EventId,
    reason: &str,
) -> Result<(), ResolveRefused> {
    let reason = crate::audit::reason(reason)?;
    let done = store.claims().reopen(event_id).await?;
    settle(
        store,
        actor,
        event_id,
        reason,
        done,
        AuditAction::ClaimReopen,
    )
    .await
}

/// Audits what was done, or says why nothing was.
async fn settle(
    store: &Store,
    actor: &Actor,
    event_id: &EventId,
    reason: &str,
    done: bool,
    action: AuditAction,
) -> Result<(), ResolveRefused> {
    if !done {
        return Err(match store.claims().get(event_id, now_ms()).await? {
            None => ResolveRefused::NotFound(event_id.to_string()),
            Some(claim) => ResolveRefused::WrongState(claim.status),
        });
    }
    store
        .audit()
        .record(
            &AuditRecord {
                actor,
                action,
                target: event_id.as_str(),
                reason,
                outcome: "done",
            },
            now_ms(),
        )
        .await?;
    Ok(())
}
