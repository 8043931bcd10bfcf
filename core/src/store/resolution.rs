//! Setting a failed claim aside without re-driving it, and taking that back: two
//! compare-and-sets on the claim row, so two admins acting at once do it once.

use super::Claims;
use super::query::sql;
use crate::error::StoreError;
use crate::ids::EventId;

/// Only a failed claim that is not resolved yet ([`ClaimState::is_resolvable`]).
///
/// [`ClaimState::is_resolvable`]: crate::ClaimState::is_resolvable
const RESOLVE: &str = "\
    UPDATE processed_stripe_events SET resolved_at = $2, resolved_by = $3, resolution = $4 \
    WHERE event_id = $1 AND status = 'failed' AND resolved_at IS NULL";

/// Only a resolved claim: it is failed again, and waits for an operator as before.
const REOPEN: &str = "\
    UPDATE processed_stripe_events SET resolved_at = NULL, resolved_by = NULL, resolution = NULL \
    WHERE event_id = $1 AND status = 'failed' AND resolved_at IS NOT NULL";

impl Claims<'_> {
    /// Marks a failed claim resolved by `actor` for `reason`; `false` if it is not (or no
    /// longer) a failed, unresolved claim.
    pub async fn resolve(
        self,
        event_id: &EventId,
        actor: &str,
        reason: &str,
        now: i64,
    ) -> Result<bool, StoreError> {
        let done = self
            .pool
            .on()
            .execute(
                sql(RESOLVE)
                    .bind(event_id.as_str())
                    .bind(now)
                    .bind(actor)
                    .bind(reason),
            )
            .await?;
        Ok(done == 1)
    }

    /// Makes a resolved claim failed again; `false` if it is not resolved.
    pub async fn reopen(self, event_id: &EventId) -> Result<bool, StoreError> {
        let done = self
            .pool
            .on()
            .execute(sql(REOPEN).bind(event_id.as_str()))
            .await?;
        Ok(done == 1)
    }
}
