//! Writing deliveries and claims: the one transaction the webhook answers after.

use super::{BeginWrite, Pool, Store};
use crate::error::StoreError;
use crate::ids::{EventId, ObjectId};
use crate::webhook::{DeliveryOutcome, Envelope};

/// How many delivery rows one event id may accumulate. Stripe retries a handful of times;
/// past this, a replayed delivery is still answered but no longer logged row by row.
pub const DELIVERIES_KEPT_PER_EVENT: i64 = 20;

/// What the claim insert found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ClaimOutcome {
    Claimed,
    DuplicateEvent,
    DuplicateAction { original: EventId },
}

/// One row of the delivery log.
#[derive(Debug, Clone)]
pub struct DeliveryRow<'a> {
    event_id: Option<&'a str>,
    event_type: Option<&'a str>,
    object_id: Option<&'a str>,
    outcome: DeliveryOutcome,
    duplicate_of: Option<&'a str>,
    detail: Option<&'a str>,
    received_at: i64,
}

impl<'a> DeliveryRow<'a> {
    pub fn new(
        envelope: Option<&'a Envelope>,
        outcome: DeliveryOutcome,
        detail: Option<&'a str>,
        received_at: i64,
    ) -> DeliveryRow<'a> {
        DeliveryRow {
            event_id: envelope.map(|e| e.id.as_str()),
            event_type: envelope.map(|e| e.event_type.as_str()),
            object_id: envelope
                .and_then(|e| e.object_id.as_ref())
                .map(ObjectId::as_str),
            outcome,
            duplicate_of: None,
            detail,
            received_at,
        }
    }
}

const INSERT_CLAIM: &str = "\
    INSERT INTO processed_stripe_events \
        (event_id, event_type, object_id, status, attempts, next_attempt_at, \
         stripe_created, livemode, received_at, payload) \
    VALUES ($1, $2, $3, 'processing', 0, $4, $5, $6, $4, $7) \
    ON CONFLICT DO NOTHING";

/// Counts a repeated delivery on its claim. The row lock it takes on PostgreSQL also
/// serialises concurrent duplicates of one event, so the delivery-log cap below is exact.
const COUNT_REPEAT: &str = "\
    UPDATE processed_stripe_events SET deliveries = deliveries + 1 \
    WHERE event_id = $1 RETURNING deliveries";

const FIND_ACTION: &str = "\
    SELECT event_id FROM processed_stripe_events WHERE object_id = $1 AND event_type = $2";

const COUNT_DELIVERIES: &str = "SELECT COUNT(*) FROM webhook_deliveries WHERE event_id = $1";

const INSERT_DELIVERY: &str = "\
    INSERT INTO webhook_deliveries \
        (event_id, event_type, object_id, outcome, duplicate_of, detail, received_at) \
    VALUES ($1, $2, $3, $4, $5, $6, $7)";

/// Inserts a delivery row. With `counted`, first checks that its event id does not already
/// have its share of rows (callers that know the count already pass `false`).
macro_rules! insert_delivery {
    ($tx:expr, $row:expr, counted: $counted:expr) => {{
        let row: &DeliveryRow<'_> = $row;
        let kept: i64 = match row.event_id {
            Some(id) if $counted => {
                sqlx::query_scalar(COUNT_DELIVERIES)
                    .bind(id)
                    .fetch_one(&mut *$tx)
                    .await?
            }
            _ => 0,
        };
        if kept < DELIVERIES_KEPT_PER_EVENT {
            sqlx::query(INSERT_DELIVERY)
                .bind(row.event_id)
                .bind(row.event_type)
                .bind(row.object_id)
                .bind(row.outcome.as_str())
                .bind(row.duplicate_of)
                .bind(row.detail)
                .bind(row.received_at)
                .execute(&mut *$tx)
                .await?;
        }
    }};
}

impl Store {
    /// Claims `envelope` and logs the delivery in one transaction. A unique violation on the
    /// event id or on (object id, event type) is a duplicate, never an error.
    pub async fn claim_event(
        &self,
        envelope: &Envelope,
        object_id: &ObjectId,
        payload: &str,
        received_at: i64,
    ) -> Result<ClaimOutcome, StoreError> {
        on_pool!(self, pool => {
            let mut tx = pool.begin_write().await?;
            let inserted = sqlx::query(INSERT_CLAIM)
                .bind(envelope.id.as_str())
                .bind(envelope.event_type.as_str())
                .bind(object_id.as_str())
                .bind(received_at)
                .bind(envelope.created)
                .bind(envelope.livemode)
                .bind(payload)
                .execute(&mut *tx)
                .await?
                .rows_affected();
            let repeats: Option<i64> = if inserted == 1 {
                None
            } else {
                sqlx::query_scalar(COUNT_REPEAT)
                    .bind(envelope.id.as_str())
                    .fetch_optional(&mut *tx)
                    .await?
            };
            let outcome = if inserted == 1 {
                ClaimOutcome::Claimed
            } else if repeats.is_some() {
                ClaimOutcome::DuplicateEvent
            } else {
                let original: String = sqlx::query_scalar(FIND_ACTION)
                    .bind(object_id.as_str())
                    .bind(envelope.event_type.as_str())
                    .fetch_optional(&mut *tx)
                    .await?
                    .ok_or_else(|| {
                        StoreError::Corrupt(format!(
                            "claim insert for {} conflicted, but no conflicting claim exists",
                            envelope.id
                        ))
                    })?;
                ClaimOutcome::DuplicateAction {
                    original: EventId::parse(original)
                        .map_err(|e| StoreError::Corrupt(e.to_string()))?,
                }
            };
            let delivery_outcome = match outcome {
                ClaimOutcome::Claimed => DeliveryOutcome::Claimed,
                ClaimOutcome::DuplicateEvent => DeliveryOutcome::DuplicateEvent,
                ClaimOutcome::DuplicateAction { .. } => DeliveryOutcome::DuplicateAction,
            };
            let mut row = DeliveryRow::new(Some(envelope), delivery_outcome, None, received_at);
            if let ClaimOutcome::DuplicateAction { original } = &outcome {
                row.duplicate_of = Some(original.as_str());
            }
            match (&outcome, repeats) {
                (ClaimOutcome::Claimed, _) => insert_delivery!(tx, &row, counted: false),
                (ClaimOutcome::DuplicateEvent, Some(n)) if n > DELIVERIES_KEPT_PER_EVENT => {}
                (ClaimOutcome::DuplicateEvent, _) => insert_delivery!(tx, &row, counted: false),
                (ClaimOutcome::DuplicateAction { .. }, _) => {
                    insert_delivery!(tx, &row, counted: true)
                }
            }
            tx.commit().await?;
            Ok(outcome)
        })
    }

    /// Logs a delivery that makes no claim (ignored type, refused payload or mode).
    pub async fn record_delivery(&self, row: &DeliveryRow<'_>) -> Result<(), StoreError> {
        on_pool!(self, pool => {
            let mut tx = pool.begin_write().await?;
            insert_delivery!(tx, row, counted: true);
            tx.commit().await?;
            Ok(())
        })
    }

    /// The delivery log of one event, oldest first, as (outcome, duplicate_of).
    pub async fn deliveries_of(
        &self,
        event_id: &EventId,
    ) -> Result<Vec<(String, Option<String>)>, StoreError> {
        const SQL: &str = "SELECT outcome, duplicate_of FROM webhook_deliveries \
                           WHERE event_id = $1 ORDER BY id";
        let rows = on_pool!(self, pool => {
            sqlx::query_as(SQL).bind(event_id.as_str()).fetch_all(pool).await
        })?;
        Ok(rows)
    }
}
