//! No event lost across versions. A delivery of a type a version does not act on is answered
//! 200 and recorded `ignored` with its payload, and Stripe never sends it again; a version
//! that acts on the type adopts those of the last [`ADOPT_WITHIN`] at start-up and in each
//! reconcile run: each is claimed once, under the same event-id and action-key rules as a
//! delivery (a twin of an action already claimed stays a twin), and marked adopted. Instances
//! starting together adopt each once (the claim's insert decides).

use std::time::Duration;

use crate::error::StoreError;
use crate::store::{ClaimOutcome, ClaimSource, Store, WriteOp, WriteResult};
use crate::webhook::Envelope;

/// How far back ignored deliveries are adopted, and how long their payloads are kept.
pub const ADOPT_WITHIN: Duration = Duration::from_secs(30 * 86_400);

/// Ignored deliveries looked at per round.
const BATCH: i64 = 200;

/// What one adoption run did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Adopted {
    /// New claims.
    pub claimed: u64,
    /// Twins of an action already claimed.
    pub twins: u64,
    /// Already claimed (a redelivery, a reconcile run, or another instance came first), or
    /// not an event this version can act on after all.
    pub already: u64,
}

fn ms(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX / 2)
}

/// Adopts the deliveries recorded as ignored within [`ADOPT_WITHIN`] before `now` whose type
/// this version acts on.
pub async fn adopt_ignored(store: &Store, now: i64) -> Result<Adopted, StoreError> {
    let since = now - ms(ADOPT_WITHIN);
    let mut done = Adopted::default();
    loop {
        let batch = store.claims().ignored_to_adopt(since, BATCH).await?;
        if batch.is_empty() {
            return Ok(done);
        }
        for ignored in batch {
            let claim = Envelope::parse(ignored.payload.as_bytes())
                .ok()
                .and_then(|envelope| {
                    let object_id = envelope.object_id.clone()?;
                    let action_key = envelope.action_key.clone()?;
                    Some(WriteOp::Claim {
                        envelope,
                        object_id,
                        action_key,
                        payload: ignored.payload.clone(),
                        // When Stripe delivered it: the claim is due at once.
                        received_at: ignored.received_at,
                        // Stripe delivered it to the webhook; the delivery row says adopted.
                        source: ClaimSource::Webhook,
                    })
                });
            let outcome = match &claim {
                Some(op) => store.claims().apply_writes(&[op]).await?.pop(),
                None => None,
            };
            match outcome {
                Some(WriteResult::Claim(ClaimOutcome::Claimed)) => done.claimed += 1,
                Some(WriteResult::Claim(ClaimOutcome::DuplicateAction { .. })) => done.twins += 1,
                _ => done.already += 1,
            }
            store.claims().mark_adopted(ignored.id, now).await?;
        }
    }
}
