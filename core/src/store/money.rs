//! Writing what an order's money says into its ledger. Every path that changes money facts
//! (a refund, failed refund or dispute event; a refund Claimcheck made; the unlock that finds
//! facts recorded before it) ends in [`MoneyTx::settle_credits`], inside the transaction that
//! holds the order's row lock, so the ledger is read only after whatever else touches the
//! order has committed.

use super::Write;
use crate::error::StoreError;
use crate::fulfilment::MoneyEvent;
use crate::money::{DisputeStatus, LedgerKind, MoneyFacts, OrderStatus, OutOfRange};

/// What a ledger step is written on behalf of: the event being fulfilled, or a call
/// Claimcheck made (its Idempotency-Key).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StepSource<'a> {
    Event(&'a str),
    Request(&'a str),
}

impl StepSource<'_> {
    fn step(&self) -> &str {
        match self {
            StepSource::Event(id) | StepSource::Request(id) => id,
        }
    }

    fn event_id(&self) -> Option<&str> {
        match self {
            StepSource::Event(id) => Some(id),
            StepSource::Request(_) => None,
        }
    }

    fn idempotency_key(&self) -> Option<&str> {
        match self {
            StepSource::Event(_) => None,
            StepSource::Request(key) => Some(key),
        }
    }
}

/// The ledger rows one settlement wrote.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Settled {
    pub rows: u64,
}

const ORDER_MONEY: &str = "\
    SELECT o.credits, o.amount, o.amount_refunded, o.dispute_status, o.status, \
        (SELECT CAST(COALESCE(SUM(amount), 0) AS BIGINT) FROM failed_refunds f \
         WHERE f.order_id = o.order_id), \
        (SELECT COUNT(*) FROM credit_ledger l WHERE l.order_id = o.order_id AND l.kind = 'unlock'), \
        (SELECT CAST(COALESCE(SUM(delta), 0) AS BIGINT) FROM credit_ledger l \
         WHERE l.order_id = o.order_id AND l.kind IN ('revoke', 'restore')), \
        (SELECT CAST(COALESCE(SUM(delta), 0) AS BIGINT) FROM credit_ledger l \
         WHERE l.order_id = o.order_id AND l.kind IN ('dispute_hold', 'dispute_release')) \
    FROM orders o WHERE o.order_id = $1";

type MoneyRow = (
    i64,
    Option<i64>,
    i64,
    Option<String>,
    String,
    i64,
    i64,
    i64,
    i64,
);

const INSERT_STEP: &str = "\
    INSERT INTO credit_ledger (order_id, kind, delta, customer_email, customer_id, event_id, \
                               idempotency_key, step, amount, created_at) \
    SELECT order_id, $2, $3, customer_email, customer_id, $4, $5, $6, $7, $8 \
    FROM orders WHERE order_id = $1 \
    ON CONFLICT DO NOTHING";

const SET_STATUS: &str =
    "UPDATE orders SET status = $2, updated_at = $3 WHERE order_id = $1 AND status <> $2";

/// The refunded amount only grows: an older, smaller `amount_refunded` arriving late changes
/// nothing. The charge's amount fills in an order that had none.
const RECORD_REFUNDED: &str = "\
    UPDATE orders SET \
        amount = COALESCE(amount, $3), \
        amount_refunded = CASE WHEN amount_refunded < $2 THEN $2 ELSE amount_refunded END, \
        updated_at = $4 \
    WHERE order_id = $1";

const RECORD_FAILED_REFUND: &str = "\
    INSERT INTO failed_refunds (refund_id, order_id, amount, event_id, created_at) \
    VALUES ($1, $2, $3, $4, $5) ON CONFLICT DO NOTHING";

/// A dispute opens unless this one is already known (its close may have come first) or an
/// earlier one is still open or was lost.
const OPEN_DISPUTE: &str = "\
    UPDATE orders SET dispute_id = $2, dispute_status = 'open', updated_at = $3 \
    WHERE order_id = $1 AND (dispute_id IS NULL OR (dispute_id <> $2 AND dispute_status = 'won'))";

/// A close is final for its dispute, whether or not its opening was seen.
const CLOSE_DISPUTE: &str = "\
    UPDATE orders SET dispute_id = $2, dispute_status = $3, updated_at = $4 \
    WHERE order_id = $1 AND (dispute_id IS NULL OR dispute_id = $2 OR dispute_status = 'won')";

fn out_of_range(order_id: &str) -> impl Fn(OutOfRange) -> StoreError + '_ {
    move |e| StoreError::OutOfRange(format!("order {order_id}: {e}"))
}

/// Writes in a transaction that holds the order's row lock (SQLite: the database write lock
/// of `BEGIN IMMEDIATE`; PostgreSQL: `SELECT … FOR UPDATE`).
pub(crate) trait MoneyTx {
    /// The order a payment intent paid, locked until the transaction ends.
    fn lock_order_by_payment<'a>(
        &'a mut self,
        payment_intent: &'a str,
    ) -> Write<'a, Option<String>>;

    /// Locks an order until the transaction ends; false if there is none.
    fn lock_order<'a>(&'a mut self, order_id: &'a str) -> Write<'a, bool>;

    /// Records one money event's fact on the (locked) order.
    fn record_money_event<'a>(
        &'a mut self,
        order_id: &'a str,
        event: &'a MoneyEvent,
        event_id: &'a str,
        now: i64,
    ) -> Write<'a, ()>;

    /// Raises the order's refunded amount to `refunded_after` (a refund Claimcheck made).
    fn record_refunded_amount<'a>(
        &'a mut self,
        order_id: &'a str,
        refunded_after: i64,
        now: i64,
    ) -> Write<'a, ()>;

    /// Writes the difference between what the (locked) order's money says and its ledger,
    /// one row per cause, and moves a paid order's status along.
    fn settle_credits<'a>(
        &'a mut self,
        order_id: &'a str,
        source: StepSource<'a>,
        now: i64,
    ) -> Write<'a, Settled>;
}

macro_rules! impl_money_tx {
    ($db:ty, $lock:literal) => {
        impl MoneyTx for sqlx::Transaction<'static, $db> {
            fn lock_order_by_payment<'a>(
                &'a mut self,
                payment_intent: &'a str,
            ) -> Write<'a, Option<String>> {
                Box::pin(async move {
                    let sql = concat!(
                        "SELECT order_id FROM orders WHERE payment_intent_id = $1",
                        $lock
                    );
                    Ok(sqlx::query_scalar(sql)
                        .bind(payment_intent)
                        .fetch_optional(&mut **self)
                        .await?)
                })
            }

            fn lock_order<'a>(&'a mut self, order_id: &'a str) -> Write<'a, bool> {
                Box::pin(async move {
                    let sql = concat!("SELECT order_id FROM orders WHERE order_id = $1", $lock);
                    let found: Option<String> = sqlx::query_scalar(sql)
                        .bind(order_id)
                        .fetch_optional(&mut **self)
                        .await?;
                    Ok(found.is_some())
                })
            }

            fn record_money_event<'a>(
                &'a mut self,
                order_id: &'a str,
                event: &'a MoneyEvent,
                event_id: &'a str,
                now: i64,
            ) -> Write<'a, ()> {
                Box::pin(async move {
                    match event {
                        MoneyEvent::Refunded {
                            charge_amount,
                            amount_refunded,
                        } => {
                            sqlx::query(RECORD_REFUNDED)
                                .bind(order_id)
                                .bind(*amount_refunded)
                                .bind(*charge_amount)
                                .bind(now)
                                .execute(&mut **self)
                                .await?;
                        }
                        MoneyEvent::RefundFailed { refund_id, amount } => {
                            sqlx::query(RECORD_FAILED_REFUND)
                                .bind(refund_id.as_str())
                                .bind(order_id)
                                .bind(*amount)
                                .bind(event_id)
                                .bind(now)
                                .execute(&mut **self)
                                .await?;
                        }
                        MoneyEvent::DisputeOpened { dispute_id } => {
                            sqlx::query(OPEN_DISPUTE)
                                .bind(order_id)
                                .bind(dispute_id.as_str())
                                .bind(now)
                                .execute(&mut **self)
                                .await?;
                        }
                        MoneyEvent::DisputeClosed { dispute_id, status } => {
                            sqlx::query(CLOSE_DISPUTE)
                                .bind(order_id)
                                .bind(dispute_id.as_str())
                                .bind(status.as_str())
                                .bind(now)
                                .execute(&mut **self)
                                .await?;
                        }
                    }
                    Ok(())
                })
            }

            fn record_refunded_amount<'a>(
                &'a mut self,
                order_id: &'a str,
                refunded_after: i64,
                now: i64,
            ) -> Write<'a, ()> {
                Box::pin(async move {
                    sqlx::query(RECORD_REFUNDED)
                        .bind(order_id)
                        .bind(refunded_after)
                        .bind(None::<i64>)
                        .bind(now)
                        .execute(&mut **self)
                        .await?;
                    Ok(())
                })
            }

            fn settle_credits<'a>(
                &'a mut self,
                order_id: &'a str,
                source: StepSource<'a>,
                now: i64,
            ) -> Write<'a, Settled> {
                Box::pin(async move {
                    let row: Option<MoneyRow> = sqlx::query_as(ORDER_MONEY)
                        .bind(order_id)
                        .fetch_optional(&mut **self)
                        .await?;
                    let Some(row) = row else {
                        return Ok(Settled::default());
                    };
                    let plan = settlement(order_id, row)?;
                    let mut settled = Settled::default();
                    for step in &plan.steps {
                        settled.rows += sqlx::query(INSERT_STEP)
                            .bind(order_id)
                            .bind(step.kind.as_str())
                            .bind(step.delta)
                            .bind(source.event_id())
                            .bind(source.idempotency_key())
                            .bind(source.step())
                            .bind(step.amount)
                            .bind(now)
                            .execute(&mut **self)
                            .await?
                            .rows_affected();
                    }
                    if let Some(status) = plan.status {
                        sqlx::query(SET_STATUS)
                            .bind(order_id)
                            .bind(status.as_str())
                            .bind(now)
                            .execute(&mut **self)
                            .await?;
                    }
                    Ok(settled)
                })
            }
        }
    };
}

impl_money_tx!(sqlx::Sqlite, "");
impl_money_tx!(sqlx::Postgres, " FOR UPDATE");

/// One ledger row to write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Step {
    kind: LedgerKind,
    delta: i64,
    amount: Option<i64>,
}

/// The row that takes `change` more credits (or gives them back, when negative) for one
/// cause: `(taking, giving)` are its two kinds. Nothing when there is no change.
fn step(
    change: i64,
    (taking, giving): (LedgerKind, LedgerKind),
    amount: Option<i64>,
) -> Option<Step> {
    (change != 0).then(|| Step {
        kind: if change > 0 { taking } else { giving },
        delta: -change,
        amount,
    })
}

#[derive(Debug, Default, PartialEq, Eq)]
struct Settlement {
    steps: Vec<Step>,
    /// The paid order's status now; `None` for an order not paid (yet).
    status: Option<OrderStatus>,
}

/// Compares what the money says with the ledger's sums per cause: the refund part (revokes
/// and restores) and the dispute part (holds and releases) each move to their target.
fn settlement(order_id: &str, row: MoneyRow) -> Result<Settlement, StoreError> {
    let (credits, amount, refunded, dispute, status, failed, unlocks, refund_sum, dispute_sum) =
        row;
    let status: OrderStatus = status.parse().map_err(StoreError::UnknownValue)?;
    if unlocks == 0 || !status.is_paid() {
        // Nothing granted, nothing to take back; the facts wait for the unlock.
        return Ok(Settlement::default());
    }
    let dispute = match dispute.as_deref() {
        None => None,
        Some(text) => Some(DisputeStatus::parse(text).ok_or_else(|| {
            StoreError::UnknownValue(format!("order {order_id}: dispute status '{text}'"))
        })?),
    };
    let facts = MoneyFacts {
        credits,
        amount,
        refunded,
        refund_failed: failed,
        dispute,
    };
    let withheld = facts.withheld().map_err(out_of_range(order_id))?;
    let net_refunded = facts.net_refunded();
    // The ledger's sums are negative (credits taken); the targets are positive.
    let change = |sum: i64, target: i64| {
        sum.checked_add(target)
            .ok_or_else(|| StoreError::OutOfRange(format!("order {order_id}: the ledger")))
    };
    let steps = [
        step(
            change(refund_sum, withheld.refunded)?,
            (LedgerKind::Revoke, LedgerKind::Restore),
            Some(net_refunded),
        ),
        step(
            change(dispute_sum, withheld.disputed)?,
            (LedgerKind::DisputeHold, LedgerKind::DisputeRelease),
            amount.map(|a| a.saturating_sub(net_refunded).max(0)),
        ),
    ]
    .into_iter()
    .flatten()
    .collect();
    Ok(Settlement {
        steps,
        status: Some(facts.paid_status()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(refunded: i64, failed: i64, refund_sum: i64, dispute: Option<&str>) -> MoneyRow {
        (
            40,
            Some(4900),
            refunded,
            dispute.map(str::to_owned),
            "paid".into(),
            failed,
            1,
            refund_sum,
            0,
        )
    }

    #[test]
    fn only_the_difference_is_written() {
        let first = settlement("o", row(2450, 0, 0, None)).unwrap();
        assert_eq!(
            first.steps,
            vec![Step {
                kind: LedgerKind::Revoke,
                delta: -20,
                amount: Some(2450)
            }]
        );
        assert_eq!(first.status, Some(OrderStatus::PartiallyRefunded));
        // Already revoked for the full refund: the late partial one writes nothing.
        let late = settlement("o", row(4900, 0, -40, None)).unwrap();
        assert!(late.steps.is_empty());
        assert_eq!(late.status, Some(OrderStatus::Refunded));
        // A refund of the whole amount failed: the 40 come back.
        let failed = settlement("o", row(4900, 4900, -40, None)).unwrap();
        assert_eq!(failed.steps[0].kind, LedgerKind::Restore);
        assert_eq!(failed.steps[0].delta, 40);
        assert_eq!(failed.status, Some(OrderStatus::Paid));
    }

    #[test]
    fn disputes_hold_and_release_what_is_left() {
        let open = settlement("o", row(1000, 0, -8, Some("open"))).unwrap();
        assert_eq!(open.steps.len(), 1);
        assert_eq!(open.steps[0].kind, LedgerKind::DisputeHold);
        assert_eq!(open.steps[0].delta, -32);
        assert_eq!(open.status, Some(OrderStatus::Disputed));
        let mut won = row(1000, 0, -8, Some("won"));
        won.8 = -32;
        let won = settlement("o", won).unwrap();
        assert_eq!(won.steps[0].kind, LedgerKind::DisputeRelease);
        assert_eq!(won.steps[0].delta, 32);
        assert_eq!(won.status, Some(OrderStatus::PartiallyRefunded));
    }

    #[test]
    fn unpaid_orders_wait_for_their_unlock() {
        let mut unpaid = row(4900, 0, 0, None);
        unpaid.6 = 0;
        assert_eq!(settlement("o", unpaid).unwrap(), Settlement::default());
        let mut awaiting = row(4900, 0, 0, None);
        awaiting.4 = "awaiting_payment".into();
        assert_eq!(settlement("o", awaiting).unwrap(), Settlement::default());
    }
}
