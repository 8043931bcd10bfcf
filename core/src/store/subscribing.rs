//! Fulfilling Stripe Billing's events inside the fulfilment transaction ([`super::fulfilling`]):
//! a paid invoice's grants, capped per period and written once per invoice, with the invoice
//! as the order that carries them; a failed payment marking its subscription unpaid; and a
//! subscription's state, never moved back by an older event. The statements are the same on
//! both backends.
//!
//! Exactly once: the invoice's claim (its action key is the invoice id) is fulfilled once,
//! and every row is keyed by the invoice besides (grants by subscription, period, step and
//! invoice; the order by the invoice id; its unlock by the order), so applying it again
//! writes nothing. The subscription's row is written first: on PostgreSQL its row lock orders
//! two invoices of one subscription, so the second reads the first's grants for the cap.

use super::Write;
use super::fulfilling::Fulfilled;
use crate::billing::{Period, PeriodSoFar, Step, SubscriptionFacts};
use crate::fulfilment::{PaidInvoice, PhaseToCome, ScheduleChange, UnpaidInvoice};

/// The event carries a state at least as recent as the one recorded.
macro_rules! newer_state {
    () => {
        "excluded.status_as_of >= COALESCE(subscriptions.status_as_of, 0)"
    };
}

/// Each `column` set from the event when `newer` (its state, or its schedule's, is at least as
/// recent as the one recorded).
macro_rules! follows {
    ($newer:expr, $($column:literal),+) => {
        concat!($(
            $column,
            " = CASE WHEN ",
            $newer,
            " THEN excluded.",
            $column,
            " ELSE subscriptions.",
            $column,
            " END, "
        ),+)
    };
}

/// The event's plan holds from a time (`excluded.plan_as_of`: a status event's `created`, a
/// paid invoice's period start or prorated change) no earlier than the recorded plan's (rows
/// written before that column: their state's time).
macro_rules! plan_not_older {
    () => {
        "excluded.plan_as_of >= \
         COALESCE(subscriptions.plan_as_of, subscriptions.status_as_of, 0)"
    };
}

/// The event moves the plan and the period end: a state at least as recent as the recorded
/// one whose plan holds from no earlier than the recorded plan (a late status event from
/// before a paid upgrade moves the status, not the plan), or a paid invoice (no state) for a
/// period that ends later than the one recorded, or for the same period with a plan that
/// holds from no earlier than the recorded one (a period's own invoice worked after its
/// prorated upgrade's never moves the plan back).
macro_rules! moves_plan {
    () => {
        concat!(
            "((",
            newer_state!(),
            " AND ",
            plan_not_older!(),
            ") OR (excluded.status_as_of IS NULL \
              AND (excluded.current_period_end > COALESCE(subscriptions.current_period_end, 0) \
                   OR (excluded.current_period_end = subscriptions.current_period_end AND ",
            plan_not_older!(),
            "))))"
        )
    };
}

/// A subscription's row, created by whichever of its events comes first. Who it belongs to
/// is filled in once. Its state (status, the plan its renewal bills, or the price when no
/// plan has it) moves only to a state at least as recent (Stripe's `created` of the event,
/// `$7`). Its plan and period end move as [`moves_plan`] says, and with them the time the plan
/// holds from (`$7`, else `$14`, the paid invoice's); a paid invoice never touches the status.
const UPSERT_SUBSCRIPTION: &str = concat!(
    "INSERT INTO subscriptions (subscription_id, subscription_ref, customer_id, customer_email, \
        plan, status, status_as_of, current_period_end, cancel_at_period_end, created_at, \
        updated_at, renewal_plan, renewal_price_amount, renewal_price_currency, plan_as_of) \
    VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $10, $11, $12, $13, COALESCE(CAST($7 AS BIGINT), CAST($14 AS BIGINT))) \
    ON CONFLICT (subscription_id) DO UPDATE SET \
        subscription_ref = COALESCE(subscriptions.subscription_ref, excluded.subscription_ref), \
        customer_id = COALESCE(subscriptions.customer_id, excluded.customer_id), \
        customer_email = COALESCE(subscriptions.customer_email, excluded.customer_email), \
        plan = CASE WHEN ",
    moves_plan!(),
    " \
                    THEN COALESCE(excluded.plan, subscriptions.plan) \
                    ELSE COALESCE(subscriptions.plan, excluded.plan) END, \
        current_period_end = CASE WHEN ",
    moves_plan!(),
    " \
            THEN COALESCE(excluded.current_period_end, subscriptions.current_period_end) \
            ELSE subscriptions.current_period_end END, \
        plan_as_of = CASE WHEN ",
    moves_plan!(),
    " THEN excluded.plan_as_of ELSE subscriptions.plan_as_of END, ",
    follows!(
        newer_state!(),
        "status",
        "cancel_at_period_end",
        "renewal_plan",
        "renewal_price_amount",
        "renewal_price_currency",
        "status_as_of"
    ),
    "updated_at = excluded.updated_at"
);

/// The schedule event's state is at least as recent as the one recorded.
macro_rules! newer_schedule {
    () => {
        "excluded.schedule_as_of >= COALESCE(subscriptions.schedule_as_of, 0)"
    };
}

/// What a schedule has next for its subscription (the phase's start, its plan or, with
/// none, its price; all `NULL` when nothing more is scheduled), moved only by a schedule
/// event at least as recent as the recorded one. The row is created when the schedule's
/// event comes first; the subscription's own events fill in the rest.
const UPSERT_SCHEDULE: &str = concat!(
    "INSERT INTO subscriptions (subscription_id, created_at, updated_at, schedule_id, \
         schedule_as_of, scheduled_at, scheduled_plan, scheduled_price_amount, \
         scheduled_price_currency) \
     VALUES ($1, $2, $2, $3, $4, $5, $6, $7, $8) \
     ON CONFLICT (subscription_id) DO UPDATE SET ",
    follows!(
        newer_schedule!(),
        "schedule_id",
        "scheduled_at",
        "scheduled_plan",
        "scheduled_price_amount",
        "scheduled_price_currency",
        "schedule_as_of"
    ),
    "updated_at = excluded.updated_at"
);

/// A paid invoice clears its own failed payment (not another invoice's).
const CLEAR_UNPAID: &str = "\
    UPDATE subscriptions SET unpaid_invoice = NULL, unpaid_since = NULL, updated_at = $3 \
    WHERE subscription_id = $1 AND unpaid_invoice = $2";

/// A failed payment marks its subscription unpaid, unless its invoice was paid already (its
/// order exists): a late failure never undoes a payment. A further failure of the same
/// invoice keeps the first one's time. Run after [`UPSERT_SUBSCRIPTION`] has locked the row,
/// as a statement of its own: on PostgreSQL it then reads the orders as they are once the
/// lock is held, so a payment committed while it waited is seen.
const MARK_UNPAID: &str = "\
    UPDATE subscriptions SET \
        unpaid_since = CASE WHEN unpaid_invoice = $2 THEN unpaid_since ELSE $3 END, \
        unpaid_invoice = $2, updated_at = $4 \
    WHERE subscription_id = $1 \
      AND NOT EXISTS (SELECT 1 FROM orders o WHERE o.order_id = $2)";

/// Who a subscription belongs to: as its row says (its Checkout Session named them), else
/// whom the order API was asked for under its reference (`$2`, the invoice's metadata, else
/// the one its row knows).
const SUBSCRIPTION_EMAIL: &str = "\
    SELECT COALESCE( \
        (SELECT s.customer_email FROM subscriptions s WHERE s.subscription_id = $1), \
        (SELECT c.customer_email FROM subscription_checkouts c \
         WHERE c.subscription_ref = COALESCE($2, \
             (SELECT s.subscription_ref FROM subscriptions s WHERE s.subscription_id = $1))))";

/// What the period's other invoices granted, and the highest ceiling among them.
const PERIOD_SO_FAR: &str = "\
    SELECT CAST(COALESCE(SUM(credits), 0) AS BIGINT), CAST(COALESCE(MAX(ceiling), 0) AS BIGINT) \
    FROM subscription_grants \
    WHERE subscription_id = $1 AND period_end = $2 AND invoice_id <> $3";

const INSERT_GRANT: &str = "\
    INSERT INTO subscription_grants (subscription_id, period_end, step, invoice_id, \
        period_start, plan, from_plan, entitled, credits, ceiling, event_id, created_at) \
    VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12) ON CONFLICT DO NOTHING";

/// The invoice as an order: paid, its credits its grants. Written once; a refund or dispute
/// of its payment intent then finds it.
const INSERT_INVOICE_ORDER: &str = "\
    INSERT INTO orders (order_id, payment_intent_id, customer_id, customer_email, package, \
        credits, status, payment_status, created_at, updated_at, amount, currency, \
        subscription_id) \
    VALUES ($1, $2, $3, $4, $5, $6, 'paid', 'paid', $7, $7, $8, $9, $10) \
    ON CONFLICT (order_id) DO NOTHING";

/// A payment intent pays one order: the one other than the invoice's that it pays already.
const PAYMENT_OWNER: &str =
    "SELECT order_id FROM orders WHERE payment_intent_id = $1 AND order_id <> $2";

const UNLOCK: &str = "\
    INSERT INTO credit_ledger (order_id, kind, delta, customer_email, customer_id, event_id, \
                               created_at) \
    VALUES ($1, 'unlock', $2, $3, $4, $5, $6) ON CONFLICT DO NOTHING";

/// The invoice's lot, written with the unlock so that it lapses at its period's end when its
/// plan resets.
const INSERT_LOT: &str = "\
    INSERT INTO credit_lots (lot_id, customer_email, order_id, credits, expires_at, created_at) \
    VALUES ('order:' || $1, $2, $1, 0, $3, $4) ON CONFLICT DO NOTHING";

/// What [`SubscribeTx::write_invoice`] writes for one paid invoice.
#[derive(Clone, Copy)]
pub(crate) struct InvoiceGrants<'a> {
    pub paid: &'a PaidInvoice,
    pub subscription_id: &'a str,
    /// What the order is named after: the plan of the last period it pays for.
    pub plan: Option<&'a str>,
    /// Whose credits they are.
    pub email: Option<&'a str>,
    /// For each entitlement of `paid`, the credits the period's cap let through.
    pub granted: &'a [i64],
    pub event_id: &'a str,
}

fn step_name(step: Step) -> &'static str {
    match step {
        Step::Period => "period",
        Step::Proration => "proration",
    }
}

/// The plan a paid invoice pays for last, and the span it pays for (from the period's start,
/// or a prorated change's, to the period's end).
#[derive(Debug, Clone, Copy)]
pub(crate) struct PaidPlan<'a> {
    pub plan: &'a str,
    pub period: Period,
}

/// The Billing writes of fulfilment, one method per statement, on either backend.
pub(crate) trait SubscribeTx {
    /// Writes what `facts` say; without a state, `paid` is what a paid invoice pays for.
    fn upsert_subscription<'a>(
        &'a mut self,
        facts: &'a SubscriptionFacts,
        paid: Option<PaidPlan<'a>>,
        now: i64,
    ) -> Write<'a, ()>;
    /// Writes what a schedule has next for its subscription (its phase named: the caller
    /// writes nothing for one whose prices are unknown).
    fn upsert_schedule<'a>(&'a mut self, change: &'a ScheduleChange, now: i64) -> Write<'a, ()>;
    fn clear_unpaid<'a>(
        &'a mut self,
        subscription_id: &'a str,
        invoice_id: &'a str,
        now: i64,
    ) -> Write<'a, ()>;
    /// Marks the (locked) subscription unpaid with the invoice, unless it was paid.
    fn mark_unpaid<'a>(&'a mut self, unpaid: &'a UnpaidInvoice, now: i64) -> Write<'a, ()>;
    fn subscription_email<'a>(
        &'a mut self,
        subscription_id: &'a str,
        reference: Option<&'a str>,
    ) -> Write<'a, Option<String>>;
    fn period_so_far<'a>(
        &'a mut self,
        subscription_id: &'a str,
        period_end: i64,
        invoice_id: &'a str,
    ) -> Write<'a, PeriodSoFar>;
    /// Writes the grants and the invoice's order, unlock and lot.
    fn write_invoice<'a>(&'a mut self, grants: &'a InvoiceGrants<'a>, now: i64) -> Write<'a, ()>;
    /// The order other than `invoice_id` that `payment_intent` pays, if any.
    fn payment_owner<'a>(
        &'a mut self,
        payment_intent: &'a str,
        invoice_id: &'a str,
    ) -> Write<'a, Option<String>>;
}

macro_rules! impl_subscribe_tx {
    ($db:ty) => {
        impl SubscribeTx for sqlx::Transaction<'static, $db> {
            fn upsert_subscription<'a>(
                &'a mut self,
                facts: &'a SubscriptionFacts,
                paid: Option<PaidPlan<'a>>,
                now: i64,
            ) -> Write<'a, ()> {
                Box::pin(async move {
                    let state = facts.state.as_ref();
                    sqlx::query(UPSERT_SUBSCRIPTION)
                        .bind(facts.subscription_id.as_str())
                        .bind(facts.subscription_ref.as_deref())
                        .bind(facts.customer_id.as_deref())
                        .bind(facts.customer_email.as_deref())
                        .bind(match state {
                            Some(state) => state.plan.as_deref(),
                            None => paid.map(|p| p.plan),
                        })
                        .bind(state.map(|s| s.status.as_str()))
                        .bind(state.map(|s| s.as_of))
                        .bind(match state {
                            Some(state) => state.current_period_end,
                            None => paid.map(|p| p.period.end),
                        })
                        .bind(i64::from(state.is_some_and(|s| s.cancel_at_period_end)))
                        .bind(now)
                        .bind(state.and_then(|s| s.plan.as_deref()))
                        .bind(state.and_then(|s| s.unmatched_price.as_ref().map(|p| p.amount)))
                        .bind(
                            state.and_then(|s| {
                                s.unmatched_price.as_ref().map(|p| p.currency.as_str())
                            }),
                        )
                        .bind(paid.map(|p| p.period.start))
                        .execute(&mut **self)
                        .await?;
                    Ok(())
                })
            }

            fn upsert_schedule<'a>(
                &'a mut self,
                change: &'a ScheduleChange,
                now: i64,
            ) -> Write<'a, ()> {
                Box::pin(async move {
                    let phase = match &change.next {
                        PhaseToCome::Named(phase) => Some(phase),
                        PhaseToCome::Nothing | PhaseToCome::Unpriced(_) => None,
                    };
                    let unmatched = phase.and_then(|p| p.unmatched_price.as_ref());
                    sqlx::query(UPSERT_SCHEDULE)
                        .bind(change.subscription_id.as_str())
                        .bind(now)
                        .bind(change.schedule_id.as_str())
                        .bind(change.as_of)
                        .bind(phase.map(|p| p.at))
                        .bind(phase.and_then(|p| p.plan.as_deref()))
                        .bind(unmatched.map(|p| p.amount))
                        .bind(unmatched.map(|p| p.currency.as_str()))
                        .execute(&mut **self)
                        .await?;
                    Ok(())
                })
            }

            fn clear_unpaid<'a>(
                &'a mut self,
                subscription_id: &'a str,
                invoice_id: &'a str,
                now: i64,
            ) -> Write<'a, ()> {
                Box::pin(async move {
                    sqlx::query(CLEAR_UNPAID)
                        .bind(subscription_id)
                        .bind(invoice_id)
                        .bind(now)
                        .execute(&mut **self)
                        .await?;
                    Ok(())
                })
            }

            fn mark_unpaid<'a>(&'a mut self, unpaid: &'a UnpaidInvoice, now: i64) -> Write<'a, ()> {
                Box::pin(async move {
                    sqlx::query(MARK_UNPAID)
                        .bind(unpaid.subscription_id.as_str())
                        .bind(unpaid.invoice_id.as_str())
                        .bind(unpaid.failed_at)
                        .bind(now)
                        .execute(&mut **self)
                        .await?;
                    Ok(())
                })
            }

            fn subscription_email<'a>(
                &'a mut self,
                subscription_id: &'a str,
                reference: Option<&'a str>,
            ) -> Write<'a, Option<String>> {
                Box::pin(async move {
                    let email: Option<String> = sqlx::query_scalar(SUBSCRIPTION_EMAIL)
                        .bind(subscription_id)
                        .bind(reference)
                        .fetch_one(&mut **self)
                        .await?;
                    Ok(email)
                })
            }

            fn period_so_far<'a>(
                &'a mut self,
                subscription_id: &'a str,
                period_end: i64,
                invoice_id: &'a str,
            ) -> Write<'a, PeriodSoFar> {
                Box::pin(async move {
                    let (granted, ceiling): (i64, i64) = sqlx::query_as(PERIOD_SO_FAR)
                        .bind(subscription_id)
                        .bind(period_end)
                        .bind(invoice_id)
                        .fetch_one(&mut **self)
                        .await?;
                    Ok(PeriodSoFar { granted, ceiling })
                })
            }

            fn write_invoice<'a>(
                &'a mut self,
                grants: &'a InvoiceGrants<'a>,
                now: i64,
            ) -> Write<'a, ()> {
                Box::pin(async move {
                    let InvoiceGrants {
                        paid,
                        subscription_id,
                        plan,
                        email,
                        granted,
                        event_id,
                    } = *grants;
                    let invoice = &paid.invoice;
                    for (grant, credits) in paid.grants.iter().zip(granted) {
                        sqlx::query(INSERT_GRANT)
                            .bind(subscription_id)
                            .bind(grant.period.end)
                            .bind(step_name(grant.step))
                            .bind(invoice.invoice_id.as_str())
                            .bind(grant.period.start)
                            .bind(grant.plan.as_str())
                            .bind(grant.from.as_deref())
                            .bind(grant.credits)
                            .bind(*credits)
                            .bind(grant.ceiling)
                            .bind(event_id)
                            .bind(now)
                            .execute(&mut **self)
                            .await?;
                    }
                    let credits: i64 = granted.iter().sum();
                    sqlx::query(INSERT_INVOICE_ORDER)
                        .bind(invoice.invoice_id.as_str())
                        .bind(invoice.payment_intent.as_deref())
                        .bind(invoice.customer_id.as_deref())
                        .bind(email)
                        .bind(plan)
                        .bind(credits)
                        .bind(now)
                        .bind(invoice.amount_paid)
                        .bind(invoice.currency.as_str())
                        .bind(subscription_id)
                        .execute(&mut **self)
                        .await?;
                    if credits <= 0 {
                        return Ok(());
                    }
                    sqlx::query(UNLOCK)
                        .bind(invoice.invoice_id.as_str())
                        .bind(credits)
                        .bind(email)
                        .bind(invoice.customer_id.as_deref())
                        .bind(event_id)
                        .bind(now)
                        .execute(&mut **self)
                        .await?;
                    if let Some(email) = email {
                        sqlx::query(INSERT_LOT)
                            .bind(invoice.invoice_id.as_str())
                            .bind(email)
                            .bind(paid.lapses_at)
                            .bind(now)
                            .execute(&mut **self)
                            .await?;
                    }
                    Ok(())
                })
            }

            fn payment_owner<'a>(
                &'a mut self,
                payment_intent: &'a str,
                invoice_id: &'a str,
            ) -> Write<'a, Option<String>> {
                Box::pin(async move {
                    Ok(sqlx::query_scalar(PAYMENT_OWNER)
                        .bind(payment_intent)
                        .bind(invoice_id)
                        .fetch_optional(&mut **self)
                        .await?)
                })
            }
        }
    };
}

impl_subscribe_tx!(sqlx::Postgres);
impl_subscribe_tx!(sqlx::Sqlite);

/// Writes a paid invoice's effect inside `tx`: its subscription (first, for its lock), its
/// grants capped per period, and the invoice as an order with its unlock and lot. An invoice
/// of no subscription that grants nothing (a one-off invoice) writes nothing; one that grants
/// credits to a customer nothing names yet writes nothing either and says so.
pub(crate) async fn apply_paid_invoice<T: SubscribeTx + Send>(
    tx: &mut T,
    paid: &PaidInvoice,
    event_id: &str,
    now: i64,
) -> Result<Option<Fulfilled>, crate::error::StoreError> {
    let invoice = &paid.invoice;
    let Some(subscription_id) = invoice.subscription_id.as_deref() else {
        return Ok(None);
    };
    // The invoice names its customer's email; else the subscription's Checkout Session did,
    // else the order API was asked for them under its reference. Credits for nobody are
    // never written: the claim waits for the event that names them.
    let reference = invoice.metadata.get(crate::billing::REF_KEY);
    let email = match invoice.customer_email.clone() {
        Some(email) => Some(email),
        None => {
            tx.subscription_email(subscription_id, reference.map(String::as_str))
                .await?
        }
    };
    if email.is_none() && paid.grants.iter().any(|g| g.credits > 0) {
        return Ok(Some(Fulfilled::CustomerUnknown {
            invoice_id: invoice.invoice_id.clone(),
        }));
    }
    // A payment pays one order: an invoice naming another's payment is the payload's fault
    // (a replayed or edited event), never a storage fault to retry.
    if let Some(payment_intent) = invoice.payment_intent.as_deref()
        && let Some(order_id) = tx
            .payment_owner(payment_intent, &invoice.invoice_id)
            .await?
    {
        return Ok(Some(Fulfilled::PaymentTaken {
            invoice_id: invoice.invoice_id.clone(),
            payment_intent: payment_intent.to_owned(),
            order_id,
        }));
    }
    let facts = SubscriptionFacts {
        subscription_id: subscription_id.to_owned(),
        subscription_ref: invoice.metadata.get(crate::billing::REF_KEY).cloned(),
        customer_id: invoice.customer_id.clone(),
        customer_email: invoice.customer_email.clone(),
        state: None,
    };
    // The plan of the last period it pays for (its whole-period line over a proration).
    let last = paid
        .grants
        .iter()
        .max_by_key(|g| (g.period.end, g.step == Step::Period));
    let plan = last.map(|g| g.plan.as_str());
    let paid_plan = last.map(|g| PaidPlan {
        plan: g.plan.as_str(),
        period: g.period,
    });
    tx.upsert_subscription(&facts, paid_plan, now).await?;
    tx.clear_unpaid(subscription_id, &invoice.invoice_id, now)
        .await?;
    let mut granted = Vec::with_capacity(paid.grants.len());
    for (i, grant) in paid.grants.iter().enumerate() {
        let mut so_far = tx
            .period_so_far(subscription_id, grant.period.end, &invoice.invoice_id)
            .await?;
        // This invoice's earlier grants of the same period count too.
        for (earlier, credits) in paid.grants[..i].iter().zip(&granted) {
            if earlier.period.end == grant.period.end {
                so_far.granted += credits;
                so_far.ceiling = so_far.ceiling.max(earlier.ceiling);
            }
        }
        granted.push(grant.capped(so_far));
    }
    let grants = InvoiceGrants {
        paid,
        subscription_id,
        plan,
        email: email.as_deref(),
        granted: &granted,
        event_id,
    };
    tx.write_invoice(&grants, now).await?;
    Ok(None)
}
