//! Writing deliveries and claims: the one transaction the webhook answers after.

use super::{BeginWrite, Claims, Pool, Write};
use crate::error::StoreError;
use crate::ids::{EventId, ObjectId};
use crate::webhook::{ActionKey, DeliveryOutcome, Envelope};

/// How many delivery rows one event id may accumulate. Stripe retries a handful of times;
/// past this, a replayed delivery is still answered but no longer logged row by row.
pub const DELIVERIES_KEPT_PER_EVENT: i64 = 20;

/// Where a claim (and the delivery row logging it) came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ClaimSource {
    /// Stripe delivered the event to the webhook.
    #[default]
    Webhook,
    /// The reconciler fetched it from Stripe's API after deliveries failed.
    Reconcile,
}

impl ClaimSource {
    pub fn as_str(self) -> &'static str {
        match self {
            ClaimSource::Webhook => "webhook",
            ClaimSource::Reconcile => "reconcile",
        }
    }
}

/// What the claim insert found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ClaimOutcome {
    Claimed,
    DuplicateEvent,
    DuplicateAction { original: EventId },
}

/// A write the webhook needs durable before it answers. Writes from concurrent deliveries
/// are gathered into one transaction by the [`BatchWriter`](super::BatchWriter).
#[derive(Debug, Clone)]
pub enum WriteOp {
    /// Claim an acting event (its envelope carries an object id) and log the delivery.
    Claim {
        envelope: Envelope,
        object_id: ObjectId,
        /// The action the event describes; a second event for it is a twin.
        action_key: ActionKey,
        payload: String,
        received_at: i64,
        source: ClaimSource,
    },
    /// Log a delivery that makes no claim: an ignored type, or a refused signed delivery.
    Record {
        envelope: Option<Envelope>,
        outcome: DeliveryOutcome,
        detail: Option<String>,
        received_at: i64,
    },
}

impl WriteOp {
    /// Writes that may conflict share this key (an event's object id, else its event id), so
    /// routing by it keeps every conflict inside one writer lane.
    pub fn conflict_key(&self) -> &str {
        match self {
            WriteOp::Claim { object_id, .. } => object_id.as_str(),
            WriteOp::Record { envelope, .. } => envelope
                .as_ref()
                .map(|e| e.object_id.as_ref().map_or(e.id.as_str(), ObjectId::as_str))
                .unwrap_or(""),
        }
    }
}

/// What a write found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WriteResult {
    Claim(ClaimOutcome),
    Recorded,
}

/// One row of the delivery log.
struct DeliveryRow<'a> {
    event_id: Option<&'a str>,
    event_type: Option<&'a str>,
    object_id: Option<&'a str>,
    outcome: DeliveryOutcome,
    duplicate_of: Option<&'a str>,
    detail: Option<&'a str>,
    received_at: i64,
    source: ClaimSource,
}

impl<'a> DeliveryRow<'a> {
    fn new(
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
            source: ClaimSource::Webhook,
        }
    }
}

const INSERT_CLAIM: &str = "\
    INSERT INTO processed_stripe_events \
        (event_id, event_type, object_id, action_key, status, attempts, next_attempt_at, \
         stripe_created, livemode, received_at, payload, source) \
    VALUES ($1, $2, $3, $8, 'processing', 0, $4, $5, $6, $4, $7, $9) \
    ON CONFLICT DO NOTHING";

/// Counts a repeated delivery on its claim. The row lock it takes on PostgreSQL also
/// serialises concurrent duplicates of one event, so the delivery-log cap below is exact.
const COUNT_REPEAT: &str = "\
    UPDATE processed_stripe_events SET deliveries = deliveries + 1 \
    WHERE event_id = $1 RETURNING deliveries";

const FIND_ACTION: &str = "SELECT event_id FROM processed_stripe_events \
    WHERE object_id = $2 AND event_type = $3 AND action_key = $1";

const COUNT_DELIVERIES: &str = "SELECT COUNT(*) FROM webhook_deliveries WHERE event_id = $1";

const INSERT_DELIVERY: &str = "\
    INSERT INTO webhook_deliveries \
        (event_id, event_type, object_id, outcome, duplicate_of, detail, received_at, source) \
    VALUES ($1, $2, $3, $4, $5, $6, $7, $8)";

/// The statements of ingestion, bound once per backend. What chains them (the duplicate
/// and twin rules) is written once, in [`apply_write`].
trait IngestTx {
    /// Inserts the claim unless its event id or action is taken; the rows inserted (0 or 1).
    fn insert_claim<'a>(&'a mut self, claim: ClaimRow<'a>) -> Write<'a, u64>;
    /// Counts one more delivery on an existing claim; `None` if the event id has no claim.
    fn count_repeat<'a>(&'a mut self, event_id: &'a str) -> Write<'a, Option<i64>>;
    /// The event id holding the action `(object_id, event_type, step)`.
    fn find_action<'a>(&'a mut self, claim: ClaimRow<'a>) -> Write<'a, Option<String>>;
    fn count_deliveries<'a>(&'a mut self, event_id: &'a str) -> Write<'a, i64>;
    fn insert_delivery<'a>(&'a mut self, row: &'a DeliveryRow<'a>) -> Write<'a, ()>;
}

/// The columns of one claim insert.
#[derive(Clone, Copy)]
struct ClaimRow<'a> {
    envelope: &'a Envelope,
    object_id: &'a str,
    action_step: &'a str,
    payload: &'a str,
    received_at: i64,
    source: ClaimSource,
}

macro_rules! impl_ingest_tx {
    ($db:ty) => {
        impl IngestTx for sqlx::Transaction<'static, $db> {
            fn insert_claim<'a>(&'a mut self, claim: ClaimRow<'a>) -> Write<'a, u64> {
                Box::pin(async move {
                    Ok(sqlx::query(INSERT_CLAIM)
                        .bind(claim.envelope.id.as_str())
                        .bind(claim.envelope.event_type.as_str())
                        .bind(claim.object_id)
                        .bind(claim.received_at)
                        .bind(claim.envelope.created)
                        .bind(claim.envelope.livemode)
                        .bind(claim.payload)
                        .bind(claim.action_step)
                        .bind(claim.source.as_str())
                        .execute(&mut **self)
                        .await?
                        .rows_affected())
                })
            }

            fn count_repeat<'a>(&'a mut self, event_id: &'a str) -> Write<'a, Option<i64>> {
                Box::pin(async move {
                    Ok(sqlx::query_scalar(COUNT_REPEAT)
                        .bind(event_id)
                        .fetch_optional(&mut **self)
                        .await?)
                })
            }

            fn find_action<'a>(&'a mut self, claim: ClaimRow<'a>) -> Write<'a, Option<String>> {
                Box::pin(async move {
                    Ok(sqlx::query_scalar(FIND_ACTION)
                        .bind(claim.action_step)
                        .bind(claim.object_id)
                        .bind(claim.envelope.event_type.as_str())
                        .fetch_optional(&mut **self)
                        .await?)
                })
            }

            fn count_deliveries<'a>(&'a mut self, event_id: &'a str) -> Write<'a, i64> {
                Box::pin(async move {
                    Ok(sqlx::query_scalar(COUNT_DELIVERIES)
                        .bind(event_id)
                        .fetch_one(&mut **self)
                        .await?)
                })
            }

            fn insert_delivery<'a>(&'a mut self, row: &'a DeliveryRow<'a>) -> Write<'a, ()> {
                Box::pin(async move {
                    sqlx::query(INSERT_DELIVERY)
                        .bind(row.event_id)
                        .bind(row.event_type)
                        .bind(row.object_id)
                        .bind(row.outcome.as_str())
                        .bind(row.duplicate_of)
                        .bind(row.detail)
                        .bind(row.received_at)
                        .bind(row.source.as_str())
                        .execute(&mut **self)
                        .await?;
                    Ok(())
                })
            }
        }
    };
}

impl_ingest_tx!(sqlx::Sqlite);
impl_ingest_tx!(sqlx::Postgres);

/// Inserts a delivery row. With `counted`, first checks that its event id does not already
/// have its share of rows (callers that know the count already pass `false`).
async fn log_delivery<T: IngestTx + Send>(
    tx: &mut T,
    row: &DeliveryRow<'_>,
    counted: bool,
) -> Result<(), StoreError> {
    let kept = match row.event_id {
        Some(id) if counted => tx.count_deliveries(id).await?,
        _ => 0,
    };
    if kept < DELIVERIES_KEPT_PER_EVENT {
        tx.insert_delivery(row).await?;
    }
    Ok(())
}

/// Applies one write inside the open transaction `tx`. A unique violation on the event id
/// or on the action key is a duplicate, never an error.
async fn apply_write<T: IngestTx + Send>(
    tx: &mut T,
    op: &WriteOp,
) -> Result<WriteResult, StoreError> {
    let (envelope, object_id, action_key, payload, received_at, source) = match op {
        WriteOp::Claim {
            envelope,
            object_id,
            action_key,
            payload,
            received_at,
            source,
        } => (
            envelope,
            object_id,
            action_key,
            payload,
            *received_at,
            *source,
        ),
        WriteOp::Record {
            envelope,
            outcome,
            detail,
            received_at,
        } => {
            let row =
                DeliveryRow::new(envelope.as_ref(), *outcome, detail.as_deref(), *received_at);
            log_delivery(tx, &row, true).await?;
            return Ok(WriteResult::Recorded);
        }
    };
    let claim = ClaimRow {
        envelope,
        object_id: object_id.as_str(),
        action_step: action_key.step(),
        payload,
        received_at,
        source,
    };
    let inserted = tx.insert_claim(claim).await?;
    let repeats = if inserted == 1 {
        None
    } else {
        tx.count_repeat(envelope.id.as_str()).await?
    };
    let outcome = if inserted == 1 {
        ClaimOutcome::Claimed
    } else if repeats.is_some() {
        ClaimOutcome::DuplicateEvent
    } else {
        let original = tx.find_action(claim).await?.ok_or_else(|| {
            StoreError::Corrupt(format!(
                "claim insert for {} conflicted, but no conflicting claim exists",
                envelope.id
            ))
        })?;
        ClaimOutcome::DuplicateAction {
            original: EventId::parse(original).map_err(|e| StoreError::Corrupt(e.to_string()))?,
        }
    };
    let delivery_outcome = match outcome {
        ClaimOutcome::Claimed => DeliveryOutcome::Claimed,
        ClaimOutcome::DuplicateEvent => DeliveryOutcome::DuplicateEvent,
        ClaimOutcome::DuplicateAction { .. } => DeliveryOutcome::DuplicateAction,
    };
    let mut row = DeliveryRow::new(Some(envelope), delivery_outcome, None, received_at);
    row.source = source;
    if let ClaimOutcome::DuplicateAction { original } = &outcome {
        row.duplicate_of = Some(original.as_str());
    }
    match (&outcome, repeats) {
        (ClaimOutcome::DuplicateEvent, Some(n)) if n > DELIVERIES_KEPT_PER_EVENT => {}
        (ClaimOutcome::DuplicateAction { .. }, _) => log_delivery(tx, &row, true).await?,
        _ => log_delivery(tx, &row, false).await?,
    }
    Ok(WriteResult::Claim(outcome))
}

/// PostgreSQL: claims of a whole batch in one statement; the ids it returns are the new
/// claims (the first of several deliveries of one event in a batch wins).
const BULK_INSERT_CLAIMS: &str = "\
    INSERT INTO processed_stripe_events \
        (event_id, event_type, object_id, action_key, status, attempts, next_attempt_at, \
         stripe_created, livemode, received_at, payload, source) \
    SELECT e, t, o, a, 'processing', 0, r, c, l, r, p, s \
    FROM UNNEST($1::text[], $2::text[], $3::text[], $4::int8[], $5::int8[], $6::bool[], \
                $7::text[], $8::text[], $9::text[]) AS u(e, t, o, r, c, l, p, a, s) \
    ON CONFLICT DO NOTHING \
    RETURNING event_id";

const BULK_INSERT_CLAIMED_DELIVERIES: &str = "\
    INSERT INTO webhook_deliveries \
        (event_id, event_type, object_id, outcome, received_at, source) \
    SELECT e, t, o, 'claimed', r, s \
    FROM UNNEST($1::text[], $2::text[], $3::text[], $4::int8[], $5::text[]) AS u(e, t, o, r, s)";

impl Claims<'_> {
    /// Applies `ops` in order in one transaction: all of them become durable, or none.
    pub async fn apply_writes(self, ops: &[&WriteOp]) -> Result<Vec<WriteResult>, StoreError> {
        let claims = ops
            .iter()
            .filter(|op| matches!(op, WriteOp::Claim { .. }))
            .count();
        if let Pool::Postgres(pool) = &self.pool
            && claims > 1
        {
            return bulk_apply_postgres(pool, ops).await;
        }
        on_pool!(self, pool => {
            let mut tx = pool.begin_write().await?;
            let mut results = Vec::with_capacity(ops.len());
            for op in ops {
                results.push(apply_write(&mut tx, op).await?);
            }
            tx.commit().await?;
            Ok(results)
        })
    }
}

/// PostgreSQL's path for a batch with several claims: one statement inserts every new claim
/// and one logs their deliveries; whatever conflicted (duplicates, twins) and every other
/// write then goes through the one-by-one path, which finds the conflict and says which.
/// Statements, not rows, are what cost on PostgreSQL.
async fn bulk_apply_postgres(
    pool: &sqlx::PgPool,
    ops: &[&WriteOp],
) -> Result<Vec<WriteResult>, StoreError> {
    let mut tx = pool.begin_write().await?;
    let mut columns = (
        Vec::new(),
        Vec::new(),
        Vec::new(),
        Vec::new(),
        Vec::new(),
        Vec::new(),
        Vec::new(),
        Vec::new(),
        Vec::new(),
    );
    for op in ops {
        if let WriteOp::Claim {
            envelope,
            object_id,
            action_key,
            payload,
            received_at,
            source,
        } = op
        {
            columns.7.push(action_key.step());
            columns.8.push(source.as_str());
            columns.0.push(envelope.id.as_str());
            columns.1.push(envelope.event_type.as_str());
            columns.2.push(object_id.as_str());
            columns.3.push(*received_at);
            columns.4.push(envelope.created);
            columns.5.push(envelope.livemode);
            columns.6.push(payload.as_str());
        }
    }
    let inserted: Vec<String> = sqlx::query_scalar(BULK_INSERT_CLAIMS)
        .bind(&columns.0)
        .bind(&columns.1)
        .bind(&columns.2)
        .bind(&columns.3)
        .bind(&columns.4)
        .bind(&columns.5)
        .bind(&columns.6)
        .bind(&columns.7)
        .bind(&columns.8)
        .fetch_all(&mut *tx)
        .await?;
    let mut new_claims: std::collections::HashSet<&str> =
        inserted.iter().map(String::as_str).collect();

    // Which op made each new claim: the first one carrying its event id.
    let mut claimed = vec![false; ops.len()];
    let mut logged = (Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for (i, op) in ops.iter().enumerate() {
        if let WriteOp::Claim {
            envelope,
            object_id,
            received_at,
            source,
            ..
        } = op
            && new_claims.remove(envelope.id.as_str())
        {
            claimed[i] = true;
            logged.0.push(envelope.id.as_str());
            logged.1.push(envelope.event_type.as_str());
            logged.2.push(object_id.as_str());
            logged.3.push(*received_at);
            logged.4.push(source.as_str());
        }
    }
    sqlx::query(BULK_INSERT_CLAIMED_DELIVERIES)
        .bind(&logged.0)
        .bind(&logged.1)
        .bind(&logged.2)
        .bind(&logged.3)
        .bind(&logged.4)
        .execute(&mut *tx)
        .await?;

    let mut results = Vec::with_capacity(ops.len());
    for (op, claimed) in ops.iter().zip(claimed) {
        if claimed {
            results.push(WriteResult::Claim(ClaimOutcome::Claimed));
        } else {
            results.push(apply_write(&mut tx, op).await?);
        }
    }
    tx.commit().await?;
    Ok(results)
}
