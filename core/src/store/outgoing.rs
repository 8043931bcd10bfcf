//! Orders created through the order API, the record of every outgoing Stripe request, and
//! the effect of a refund Claimcheck made itself.

use serde::Serialize;

use super::money::{MoneyTx, StepSource};
use super::query::sql;
use super::{BeginWrite, Orders, Pool, StripeRequests};
use crate::error::StoreError;
use crate::ids::OrderId;
pub use crate::outgoing::RequestStatus;

/// An order the shop asks for: it exists before Stripe knows about it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewOrder {
    pub order_id: OrderId,
    pub package: String,
    pub credits: i64,
    /// In the currency's minor unit (4900 = CHF 49.00).
    pub amount: i64,
    pub currency: String,
    pub customer_email: String,
}

/// What asking for an order found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OrderCreation {
    Created,
    /// The same order was asked for before (same package and customer).
    Existing,
    /// An order with this id exists for another package or customer.
    Conflict,
}

/// One outgoing Stripe request as recorded. Field names are a contract for scripts (`--json`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct StripeRequestView {
    pub idempotency_key: String,
    pub operation: String,
    pub order_id: String,
    pub params_hash: String,
    pub status: RequestStatus,
    pub attempts: i64,
    pub http_status: Option<i64>,
    pub stripe_request_id: Option<String>,
    pub object_id: Option<String>,
    pub error: Option<String>,
    /// The money the request moves (a refund's amount), in minor units.
    pub amount: Option<i64>,
    /// When a Checkout Session was found expired and replaced by a new one.
    pub expired_at: Option<i64>,
    pub created_at: i64,
    pub updated_at: i64,
}

impl StripeRequestView {
    /// Stripe refused the request itself (a 4xx other than `idempotency_error`): nothing was
    /// made under its key, and the operation may be asked again under the next one.
    pub fn is_refused(&self) -> bool {
        self.status == RequestStatus::Failed
            && !crate::stripe::is_idempotency_error(self.error.as_deref().unwrap_or_default())
    }
}

/// The answer to one attempt, as it is written back on the request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestOutcome<'a> {
    pub status: RequestStatus,
    pub http_status: Option<u16>,
    pub stripe_request_id: Option<&'a str>,
    pub object_id: Option<&'a str>,
    pub error: Option<&'a str>,
}

type RequestRow = (
    String,
    String,
    String,
    String,
    String,
    i64,
    Option<i64>,
    Option<String>,
    Option<String>,
    Option<String>,
    i64,
    i64,
    Option<i64>,
    Option<i64>,
);

const REQUEST_COLUMNS: &str = "idempotency_key, operation, order_id, params_hash, status, \
    attempts, http_status, stripe_request_id, object_id, error, created_at, updated_at, \
    amount, expired_at";

fn request_view(row: RequestRow) -> Result<StripeRequestView, StoreError> {
    let (
        idempotency_key,
        operation,
        order_id,
        params_hash,
        status,
        attempts,
        http_status,
        stripe_request_id,
        object_id,
        error,
        created_at,
        updated_at,
        amount,
        expired_at,
    ) = row;
    Ok(StripeRequestView {
        amount,
        expired_at,
        status: status.parse().map_err(StoreError::UnknownValue)?,
        idempotency_key,
        operation,
        order_id,
        params_hash,
        attempts,
        http_status,
        stripe_request_id,
        object_id,
        error,
        created_at,
        updated_at,
    })
}

const INSERT_ORDER: &str = "\
    INSERT INTO orders (order_id, customer_email, package, credits, amount, currency, status, \
                        payment_status, created_at, updated_at) \
    VALUES ($1, $2, $3, $4, $5, $6, 'awaiting_payment', 'unpaid', $7, $7) \
    ON CONFLICT (order_id) DO NOTHING";

const INSERT_REQUEST: &str = "\
    INSERT INTO stripe_requests (idempotency_key, operation, order_id, params_hash, status, \
                                 amount, created_at, updated_at) \
    VALUES ($1, $2, $3, $4, 'pending', $6, $5, $5) \
    ON CONFLICT (idempotency_key) DO NOTHING";

/// An attempt is about to be sent. A succeeded or failed request is final and never resent.
const START_ATTEMPT: &str = "\
    UPDATE stripe_requests SET attempts = attempts + 1, updated_at = $2 \
    WHERE idempotency_key = $1 AND status IN ('pending', 'indeterminate') \
    RETURNING attempts";

const RECORD_OUTCOME: &str = "\
    UPDATE stripe_requests \
    SET status = $2, http_status = $3, stripe_request_id = COALESCE($4, stripe_request_id), \
        object_id = COALESCE($5, object_id), error = $6, updated_at = $7 \
    WHERE idempotency_key = $1 AND status <> 'succeeded' \
      AND (status IN ('pending', 'indeterminate') OR $2 = 'succeeded')";

const SET_CHECKOUT: &str = "\
    UPDATE orders SET checkout_session_id = COALESCE(checkout_session_id, $2), \
        checkout_url = COALESCE(checkout_url, $3), \
        checkout_expires_at = COALESCE(checkout_expires_at, $5), updated_at = $4 \
    WHERE order_id = $1";

/// Moves an open order whose session expired to the next generation (a compare-and-set on
/// the generation: of two callers one moves it). The session stays findable through its
/// request, marked expired.
const NEXT_CHECKOUT: &str = "\
    UPDATE orders SET checkout_generation = $2 + 1, checkout_session_id = NULL, \
        checkout_url = NULL, checkout_expires_at = NULL, updated_at = $3 \
    WHERE order_id = $1 AND checkout_generation = $2 AND status = 'awaiting_payment'";

const MARK_EXPIRED: &str = "\
    UPDATE stripe_requests SET expired_at = $3, updated_at = $3 \
    WHERE order_id = $1 AND operation = 'checkout_session' AND idempotency_key = $2 \
      AND expired_at IS NULL";

impl Orders<'_> {
    /// Records an order the shop asked for, unless it exists. An existing order with the same
    /// package and customer is the same request again.
    pub async fn create(self, order: &NewOrder, now: i64) -> Result<OrderCreation, StoreError> {
        let email = order.customer_email.trim().to_lowercase();
        let inserted = self
            .pool
            .on()
            .execute(
                sql(INSERT_ORDER)
                    .bind(order.order_id.as_str())
                    .bind(email.as_str())
                    .bind(order.package.as_str())
                    .bind(order.credits)
                    .bind(order.amount)
                    .bind(order.currency.as_str())
                    .bind(now),
            )
            .await?;
        if inserted == 1 {
            return Ok(OrderCreation::Created);
        }
        const EXISTING: &str = "SELECT package, customer_email FROM orders WHERE order_id = $1";
        let (package, existing_email): (Option<String>, Option<String>) = self
            .pool
            .on()
            .one(sql(EXISTING).bind(order.order_id.as_str()))
            .await?;
        if package.as_deref() == Some(order.package.as_str())
            && existing_email.as_deref() == Some(email.as_str())
        {
            Ok(OrderCreation::Existing)
        } else {
            Ok(OrderCreation::Conflict)
        }
    }

    /// Remembers the Checkout Session created for an order and when it expires (unix ms);
    /// the first one of a generation wins.
    pub async fn set_checkout_session(
        self,
        order_id: &OrderId,
        session_id: &str,
        url: Option<&str>,
        expires_at: i64,
        now: i64,
    ) -> Result<(), StoreError> {
        self.pool
            .on()
            .execute(
                sql(SET_CHECKOUT)
                    .bind(order_id.as_str())
                    .bind(session_id)
                    .bind(url)
                    .bind(now)
                    .bind(expires_at),
            )
            .await
            .map(|_| ())?;
        Ok(())
    }

    /// The open order's session of `generation` expired: the order moves to the next
    /// generation (unless another caller moved it already) and the old session's request is
    /// marked expired.
    pub async fn expire_checkout(
        self,
        order_id: &OrderId,
        generation: i64,
        now: i64,
    ) -> Result<(), StoreError> {
        let old_key = crate::stripe::Operation::CheckoutSession { generation }.key(order_id);
        {
            let mut tx = self.pool.begin().await?;
            let moved = tx
                .on()
                .execute(
                    sql(NEXT_CHECKOUT)
                        .bind(order_id.as_str())
                        .bind(generation)
                        .bind(now),
                )
                .await?;
            if moved == 1 {
                tx.on()
                    .execute(
                        sql(MARK_EXPIRED)
                            .bind(order_id.as_str())
                            .bind(old_key.as_str())
                            .bind(now),
                    )
                    .await?;
            }
            tx.commit().await?;
        };
        Ok(())
    }

    /// A refund of the order succeeded and `refunded_after` is refunded in total: revoke the
    /// credits in proportion and move the order's status, in one transaction under the
    /// order's row lock. The `charge.refunded` event for the same refund carries the same
    /// total and writes nothing (nor does this call after that event). Returns whether this
    /// call wrote a ledger step.
    pub async fn record_refund(
        self,
        order_id: &OrderId,
        key: &str,
        refunded_after: i64,
        now: i64,
    ) -> Result<bool, StoreError> {
        // Money's statements are bound per backend (`MoneyTx`).
        let settled = match self.pool {
            Pool::Sqlite(db) => {
                refund_settled(db.begin_write().await?, order_id, key, refunded_after, now).await?
            }
            Pool::Postgres(pool) => {
                refund_settled(
                    pool.begin_write().await?,
                    order_id,
                    key,
                    refunded_after,
                    now,
                )
                .await?
            }
        };
        Ok(settled)
    }
}

/// [`Orders::record_refund`] in `tx`: whether a ledger step was written.
async fn refund_settled<DB: sqlx::Database>(
    mut tx: sqlx::Transaction<'static, DB>,
    order_id: &OrderId,
    key: &str,
    refunded_after: i64,
    now: i64,
) -> Result<bool, StoreError>
where
    sqlx::Transaction<'static, DB>: MoneyTx + Send,
{
    if !tx.lock_order(order_id.as_str()).await? {
        return Err(StoreError::Missing(format!("order {order_id}")));
    }
    tx.record_refunded_amount(order_id.as_str(), refunded_after, now)
        .await?;
    let settled = tx
        .settle_credits(order_id.as_str(), StepSource::Request(key), now)
        .await?;
    tx.commit().await?;
    Ok(settled.rows > 0)
}

impl StripeRequests<'_> {
    /// Records a request under `key` before it is first sent; returns the record as it
    /// stands (the existing one if the key was recorded before).
    pub async fn record(
        self,
        key: &str,
        operation: &str,
        amount: Option<i64>,
        subject: &str,
        params_hash: &str,
        now: i64,
    ) -> Result<StripeRequestView, StoreError> {
        self.pool
            .on()
            .execute(
                sql(INSERT_REQUEST)
                    .bind(key)
                    .bind(operation)
                    .bind(subject)
                    .bind(params_hash)
                    .bind(now)
                    .bind(amount),
            )
            .await
            .map(|_| ())?;
        self.get(key)
            .await?
            .ok_or_else(|| StoreError::Missing(format!("stripe request {key}")))
    }

    pub async fn get(self, key: &str) -> Result<Option<StripeRequestView>, StoreError> {
        let statement =
            format!("SELECT {REQUEST_COLUMNS} FROM stripe_requests WHERE idempotency_key = $1");
        let row: Option<RequestRow> = self.pool.on().optional(sql(&statement).bind(key)).await?;
        row.map(request_view).transpose()
    }

    /// Every request recorded for an order, oldest first.
    pub async fn for_order(self, order_id: &str) -> Result<Vec<StripeRequestView>, StoreError> {
        let statement = format!(
            "SELECT {REQUEST_COLUMNS} FROM stripe_requests WHERE order_id = $1 \
             AND operation NOT LIKE 'subscription%' ORDER BY created_at, idempotency_key"
        );
        let rows: Vec<RequestRow> = self.pool.on().all(sql(&statement).bind(order_id)).await?;
        rows.into_iter().map(request_view).collect()
    }

    /// Every request recorded for a subscription the shop asked for, oldest first.
    pub async fn for_subscription(
        self,
        reference: &str,
    ) -> Result<Vec<StripeRequestView>, StoreError> {
        let statement = format!(
            "SELECT {REQUEST_COLUMNS} FROM stripe_requests WHERE order_id = $1 \
             AND operation LIKE 'subscription%' ORDER BY created_at, idempotency_key"
        );
        let rows: Vec<RequestRow> = self.pool.on().all(sql(&statement).bind(reference)).await?;
        rows.into_iter().map(request_view).collect()
    }

    /// The requests in `status`, the most recently updated first (up to `limit`), and how
    /// many there are in all.
    pub async fn in_status(
        self,
        status: RequestStatus,
        limit: i64,
    ) -> Result<(i64, Vec<StripeRequestView>), StoreError> {
        const COUNT: &str = "SELECT COUNT(*) FROM stripe_requests WHERE status = $1";
        let statement = format!(
            "SELECT {REQUEST_COLUMNS} FROM stripe_requests WHERE status = $1 \
             ORDER BY updated_at DESC, idempotency_key LIMIT $2"
        );
        let total: i64 = self
            .pool
            .on()
            .value(sql(COUNT).bind(status.as_str()))
            .await?;
        let rows: Vec<RequestRow> = self
            .pool
            .on()
            .all(sql(&statement).bind(status.as_str()).bind(limit))
            .await?;
        let rows = rows
            .into_iter()
            .map(request_view)
            .collect::<Result<_, _>>()?;
        Ok((total, rows))
    }

    /// The orders whose requests made the Stripe object `object_id` (a refund, a session).
    pub async fn orders_of_object(self, object_id: &str) -> Result<Vec<OrderId>, StoreError> {
        const SQL: &str = "SELECT DISTINCT order_id FROM stripe_requests WHERE object_id = $1 \
                           AND operation NOT LIKE 'subscription%'";
        let ids: Vec<String> = self
            .pool
            .on()
            .column(sql(SQL).bind(object_id.trim()))
            .await?;
        ids.into_iter()
            .map(|id| {
                OrderId::parse(id).map_err(|source| StoreError::BadStoredId {
                    what: "order id",
                    source,
                })
            })
            .collect()
    }

    /// Counts an attempt about to be sent; `None` if the request is already final.
    pub async fn start_attempt(self, key: &str, now: i64) -> Result<Option<i64>, StoreError> {
        let attempts = {
            let mut tx = self.pool.begin().await?;
            let attempts = tx
                .on()
                .optional_value(sql(START_ATTEMPT).bind(key).bind(now))
                .await?;
            tx.commit().await?;
            attempts
        };
        Ok(attempts)
    }

    /// Writes what an attempt got back. A succeeded request is never overwritten, and a
    /// refused (failed) one only by a success: a late timeout of a concurrent caller cannot
    /// make a refused request look worth sending again.
    pub async fn record_outcome(
        self,
        key: &str,
        outcome: &RequestOutcome<'_>,
        now: i64,
    ) -> Result<(), StoreError> {
        self.pool
            .on()
            .execute(
                sql(RECORD_OUTCOME)
                    .bind(key)
                    .bind(outcome.status.as_str())
                    .bind(outcome.http_status.map(i64::from))
                    .bind(outcome.stripe_request_id)
                    .bind(outcome.object_id)
                    .bind(outcome.error)
                    .bind(now),
            )
            .await
            .map(|_| ())?;
        Ok(())
    }
}
