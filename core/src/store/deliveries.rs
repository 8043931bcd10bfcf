//! Writing deliveries and claims: the one transaction the webhook answers after.

use super::claim_state::known_types;
use super::query::sql;
use super::{BeginWrite, Claims, Pool, Write};
use crate::error::StoreError;
use crate::ids::{EventId, ObjectId};
use crate::webhook::terms::{Term, TermKind};
use crate::webhook::{ActionKey, DeliveryOutcome, Envelope};

/// How many delivery rows one event id may accumulate. Stripe retries a handful of times;
/// past this, a replayed delivery is still answered but no longer logged row by row.
pub const DELIVERIES_KEPT_PER_EVENT: i64 = 20;

pub use crate::claim::ClaimSource;

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
        /// An ignored delivery's body, kept for a later version that acts on its type
        /// ([`crate::adoption`]).
        payload: Option<String>,
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
struct NewDelivery<'a> {
    event_id: Option<&'a str>,
    event_type: Option<&'a str>,
    object_id: Option<&'a str>,
    outcome: DeliveryOutcome,
    duplicate_of: Option<&'a str>,
    detail: Option<&'a str>,
    received_at: i64,
    source: ClaimSource,
    payload: Option<&'a str>,
}

impl<'a> NewDelivery<'a> {
    fn new(
        envelope: Option<&'a Envelope>,
        outcome: DeliveryOutcome,
        detail: Option<&'a str>,
        received_at: i64,
    ) -> NewDelivery<'a> {
        NewDelivery {
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
            payload: None,
        }
    }
}

const INSERT_CLAIM: &str = "\
    INSERT INTO processed_stripe_events \
        (event_id, event_type, object_id, action_key, status, attempts, next_attempt_at, \
         stripe_created, livemode, received_at, payload, source, terms_indexed) \
    VALUES ($1, $2, $3, $8, 'processing', 0, $4, $5, $6, $4, $7, $9, TRUE) \
    ON CONFLICT DO NOTHING";

/// Counts a repeated delivery on its claim. The row lock it takes on PostgreSQL also
/// serialises concurrent duplicates of one event, so the delivery-log cap below is exact.
const COUNT_REPEAT: &str = "\
    UPDATE processed_stripe_events SET deliveries = deliveries + 1 \
    WHERE event_id = $1 RETURNING deliveries";

const FIND_ACTION: &str = "SELECT event_id FROM processed_stripe_events \
    WHERE object_id = $2 AND event_type = $3 AND action_key = $1";

const COUNT_DELIVERIES: &str = "SELECT COUNT(*) FROM webhook_deliveries WHERE event_id = $1";

const UNINDEXED: &str = "SELECT event_id, object_id, payload FROM processed_stripe_events \
    WHERE NOT terms_indexed ORDER BY received_at LIMIT $1";

const MARK_INDEXED: &str =
    "UPDATE processed_stripe_events SET terms_indexed = TRUE WHERE event_id = $1";

const INSERT_DELIVERY: &str = "\
    INSERT INTO webhook_deliveries \
        (event_id, event_type, object_id, outcome, duplicate_of, detail, received_at, source, \
         payload) \
    VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)";

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
    fn insert_delivery<'a>(&'a mut self, row: &'a NewDelivery<'a>) -> Write<'a, ()>;
    /// Up to `limit` claims written without their search terms, oldest first: (event id,
    /// object id, payload).
    fn unindexed<'a>(&'a mut self, limit: i64) -> Write<'a, Vec<(String, String, String)>>;
    fn mark_indexed<'a>(&'a mut self, event_id: &'a str) -> Write<'a, ()>;
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

            fn insert_delivery<'a>(&'a mut self, row: &'a NewDelivery<'a>) -> Write<'a, ()> {
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
                        .bind(row.payload)
                        .execute(&mut **self)
                        .await?;
                    Ok(())
                })
            }

            fn unindexed<'a>(&'a mut self, limit: i64) -> Write<'a, Vec<(String, String, String)>> {
                Box::pin(async move {
                    Ok(sqlx::query_as(UNINDEXED)
                        .bind(limit)
                        .fetch_all(&mut **self)
                        .await?)
                })
            }

            fn mark_indexed<'a>(&'a mut self, event_id: &'a str) -> Write<'a, ()> {
                Box::pin(async move {
                    sqlx::query(MARK_INDEXED)
                        .bind(event_id)
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
    row: &NewDelivery<'_>,
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
async fn apply_write<T: IngestTx + BulkIngestTx + Send>(
    tx: &mut T,
    op: &WriteOp,
) -> Result<WriteResult, StoreError> {
    let Some(claim) = claim_row(op) else {
        if let WriteOp::Record {
            envelope,
            outcome,
            detail,
            received_at,
            payload,
        } = op
        {
            let mut row =
                NewDelivery::new(envelope.as_ref(), *outcome, detail.as_deref(), *received_at);
            row.payload = payload.as_deref();
            log_delivery(tx, &row, true).await?;
        }
        return Ok(WriteResult::Recorded);
    };
    let ClaimRow {
        envelope,
        received_at,
        source,
        ..
    } = claim;
    let inserted = tx.insert_claim(claim).await?;
    if inserted == 1 {
        tx.insert_terms(&terms_of(&[claim])).await?;
    }
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
            StoreError::Inconsistent(format!(
                "claim insert for {} conflicted, but no conflicting claim exists",
                envelope.id
            ))
        })?;
        ClaimOutcome::DuplicateAction {
            original: EventId::parse(original).map_err(|source| StoreError::BadStoredId {
                what: "event id",
                source,
            })?,
        }
    };
    let delivery_outcome = match outcome {
        ClaimOutcome::Claimed => DeliveryOutcome::Claimed,
        ClaimOutcome::DuplicateEvent => DeliveryOutcome::DuplicateEvent,
        ClaimOutcome::DuplicateAction { .. } => DeliveryOutcome::DuplicateAction,
    };
    let mut row = NewDelivery::new(Some(envelope), delivery_outcome, None, received_at);
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
const BULK_INSERT_CLAIMS_POSTGRES: &str = "\
    INSERT INTO processed_stripe_events \
        (event_id, event_type, object_id, action_key, status, attempts, next_attempt_at, \
         stripe_created, livemode, received_at, payload, source, terms_indexed) \
    SELECT e, t, o, a, 'processing', 0, r, c, l, r, p, s, TRUE \
    FROM UNNEST($1::text[], $2::text[], $3::text[], $4::int8[], $5::int8[], $6::bool[], \
                $7::text[], $8::text[], $9::text[]) AS u(e, t, o, r, c, l, p, a, s) \
    ON CONFLICT DO NOTHING \
    RETURNING event_id";

const BULK_INSERT_CLAIMED_DELIVERIES_POSTGRES: &str = "\
    INSERT INTO webhook_deliveries \
        (event_id, event_type, object_id, outcome, received_at, source) \
    SELECT e, t, o, 'claimed', r, s \
    FROM UNNEST($1::text[], $2::text[], $3::text[], $4::int8[], $5::text[]) AS u(e, t, o, r, s)";

const BULK_INSERT_TERMS_POSTGRES: &str = "\
    INSERT INTO claim_terms (term, event_id, kind) \
    SELECT t, e, k FROM UNNEST($1::text[], $2::text[], $3::text[]) AS u(t, e, k) \
    ON CONFLICT DO NOTHING";

/// One row of `claim_terms`: (term, event id, kind).
type TermRow<'a> = (&'a str, &'a str, &'static str);

/// Every term of `claims`.
fn terms_of<'a>(claims: &[ClaimRow<'a>]) -> Vec<TermRow<'a>> {
    claims
        .iter()
        .flat_map(|c| {
            let event = c.envelope.id.as_str();
            c.envelope
                .terms
                .iter()
                .map(move |t| (t.text.as_str(), event, t.kind.as_str()))
        })
        .collect()
}

/// The set-based statements of a batch, one per backend: PostgreSQL binds one array per
/// column (`UNNEST`), SQLite one multi-row `VALUES` list.
trait BulkIngestTx {
    /// Inserts the claims that take neither an event id nor an action already taken; returns
    /// the event ids inserted.
    fn insert_claims<'a>(&'a mut self, claims: &'a [ClaimRow<'a>]) -> Write<'a, Vec<String>>;
    /// Logs a `claimed` delivery for each new claim.
    fn log_claimed<'a>(&'a mut self, claims: &'a [ClaimRow<'a>]) -> Write<'a, ()>;
    /// Indexes claims by what their payloads name: (term, event id, kind) rows ([`Term`]).
    fn insert_terms<'a>(&'a mut self, terms: &'a [TermRow<'a>]) -> Write<'a, ()>;
}

impl BulkIngestTx for sqlx::Transaction<'static, sqlx::Postgres> {
    fn insert_claims<'a>(&'a mut self, claims: &'a [ClaimRow<'a>]) -> Write<'a, Vec<String>> {
        Box::pin(async move {
            let column = |f: fn(&ClaimRow<'a>) -> &'a str| claims.iter().map(f).collect::<Vec<_>>();
            Ok(sqlx::query_scalar(BULK_INSERT_CLAIMS_POSTGRES)
                .bind(column(|c| c.envelope.id.as_str()))
                .bind(column(|c| c.envelope.event_type.as_str()))
                .bind(column(|c| c.object_id))
                .bind(claims.iter().map(|c| c.received_at).collect::<Vec<_>>())
                .bind(
                    claims
                        .iter()
                        .map(|c| c.envelope.created)
                        .collect::<Vec<_>>(),
                )
                .bind(
                    claims
                        .iter()
                        .map(|c| c.envelope.livemode)
                        .collect::<Vec<_>>(),
                )
                .bind(column(|c| c.payload))
                .bind(column(|c| c.action_step))
                .bind(column(|c| c.source.as_str()))
                .fetch_all(&mut **self)
                .await?)
        })
    }

    fn log_claimed<'a>(&'a mut self, claims: &'a [ClaimRow<'a>]) -> Write<'a, ()> {
        Box::pin(async move {
            let column = |f: fn(&ClaimRow<'a>) -> &'a str| claims.iter().map(f).collect::<Vec<_>>();
            sqlx::query(BULK_INSERT_CLAIMED_DELIVERIES_POSTGRES)
                .bind(column(|c| c.envelope.id.as_str()))
                .bind(column(|c| c.envelope.event_type.as_str()))
                .bind(column(|c| c.object_id))
                .bind(claims.iter().map(|c| c.received_at).collect::<Vec<_>>())
                .bind(column(|c| c.source.as_str()))
                .execute(&mut **self)
                .await?;
            Ok(())
        })
    }

    fn insert_terms<'a>(&'a mut self, rows: &'a [TermRow<'a>]) -> Write<'a, ()> {
        Box::pin(async move {
            let (mut terms, mut events, mut kinds) = (Vec::new(), Vec::new(), Vec::new());
            for (term, event, kind) in rows {
                terms.push(*term);
                events.push(*event);
                kinds.push(*kind);
            }
            if terms.is_empty() {
                return Ok(());
            }
            sqlx::query(BULK_INSERT_TERMS_POSTGRES)
                .bind(terms)
                .bind(events)
                .bind(kinds)
                .execute(&mut **self)
                .await?;
            Ok(())
        })
    }
}

impl BulkIngestTx for sqlx::Transaction<'static, sqlx::Sqlite> {
    fn insert_claims<'a>(&'a mut self, claims: &'a [ClaimRow<'a>]) -> Write<'a, Vec<String>> {
        Box::pin(async move {
            let mut insert = sqlx::QueryBuilder::new(
                "INSERT INTO processed_stripe_events \
                 (event_id, event_type, object_id, action_key, status, attempts, \
                  next_attempt_at, stripe_created, livemode, received_at, payload, source, \
                  terms_indexed) ",
            );
            insert.push_values(claims, |mut row, c| {
                row.push_bind(c.envelope.id.as_str())
                    .push_bind(c.envelope.event_type.as_str())
                    .push_bind(c.object_id)
                    .push_bind(c.action_step)
                    .push_bind("processing")
                    .push_bind(0_i64)
                    .push_bind(c.received_at)
                    .push_bind(c.envelope.created)
                    .push_bind(c.envelope.livemode)
                    .push_bind(c.received_at)
                    .push_bind(c.payload)
                    .push_bind(c.source.as_str())
                    .push_bind(true);
            });
            insert.push(" ON CONFLICT DO NOTHING RETURNING event_id");
            Ok(insert.build_query_scalar().fetch_all(&mut **self).await?)
        })
    }

    fn log_claimed<'a>(&'a mut self, claims: &'a [ClaimRow<'a>]) -> Write<'a, ()> {
        Box::pin(async move {
            let mut insert = sqlx::QueryBuilder::new(
                "INSERT INTO webhook_deliveries \
                 (event_id, event_type, object_id, outcome, received_at, source) ",
            );
            insert.push_values(claims, |mut row, c| {
                row.push_bind(c.envelope.id.as_str())
                    .push_bind(c.envelope.event_type.as_str())
                    .push_bind(c.object_id)
                    .push_bind(DeliveryOutcome::Claimed.as_str())
                    .push_bind(c.received_at)
                    .push_bind(c.source.as_str());
            });
            insert.build().execute(&mut **self).await?;
            Ok(())
        })
    }

    fn insert_terms<'a>(&'a mut self, rows: &'a [TermRow<'a>]) -> Write<'a, ()> {
        Box::pin(async move {
            // Three values a term, within SQLite's 32,766 per statement.
            for chunk in rows.chunks(8192) {
                let mut insert =
                    sqlx::QueryBuilder::new("INSERT INTO claim_terms (term, event_id, kind) ");
                insert.push_values(chunk, |mut row, (term, event, kind)| {
                    row.push_bind(*term).push_bind(*event).push_bind(*kind);
                });
                insert.push(" ON CONFLICT DO NOTHING");
                insert.build().execute(&mut **self).await?;
            }
            Ok(())
        })
    }
}

/// Claims a batch writes set-based at most: a multi-row statement binds 13 values a claim and
/// SQLite allows 32,766 in one statement.
const BULK_MAX_CLAIMS: usize = 1024;

impl Claims<'_> {
    /// Applies `ops` in order in one transaction: all of them become durable, or none.
    pub async fn apply_writes(self, ops: &[&WriteOp]) -> Result<Vec<WriteResult>, StoreError> {
        let claims = ops
            .iter()
            .filter(|op| matches!(op, WriteOp::Claim { .. }))
            .count();
        // The statements differ per backend (see `BulkIngestTx`); the chain does not.
        match &self.pool {
            Pool::Sqlite(db) => apply_all(db.begin_write().await?, ops, claims).await,
            Pool::Postgres(pool) => apply_all(pool.begin_write().await?, ops, claims).await,
        }
    }
}

/// A delivery recorded as `ignored` that a version acting on its type may adopt.
#[derive(Debug, Clone)]
pub struct IgnoredDelivery {
    pub id: i64,
    pub received_at: i64,
    pub payload: String,
}

impl Claims<'_> {
    /// Up to `limit` deliveries of the types this version acts on, recorded as ignored after
    /// `since` with their payload and not adopted yet, oldest first.
    pub async fn ignored_to_adopt(
        self,
        since: i64,
        limit: i64,
    ) -> Result<Vec<IgnoredDelivery>, StoreError> {
        const IGNORED_TO_ADOPT: &str = concat!(
            "SELECT id, received_at, payload FROM webhook_deliveries \
             WHERE received_at > $1 AND outcome = 'ignored' AND payload IS NOT NULL \
             AND adopted_at IS NULL",
            known_types!(),
            "ORDER BY received_at, id LIMIT $2"
        );
        let rows: Vec<(i64, i64, String)> = self
            .pool
            .on()
            .all(sql(IGNORED_TO_ADOPT).bind(since).bind(limit))
            .await?;
        Ok(rows
            .into_iter()
            .map(|(id, received_at, payload)| IgnoredDelivery {
                id,
                received_at,
                payload,
            })
            .collect())
    }

    /// Marks an ignored delivery adopted at `now` and lets its payload go (the claim holds it).
    pub async fn mark_adopted(self, id: i64, now: i64) -> Result<(), StoreError> {
        self.pool
            .on()
            .execute(
                sql("UPDATE webhook_deliveries SET adopted_at = $2, payload = NULL WHERE id = $1")
                    .bind(id)
                    .bind(now),
            )
            .await?;
        Ok(())
    }

    /// Lets the payloads of ignored deliveries received before `before` go, at most `batch`;
    /// how many.
    pub async fn forget_ignored_payloads(self, before: i64, batch: i64) -> Result<u64, StoreError> {
        Ok(self
            .pool
            .on()
            .execute(
                sql(
                    "UPDATE webhook_deliveries SET payload = NULL WHERE id IN ( \
                       SELECT id FROM webhook_deliveries \
                       WHERE received_at <= $1 AND payload IS NOT NULL LIMIT $2)",
                )
                .bind(before)
                .bind(batch),
            )
            .await?)
    }
}

impl Claims<'_> {
    /// Indexes up to `batch` claims that were written without their search terms (before
    /// the terms existed, or by a version that does not write them), oldest first, in one
    /// transaction. Returns how many it indexed; 0 when every claim is indexed.
    pub async fn index_unindexed(self, batch: i64) -> Result<usize, StoreError> {
        match &self.pool {
            Pool::Sqlite(db) => index_batch(db.begin_write().await?, batch).await,
            Pool::Postgres(pool) => index_batch(pool.begin_write().await?, batch).await,
        }
    }
}

async fn index_batch<DB: sqlx::Database>(
    mut tx: sqlx::Transaction<'static, DB>,
    batch: i64,
) -> Result<usize, StoreError>
where
    sqlx::Transaction<'static, DB>: IngestTx + BulkIngestTx + Send,
{
    let claims = tx.unindexed(batch).await?;
    for (event_id, object_id, payload) in &claims {
        // The payload's terms, read by the same rule as at claim time; a pruned payload
        // still has its object's id.
        let terms = match Envelope::parse(payload.as_bytes()) {
            Ok(envelope) => envelope.terms,
            Err(_) => {
                let kind = TermKind::of_stripe_id(object_id).unwrap_or(TermKind::Object);
                Term::new(kind, object_id).into_iter().collect()
            }
        };
        let rows: Vec<TermRow<'_>> = terms
            .iter()
            .map(|t| (t.text.as_str(), event_id.as_str(), t.kind.as_str()))
            .collect();
        tx.insert_terms(&rows).await?;
        tx.mark_indexed(event_id).await?;
    }
    tx.commit().await?;
    Ok(claims.len())
}

/// Applies `ops` in `tx` and commits: in bulk when there are several claims.
async fn apply_all<DB: sqlx::Database>(
    mut tx: sqlx::Transaction<'static, DB>,
    ops: &[&WriteOp],
    claims: usize,
) -> Result<Vec<WriteResult>, StoreError>
where
    sqlx::Transaction<'static, DB>: IngestTx + BulkIngestTx + Send,
{
    let results = if claims > 1 && claims <= BULK_MAX_CLAIMS {
        bulk_apply(&mut tx, ops).await?
    } else {
        let mut results = Vec::with_capacity(ops.len());
        for op in ops {
            results.push(apply_write(&mut tx, op).await?);
        }
        results
    };
    tx.commit().await?;
    Ok(results)
}

/// A batch with several claims: one statement inserts every new claim and one logs their
/// deliveries; whatever conflicted (duplicates, twins) and every other write then goes
/// through the one-by-one path, which finds the conflict and says which. Statements, not
/// rows, are what cost: a round trip to PostgreSQL, a hand-over to SQLite's connection
/// thread.
async fn bulk_apply<T: IngestTx + BulkIngestTx + Send>(
    tx: &mut T,
    ops: &[&WriteOp],
) -> Result<Vec<WriteResult>, StoreError> {
    let rows: Vec<ClaimRow<'_>> = ops.iter().filter_map(|op| claim_row(op)).collect();
    let inserted = tx.insert_claims(&rows).await?;
    let mut new_claims: std::collections::HashSet<&str> =
        inserted.iter().map(String::as_str).collect();

    // Which op made each new claim: the first one carrying its event id.
    let mut claimed = vec![false; ops.len()];
    let mut logged = Vec::with_capacity(inserted.len());
    for (i, op) in ops.iter().enumerate() {
        if let Some(row) = claim_row(op)
            && new_claims.remove(row.envelope.id.as_str())
        {
            claimed[i] = true;
            logged.push(row);
        }
    }
    if !logged.is_empty() {
        tx.log_claimed(&logged).await?;
        tx.insert_terms(&terms_of(&logged)).await?;
    }

    let mut results = Vec::with_capacity(ops.len());
    for (op, claimed) in ops.iter().zip(claimed) {
        if claimed {
            results.push(WriteResult::Claim(ClaimOutcome::Claimed));
        } else {
            results.push(apply_write(tx, op).await?);
        }
    }
    Ok(results)
}

/// The claim a write makes, if it makes one.
fn claim_row<'a>(op: &'a WriteOp) -> Option<ClaimRow<'a>> {
    match op {
        WriteOp::Claim {
            envelope,
            object_id,
            action_key,
            payload,
            received_at,
            source,
        } => Some(ClaimRow {
            envelope,
            object_id: object_id.as_str(),
            action_step: action_key.step(),
            payload,
            received_at: *received_at,
            source: *source,
        }),
        WriteOp::Record { .. } => None,
    }
}
