//! Taking claims with a lease, fulfilling them, and recording failed attempts.
//!
//! A worker leases a due claim (pending and past its backoff, or stale when rescue is on),
//! applies the fulfilment plan and flips the claim to `processed` in one transaction that
//! only commits while it still holds the lease, so a worker whose lease was taken over can
//! never complete a claim twice.

use std::collections::HashMap;

use super::money::{MoneyTx, StepSource};
use super::{BeginWrite, Claims, Pool, Write};
use crate::error::StoreError;
use crate::fulfilment::{OrderFacts, Plan, SessionAction};
use crate::ids::EventId;

/// A claim this worker holds the lease on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeasedClaim {
    pub event_id: EventId,
    pub event_type: String,
    pub payload: String,
    /// Attempts so far, this one included.
    pub attempts: i64,
    /// When the claim was made (unix ms): its delivery received, or its reconcile run.
    pub received_at: i64,
}

/// How applying a plan ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fulfilled {
    /// The effect is written and the claim is processed.
    Processed,
    /// Another worker holds the lease now; nothing was written.
    LeaseLost,
    /// A refund, failed refund or dispute for a payment intent no order knows yet (its
    /// session event is still on the way): retry later.
    OrderNotFound { payment_intent: String },
}

/// Leases up to `$6` due claims: stale ones with attempts left when rescue (`$4`) is on (their
/// worker died; they come first), then pending ones past their backoff, oldest first. `$lock`
/// is the row-locking clause, if any; `$pending` and `$stale` name the index each part reads.
///
/// Each part reads its own partial index in the order it wants (`…_pending`, `…_leased`) and
/// stops after `$6` rows, so a lease costs the same with a backlog of ten claims or of a
/// hundred thousand; one query with both conditions OR-ed would read and sort the backlog.
/// SQLite is told the index (`INDEXED BY`): without statistics its planner picks the status
/// index and sorts.
macro_rules! lease_sql {
    ($pending:literal, $stale:literal, $lock:literal) => {
        concat!(
            "WITH pending AS (",
            " SELECT event_id FROM processed_stripe_events",
            $pending,
            " WHERE status = 'processing' AND lease_expires_at IS NULL AND next_attempt_at <= $3",
            " ORDER BY next_attempt_at, received_at LIMIT $6 ",
            $lock,
            "), stale AS (",
            " SELECT event_id FROM processed_stripe_events",
            $stale,
            " WHERE $4 AND status = 'processing' AND lease_expires_at <= $3 AND attempts < $5",
            " ORDER BY lease_expires_at LIMIT $6 ",
            $lock,
            ") ",
            "UPDATE processed_stripe_events ",
            "SET lease_owner = $1, lease_expires_at = $2, attempts = attempts + 1 ",
            "WHERE event_id IN (SELECT event_id FROM stale UNION ALL SELECT event_id FROM pending LIMIT $6) ",
            "RETURNING event_id, event_type, payload, attempts, received_at"
        )
    };
}

const LEASE_SQLITE: &str = lease_sql!(
    " INDEXED BY processed_stripe_events_pending",
    " INDEXED BY processed_stripe_events_leased",
    ""
);

/// Concurrent workers on other instances skip the rows another one is taking.
const LEASE_POSTGRES: &str = lease_sql!("", "", "FOR UPDATE SKIP LOCKED");

/// A claim whose lease ran out on its last allowed attempt (its worker crashed or overran the
/// lease every time) is not rescued again: it is failed and waits for an operator.
const FAIL_EXHAUSTED_STALE: &str = "\
    UPDATE processed_stripe_events \
    SET status = 'failed', lease_owner = NULL, lease_expires_at = NULL, \
        last_error = 'the lease expired on the last allowed attempt (worker crashed or ran out of time)' \
    WHERE status = 'processing' AND lease_expires_at <= $1 AND attempts >= $2";

/// What an order row becomes when a session event meets an existing one. Status precedence:
/// an order only moves forward (awaiting < failed < paid < what its money did since), whatever
/// order its events are fulfilled in; after the unlock only the money moves it.
macro_rules! on_order_conflict {
    () => {
        "ON CONFLICT (order_id) DO UPDATE SET \
        checkout_session_id = COALESCE(orders.checkout_session_id, excluded.checkout_session_id), \
        payment_intent_id = COALESCE(orders.payment_intent_id, excluded.payment_intent_id), \
        customer_id = COALESCE(orders.customer_id, excluded.customer_id), \
        customer_email = COALESCE(orders.customer_email, excluded.customer_email), \
        package = COALESCE(orders.package, excluded.package), \
        amount = COALESCE(orders.amount, excluded.amount), \
        currency = COALESCE(orders.currency, excluded.currency), \
        status = CASE WHEN \
            (CASE excluded.status WHEN 'awaiting_payment' THEN 0 WHEN 'payment_failed' THEN 1 \
                                  WHEN 'paid' THEN 2 ELSE 3 END) > \
            (CASE orders.status WHEN 'awaiting_payment' THEN 0 WHEN 'payment_failed' THEN 1 \
                                WHEN 'paid' THEN 2 ELSE 3 END) \
            THEN excluded.status ELSE orders.status END, \
        payment_status = CASE WHEN orders.status IN ('awaiting_payment', 'payment_failed') \
            THEN excluded.payment_status ELSE orders.payment_status END, \
        updated_at = excluded.updated_at"
    };
}

const UPSERT_ORDER: &str = concat!(
    "INSERT INTO orders (order_id, checkout_session_id, payment_intent_id, customer_id, ",
    "customer_email, package, credits, status, payment_status, created_at, updated_at, ",
    "amount, currency) ",
    "VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $10, $11, $12) ",
    on_order_conflict!()
);

/// Orders of a batch whose money moved before they were unlocked (a refund or dispute
/// fulfilled before the payment): their unlock is settled against those facts.
macro_rules! with_money_facts {
    () => {
        "amount_refunded > 0 OR dispute_id IS NOT NULL \
         OR EXISTS (SELECT 1 FROM failed_refunds f WHERE f.order_id = orders.order_id)"
    };
}
const WITH_MONEY_FACTS: &str = with_money_facts!();

/// A batch of distinct orders in one statement: PostgreSQL reads them from arrays, and
/// returns each order as it now stands with whether its money moved before: what the batch's
/// unlocks need, so they never read the orders again.
const UPSERT_ORDERS_POSTGRES: &str = concat!(
    "INSERT INTO orders (order_id, checkout_session_id, payment_intent_id, customer_id, ",
    "customer_email, package, credits, status, payment_status, created_at, updated_at, ",
    "amount, currency) ",
    "SELECT o, s, pi, c, e, p, cr, st, ps, $10, $10, am, cu FROM UNNEST($1::text[], ",
    "$2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::bigint[], $8::text[], ",
    "$9::text[], $11::bigint[], $12::text[]) AS u(o, s, pi, c, e, p, cr, st, ps, am, cu) ",
    on_order_conflict!(),
    " RETURNING order_id, status, credits, customer_email, customer_id, (",
    with_money_facts!(),
    ")"
);

/// SQLite reads them from a JSON array (`WHERE true` lets the parser see the upsert).
const UPSERT_ORDERS_SQLITE: &str = concat!(
    "INSERT INTO orders (order_id, checkout_session_id, payment_intent_id, customer_id, ",
    "customer_email, package, credits, status, payment_status, created_at, updated_at, ",
    "amount, currency) ",
    "SELECT value ->> '$[0]', value ->> '$[1]', value ->> '$[2]', value ->> '$[3]', ",
    "value ->> '$[4]', value ->> '$[5]', value ->> '$[6]', value ->> '$[7]', value ->> '$[8]', ",
    "$2, $2, value ->> '$[9]', value ->> '$[10]' FROM json_each($1) WHERE true ",
    on_order_conflict!()
);

/// Unlock entries for a batch of paid orders, from arrays the upsert returned; names the
/// orders that got theirs now (not before).
///
/// Joining the orders here instead let PostgreSQL plan a hash join over a sequential scan of
/// every order whenever its statistics were stale (a fresh database, autovacuum behind a bulk
/// load): each batch read the whole table, so fulfilment slowed as orders grew.
const UNLOCK_POSTGRES: &str = "\
    INSERT INTO credit_ledger (order_id, kind, delta, customer_email, customer_id, event_id, \
                               created_at) \
    SELECT o, 'unlock', d, e, c, ev, $6 \
    FROM UNNEST($1::text[], $2::bigint[], $3::text[], $4::text[], $5::text[]) AS u(o, d, e, c, ev) \
    ON CONFLICT DO NOTHING RETURNING order_id";

const UNLOCK_SQLITE: &str = "\
    INSERT INTO credit_ledger (order_id, kind, delta, customer_email, customer_id, event_id, \
                               created_at) \
    SELECT o.order_id, 'unlock', o.credits, o.customer_email, o.customer_id, \
           u.value ->> '$[1]', $2 \
    FROM json_each($1) AS u JOIN orders o ON o.order_id = u.value ->> '$[0]' \
    WHERE o.status = 'paid' \
    ON CONFLICT DO NOTHING";

/// Marks a batch processed. Holding the lease is the whole condition: every transition out of
/// `processing` clears `lease_owner`. Naming the status too would let PostgreSQL's planner
/// intersect the primary key with the status index, which under load reads every claim in
/// flight.
const MARK_ALL_PROCESSED_POSTGRES: &str = "\
    UPDATE processed_stripe_events \
    SET status = 'processed', processed_at = $3, lease_owner = NULL, lease_expires_at = NULL, \
        last_error = NULL \
    WHERE event_id = ANY($1::text[]) AND lease_owner = $2";

const MARK_ALL_PROCESSED_SQLITE: &str = "\
    UPDATE processed_stripe_events \
    SET status = 'processed', processed_at = $3, lease_owner = NULL, lease_expires_at = NULL, \
        last_error = NULL \
    WHERE event_id IN (SELECT value FROM json_each($1)) AND lease_owner = $2";

/// The unlock entry, written only while the order is paid (never after a refund).
const UNLOCK: &str = "\
    INSERT INTO credit_ledger (order_id, kind, delta, customer_email, customer_id, event_id, \
                               created_at) \
    SELECT order_id, 'unlock', credits, customer_email, customer_id, $2, $3 \
    FROM orders WHERE order_id = $1 AND status = 'paid' \
    ON CONFLICT DO NOTHING";

const MARK_PROCESSED: &str = "\
    UPDATE processed_stripe_events \
    SET status = 'processed', processed_at = $3, lease_owner = NULL, lease_expires_at = NULL, \
        last_error = NULL \
    WHERE event_id = $1 AND lease_owner = $2 AND status = 'processing'";

const RECORD_FAILURE: &str = "\
    UPDATE processed_stripe_events \
    SET lease_owner = NULL, lease_expires_at = NULL, last_error = $3, next_attempt_at = $4, \
        status = CASE WHEN attempts >= $5 THEN 'failed' ELSE 'processing' END \
    WHERE event_id = $1 AND lease_owner = $2 AND status = 'processing' \
    RETURNING status";

/// Gives a claim back after the database was unavailable for its whole lease: the attempt
/// taken with the lease is handed back.
const RELEASE_UNCOUNTED: &str = "\
    UPDATE processed_stripe_events \
    SET lease_owner = NULL, lease_expires_at = NULL, attempts = attempts - 1, \
        next_attempt_at = $3, last_error = $4 \
    WHERE event_id = $1 AND lease_owner = $2 AND status = 'processing' AND attempts > 0";

/// [`ClaimState::is_redrivable`] in SQL, at the time in parameter `$now`: pending (no
/// lease), stale (its lease is over) or failed. Re-drive's compare-and-set and the bulk
/// selection both read it; `core/tests/store.rs` holds it to the Rust rule state by state.
///
/// [`ClaimState::is_redrivable`]: crate::ClaimState::is_redrivable
macro_rules! redrivable_sql {
    ($now:literal) => {
        concat!(
            "(status IN ('processing', 'failed') AND (lease_expires_at IS NULL OR lease_expires_at <= ",
            $now,
            "))"
        )
    };
}
pub(super) use redrivable_sql;

/// Re-drive's compare-and-set: the lease is taken only if nobody holds a live one and the
/// claim is not processed; two operators (or an operator and a worker) cannot both win.
const TAKE_FOR_REDRIVE: &str = concat!(
    "UPDATE processed_stripe_events \
     SET lease_owner = $2, lease_expires_at = $3, attempts = attempts + 1, \
         status = 'processing', next_attempt_at = $4 \
     WHERE event_id = $1 AND ",
    redrivable_sql!("$4"),
    " RETURNING event_id, event_type, payload, attempts, received_at"
);

fn session_status(action: SessionAction) -> &'static str {
    match action {
        SessionAction::Unlock => "paid",
        SessionAction::AwaitPayment => "awaiting_payment",
        SessionAction::PaymentFailed => "payment_failed",
    }
}

/// The statements of fulfilling one claim, bound once per backend; [`apply_plan`] chains
/// them (with the settlement of [`MoneyTx`]) once for both.
trait FulfilTx {
    /// Creates the order or moves it forward (see `on_order_conflict!`).
    fn upsert_order<'a>(
        &'a mut self,
        order: &'a OrderFacts,
        status: &'static str,
        now: i64,
    ) -> Write<'a, ()>;
    /// Writes the order's unlock for `event_id` if it is paid and has none; rows written.
    fn unlock<'a>(&'a mut self, order_id: &'a str, event_id: &'a str, now: i64) -> Write<'a, u64>;
    /// Marks the claim processed if `owner` still holds its lease; rows marked.
    fn mark_processed<'a>(
        &'a mut self,
        event_id: &'a str,
        owner: &'a str,
        now: i64,
    ) -> Write<'a, u64>;
}

macro_rules! impl_fulfil_tx {
    ($db:ty) => {
        impl FulfilTx for sqlx::Transaction<'static, $db> {
            fn upsert_order<'a>(
                &'a mut self,
                order: &'a OrderFacts,
                status: &'static str,
                now: i64,
            ) -> Write<'a, ()> {
                Box::pin(async move {
                    sqlx::query(UPSERT_ORDER)
                        .bind(order.order_id.as_str())
                        .bind(order.session_id.as_str())
                        .bind(order.payment_intent.as_deref())
                        .bind(order.customer_id.as_deref())
                        .bind(order.customer_email.as_deref())
                        .bind(order.package.as_deref())
                        .bind(order.credits)
                        .bind(status)
                        .bind(order.payment_status.as_str())
                        .bind(now)
                        .bind(order.amount)
                        .bind(order.currency.as_deref())
                        .execute(&mut **self)
                        .await?;
                    Ok(())
                })
            }

            fn unlock<'a>(
                &'a mut self,
                order_id: &'a str,
                event_id: &'a str,
                now: i64,
            ) -> Write<'a, u64> {
                Box::pin(async move {
                    Ok(sqlx::query(UNLOCK)
                        .bind(order_id)
                        .bind(event_id)
                        .bind(now)
                        .execute(&mut **self)
                        .await?
                        .rows_affected())
                })
            }

            fn mark_processed<'a>(
                &'a mut self,
                event_id: &'a str,
                owner: &'a str,
                now: i64,
            ) -> Write<'a, u64> {
                Box::pin(async move {
                    Ok(sqlx::query(MARK_PROCESSED)
                        .bind(event_id)
                        .bind(owner)
                        .bind(now)
                        .execute(&mut **self)
                        .await?
                        .rows_affected())
                })
            }
        }
    };
}

impl_fulfil_tx!(sqlx::Sqlite);
impl_fulfil_tx!(sqlx::Postgres);

/// Writes `plan`'s effect for `event_id` and marks it processed inside `tx`, if `owner`
/// still holds its lease. Nothing is committed here.
async fn apply_plan<T: FulfilTx + MoneyTx + Send>(
    tx: &mut T,
    event_id: &str,
    owner: &str,
    plan: &Plan,
    now: i64,
) -> Result<Fulfilled, StoreError> {
    match plan {
        Plan::Session { order, action } => {
            // The upsert takes the order's row lock before anything reads its ledger.
            tx.upsert_order(order, session_status(*action), now).await?;
            if *action == SessionAction::Unlock
                && tx.unlock(order.order_id.as_str(), event_id, now).await? == 1
            {
                tx.settle_credits(order.order_id.as_str(), StepSource::Event(event_id), now)
                    .await?;
            }
        }
        Plan::Money {
            payment_intent,
            event,
        } => {
            let Some(order_id) = tx.lock_order_by_payment(payment_intent).await? else {
                return Ok(Fulfilled::OrderNotFound {
                    payment_intent: payment_intent.clone(),
                });
            };
            tx.record_money_event(&order_id, event, event_id, now)
                .await?;
            tx.settle_credits(&order_id, StepSource::Event(event_id), now)
                .await?;
        }
    }
    crate::failpoint::hit("after-ledger").await;
    if tx.mark_processed(event_id, owner, now).await? == 1 {
        Ok(Fulfilled::Processed)
    } else {
        Ok(Fulfilled::LeaseLost)
    }
}

impl Claims<'_> {
    /// Leases the next due claim to `owner` (see [`Store::lease_due`]).
    pub async fn lease_next(
        self,
        owner: &str,
        now: i64,
        lease_ms: i64,
        rescue_stale: bool,
        max_attempts: i64,
    ) -> Result<Option<LeasedClaim>, StoreError> {
        let mut claims = self
            .lease_due(owner, now, lease_ms, rescue_stale, max_attempts, 1)
            .await?;
        Ok(claims.pop())
    }

    /// Leases up to `limit` due claims to `owner` until `now + lease_ms`, oldest first. With
    /// `rescue_stale`, claims whose lease expired (their worker died) are due too, while they
    /// have attempts left (`max_attempts`).
    pub async fn lease_due(
        self,
        owner: &str,
        now: i64,
        lease_ms: i64,
        rescue_stale: bool,
        max_attempts: i64,
        limit: i64,
    ) -> Result<Vec<LeasedClaim>, StoreError> {
        let sql = match self.pool {
            Pool::Sqlite(_) => LEASE_SQLITE,
            Pool::Postgres(_) => LEASE_POSTGRES,
        };
        let mut rows: Vec<(String, String, String, i64, i64)> = on_pool!(self, pool => {
            let mut tx = pool.begin_write().await?;
            let rows = sqlx::query_as(sql)
                .bind(owner)
                .bind(now + lease_ms)
                .bind(now)
                .bind(rescue_stale)
                .bind(max_attempts)
                .bind(limit)
                .fetch_all(&mut *tx)
                .await?;
            tx.commit().await?;
            rows
        });
        // RETURNING follows no order: work the oldest first (a session before its refund).
        rows.sort_by_key(|row| row.4);
        rows.into_iter()
            .map(|(event_id, event_type, payload, attempts, received_at)| {
                Ok(LeasedClaim {
                    event_id: EventId::parse(event_id)
                        .map_err(|e| StoreError::Corrupt(e.to_string()))?,
                    event_type,
                    payload,
                    attempts,
                    received_at,
                })
            })
            .collect()
    }

    /// Applies `plan` for `claim` and marks it processed, in one transaction that commits
    /// only while `owner` still holds the lease.
    pub async fn fulfil(
        self,
        claim: &LeasedClaim,
        owner: &str,
        plan: &Plan,
        now: i64,
    ) -> Result<Fulfilled, StoreError> {
        on_pool!(self, pool => {
            let mut tx = pool.begin_write().await?;
            let fulfilled = apply_plan(&mut tx, claim.event_id.as_str(), owner, plan, now).await?;
            if fulfilled == Fulfilled::Processed {
                tx.commit().await?;
            }
            // Otherwise dropping the transaction rolls the effect back.
            Ok(fulfilled)
        })
    }

    /// Fulfils a batch leased by `owner` in one transaction (one commit for all). `None` if
    /// the lease of any of them was lost: nothing is written and the caller goes one by one.
    /// A refund whose order is not known yet is skipped (no writes) and reported as such.
    pub async fn fulfil_batch(
        self,
        batch: &[(&LeasedClaim, &Plan)],
        owner: &str,
        now: i64,
    ) -> Result<Option<Vec<Fulfilled>>, StoreError> {
        if let Some(sessions) = distinct_sessions(batch) {
            return self.fulfil_sessions(sessions, owner, now).await;
        }
        on_pool!(self, pool => {
            let mut tx = pool.begin_write().await?;
            let mut results = Vec::with_capacity(batch.len());
            for (claim, plan) in batch {
                let fulfilled = apply_plan(&mut tx, claim.event_id.as_str(), owner, plan, now).await?;
                if fulfilled == Fulfilled::LeaseLost {
                    return Ok(None);
                }
                results.push(fulfilled);
            }
            tx.commit().await?;
            Ok(Some(results))
        })
    }

    /// Fails stale claims that have used up their attempts; returns how many.
    pub async fn fail_exhausted_stale(
        self,
        now: i64,
        max_attempts: i64,
    ) -> Result<u64, StoreError> {
        let failed = on_pool!(self, pool => {
            sqlx::query(FAIL_EXHAUSTED_STALE)
                .bind(now)
                .bind(max_attempts)
                .execute(pool)
                .await
                .map(|r| r.rows_affected())
        })?;
        Ok(failed)
    }

    /// Takes the lease on `event_id` for a re-drive, if it is pending, stale or failed.
    pub async fn take_for_redrive(
        self,
        event_id: &EventId,
        owner: &str,
        now: i64,
        lease_ms: i64,
    ) -> Result<Option<LeasedClaim>, StoreError> {
        let row: Option<(String, String, String, i64, i64)> = on_pool!(self, pool => {
            let mut tx = pool.begin_write().await?;
            let row = sqlx::query_as(TAKE_FOR_REDRIVE)
                .bind(event_id.as_str())
                .bind(owner)
                .bind(now + lease_ms)
                .bind(now)
                .fetch_optional(&mut *tx)
                .await?;
            tx.commit().await?;
            row
        });
        Ok(row.map(
            |(_, event_type, payload, attempts, received_at)| LeasedClaim {
                event_id: event_id.clone(),
                event_type,
                payload,
                attempts,
                received_at,
            },
        ))
    }

    /// Gives a leased claim back without counting its attempt (the database, not the claim,
    /// was the problem).
    pub async fn release_uncounted(
        self,
        event_id: &EventId,
        owner: &str,
        next_attempt_at: i64,
        why: &str,
    ) -> Result<(), StoreError> {
        on_pool!(self, pool => {
            let mut tx = pool.begin_write().await?;
            sqlx::query(RELEASE_UNCOUNTED)
                .bind(event_id.as_str())
                .bind(owner)
                .bind(next_attempt_at)
                .bind(why)
                .execute(&mut *tx)
                .await?;
            tx.commit().await?;
        });
        Ok(())
    }

    /// Records a failed attempt: the lease is released and the claim retried at
    /// `next_attempt_at`, or marked `failed` once it has had `max_attempts`. Returns whether
    /// it is now failed; `None` if `owner` no longer held the lease.
    pub async fn record_failure(
        self,
        event_id: &EventId,
        owner: &str,
        error: &str,
        next_attempt_at: i64,
        max_attempts: i64,
    ) -> Result<Option<bool>, StoreError> {
        let status: Option<String> = on_pool!(self, pool => {
            let mut tx = pool.begin_write().await?;
            let status = sqlx::query_scalar(RECORD_FAILURE)
                .bind(event_id.as_str())
                .bind(owner)
                .bind(error)
                .bind(next_attempt_at)
                .bind(max_attempts)
                .fetch_optional(&mut *tx)
                .await?;
            tx.commit().await?;
            status
        });
        Ok(status.map(|s| s == "failed"))
    }
}

/// A batch of session plans, one per order, in order id order (so concurrent batches lock
/// shared orders in the same order); `None` if the batch holds anything else.
type SessionBatch<'a> = Vec<(&'a LeasedClaim, &'a OrderFacts, SessionAction)>;

/// An order as the batch upsert left it: id, status, credits, customer e-mail and id, and
/// whether its money moved before it was unlocked.
type UpsertedOrder = (String, String, i64, Option<String>, Option<String>, bool);

fn distinct_sessions<'a>(batch: &[(&'a LeasedClaim, &'a Plan)]) -> Option<SessionBatch<'a>> {
    let mut sessions: SessionBatch<'a> = batch
        .iter()
        .map(|(claim, plan)| match plan {
            Plan::Session { order, action } => Some((*claim, order, *action)),
            _ => None,
        })
        .collect::<Option<_>>()?;
    sessions.sort_by(|a, b| a.1.order_id.cmp(&b.1.order_id));
    if sessions
        .windows(2)
        .any(|pair| pair[0].1.order_id == pair[1].1.order_id)
    {
        return None;
    }
    Some(sessions)
}

impl Claims<'_> {
    /// Fulfils a batch of session plans for distinct orders set-based: one statement upserts
    /// every order, one writes every unlock, one marks every claim processed, all in one
    /// transaction that commits only if `owner` still holds every lease.
    async fn fulfil_sessions(
        self,
        sessions: SessionBatch<'_>,
        owner: &str,
        now: i64,
    ) -> Result<Option<Vec<Fulfilled>>, StoreError> {
        let n = sessions.len();
        let unlocks: Vec<(&str, &str)> = sessions
            .iter()
            .filter(|(_, _, action)| *action == SessionAction::Unlock)
            .map(|(claim, order, _)| (order.order_id.as_str(), claim.event_id.as_str()))
            .collect();
        let event_ids: Vec<&str> = sessions
            .iter()
            .map(|(c, _, _)| c.event_id.as_str())
            .collect();
        let marked = match &self.pool {
            Pool::Postgres(pool) => {
                let mut tx = pool.begin().await?;
                let column = |f: fn(&OrderFacts) -> Option<&str>| -> Vec<Option<String>> {
                    sessions
                        .iter()
                        .map(|(_, o, _)| f(o).map(str::to_owned))
                        .collect()
                };
                let upserted: Vec<UpsertedOrder> = sqlx::query_as(UPSERT_ORDERS_POSTGRES)
                    .bind(column(|o| Some(o.order_id.as_str())))
                    .bind(column(|o| Some(o.session_id.as_str())))
                    .bind(column(|o| o.payment_intent.as_deref()))
                    .bind(column(|o| o.customer_id.as_deref()))
                    .bind(column(|o| o.customer_email.as_deref()))
                    .bind(column(|o| o.package.as_deref()))
                    .bind(
                        sessions
                            .iter()
                            .map(|(_, o, _)| o.credits)
                            .collect::<Vec<i64>>(),
                    )
                    .bind(
                        sessions
                            .iter()
                            .map(|(_, _, a)| session_status(*a))
                            .collect::<Vec<&str>>(),
                    )
                    .bind(column(|o| Some(o.payment_status.as_str())))
                    .bind(now)
                    .bind(
                        sessions
                            .iter()
                            .map(|(_, o, _)| o.amount)
                            .collect::<Vec<Option<i64>>>(),
                    )
                    .bind(column(|o| o.currency.as_deref()))
                    .fetch_all(&mut *tx)
                    .await?;
                let by_id: HashMap<&str, &UpsertedOrder> =
                    upserted.iter().map(|o| (o.0.as_str(), o)).collect();
                // Only the orders that are paid now are unlocked (never one refunded since).
                // An order the upsert did not return would lose its unlock unseen: the batch
                // is refused instead (rolled back, worked claim by claim).
                let mut paid: Vec<(&UpsertedOrder, &str)> = Vec::with_capacity(unlocks.len());
                for (order_id, event_id) in &unlocks {
                    let order = by_id.get(order_id).ok_or_else(|| {
                        StoreError::Corrupt(format!("the batch upsert did not return {order_id}"))
                    })?;
                    if order.1 == "paid" {
                        paid.push((order, event_id));
                    }
                }
                if !paid.is_empty() {
                    let unlocked: Vec<String> = sqlx::query_scalar(UNLOCK_POSTGRES)
                        .bind(paid.iter().map(|(o, _)| o.0.as_str()).collect::<Vec<_>>())
                        .bind(paid.iter().map(|(o, _)| o.2).collect::<Vec<i64>>())
                        .bind(paid.iter().map(|(o, _)| o.3.as_deref()).collect::<Vec<_>>())
                        .bind(paid.iter().map(|(o, _)| o.4.as_deref()).collect::<Vec<_>>())
                        .bind(paid.iter().map(|(_, e)| *e).collect::<Vec<&str>>())
                        .bind(now)
                        .fetch_all(&mut *tx)
                        .await?;
                    let moved: Vec<String> = unlocked
                        .into_iter()
                        .filter(|id| by_id.get(id.as_str()).is_some_and(|o| o.5))
                        .collect();
                    settle_moved(&mut tx, &unlocks, &moved, now).await?;
                }
                crate::failpoint::hit("after-ledger").await;
                let marked = sqlx::query(MARK_ALL_PROCESSED_POSTGRES)
                    .bind(&event_ids)
                    .bind(owner)
                    .bind(now)
                    .execute(&mut *tx)
                    .await?
                    .rows_affected();
                if marked as usize == n {
                    tx.commit().await?;
                }
                marked
            }
            Pool::Sqlite(pool) => {
                let mut tx = pool.begin_write().await?;
                let rows: Vec<serde_json::Value> = sessions
                    .iter()
                    .map(|(_, o, action)| {
                        serde_json::json!([
                            o.order_id.as_str(),
                            o.session_id,
                            o.payment_intent,
                            o.customer_id,
                            o.customer_email,
                            o.package,
                            o.credits,
                            session_status(*action),
                            o.payment_status,
                            o.amount,
                            o.currency,
                        ])
                    })
                    .collect();
                sqlx::query(UPSERT_ORDERS_SQLITE)
                    .bind(serde_json::Value::Array(rows).to_string())
                    .bind(now)
                    .execute(&mut *tx)
                    .await?;
                if !unlocks.is_empty() {
                    let orders: Vec<&str> = unlocks.iter().map(|(order, _)| *order).collect();
                    sqlx::query(UNLOCK_SQLITE)
                        .bind(serde_json::json!(unlocks).to_string())
                        .bind(now)
                        .execute(&mut *tx)
                        .await?;
                    let sql = format!(
                        "SELECT order_id FROM orders \
                         WHERE order_id IN (SELECT value FROM json_each($1)) \
                         AND ({WITH_MONEY_FACTS})"
                    );
                    let moved: Vec<String> = sqlx::query_scalar(&sql)
                        .bind(serde_json::json!(orders).to_string())
                        .fetch_all(&mut *tx)
                        .await?;
                    settle_moved(&mut tx, &unlocks, &moved, now).await?;
                }
                crate::failpoint::hit("after-ledger").await;
                let marked = sqlx::query(MARK_ALL_PROCESSED_SQLITE)
                    .bind(serde_json::json!(event_ids).to_string())
                    .bind(owner)
                    .bind(now)
                    .execute(&mut *tx)
                    .await?
                    .rows_affected();
                if marked as usize == n {
                    tx.commit().await?;
                }
                marked
            }
        };
        // Fewer marked: a lease was lost; the transaction rolled back on drop.
        if marked as usize == n {
            Ok(Some(vec![Fulfilled::Processed; n]))
        } else {
            Ok(None)
        }
    }
}

/// Settles the unlocks of a batch against money facts recorded before them (rare: a refund
/// or dispute fulfilled before the payment's own event).
async fn settle_moved<T: MoneyTx>(
    tx: &mut T,
    unlocks: &[(&str, &str)],
    moved: &[String],
    now: i64,
) -> Result<(), StoreError> {
    for (order_id, event_id) in unlocks {
        if moved.iter().any(|m| m == order_id) {
            tx.settle_credits(order_id, StepSource::Event(event_id), now)
                .await?;
        }
    }
    Ok(())
}
