//! Read models for operators: claims, orders, customers. Shared by the CLI and the dashboard.

use serde::Serialize;

use super::outgoing::StripeRequestView;
use super::query::{Arg, sql};
use super::{ClaimSource, Claims, Orders, StripeRequests};
use crate::claim::ClaimState;
use crate::error::StoreError;
use crate::ids::{EventId, OrderId};
use crate::money::{LedgerKind, OrderStatus};
use crate::outcome::DeliveryOutcome;
use crate::webhook::terms::{normalise_query, prefix_bounds};

/// A claim as operators see it. Field names are a contract for scripts (`--json`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, sqlx::FromRow)]
pub struct ClaimView {
    pub event_id: String,
    pub event_type: String,
    pub object_id: String,
    #[sqlx(try_from = "String")]
    pub status: ClaimState,
    pub attempts: i64,
    pub last_error: Option<String>,
    pub lease_owner: Option<String>,
    pub lease_expires_at: Option<i64>,
    pub next_attempt_at: i64,
    pub deliveries: i64,
    pub livemode: bool,
    pub received_at: i64,
    pub processed_at: Option<i64>,
    /// Where the claim came from: a delivery, or the reconciler.
    #[sqlx(try_from = "String")]
    pub source: ClaimSource,
    /// For a claim the reconciler made: the key of its run (`reconcile_runs.run_key`).
    pub source_run: Option<String>,
    /// When an admin resolved it without re-driving it, who, and why.
    pub resolved_at: Option<i64>,
    pub resolved_by: Option<String>,
    pub resolution: Option<String>,
}

impl ClaimView {
    /// Whether it waits for a version that fulfils its type: a newer version claimed it,
    /// and this version's workers leave it untouched (never leased, re-driven or failed).
    pub fn waits_for_a_newer_version(&self) -> bool {
        matches!(self.status, ClaimState::Pending | ClaimState::Stale)
            && !crate::event_kind::EventKind::parse(&self.event_type)
                .is_some_and(crate::event_kind::EventKind::is_acting)
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DeliveryView {
    pub outcome: DeliveryOutcome,
    pub duplicate_of: Option<String>,
    pub detail: Option<String>,
    pub received_at: i64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LedgerEntryView {
    /// unlock | revoke | restore | dispute_hold | dispute_release
    pub kind: LedgerKind,
    pub delta: i64,
    /// The money behind the step, in minor units: for a revoke or restore the refunded total
    /// after it, for a dispute step the disputed amount.
    pub amount: Option<i64>,
    /// The event whose fulfilment wrote the entry; `None` for a revoke written by a refund
    /// Claimcheck made, which names its request instead.
    pub event_id: Option<String>,
    pub idempotency_key: Option<String>,
    pub created_at: i64,
}

/// An order and its credit history. Field names are a contract for scripts (`--json`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct OrderView {
    pub order_id: String,
    /// awaiting_payment | payment_failed | paid | partially_refunded | refunded | disputed |
    /// chargeback
    pub status: OrderStatus,
    pub payment_status: String,
    /// Net credits granted: the unlock minus what refunds and disputes took back.
    pub credits_granted: i64,
    pub credits: i64,
    pub package: Option<String>,
    pub customer_email: Option<String>,
    pub customer_id: Option<String>,
    pub checkout_session_id: Option<String>,
    pub payment_intent_id: Option<String>,
    /// The price, in the currency's minor unit, for orders created through the order API.
    pub amount: Option<i64>,
    pub currency: Option<String>,
    /// Money refunded and not failed, in minor units.
    pub amount_refunded: i64,
    /// The largest cumulative refunded amount seen, failed refunds included.
    pub gross_refunded: i64,
    /// Refunds that failed, in minor units.
    pub refund_failed: i64,
    /// open | won | lost, when the charge was disputed.
    pub dispute_status: Option<String>,
    pub dispute_id: Option<String>,
    pub checkout_url: Option<String>,
    /// When the current Checkout Session expires (unix ms).
    pub checkout_expires_at: Option<i64>,
    /// 1 for the first Checkout Session, 2 after it expired, …
    pub checkout_generation: i64,
    pub ledger: Vec<LedgerEntryView>,
    /// Every outgoing Stripe request made for this order, with its Idempotency-Key.
    pub stripe_requests: Vec<StripeRequestView>,
    pub created_at: i64,
    pub updated_at: i64,
}

/// Why an order cannot be refunded (by Claimcheck: the Stripe Dashboard still can).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NotRefundable {
    /// Not paid, or disputed (Stripe refuses to refund a disputed charge).
    Status(OrderStatus),
    /// No amount on record to refund a share of.
    NoAmount,
    /// No payment intent on record to refund.
    NoPaymentIntent,
}

impl OrderView {
    /// What a refund could still return, in minor units (0: everything is refunded), or why
    /// none can be made: the one rule the refund form and [`crate::payments::refund`] follow.
    pub fn refundable(&self) -> Result<i64, NotRefundable> {
        if !self.status.accepts_refunds() {
            return Err(NotRefundable::Status(self.status));
        }
        let charged = self.amount.ok_or(NotRefundable::NoAmount)?;
        if self.payment_intent_id.is_none() {
            return Err(NotRefundable::NoPaymentIntent);
        }
        Ok(charged.saturating_sub(self.amount_refunded).max(0))
    }

    /// The facts its credits are settled from (see `store::money`), for a preview of what
    /// a refund would take.
    pub fn money_facts(&self) -> crate::money::MoneyFacts {
        crate::money::MoneyFacts {
            credits: self.credits,
            amount: self.amount,
            refunded: self.gross_refunded,
            refund_failed: self.refund_failed,
            dispute: self
                .dispute_status
                .as_deref()
                .and_then(crate::money::DisputeStatus::parse),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CustomerView {
    /// The email or customer id asked for.
    pub customer: String,
    pub balance: i64,
    pub orders: Vec<OrderView>,
    /// Every claim whose payload names them, newest first (at most `CUSTOMER_CLAIMS`):
    /// also those whose order does not exist yet because fulfilment never got that far.
    pub claims: Vec<ClaimView>,
}

/// Claims a customer page shows at most.
pub const CUSTOMER_CLAIMS: i64 = 200;

/// Matches of a term prefix followed at most, so that a short prefix stays one bounded
/// read of the index.
pub const PREFIX_MATCHES: i64 = 1000;

/// A claim's columns, its state derived at `$1` (now).
pub(super) const CLAIM_COLUMNS: &str = concat!(
    "event_id, event_type, object_id, ",
    super::claim_state::claim_state_sql!("$1"),
    " AS status, attempts, last_error, lease_owner, lease_expires_at, next_attempt_at, \
     deliveries, livemode, received_at, processed_at, source, source_run, resolved_at, \
     resolved_by, resolution"
);

/// An `orders` row as [`ORDER_COLUMNS`] reads it.
#[derive(sqlx::FromRow)]
struct OrderRow {
    order_id: String,
    status: String,
    payment_status: String,
    credits: i64,
    package: Option<String>,
    customer_email: Option<String>,
    customer_id: Option<String>,
    checkout_session_id: Option<String>,
    payment_intent_id: Option<String>,
    created_at: i64,
    updated_at: i64,
    amount: Option<i64>,
    currency: Option<String>,
    checkout_url: Option<String>,
    amount_refunded: i64,
    dispute_status: Option<String>,
    dispute_id: Option<String>,
    checkout_expires_at: Option<i64>,
    checkout_generation: i64,
    refund_failed: i64,
}

const ORDER_COLUMNS: &str = "order_id, status, payment_status, credits, package, \
    customer_email, customer_id, checkout_session_id, payment_intent_id, created_at, updated_at, \
    amount, currency, checkout_url, amount_refunded, dispute_status, dispute_id, \
    checkout_expires_at, checkout_generation, \
    (SELECT CAST(COALESCE(SUM(f.amount), 0) AS BIGINT) FROM failed_refunds f \
     WHERE f.order_id = orders.order_id) AS refund_failed";

impl Claims<'_> {
    /// Claims, newest first, in `state` if given; at most `limit`.
    pub async fn list(
        self,
        state: Option<ClaimState>,
        now: i64,
        limit: i64,
    ) -> Result<Vec<ClaimView>, StoreError> {
        let condition = state.map_or_else(
            || "TRUE".to_owned(),
            |state| super::claim_state::in_state(state, "$1"),
        );
        let statement = format!(
            "SELECT {CLAIM_COLUMNS} FROM processed_stripe_events WHERE {condition} \
             ORDER BY received_at DESC, event_id LIMIT $2"
        );
        let claims = self
            .pool
            .on()
            .all(sql(&statement).bind(now).bind(limit))
            .await?;
        Ok(claims)
    }

    pub async fn get(self, event_id: &EventId, now: i64) -> Result<Option<ClaimView>, StoreError> {
        let statement =
            format!("SELECT {CLAIM_COLUMNS} FROM processed_stripe_events WHERE event_id = $2");
        let claim = self
            .pool
            .on()
            .optional(sql(&statement).bind(now).bind(event_id.as_str()))
            .await?;
        Ok(claim)
    }

    /// Every logged delivery of an event, oldest first.
    pub async fn deliveries(self, event_id: &EventId) -> Result<Vec<DeliveryView>, StoreError> {
        const SQL: &str = "SELECT outcome, duplicate_of, detail, received_at \
                           FROM webhook_deliveries WHERE event_id = $1 ORDER BY id";
        let rows: Vec<(String, Option<String>, Option<String>, i64)> =
            self.pool.on().all(sql(SQL).bind(event_id.as_str())).await?;
        rows.into_iter()
            .map(|(outcome, duplicate_of, detail, received_at)| {
                Ok(DeliveryView {
                    outcome: outcome.parse().map_err(StoreError::UnknownValue)?,
                    duplicate_of,
                    detail,
                    received_at,
                })
            })
            .collect()
    }

    /// Milliseconds from receipt to `processed` for every claim received at or after
    /// `since`, ascending: how long a paid order waited for its credits.
    pub async fn processing_times(self, since: i64) -> Result<Vec<(i64, i64)>, StoreError> {
        const SQL: &str = "SELECT processed_at - received_at, processed_at \
                           FROM processed_stripe_events \
                           WHERE received_at >= $1 AND processed_at IS NOT NULL ORDER BY 1";
        let times = self.pool.on().all(sql(SQL).bind(since)).await?;
        Ok(times)
    }
}

impl Orders<'_> {
    pub async fn get(self, order_id: &OrderId) -> Result<Option<OrderView>, StoreError> {
        let statement = format!("SELECT {ORDER_COLUMNS} FROM orders WHERE order_id = $1");
        let row: Option<OrderRow> = self
            .pool
            .on()
            .optional(sql(&statement).bind(order_id.as_str()))
            .await?;
        match row {
            Some(row) => Ok(Some(self.view(row).await?)),
            None => Ok(None),
        }
    }

    /// A customer's orders (by email, case-insensitive, or Stripe customer id) and balance.
    pub async fn customer(self, who: &str) -> Result<CustomerView, StoreError> {
        let statement = format!(
            "SELECT {ORDER_COLUMNS} FROM orders \
             WHERE customer_email = $1 OR customer_id = $2 ORDER BY created_at, order_id"
        );
        let rows: Vec<OrderRow> = self
            .pool
            .on()
            .all(
                sql(&statement)
                    .bind(who.trim().to_lowercase())
                    .bind(who.trim()),
            )
            .await?;
        let mut orders = Vec::with_capacity(rows.len());
        for row in rows {
            orders.push(self.view(row).await?);
        }
        // Spends, expiries and adjustments (by e-mail) beside what the orders granted.
        let moved: i64 = self
            .pool
            .on()
            .value(
                sql(
                    "SELECT CAST(COALESCE(SUM(delta), 0) AS BIGINT) FROM credit_movements \
                     WHERE customer_email = $1",
                )
                .bind(who.trim().to_lowercase()),
            )
            .await?;
        Ok(CustomerView {
            customer: who.trim().to_owned(),
            balance: orders.iter().map(|o| o.credits_granted).sum::<i64>() + moved,
            orders,
            claims: Vec::new(),
        })
    }

    async fn view(self, row: OrderRow) -> Result<OrderView, StoreError> {
        let OrderRow {
            order_id,
            status,
            payment_status,
            credits,
            package,
            customer_email,
            customer_id,
            checkout_session_id,
            payment_intent_id,
            created_at,
            updated_at,
            amount,
            currency,
            checkout_url,
            amount_refunded: gross_refunded,
            dispute_status,
            dispute_id,
            checkout_expires_at,
            checkout_generation,
            refund_failed,
        } = row;
        const LEDGER: &str = "SELECT kind, delta, event_id, idempotency_key, created_at, amount \
                              FROM credit_ledger WHERE order_id = $1 ORDER BY id";
        type LedgerRow = (
            String,
            i64,
            Option<String>,
            Option<String>,
            i64,
            Option<i64>,
        );
        let entries: Vec<LedgerRow> = self
            .pool
            .on()
            .all(sql(LEDGER).bind(order_id.as_str()))
            .await?;
        let ledger: Vec<LedgerEntryView> = entries
            .into_iter()
            .map(
                |(kind, delta, event_id, idempotency_key, created_at, amount)| {
                    Ok(LedgerEntryView {
                        kind: kind.parse().map_err(StoreError::UnknownValue)?,
                        delta,
                        amount,
                        event_id,
                        idempotency_key,
                        created_at,
                    })
                },
            )
            .collect::<Result<_, StoreError>>()?;
        let money = crate::money::MoneyFacts {
            credits,
            amount,
            refunded: gross_refunded,
            refund_failed,
            dispute: None,
        };
        let stripe_requests = (StripeRequests { pool: self.pool })
            .for_order(&order_id)
            .await?;
        Ok(OrderView {
            credits_granted: ledger.iter().map(|e| e.delta).sum(),
            order_id,
            status: status.parse().map_err(StoreError::UnknownValue)?,
            payment_status,
            credits,
            package,
            customer_email,
            customer_id,
            checkout_session_id,
            payment_intent_id,
            amount_refunded: money.net_refunded(),
            amount,
            currency,
            gross_refunded,
            refund_failed,
            dispute_status,
            dispute_id,
            checkout_url,
            checkout_expires_at,
            checkout_generation,
            ledger,
            stripe_requests,
            created_at,
            updated_at,
        })
    }
}

/// What the events list is narrowed to. Empty fields do not filter.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EventFilter {
    pub state: Option<ClaimState>,
    pub event_type: Option<String>,
    /// Received at or after (unix ms).
    pub from: Option<i64>,
    /// Received before (unix ms).
    pub to: Option<i64>,
    /// An event id, an object id (session, charge), an order id, a payment intent or a
    /// customer email.
    pub search: Option<String>,
    /// The last error contains this text (case-insensitive).
    pub error_contains: Option<String>,
    /// Where the claims came from.
    pub source: Option<ClaimSource>,
    /// Only the claims the reconcile run with this key recovered.
    pub source_run: Option<String>,
    /// Only these claims (empty: no such condition).
    pub event_ids: Vec<String>,
}

/// The conditions of `filter` over `processed_stripe_events` (and the search's CTE), their
/// values pushed onto `args`, whose `$1` must already be now.
pub(super) fn filter_conditions(
    filter: &EventFilter,
    args: &mut Vec<Arg<'static>>,
) -> (String, Vec<String>) {
    let mut conditions = Vec::new();
    let arg = |value: Arg<'static>, args: &mut Vec<Arg<'static>>| {
        args.push(value);
        format!("${}", args.len())
    };
    if let Some(state) = filter.state {
        conditions.push(super::claim_state::in_state(state, "$1"));
    }
    if let Some(event_type) = &filter.event_type {
        let p = arg(Arg::from(event_type.clone()), args);
        conditions.push(format!("event_type = {p}"));
    }
    if let Some(from) = filter.from {
        let p = arg(Arg::Int(from), args);
        conditions.push(format!("received_at >= {p}"));
    }
    if let Some(to) = filter.to {
        let p = arg(Arg::Int(to), args);
        conditions.push(format!("received_at < {p}"));
    }
    if let Some(text) = filter
        .error_contains
        .as_deref()
        .map(str::trim)
        .filter(|s| !s.is_empty())
    {
        // LIKE is case-sensitive on PostgreSQL and not on SQLite: lower both sides. The
        // wildcards in the operator's text are taken literally.
        let escaped = text
            .to_lowercase()
            .replace('\\', "\\\\")
            .replace('%', "\\%")
            .replace('_', "\\_");
        let p = arg(Arg::from(format!("%{escaped}%")), args);
        conditions.push(format!("LOWER(last_error) LIKE {p} ESCAPE '\\'"));
    }
    if let Some(source) = filter.source {
        let p = arg(Arg::from(source.as_str().to_owned()), args);
        conditions.push(format!("source = {p}"));
    }
    if let Some(run) = &filter.source_run {
        let p = arg(Arg::from(run.clone()), args);
        conditions.push(format!("source_run = {p}"));
    }
    if !filter.event_ids.is_empty() {
        let list: Vec<String> = filter
            .event_ids
            .iter()
            .map(|id| arg(Arg::from(id.clone()), args))
            .collect();
        conditions.push(format!("event_id IN ({})", list.join(", ")));
    }
    // A search first collects the matching event ids through the indexed ids (event,
    // object, and the orders' id, email, payment intent, customer), materialised so that
    // the planner starts from them instead of walking the newest events. One branch per
    // column, not ORs: SQLite would scan the table for an OR once its statistics say a
    // column (customer_id, mostly NULL) is unselective.
    let mut search_cte = String::new();
    if let Some(search) = filter
        .search
        .as_deref()
        .map(str::trim)
        .filter(|s| !s.is_empty())
    {
        let term = arg(Arg::from(search.to_owned()), args);
        let email = arg(Arg::from(search.to_lowercase()), args);
        let (low, high) = prefix_bounds(&normalise_query(search));
        let (low, high) = (arg(Arg::from(low), args), arg(Arg::from(high), args));
        let named = arg(Arg::Int(PREFIX_MATCHES), args);
        search_cte = format!(
            "WITH hits AS MATERIALIZED ( \
               SELECT event_id FROM processed_stripe_events WHERE event_id = {term} \
               UNION SELECT event_id FROM processed_stripe_events WHERE object_id = {term} \
               UNION SELECT event_id FROM processed_stripe_events WHERE object_id IN ( \
                 SELECT checkout_session_id FROM orders WHERE order_id = {term} \
                 UNION SELECT checkout_session_id FROM orders WHERE customer_email = {email} \
                 UNION SELECT checkout_session_id FROM orders \
                   WHERE payment_intent_id = {term} \
                 UNION SELECT checkout_session_id FROM orders WHERE customer_id = {term}) \
               UNION SELECT event_id FROM ( \
                 SELECT event_id FROM claim_terms WHERE term >= {low} AND term < {high} \
                 ORDER BY term LIMIT {named}) AS named) "
        );
        conditions.push("event_id IN (SELECT event_id FROM hits)".to_owned());
    }
    (search_cte, conditions)
}

impl Claims<'_> {
    /// Claims matching `filter`, newest first, `limit` of them after the keyset `after`
    /// (received_at, event_id) of the previous page's last row. The statement holds only the
    /// conditions in use, so each shape gets its own plan: (received_at, event_id) for the
    /// plain list and its pages, (status, received_at) for a state, and the search goes
    /// through the indexed ids (event id, object id, the orders' id, email, payment intent).
    pub async fn list_events(
        self,
        filter: &EventFilter,
        after: Option<(i64, String)>,
        now: i64,
        limit: i64,
    ) -> Result<Vec<ClaimView>, StoreError> {
        let mut args = vec![Arg::Int(now)];
        let (search_cte, mut conditions) = filter_conditions(filter, &mut args);
        let arg = |value: Arg<'static>, args: &mut Vec<Arg<'static>>| {
            args.push(value);
            format!("${}", args.len())
        };
        if let Some((at, id)) = after {
            let at = arg(Arg::Int(at), &mut args);
            let id = arg(Arg::from(id), &mut args);
            // A row comparison: both backends read it as one range of the index.
            conditions.push(format!("(received_at, event_id) < ({at}, {id})"));
        }
        let limit = arg(Arg::Int(limit), &mut args);
        let filter_sql = if conditions.is_empty() {
            String::new()
        } else {
            format!("WHERE {}", conditions.join(" AND "))
        };
        let statement = format!(
            "{search_cte}SELECT {CLAIM_COLUMNS} FROM processed_stripe_events {filter_sql} \
             ORDER BY received_at DESC, event_id DESC LIMIT {limit}"
        );
        let rows = self.pool.on().all(sql(&statement).bind_all(args)).await?;
        Ok(rows)
    }

    /// The raw payload of a claimed event.
    pub async fn payload(self, event_id: &EventId) -> Result<Option<String>, StoreError> {
        const SQL: &str = "SELECT payload FROM processed_stripe_events WHERE event_id = $1";
        let payload = self
            .pool
            .on()
            .optional_value(sql(SQL).bind(event_id.as_str()))
            .await?;
        Ok(payload)
    }

    /// Claims whose event id or object id is `term`, or whose payload names something
    /// starting with it (an e-mail, case-insensitively; an order id, payment intent,
    /// charge, customer, invoice, subscription or dispute id), newest first: one indexed
    /// lookup each, the prefix read at most [`PREFIX_MATCHES`] entries far.
    pub async fn find(
        self,
        term: &str,
        now: i64,
        limit: i64,
    ) -> Result<Vec<ClaimView>, StoreError> {
        let statement = format!(
            "SELECT {CLAIM_COLUMNS} FROM processed_stripe_events WHERE event_id IN ( \
               SELECT event_id FROM processed_stripe_events WHERE event_id = $2 \
               UNION SELECT event_id FROM processed_stripe_events WHERE object_id = $2 \
               UNION SELECT event_id FROM ( \
                 SELECT event_id FROM claim_terms WHERE term >= $4 AND term < $5 \
                 ORDER BY term LIMIT $6) AS named) \
             ORDER BY received_at DESC, event_id LIMIT $3"
        );
        let (low, high) = prefix_bounds(&normalise_query(term));
        let claims = self
            .pool
            .on()
            .all(
                sql(&statement)
                    .bind(now)
                    .bind(term.trim())
                    .bind(limit)
                    .bind(Arg::from(low))
                    .bind(Arg::from(high))
                    .bind(PREFIX_MATCHES),
            )
            .await?;
        Ok(claims)
    }

    /// Claims whose payload names exactly `who` (an e-mail, case-insensitively, or a
    /// customer id), newest first, at most `limit`.
    pub async fn naming(
        self,
        who: &str,
        now: i64,
        limit: i64,
    ) -> Result<Vec<ClaimView>, StoreError> {
        let statement = format!(
            "SELECT {CLAIM_COLUMNS} FROM processed_stripe_events WHERE event_id IN ( \
               SELECT event_id FROM claim_terms WHERE term = $2) \
             ORDER BY received_at DESC, event_id LIMIT $3"
        );
        let claims = self
            .pool
            .on()
            .all(
                sql(&statement)
                    .bind(now)
                    .bind(Arg::from(normalise_query(who)))
                    .bind(limit),
            )
            .await?;
        Ok(claims)
    }
}

impl Orders<'_> {
    /// The order a payment intent paid.
    pub async fn by_payment_intent(
        self,
        payment_intent: &str,
    ) -> Result<Option<OrderView>, StoreError> {
        let statement = format!("SELECT {ORDER_COLUMNS} FROM orders WHERE payment_intent_id = $1");
        let row: Option<OrderRow> = self
            .pool
            .on()
            .optional(sql(&statement).bind(payment_intent))
            .await?;
        match row {
            Some(row) => Ok(Some(self.view(row).await?)),
            None => Ok(None),
        }
    }

    /// The order `reference` names, if it is known ([`crate::fulfilment::order_ref`]).
    pub async fn of_ref(
        self,
        reference: &crate::fulfilment::OrderRef,
    ) -> Result<Option<OrderView>, StoreError> {
        match reference {
            crate::fulfilment::OrderRef::Order(order_id) => self.get(order_id).await,
            crate::fulfilment::OrderRef::PaidBy(payment_intent) => {
                self.by_payment_intent(payment_intent).await
            }
        }
    }

    /// Orders a support person may mean by `term`: its id, the customer's email or id, the
    /// checkout session or the payment intent. Newest first, at most `limit`.
    pub async fn find(self, term: &str, limit: i64) -> Result<Vec<OrderView>, StoreError> {
        // One indexed branch per column (see list_events for why not ORs).
        let statement = format!(
            "SELECT {ORDER_COLUMNS} FROM orders WHERE order_id IN ( \
               SELECT order_id FROM orders WHERE order_id = $1 \
               UNION SELECT order_id FROM orders WHERE customer_email = $2 \
               UNION SELECT order_id FROM orders WHERE customer_id = $1 \
               UNION SELECT order_id FROM orders WHERE checkout_session_id = $1 \
               UNION SELECT order_id FROM orders WHERE payment_intent_id = $1) \
             ORDER BY created_at DESC, order_id LIMIT $3"
        );
        let term = term.trim();
        let rows: Vec<OrderRow> = self
            .pool
            .on()
            .all(
                sql(&statement)
                    .bind(term)
                    .bind(term.to_lowercase())
                    .bind(limit),
            )
            .await?;
        let mut orders = Vec::with_capacity(rows.len());
        for row in rows {
            orders.push(self.view(row).await?);
        }
        Ok(orders)
    }
}

impl Claims<'_> {
    /// Deliveries received since `since`, counted per hour (0 = the first hour after `since`)
    /// and outcome.
    pub async fn deliveries_by_hour(
        self,
        since: i64,
    ) -> Result<Vec<(i64, DeliveryOutcome, i64)>, StoreError> {
        const SQL: &str = "SELECT (received_at - $1) / 3600000 AS hour, outcome, COUNT(*) \
                           FROM webhook_deliveries WHERE received_at >= $1 \
                           GROUP BY 1, 2 ORDER BY 1, 2";
        let rows: Vec<(i64, String, i64)> = self.pool.on().all(sql(SQL).bind(since)).await?;
        rows.into_iter()
            .map(|(hour, outcome, n)| {
                Ok((hour, outcome.parse().map_err(StoreError::UnknownValue)?, n))
            })
            .collect()
    }
}

impl Orders<'_> {
    /// Credits unlocked (granted, before any revoke) since `since`.
    pub async fn credits_unlocked_since(self, since: i64) -> Result<i64, StoreError> {
        const SQL: &str = "SELECT CAST(COALESCE(SUM(delta), 0) AS BIGINT) FROM credit_ledger \
                           WHERE kind = 'unlock' AND created_at >= $1";
        let sum = self.pool.on().value(sql(SQL).bind(since)).await?;
        Ok(sum)
    }
}

/// What the orders list is narrowed to. Empty fields do not filter.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OrderFilter {
    pub status: Option<OrderStatus>,
    pub package: Option<String>,
    /// Created at or after (unix ms).
    pub from: Option<i64>,
    /// Created before (unix ms).
    pub to: Option<i64>,
}

/// An order as one line of the orders list (no ledger or requests: see [`OrderView`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct OrderLine {
    pub order_id: String,
    pub status: OrderStatus,
    pub package: Option<String>,
    pub customer_email: Option<String>,
    pub credits: i64,
    /// The ledger's sum: what the order holds now.
    pub credits_granted: i64,
    pub amount: Option<i64>,
    pub currency: Option<String>,
    pub created_at: i64,
}

#[derive(sqlx::FromRow)]
struct OrderLineRow {
    order_id: String,
    status: String,
    package: Option<String>,
    customer_email: Option<String>,
    credits: i64,
    credits_granted: i64,
    amount: Option<i64>,
    currency: Option<String>,
    created_at: i64,
}

impl Orders<'_> {
    /// Orders matching `filter`, newest first, `limit` of them after the keyset `after`
    /// (created_at, order_id) of the previous page's last row: one range of the index on
    /// (created_at, order_id), or on (status, created_at, order_id) for a status.
    pub async fn list(
        self,
        filter: &OrderFilter,
        after: Option<(i64, String)>,
        limit: i64,
    ) -> Result<Vec<OrderLine>, StoreError> {
        let mut args: Vec<Arg<'static>> = Vec::new();
        let mut arg = |value: Arg<'static>| {
            args.push(value);
            format!("${}", args.len())
        };
        let mut conditions = Vec::new();
        if let Some(status) = filter.status {
            conditions.push(format!("status = {}", arg(Arg::from(status.as_str()))));
        }
        if let Some(package) = filter
            .package
            .as_deref()
            .map(str::trim)
            .filter(|p| !p.is_empty())
        {
            conditions.push(format!("package = {}", arg(Arg::from(package.to_owned()))));
        }
        if let Some(from) = filter.from {
            conditions.push(format!("created_at >= {}", arg(Arg::Int(from))));
        }
        if let Some(to) = filter.to {
            conditions.push(format!("created_at < {}", arg(Arg::Int(to))));
        }
        if let Some((at, id)) = after {
            let at = arg(Arg::Int(at));
            let id = arg(Arg::from(id));
            conditions.push(format!("(created_at, order_id) < ({at}, {id})"));
        }
        let limit = arg(Arg::Int(limit));
        let filter_sql = if conditions.is_empty() {
            String::new()
        } else {
            format!("WHERE {}", conditions.join(" AND "))
        };
        let statement = format!(
            "SELECT order_id, status, package, customer_email, credits, amount, currency, \
               created_at, \
               (SELECT CAST(COALESCE(SUM(l.delta), 0) AS BIGINT) FROM credit_ledger l \
                WHERE l.order_id = orders.order_id) AS credits_granted \
             FROM orders {filter_sql} ORDER BY created_at DESC, order_id DESC LIMIT {limit}"
        );
        let rows: Vec<OrderLineRow> = self.pool.on().all(sql(&statement).bind_all(args)).await?;
        rows.into_iter()
            .map(|r| {
                Ok(OrderLine {
                    status: r.status.parse().map_err(StoreError::UnknownValue)?,
                    order_id: r.order_id,
                    package: r.package,
                    customer_email: r.customer_email,
                    credits: r.credits,
                    credits_granted: r.credits_granted,
                    amount: r.amount,
                    currency: r.currency,
                    created_at: r.created_at,
                })
            })
            .collect()
    }
}
