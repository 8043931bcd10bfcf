//! Fulfilling leased claims: the plan's effect written and the claim marked processed in one
//! transaction that commits only while the worker still holds the lease, so a worker whose
//! lease was taken over can never complete a claim twice. One claim or a batch, on either
//! backend, goes through one chain ([`apply_sessions`], [`apply_plan`]); the statements it
//! chains are bound per backend ([`FulfilTx`]: PostgreSQL reads a batch from arrays, SQLite
//! from JSON), and which order is unlocked and which is settled is decided once, in Rust.

use std::collections::HashMap;

use super::money::{MoneyTx, StepSource};
use super::subscribing::{SubscribeTx, apply_paid_invoice};
use super::{BeginWrite, Claims, LeasedClaim, Pool, Write};
use crate::billing::SubscriptionFacts;
use crate::error::StoreError;
use crate::fulfilment::{OrderFacts, Plan, SessionAction};
use crate::money::OrderStatus;

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
    /// A paid invoice whose credits nothing assigns to a customer yet (no e-mail on it, no
    /// Checkout Session of its subscription, no reference the order API was asked for):
    /// nothing was written; retry later.
    CustomerUnknown { invoice_id: String },
    /// A subscription schedule's next phase names a price not read from Stripe yet: nothing
    /// was written; retry later.
    PriceUnknown {
        schedule_id: String,
        price_id: String,
    },
    /// A paid invoice whose payment intent already pays another order (another invoice, or a
    /// one-off order): the payload contradicts what is stored, so nothing was written and no
    /// retry can change that.
    PaymentTaken {
        invoice_id: String,
        payment_intent: String,
        order_id: String,
    },
}

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

/// Orders of a batch whose money moved before they were unlocked (a refund or dispute
/// fulfilled before the payment): their unlock is settled against those facts.
macro_rules! with_money_facts {
    () => {
        "amount_refunded > 0 OR dispute_id IS NOT NULL \
         OR EXISTS (SELECT 1 FROM failed_refunds f WHERE f.order_id = orders.order_id)"
    };
}
/// What the upserts return of each order: an [`UpsertedOrder`].
macro_rules! upserted_columns {
    () => {
        concat!(
            " RETURNING order_id, status, credits, customer_email, customer_id, (",
            with_money_facts!(),
            ") AS money_moved"
        )
    };
}

/// Every order of a batch, upserted from arrays; each returned as it now stands.
const UPSERT_ORDERS_POSTGRES: &str = concat!(
    "INSERT INTO orders (order_id, checkout_session_id, payment_intent_id, customer_id, ",
    "customer_email, package, credits, status, payment_status, created_at, updated_at, ",
    "amount, currency) ",
    "SELECT o, s, pi, c, e, p, cr, st, ps, $10, $10, am, cu FROM UNNEST($1::text[], ",
    "$2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::bigint[], $8::text[], ",
    "$9::text[], $11::bigint[], $12::text[]) AS u(o, s, pi, c, e, p, cr, st, ps, am, cu) ",
    on_order_conflict!(),
    upserted_columns!()
);

/// The same from a JSON array (`WHERE true` lets SQLite's parser see the upsert).
const UPSERT_ORDERS_SQLITE: &str = concat!(
    "INSERT INTO orders (order_id, checkout_session_id, payment_intent_id, customer_id, ",
    "customer_email, package, credits, status, payment_status, created_at, updated_at, ",
    "amount, currency) ",
    "SELECT value ->> '$[0]', value ->> '$[1]', value ->> '$[2]', value ->> '$[3]', ",
    "value ->> '$[4]', value ->> '$[5]', value ->> '$[6]', value ->> '$[7]', value ->> '$[8]', ",
    "$2, $2, value ->> '$[9]', value ->> '$[10]' FROM json_each($1) WHERE true ",
    on_order_conflict!(),
    upserted_columns!()
);

/// The unlocks of the orders the chain found paid, from the values the upsert returned, so
/// nothing reads the orders again; names the orders that got theirs now (not before).
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
    SELECT value ->> '$[0]', 'unlock', value ->> '$[1]', value ->> '$[2]', value ->> '$[3]', \
           value ->> '$[4]', $2 \
    FROM json_each($1) WHERE true \
    ON CONFLICT DO NOTHING RETURNING order_id";

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

fn session_status(action: SessionAction) -> &'static str {
    match action {
        SessionAction::Unlock => OrderStatus::Paid.as_str(),
        SessionAction::AwaitPayment => OrderStatus::AwaitingPayment.as_str(),
        SessionAction::PaymentFailed => OrderStatus::PaymentFailed.as_str(),
    }
}

/// A session event's effect on its order, for one claim.
#[derive(Debug, Clone, Copy)]
struct SessionEffect<'a> {
    event_id: &'a str,
    order: &'a OrderFacts,
    action: SessionAction,
}

/// An order as an upsert left it.
#[derive(Debug, sqlx::FromRow)]
struct UpsertedOrder {
    order_id: String,
    status: String,
    credits: i64,
    customer_email: Option<String>,
    customer_id: Option<String>,
    /// Its money moved before it was unlocked (a refund or dispute fulfilled before the
    /// payment's own event): its unlock is settled against those facts.
    money_moved: bool,
}

/// One unlock to write.
#[derive(Debug, Clone, Copy)]
struct Unlock<'a> {
    order_id: &'a str,
    credits: i64,
    customer_email: Option<&'a str>,
    customer_id: Option<&'a str>,
    event_id: &'a str,
}

/// The statements of fulfilment that differ per backend; [`apply_sessions`] and
/// [`apply_plan`] chain them (with the settlement of [`MoneyTx`]) once for both.
trait FulfilTx {
    /// Creates the sessions' orders or moves them forward (see `on_order_conflict!`); each
    /// order as it now stands.
    fn upsert_orders<'a>(
        &'a mut self,
        sessions: &'a [SessionEffect<'a>],
        now: i64,
    ) -> Write<'a, Vec<UpsertedOrder>>;
    /// Writes the unlocks of the orders that have none yet; the orders unlocked now.
    fn unlock_all<'a>(&'a mut self, unlocks: &'a [Unlock<'a>], now: i64) -> Write<'a, Vec<String>>;
    /// Marks the claims processed where `owner` still holds their lease; rows marked.
    fn mark_all_processed<'a>(
        &'a mut self,
        event_ids: &'a [&'a str],
        owner: &'a str,
        now: i64,
    ) -> Write<'a, u64>;
}

impl FulfilTx for sqlx::Transaction<'static, sqlx::Postgres> {
    fn upsert_orders<'a>(
        &'a mut self,
        sessions: &'a [SessionEffect<'a>],
        now: i64,
    ) -> Write<'a, Vec<UpsertedOrder>> {
        Box::pin(async move {
            let text = |f: fn(&OrderFacts) -> Option<&str>| -> Vec<Option<&str>> {
                sessions.iter().map(|s| f(s.order)).collect()
            };
            Ok(sqlx::query_as(UPSERT_ORDERS_POSTGRES)
                .bind(text(|o| Some(o.order_id.as_str())))
                .bind(text(|o| Some(o.session_id.as_str())))
                .bind(text(|o| o.payment_intent.as_deref()))
                .bind(text(|o| o.customer_id.as_deref()))
                .bind(text(|o| o.customer_email.as_deref()))
                .bind(text(|o| o.package.as_deref()))
                .bind(
                    sessions
                        .iter()
                        .map(|s| s.order.credits)
                        .collect::<Vec<i64>>(),
                )
                .bind(
                    sessions
                        .iter()
                        .map(|s| session_status(s.action))
                        .collect::<Vec<&str>>(),
                )
                .bind(text(|o| Some(o.payment_status.as_str())))
                .bind(now)
                .bind(
                    sessions
                        .iter()
                        .map(|s| s.order.amount)
                        .collect::<Vec<Option<i64>>>(),
                )
                .bind(text(|o| o.currency.as_deref()))
                .fetch_all(&mut **self)
                .await?)
        })
    }

    fn unlock_all<'a>(&'a mut self, unlocks: &'a [Unlock<'a>], now: i64) -> Write<'a, Vec<String>> {
        Box::pin(async move {
            Ok(sqlx::query_scalar(UNLOCK_POSTGRES)
                .bind(unlocks.iter().map(|u| u.order_id).collect::<Vec<_>>())
                .bind(unlocks.iter().map(|u| u.credits).collect::<Vec<i64>>())
                .bind(unlocks.iter().map(|u| u.customer_email).collect::<Vec<_>>())
                .bind(unlocks.iter().map(|u| u.customer_id).collect::<Vec<_>>())
                .bind(unlocks.iter().map(|u| u.event_id).collect::<Vec<_>>())
                .bind(now)
                .fetch_all(&mut **self)
                .await?)
        })
    }

    fn mark_all_processed<'a>(
        &'a mut self,
        event_ids: &'a [&'a str],
        owner: &'a str,
        now: i64,
    ) -> Write<'a, u64> {
        Box::pin(async move {
            Ok(sqlx::query(MARK_ALL_PROCESSED_POSTGRES)
                .bind(event_ids)
                .bind(owner)
                .bind(now)
                .execute(&mut **self)
                .await?
                .rows_affected())
        })
    }
}

impl FulfilTx for sqlx::Transaction<'static, sqlx::Sqlite> {
    fn upsert_orders<'a>(
        &'a mut self,
        sessions: &'a [SessionEffect<'a>],
        now: i64,
    ) -> Write<'a, Vec<UpsertedOrder>> {
        Box::pin(async move {
            let rows: Vec<serde_json::Value> = sessions
                .iter()
                .map(|s| {
                    let o = s.order;
                    serde_json::json!([
                        o.order_id.as_str(),
                        o.session_id,
                        o.payment_intent,
                        o.customer_id,
                        o.customer_email,
                        o.package,
                        o.credits,
                        session_status(s.action),
                        o.payment_status,
                        o.amount,
                        o.currency,
                    ])
                })
                .collect();
            Ok(sqlx::query_as(UPSERT_ORDERS_SQLITE)
                .bind(serde_json::Value::Array(rows).to_string())
                .bind(now)
                .fetch_all(&mut **self)
                .await?)
        })
    }

    fn unlock_all<'a>(&'a mut self, unlocks: &'a [Unlock<'a>], now: i64) -> Write<'a, Vec<String>> {
        Box::pin(async move {
            let rows: Vec<serde_json::Value> = unlocks
                .iter()
                .map(|u| {
                    serde_json::json!([
                        u.order_id,
                        u.credits,
                        u.customer_email,
                        u.customer_id,
                        u.event_id
                    ])
                })
                .collect();
            Ok(sqlx::query_scalar(UNLOCK_SQLITE)
                .bind(serde_json::Value::Array(rows).to_string())
                .bind(now)
                .fetch_all(&mut **self)
                .await?)
        })
    }

    fn mark_all_processed<'a>(
        &'a mut self,
        event_ids: &'a [&'a str],
        owner: &'a str,
        now: i64,
    ) -> Write<'a, u64> {
        Box::pin(async move {
            Ok(sqlx::query(MARK_ALL_PROCESSED_SQLITE)
                .bind(serde_json::json!(event_ids).to_string())
                .bind(owner)
                .bind(now)
                .execute(&mut **self)
                .await?
                .rows_affected())
        })
    }
}

/// Whether an order as it now stands gets its credits: only a paid one (never one its money
/// moved on from: refunded, disputed), the one rule whatever path fulfils it.
fn unlocks(order: &UpsertedOrder) -> bool {
    order.status == OrderStatus::Paid.as_str()
}

/// Writes the sessions' effects inside `tx`: every order upserted, the paid ones unlocked
/// (once: the ledger holds one unlock per order), and the unlocks made now settled against
/// money that moved before them. Nothing is marked or committed here.
async fn apply_sessions<T: FulfilTx + MoneyTx + Send>(
    tx: &mut T,
    sessions: &[SessionEffect<'_>],
    now: i64,
) -> Result<(), StoreError> {
    // The upsert takes the orders' row locks before anything reads their ledger.
    let upserted = tx.upsert_orders(sessions, now).await?;
    let by_id: HashMap<&str, &UpsertedOrder> = upserted
        .iter()
        .map(|order| (order.order_id.as_str(), order))
        .collect();
    let mut wanted = Vec::new();
    for session in sessions
        .iter()
        .filter(|s| s.action == SessionAction::Unlock)
    {
        // An order the upsert did not return would lose its unlock unseen: refuse instead.
        let order = by_id.get(session.order.order_id.as_str()).ok_or_else(|| {
            StoreError::Inconsistent(format!(
                "the upsert did not return {}",
                session.order.order_id
            ))
        })?;
        if unlocks(order) {
            wanted.push(Unlock {
                order_id: &order.order_id,
                credits: order.credits,
                customer_email: order.customer_email.as_deref(),
                customer_id: order.customer_id.as_deref(),
                event_id: session.event_id,
            });
        }
    }
    if wanted.is_empty() {
        return Ok(());
    }
    let unlocked = tx.unlock_all(&wanted, now).await?;
    for unlock in &wanted {
        let moved = by_id.get(unlock.order_id).is_some_and(|o| o.money_moved);
        if moved && unlocked.iter().any(|id| id == unlock.order_id) {
            tx.settle_credits(unlock.order_id, StepSource::Event(unlock.event_id), now)
                .await?;
        }
    }
    Ok(())
}

/// Writes `plan`'s effect for `event_id` and marks it processed inside `tx`, if `owner`
/// still holds its lease. Nothing is committed here.
async fn apply_plan<T: FulfilTx + MoneyTx + SubscribeTx + Send>(
    tx: &mut T,
    event_id: &str,
    owner: &str,
    plan: &Plan,
    now: i64,
) -> Result<Fulfilled, StoreError> {
    match plan {
        Plan::Session { order, action } => {
            let effect = SessionEffect {
                event_id,
                order,
                action: *action,
            };
            apply_sessions(tx, &[effect], now).await?;
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
        Plan::Invoice(paid) => {
            if let Some(waiting) = apply_paid_invoice(tx, paid, event_id, now).await? {
                return Ok(waiting);
            }
        }
        Plan::InvoiceUnpaid(unpaid) => {
            // The row first (created, or locked), then the mark in a statement of its own.
            let facts = SubscriptionFacts {
                subscription_id: unpaid.subscription_id.clone(),
                subscription_ref: None,
                customer_id: unpaid.customer_id.clone(),
                customer_email: unpaid.customer_email.clone(),
                state: None,
            };
            tx.upsert_subscription(&facts, None, now).await?;
            tx.mark_unpaid(unpaid, now).await?;
        }
        Plan::Subscription(facts) => tx.upsert_subscription(facts, None, now).await?,
        Plan::Schedule(change) => {
            if let Some(price_id) = change.unpriced().into_iter().next() {
                return Ok(Fulfilled::PriceUnknown {
                    schedule_id: change.schedule_id.clone(),
                    price_id,
                });
            }
            tx.upsert_schedule(change, now).await?;
        }
        Plan::Record { .. } => {}
    }
    crate::failpoint::hit("after-ledger").await;
    if tx.mark_all_processed(&[event_id], owner, now).await? == 1 {
        Ok(Fulfilled::Processed)
    } else {
        Ok(Fulfilled::LeaseLost)
    }
}

/// Session plans for distinct orders, in order id order (so concurrent batches lock shared
/// orders in the same order); `None` if the batch holds anything else.
fn distinct_sessions<'a>(batch: &[(&'a LeasedClaim, &'a Plan)]) -> Option<Vec<SessionEffect<'a>>> {
    let mut sessions: Vec<SessionEffect<'a>> = batch
        .iter()
        .map(|(claim, plan)| match plan {
            Plan::Session { order, action } => Some(SessionEffect {
                event_id: claim.event_id.as_str(),
                order,
                action: *action,
            }),
            Plan::Money { .. }
            | Plan::Invoice(_)
            | Plan::InvoiceUnpaid(_)
            | Plan::Subscription(_)
            | Plan::Schedule(_)
            | Plan::Record { .. } => None,
        })
        .collect::<Option<_>>()?;
    sessions.sort_by(|a, b| a.order.order_id.cmp(&b.order.order_id));
    if sessions
        .windows(2)
        .any(|pair| pair[0].order.order_id == pair[1].order.order_id)
    {
        return None;
    }
    Some(sessions)
}

/// One claim's plan in its own transaction, committed if it was processed.
async fn fulfil_one<DB: sqlx::Database>(
    mut tx: sqlx::Transaction<'static, DB>,
    claim: &LeasedClaim,
    owner: &str,
    plan: &Plan,
    now: i64,
) -> Result<Fulfilled, StoreError>
where
    sqlx::Transaction<'static, DB>: FulfilTx + MoneyTx + SubscribeTx + Send,
{
    let fulfilled = apply_plan(&mut tx, claim.event_id.as_str(), owner, plan, now).await?;
    if fulfilled == Fulfilled::Processed {
        tx.commit().await?;
    }
    // Otherwise dropping the transaction rolls the effect back.
    Ok(fulfilled)
}

/// A batch in one transaction (one commit for all): set-based when it is sessions of
/// distinct orders (one statement upserts every order, one writes every unlock, one marks
/// every claim), claim by claim otherwise. `None` if any lease was lost: nothing is written.
async fn fulfil_many<DB: sqlx::Database>(
    mut tx: sqlx::Transaction<'static, DB>,
    batch: &[(&LeasedClaim, &Plan)],
    owner: &str,
    now: i64,
) -> Result<Option<Vec<Fulfilled>>, StoreError>
where
    sqlx::Transaction<'static, DB>: FulfilTx + MoneyTx + SubscribeTx + Send,
{
    let results = match distinct_sessions(batch) {
        Some(sessions) => {
            apply_sessions(&mut tx, &sessions, now).await?;
            crate::failpoint::hit("after-ledger").await;
            let event_ids: Vec<&str> = sessions.iter().map(|s| s.event_id).collect();
            let marked = tx.mark_all_processed(&event_ids, owner, now).await?;
            if marked as usize != sessions.len() {
                return Ok(None);
            }
            vec![Fulfilled::Processed; sessions.len()]
        }
        None => {
            let mut results = Vec::with_capacity(batch.len());
            for (claim, plan) in batch {
                let fulfilled =
                    apply_plan(&mut tx, claim.event_id.as_str(), owner, plan, now).await?;
                if fulfilled == Fulfilled::LeaseLost {
                    return Ok(None);
                }
                results.push(fulfilled);
            }
            results
        }
    };
    tx.commit().await?;
    Ok(Some(results))
}

impl Claims<'_> {
    /// Applies `plan` for `claim` and marks it processed, in one transaction that commits
    /// only while `owner` still holds the lease.
    pub async fn fulfil(
        self,
        claim: &LeasedClaim,
        owner: &str,
        plan: &Plan,
        now: i64,
    ) -> Result<Fulfilled, StoreError> {
        // The statements differ per backend (`FulfilTx`); the chain does not.
        match self.pool {
            Pool::Sqlite(db) => fulfil_one(db.begin_write().await?, claim, owner, plan, now).await,
            Pool::Postgres(pool) => {
                fulfil_one(pool.begin_write().await?, claim, owner, plan, now).await
            }
        }
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
        match self.pool {
            Pool::Sqlite(db) => fulfil_many(db.begin_write().await?, batch, owner, now).await,
            Pool::Postgres(pool) => fulfil_many(pool.begin_write().await?, batch, owner, now).await,
        }
    }
}
