//! Everything that happened to one order, for its timeline: the claims that name it (by
//! order id, Checkout Session or payment intent, through the search terms written at claim
//! time, so the claims of a payment that never got as far as an order count too), every
//! delivery of those events, the payment intent's own telemetry (why a debit failed), and
//! when Stripe says it was paid.

use serde::Serialize;

use super::Orders;
use super::query::{Arg, sql};
use super::views::{CLAIM_COLUMNS, ClaimView, OrderView};
use crate::error::StoreError;
use crate::outcome::DeliveryOutcome;

/// Claims and deliveries one timeline shows at most (the oldest first: how it began).
pub const TIMELINE_ROWS: i64 = 500;

/// One delivery as the log holds it (an order's timeline, the search's unclaimed ones).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, sqlx::FromRow)]
pub struct LoggedDelivery {
    pub event_id: Option<String>,
    pub event_type: Option<String>,
    #[sqlx(try_from = "String")]
    pub outcome: DeliveryOutcome,
    pub duplicate_of: Option<String>,
    /// Why it was refused, or, for a failed payment's telemetry, Stripe's reason.
    pub detail: Option<String>,
    pub received_at: i64,
}

/// What the order's timeline is made of, besides the order's own ledger and requests.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct OrderHistory {
    /// Oldest first.
    pub claims: Vec<ClaimView>,
    /// Oldest first.
    pub deliveries: Vec<LoggedDelivery>,
    /// When the payment was made, as Stripe dates the event that unlocked the order (unix
    /// ms): for an order written late (a re-drive, a reconcile run), when it was paid, not
    /// when it was written.
    pub paid_at: Option<i64>,
    /// The latest reason Stripe gave for a failed payment of this order.
    pub failure: Option<String>,
}

const PAID_AT: &str = "\
    SELECT e.stripe_created FROM credit_ledger l \
    JOIN processed_stripe_events e ON e.event_id = l.event_id \
    WHERE l.order_id = $1 AND l.kind = 'unlock'";

/// Deliveries that made no claim (ignored types, refused ones) whose event id or type is
/// `term`, newest first, at most `limit`: the claims' own deliveries are found with them.
const UNCLAIMED: &str = "\
    SELECT event_id, event_type, outcome, duplicate_of, detail, received_at \
    FROM webhook_deliveries WHERE id IN ( \
      SELECT id FROM webhook_deliveries WHERE event_id = $1 \
      UNION SELECT id FROM ( \
        SELECT id FROM webhook_deliveries \
        WHERE event_type = $1 AND outcome NOT IN ('claimed', 'duplicate_event', 'duplicate_action') \
        ORDER BY received_at DESC LIMIT $2) AS of_type) \
    AND outcome NOT IN ('claimed', 'duplicate_event', 'duplicate_action') \
    ORDER BY received_at DESC, id DESC LIMIT $2";

impl super::Claims<'_> {
    /// What the webhook recorded without claiming it under the event id or type `term`.
    pub async fn unclaimed_deliveries(
        self,
        term: &str,
        limit: i64,
    ) -> Result<Vec<LoggedDelivery>, StoreError> {
        Ok(self
            .pool
            .on()
            .all(sql(UNCLAIMED).bind(term).bind(limit))
            .await?)
    }
}

impl Orders<'_> {
    /// The claims, deliveries, payment time and failure reason of `order`, at `now`.
    pub async fn history(self, order: &OrderView, now: i64) -> Result<OrderHistory, StoreError> {
        // The terms the claims of this order were indexed by; an absent one matches nothing.
        let session = order.checkout_session_id.clone().unwrap_or_default();
        let intent = order.payment_intent_id.clone().unwrap_or_default();
        let named = "WITH named AS MATERIALIZED ( \
                       SELECT event_id FROM claim_terms WHERE term = $2 \
                       UNION SELECT event_id FROM claim_terms WHERE term = $3 AND term <> '' \
                       UNION SELECT event_id FROM claim_terms WHERE term = $4 AND term <> '') ";
        let claims_sql = format!(
            "{named}SELECT {CLAIM_COLUMNS} FROM processed_stripe_events \
             WHERE event_id IN (SELECT event_id FROM named) \
             ORDER BY received_at, event_id LIMIT $5"
        );
        let claims: Vec<ClaimView> = self
            .pool
            .on()
            .all(
                sql(&claims_sql)
                    .bind(now)
                    .bind(order.order_id.clone())
                    .bind(Arg::from(session.clone()))
                    .bind(Arg::from(intent.clone()))
                    .bind(TIMELINE_ROWS),
            )
            .await?;
        // The deliveries of those events, and the payment intent's own (its telemetry names
        // no order, only the intent).
        let deliveries_sql = format!(
            "{named}SELECT event_id, event_type, outcome, duplicate_of, detail, received_at \
             FROM webhook_deliveries WHERE id IN ( \
               SELECT id FROM webhook_deliveries \
                 WHERE event_id IN (SELECT event_id FROM named) \
               UNION SELECT id FROM webhook_deliveries WHERE object_id = $4 AND $4 <> '') \
             ORDER BY received_at, id LIMIT $5"
        );
        let deliveries: Vec<LoggedDelivery> = self
            .pool
            .on()
            .all(
                sql(&deliveries_sql)
                    .bind(now)
                    .bind(order.order_id.clone())
                    .bind(Arg::from(session))
                    .bind(Arg::from(intent.clone()))
                    .bind(TIMELINE_ROWS),
            )
            .await?;
        let paid_at: Option<i64> = self
            .pool
            .on()
            .optional_value(sql(PAID_AT).bind(order.order_id.clone()))
            .await?;
        let failure = deliveries
            .iter()
            .rev()
            .filter(|d| {
                d.outcome == DeliveryOutcome::Ignored
                    && d.event_type.as_deref().is_some_and(|t| {
                        t == crate::EventKind::PaymentIntentPaymentFailed.as_str()
                            || t == crate::EventKind::ChargeFailed.as_str()
                    })
            })
            .find_map(|d| d.detail.clone());
        Ok(OrderHistory {
            claims,
            deliveries,
            paid_at: paid_at.map(|secs| secs.saturating_mul(1000)),
            failure,
        })
    }
}
