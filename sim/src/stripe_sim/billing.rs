//! Stripe Billing in the simulator, with Stripe's payloads (API 2025-03-31): a paid
//! `mode=subscription` Checkout Session starts a subscription and its first invoice, and test
//! clocks move its time on, period by period.
//!
//! - Paying such a session (`POST /_sim/checkout/sessions/{id}/pay` `{"outcome": "card",
//!   "test_clock"?}`) makes the subscription (the session's `subscription_data.metadata`,
//!   its price and interval) and the paid `subscription_create` invoice, and the six events
//!   Stripe makes (`customer.subscription.created`, `invoice.created`, `invoice.paid`,
//!   `invoice.payment_succeeded`, `charge.succeeded`, `checkout.session.completed`) in a random
//!   order.
//! - `POST /v1/test_helpers/test_clocks` (`frozen_time`) makes a clock; `POST
//!   /v1/test_helpers/test_clocks/{id}/advance` (`frozen_time`) moves it on: every subscription
//!   on it renews at each period end it passes (a `subscription_cycle` invoice at its price, paid,
//!   or failed when a failure was armed: `invoice.payment_failed` and `past_due`), or ends when
//!   it was to cancel at the period's end.
//!   Without a clock, a subscription lives in real time and only its changes move it.
//! - `POST /_sim/subscriptions/{id}/fail_next` `{"count"}` fails its next renewals' payments;
//!   `POST /_sim/invoices/{id}/pay` pays a failed invoice (Stripe's retry).
//! - `POST /_sim/subscriptions/{id}/change` `{"unit_amount", "at_period_end"}`: a plan change
//!   now (a `subscription_update` invoice with the unused time on the old price and the
//!   remaining time on the new one, paid) or at the period's end (Stripe's update without
//!   proration: the item's price changes now, with its `customer.subscription.updated`, and
//!   the next renewal bills it).
//! - `POST /_sim/subscriptions/{id}/schedule` `{"unit_amount"}`: a subscription schedule made
//!   from the subscription (`subscription_schedule.created`, one phase: the current period),
//!   then given a second phase at the new price from the period's end for one period
//!   (`subscription_schedule.updated`; its phases name prices by id, as Stripe's do). When
//!   the clock reaches the phase, the subscription's price changes (`customer.subscription.updated`,
//!   the schedule's `updated`) and the renewal bills it; when the phase ends, the schedule
//!   lets the subscription go (`subscription_schedule.released`). `GET /v1/prices/{id}`
//!   answers for every price the simulator billed or scheduled.
//!
//! A month is 30 days here, a year 365. A paid invoice lists its payment intent under
//! `payments` (as when an endpoint's events include it), so `/v1/refunds` can refund it.

use std::collections::BTreeMap;

use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::{Json, Router};
use claimcheck_core::now_ms;
use serde::Deserialize;
use serde_json::{Value, json};

use super::{Answer, Charge, Sim, SimState, handle, sim_error, stripe_error};

pub(super) fn router() -> Router<Sim> {
    Router::new()
        .route("/v1/test_helpers/test_clocks", post(create_clock))
        .route(
            "/v1/test_helpers/test_clocks/{id}",
            axum::routing::get(retrieve_clock),
        )
        .route(
            "/v1/test_helpers/test_clocks/{id}/advance",
            post(advance_clock),
        )
        .route("/_sim/subscriptions/{id}/fail_next", post(fail_next))
        .route("/_sim/subscriptions/{id}/change", post(change_plan))
        .route("/_sim/subscriptions/{id}/schedule", post(schedule_plan))
        .route("/v1/prices/{id}", axum::routing::get(retrieve_price))
        .route("/_sim/invoices/{id}/pay", post(pay_invoice))
}

/// A recurring price as a session or a change gave it.
#[derive(Debug, Clone)]
pub(super) struct Price {
    pub unit_amount: i64,
    pub currency: String,
    pub interval: String,
    pub product: String,
}

impl Price {
    pub(super) fn id(&self) -> String {
        format!("price_sim_{}_{}", self.currency, self.unit_amount)
    }

    fn seconds(&self) -> i64 {
        match self.interval.as_str() {
            "day" => 86_400,
            "week" => 7 * 86_400,
            "year" => 365 * 86_400,
            _ => 30 * 86_400,
        }
    }
}

/// What a `mode=subscription` session will start once paid.
#[derive(Debug, Clone)]
pub(super) struct SessionPlan {
    pub price: Price,
    pub metadata: serde_json::Map<String, Value>,
}

impl SessionPlan {
    /// The plan of a session's form parameters, when it is in `subscription` mode.
    pub(super) fn of(params: &BTreeMap<String, String>) -> Option<SessionPlan> {
        if params.get("mode").map(String::as_str) != Some("subscription") {
            return None;
        }
        let item = |name: &str| params.get(&format!("line_items[0][price_data][{name}]"));
        Some(SessionPlan {
            price: Price {
                unit_amount: item("unit_amount")?.parse().ok()?,
                currency: item("currency")?.to_ascii_lowercase(),
                interval: item("recurring][interval")
                    .cloned()
                    .unwrap_or_else(|| "month".into()),
                product: item("product_data][name")
                    .cloned()
                    .unwrap_or_else(|| "plan".into()),
            },
            metadata: super::prefixed(params, "subscription_data[metadata]["),
        })
    }
}

/// A subscription's billing as the simulator runs it.
#[derive(Debug, Clone)]
pub(super) struct Billing {
    customer: String,
    email: Option<String>,
    metadata: serde_json::Map<String, Value>,
    price: Price,
    period_start: i64,
    period_end: i64,
    clock: Option<String>,
    /// Renewals whose payment fails still to come.
    fail_next: u32,
    /// The last `created` given to an event about it: each later one is at least a second on,
    /// so that two changes are never taken for twins.
    last_stamp: i64,
    /// Its subscription schedule, while it has one.
    schedule: Option<Schedule>,
}

/// A schedule of two phases: the period it was made in, then `price` from `starts_at` to
/// `ends_at`; released at the end.
#[derive(Debug, Clone)]
pub(super) struct Schedule {
    id: String,
    created: i64,
    first: (i64, Price),
    price: Price,
    starts_at: i64,
    ends_at: i64,
    /// Whether the second phase was given yet (the schedule's `updated`), and has begun.
    second: bool,
    begun: bool,
}

impl SimState {
    /// The time of `clock` (unix seconds), else now.
    fn time_of(&self, clock: Option<&str>) -> i64 {
        clock
            .and_then(|c| self.clocks.get(c).copied())
            .unwrap_or_else(|| now_ms() / 1000)
    }

    /// A `created` for the next event about `subscription`.
    pub(super) fn stamp(&mut self, subscription: &str) -> i64 {
        let Some(billing) = self.billing.get(subscription) else {
            return now_ms() / 1000;
        };
        let at = self
            .time_of(billing.clock.as_deref())
            .max(billing.last_stamp + 1);
        if let Some(billing) = self.billing.get_mut(subscription) {
            billing.last_stamp = at;
        }
        at
    }

    /// The subscription object as Stripe shows it.
    pub(super) fn subscription_object(&self, id: &str) -> Value {
        let mut object = self.subscriptions.get(id).cloned().unwrap_or_default();
        if let Some(b) = self.billing.get(id) {
            object["current_period_start"] = json!(b.period_start);
            object["current_period_end"] = json!(b.period_end);
            object["items"] = json!({
                "object": "list",
                "data": [{
                    "id": format!("si_{}", id.trim_start_matches("sub_")),
                    "object": "subscription_item",
                    "quantity": 1,
                    "subscription": id,
                    "current_period_start": b.period_start,
                    "current_period_end": b.period_end,
                    "price": {
                        "id": b.price.id(),
                        "object": "price",
                        "currency": b.price.currency,
                        "unit_amount": b.price.unit_amount,
                        "unit_amount_decimal": b.price.unit_amount.to_string(),
                        "product": b.price.product,
                        "recurring": { "interval": b.price.interval, "interval_count": 1 },
                        "type": "recurring",
                    },
                }],
                "has_more": false,
            });
            object["test_clock"] = json!(b.clock);
        }
        object
    }

    /// Records a change of `id` (`status`, …) and its `customer.subscription.*` event.
    fn subscription_changed(&mut self, id: &str, kind: &str, change: impl FnOnce(&mut Value)) {
        let before = self.subscription_object(id);
        if let Some(subscription) = self.subscriptions.get_mut(id) {
            change(subscription);
        }
        let at = self.stamp(id);
        let object = self.subscription_object(id);
        if kind.ends_with(".updated") {
            self.updated_at(kind, &before, object, at);
        } else {
            self.event_at(kind, object, at);
        }
    }

    /// A subscription invoice with `lines` (amount, period, price, proration), paid or not.
    fn invoice(
        &mut self,
        subscription: &str,
        reason: &str,
        lines: &[(i64, i64, i64, &Price, bool)],
        paid: bool,
        at: i64,
    ) -> Value {
        let id = self.next("in");
        let b = self.billing[subscription].clone();
        let total: i64 = lines.iter().map(|l| l.0).sum::<i64>().max(0);
        let intent = format!("pi_{}", id.trim_start_matches("in_"));
        let data: Vec<Value> = lines
            .iter()
            .enumerate()
            .map(|(i, (amount, start, end, price, proration))| {
                json!({
                    "id": format!("il_{}_{i}", id.trim_start_matches("in_")),
                    "object": "line_item",
                    "amount": amount,
                    "currency": price.currency,
                    "description": format!("1 × {}", price.product),
                    "invoice": id,
                    "quantity": 1,
                    "period": { "start": start, "end": end },
                    "metadata": b.metadata,
                    "parent": {
                        "type": "subscription_item_details",
                        "subscription_item_details": {
                            "proration": proration,
                            "subscription": subscription,
                            "subscription_item": format!("si_{}", subscription.trim_start_matches("sub_")),
                        },
                    },
                    "pricing": {
                        "type": "price_details",
                        "price_details": { "price": price.id(), "product": price.product },
                        "unit_amount_decimal": price.unit_amount.to_string(),
                    },
                })
            })
            .collect();
        let mut invoice = json!({
            "id": id,
            "object": "invoice",
            "billing_reason": reason,
            "status": if paid { "paid" } else { "open" },
            "amount_due": total,
            "total": total,
            "subtotal": total,
            "starting_balance": 0,
            "amount_paid": if paid { total } else { 0 },
            "amount_remaining": if paid { 0 } else { total },
            "attempt_count": 1,
            "attempted": true,
            "collection_method": "charge_automatically",
            "currency": b.price.currency,
            "customer": b.customer,
            "customer_email": b.email,
            "created": at,
            // Stripe's trap: the invoice's own period is the one before.
            "period_start": b.period_start,
            "period_end": b.period_start,
            "livemode": false,
            "lines": { "object": "list", "data": data, "has_more": false },
            "parent": {
                "type": "subscription_details",
                "subscription_details": { "metadata": b.metadata, "subscription": subscription },
            },
            "status_transitions": { "finalized_at": at, "paid_at": if paid { json!(at) } else { Value::Null } },
        });
        if paid {
            self.pay_invoice_object(&mut invoice, &intent, total, at);
        }
        self.invoices.insert(id, invoice.clone());
        invoice
    }

    /// Marks `invoice` paid by `intent` and makes the charge a refund can find.
    fn pay_invoice_object(&mut self, invoice: &mut Value, intent: &str, total: i64, at: i64) {
        invoice["status"] = json!("paid");
        invoice["amount_paid"] = json!(total);
        invoice["amount_remaining"] = json!(0);
        invoice["status_transitions"]["paid_at"] = json!(at);
        invoice["payments"] = json!({
            "object": "list",
            "data": [{ "object": "invoice_payment", "status": "paid",
                       "payment": { "type": "payment_intent", "payment_intent": intent } }],
        });
        let currency = invoice["currency"].as_str().unwrap_or("chf").to_owned();
        self.charges.insert(
            intent.to_owned(),
            Charge {
                id: format!("ch_{}", intent.trim_start_matches("pi_")),
                amount: Some(total),
                refunded: 0,
                currency,
            },
        );
    }

    /// The events of a paid invoice: `invoice.paid`, `invoice.payment_succeeded` and the
    /// charge, in the order given.
    fn invoice_paid_events(&mut self, invoice: &Value, at: i64) -> Vec<(&'static str, Value)> {
        let intent = invoice["payments"]["data"][0]["payment"]["payment_intent"].clone();
        vec![
            ("invoice.paid", invoice.clone()),
            ("invoice.payment_succeeded", invoice.clone()),
            (
                "charge.succeeded",
                json!({ "id": format!("ch_{}", intent.as_str().unwrap_or_default().trim_start_matches("pi_")),
                        "object": "charge", "amount": invoice["amount_paid"], "currency": invoice["currency"],
                        "amount_captured": invoice["amount_paid"], "captured": true,
                        "billing_details": super::empty_billing_details(),
                        "payment_intent": intent, "invoice": invoice["id"], "paid": true, "created": at }),
            ),
        ]
    }

    /// Starts the subscription a paid `mode=subscription` session names; the session is
    /// completed with it.
    pub(super) fn start_subscription(
        &mut self,
        session: &mut Value,
        plan: SessionPlan,
        clock: Option<String>,
    ) -> Result<(), String> {
        if let Some(clock) = &clock
            && !self.clocks.contains_key(clock)
        {
            return Err(format!("No such test clock: '{clock}'"));
        }
        let id = self.next("sub");
        let customer = self.next("cus");
        let start = self.time_of(clock.as_deref());
        let email = session["customer_email"].as_str().map(str::to_owned);
        self.subscriptions.insert(
            id.clone(),
            json!({
                "id": id,
                "object": "subscription",
                "status": "active",
                "customer": customer,
                "metadata": plan.metadata,
                "cancel_at_period_end": false,
                "created": start,
                "start_date": start,
                "billing_cycle_anchor": start,
                "livemode": false,
            }),
        );
        self.billing.insert(
            id.clone(),
            Billing {
                customer: customer.clone(),
                email,
                metadata: plan.metadata.clone(),
                period_start: start,
                period_end: start + plan.price.seconds(),
                price: plan.price.clone(),
                clock,
                fail_next: 0,
                last_stamp: start - 1,
                schedule: None,
            },
        );
        self.prices.insert(plan.price.id(), plan.price.clone());
        let at = self.stamp(&id);
        let invoice = self.invoice(
            &id,
            "subscription_create",
            &[(
                plan.price.unit_amount,
                start,
                start + plan.price.seconds(),
                &plan.price,
                false,
            )],
            true,
            at,
        );
        session["status"] = json!("complete");
        session["payment_status"] = json!("paid");
        session["subscription"] = json!(id);
        session["customer"] = json!(customer);
        session["invoice"] = invoice["id"].clone();
        let mut created = invoice.clone();
        created["status"] = json!("draft");
        created["amount_paid"] = json!(0);
        created.as_object_mut().map(|o| o.remove("payments"));
        let mut events = vec![
            (
                "customer.subscription.created",
                self.subscription_object(&id),
            ),
            ("invoice.created", created),
            ("checkout.session.completed", session.clone()),
        ];
        events.extend(self.invoice_paid_events(&invoice, at));
        // Stripe promises no order among them.
        while !events.is_empty() {
            let i = self.roll(events.len());
            let (kind, object) = events.swap_remove(i);
            self.event_at(kind, object, at);
        }
        Ok(())
    }

    /// A number below `n` from the simulator's dice.
    fn roll(&mut self, n: usize) -> usize {
        self.dice ^= self.dice << 13;
        self.dice ^= self.dice >> 7;
        self.dice ^= self.dice << 17;
        (self.dice % n.max(1) as u64) as usize
    }

    /// Moves `clock` to `to`: each subscription on it renews at every period end passed.
    fn advance(&mut self, clock: &str, to: i64) {
        self.clocks.insert(clock.to_owned(), to);
        let on_clock: Vec<String> = self
            .billing
            .iter()
            .filter(|(_, b)| b.clock.as_deref() == Some(clock))
            .map(|(id, _)| id.clone())
            .collect();
        for id in on_clock {
            while self.billing[&id].period_end <= to {
                let status = self.subscriptions[&id]["status"].clone();
                if status == "canceled" {
                    break;
                }
                if self.subscriptions[&id]["cancel_at_period_end"] == true {
                    self.subscription_changed(&id, "customer.subscription.deleted", |s| {
                        s["status"] = json!("canceled");
                    });
                    break;
                }
                self.follow_schedule(&id);
                self.renew(&id);
            }
        }
    }

    /// At `id`'s period end, its schedule's second phase begins (the price changes, with the
    /// subscription's and the schedule's events), or, once that phase is over, the schedule
    /// lets the subscription go.
    fn follow_schedule(&mut self, id: &str) {
        let Some(billing) = self.billing.get(id) else {
            return;
        };
        let Some(schedule) = billing.schedule.clone() else {
            return;
        };
        let period_end = billing.period_end;
        if schedule.begun && period_end >= schedule.ends_at {
            if let Some(b) = self.billing.get_mut(id) {
                b.schedule = None;
            }
            let at = self.stamp(id);
            let object = self.schedule_object(id, &schedule, "released");
            self.event_at("subscription_schedule.released", object, at);
        } else if schedule.second && !schedule.begun && period_end >= schedule.starts_at {
            let begun = Schedule {
                begun: true,
                ..schedule
            };
            if let Some(b) = self.billing.get_mut(id) {
                b.price = begun.price.clone();
                b.schedule = Some(begun.clone());
            }
            self.subscription_changed(id, "customer.subscription.updated", |_| {});
            let at = self.stamp(id);
            let object = self.schedule_object(id, &begun, "active");
            self.event_at("subscription_schedule.updated", object, at);
        }
    }

    /// `id`'s billing and a price like its own at `unit_amount` (and `product`, if given),
    /// known from now on to `GET /v1/prices/{id}`; `None` for a subscription it does not bill.
    fn new_price(
        &mut self,
        id: &str,
        unit_amount: i64,
        product: Option<String>,
    ) -> Option<(Billing, Price)> {
        let billing = self.billing.get(id).cloned()?;
        let price = Price {
            unit_amount,
            product: product.unwrap_or_else(|| billing.price.product.clone()),
            ..billing.price.clone()
        };
        self.prices.insert(price.id(), price.clone());
        Some((billing, price))
    }

    /// A schedule as Stripe shows it: its phases name their prices by id.
    fn schedule_object(&self, subscription: &str, schedule: &Schedule, status: &str) -> Value {
        let b = &self.billing[subscription];
        let phase = |start: i64, end: i64, price: &Price| {
            json!({ "start_date": start, "end_date": end, "proration_behavior": "none",
                    "items": [{ "price": price.id(), "quantity": 1, "metadata": {} }] })
        };
        let (first_start, first_price) = &schedule.first;
        let mut phases = vec![phase(*first_start, schedule.starts_at, first_price)];
        if schedule.second {
            phases.push(phase(schedule.starts_at, schedule.ends_at, &schedule.price));
        }
        let released = status == "released";
        let current = match (released, schedule.begun) {
            (true, _) => Value::Null,
            (false, false) => json!({ "start_date": first_start, "end_date": schedule.starts_at }),
            (false, true) => {
                json!({ "start_date": schedule.starts_at, "end_date": schedule.ends_at })
            }
        };
        json!({
            "id": schedule.id,
            "object": "subscription_schedule",
            "status": status,
            "created": schedule.created,
            "customer": b.customer,
            "subscription": if released { Value::Null } else { json!(subscription) },
            "released_subscription": if released { json!(subscription) } else { Value::Null },
            "released_at": if released { json!(self.time_of(b.clock.as_deref())) } else { Value::Null },
            "end_behavior": "release",
            "current_phase": current,
            "phases": phases,
            "metadata": {},
            "test_clock": b.clock,
            "livemode": false,
        })
    }

    /// One renewal of `id` at its period's end.
    fn renew(&mut self, id: &str) {
        let Some(billing) = self.billing.get_mut(id) else {
            return;
        };
        billing.period_start = billing.period_end;
        billing.period_end += billing.price.seconds();
        let fails = billing.fail_next > 0;
        billing.fail_next = billing.fail_next.saturating_sub(1);
        let (start, end, price) = (
            billing.period_start,
            billing.period_end,
            billing.price.clone(),
        );
        let at = self.stamp(id);
        let invoice = self.invoice(
            id,
            "subscription_cycle",
            &[(price.unit_amount, start, end, &price, false)],
            !fails,
            at,
        );
        self.event_at("invoice.created", invoice.clone(), at);
        if fails {
            self.event_at("invoice.payment_failed", invoice, at);
            self.subscription_changed(id, "customer.subscription.updated", |s| {
                s["status"] = json!("past_due");
            });
        } else {
            for (kind, object) in self.invoice_paid_events(&invoice, at) {
                self.event_at(kind, object, at);
            }
            // Its latest invoice paid: active again, even with an earlier one left unpaid.
            let past_due = self
                .subscriptions
                .get(id)
                .is_some_and(|s| s["status"] == "past_due");
            if past_due {
                self.subscription_changed(id, "customer.subscription.updated", |s| {
                    s["status"] = json!("active");
                });
            }
        }
    }
}

fn form_time(params: &BTreeMap<String, String>) -> Result<i64, Answer> {
    params
        .get("frozen_time")
        .and_then(|t| t.parse().ok())
        .ok_or_else(|| {
            stripe_error(
                StatusCode::BAD_REQUEST,
                "invalid_request_error",
                Some("parameter_missing"),
                "Missing required param: frozen_time.",
            )
        })
}

fn clock_object(id: &str, frozen_time: i64) -> Value {
    json!({ "id": id, "object": "test_helpers.test_clock", "frozen_time": frozen_time,
            "status": "ready", "livemode": false })
}

fn ok(body: Value) -> Answer {
    Answer {
        status: StatusCode::OK,
        body,
        request_id: String::new(),
    }
}

async fn create_clock(State(sim): State<Sim>, headers: HeaderMap, body: Bytes) -> Response {
    let path = "/v1/test_helpers/test_clocks";
    let operation = |state: &mut SimState, _: &str, params: &BTreeMap<String, String>| {
        let frozen_time = match form_time(params) {
            Ok(at) => at,
            Err(answer) => return answer,
        };
        let id = state.next("clock");
        state.clocks.insert(id.clone(), frozen_time);
        ok(clock_object(&id, frozen_time))
    };
    handle(sim, "POST", path, headers, body, operation).await
}

async fn retrieve_clock(
    State(sim): State<Sim>,
    Path(id): Path<String>,
    headers: HeaderMap,
) -> Response {
    let path = format!("/v1/test_helpers/test_clocks/{id}");
    super::retrieve(
        &sim,
        &headers,
        &path,
        "test_helpers.test_clock",
        &id,
        |state| state.clocks.get(&id).map(|at| clock_object(&id, *at)),
    )
    .await
}

async fn advance_clock(
    State(sim): State<Sim>,
    Path(id): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let path = format!("/v1/test_helpers/test_clocks/{id}/advance");
    let operation = move |state: &mut SimState, _: &str, params: &BTreeMap<String, String>| {
        let to = match form_time(params) {
            Ok(at) => at,
            Err(answer) => return answer,
        };
        let Some(now) = state.clocks.get(&id).copied() else {
            return stripe_error(
                StatusCode::NOT_FOUND,
                "invalid_request_error",
                Some("resource_missing"),
                &format!("No such test_helpers.test_clock: '{id}'"),
            );
        };
        if to <= now {
            return stripe_error(
                StatusCode::BAD_REQUEST,
                "invalid_request_error",
                None,
                "The test clock can only be advanced to a time after its current frozen_time.",
            );
        }
        state.advance(&id, to);
        ok(clock_object(&id, to))
    };
    handle(sim, "POST", &path, headers, body, operation).await
}

#[derive(Deserialize)]
struct FailNext {
    #[serde(default = "one")]
    count: u32,
}

fn one() -> u32 {
    1
}

async fn fail_next(
    State(sim): State<Sim>,
    Path(id): Path<String>,
    Json(request): Json<FailNext>,
) -> Response {
    let mut state = sim.lock();
    match state.billing.get_mut(&id) {
        Some(billing) => {
            billing.fail_next = request.count;
            StatusCode::NO_CONTENT.into_response()
        }
        None => sim_error(
            StatusCode::NOT_FOUND,
            &format!("No such subscription: '{id}'"),
        ),
    }
}

/// Stripe's retry of a failed invoice succeeds: paid, and the subscription active again.
async fn pay_invoice(State(sim): State<Sim>, Path(id): Path<String>) -> Response {
    let mut state = sim.lock();
    let Some(mut invoice) = state.invoices.get(&id).cloned() else {
        return sim_error(StatusCode::NOT_FOUND, &format!("No such invoice: '{id}'"));
    };
    if invoice["status"] != "open" {
        return sim_error(StatusCode::BAD_REQUEST, "The invoice is not open.");
    }
    let subscription = invoice["parent"]["subscription_details"]["subscription"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    let at = state.stamp(&subscription);
    let total = invoice["amount_due"].as_i64().unwrap_or(0);
    let intent = format!("pi_{}", id.trim_start_matches("in_"));
    invoice["attempt_count"] = json!(2);
    state.pay_invoice_object(&mut invoice, &intent, total, at);
    state.invoices.insert(id, invoice.clone());
    for (kind, object) in state.invoice_paid_events(&invoice, at) {
        state.event_at(kind, object, at);
    }
    if state
        .subscriptions
        .get(&subscription)
        .map(|s| s["status"].clone())
        == Some(json!("past_due"))
    {
        state.subscription_changed(&subscription, "customer.subscription.updated", |s| {
            s["status"] = json!("active");
        });
    }
    Json(invoice).into_response()
}

#[derive(Deserialize)]
struct ScheduledPlan {
    unit_amount: i64,
    #[serde(default)]
    product: Option<String>,
}

/// A schedule moving the subscription to a new price from its period's end: made, then
/// given its second phase, each with its event.
async fn schedule_plan(
    State(sim): State<Sim>,
    Path(id): Path<String>,
    Json(change): Json<ScheduledPlan>,
) -> Response {
    let mut state = sim.lock();
    let Some((billing, price)) = state.new_price(&id, change.unit_amount, change.product) else {
        return sim_error(
            StatusCode::NOT_FOUND,
            &format!("No such subscription: '{id}'"),
        );
    };
    if billing.schedule.is_some() {
        return sim_error(
            StatusCode::BAD_REQUEST,
            &format!("The subscription {id} is already attached to a schedule."),
        );
    }
    let made = Schedule {
        id: state.next("sub_sched"),
        created: state.time_of(billing.clock.as_deref()),
        first: (billing.period_start, billing.price.clone()),
        starts_at: billing.period_end,
        ends_at: billing.period_end + price.seconds(),
        price,
        second: false,
        begun: false,
    };
    for (kind, schedule) in [
        ("subscription_schedule.created", made.clone()),
        (
            "subscription_schedule.updated",
            Schedule {
                second: true,
                ..made
            },
        ),
    ] {
        if let Some(b) = state.billing.get_mut(&id) {
            b.schedule = Some(schedule.clone());
        }
        let at = state.stamp(&id);
        let object = state.schedule_object(&id, &schedule, "active");
        state.event_at(kind, object, at);
    }
    let schedule = state.billing[&id].schedule.clone();
    Json(schedule.map(|s| state.schedule_object(&id, &s, "active"))).into_response()
}

/// `GET /v1/prices/{id}`: a price the simulator billed or scheduled.
async fn retrieve_price(
    State(sim): State<Sim>,
    Path(id): Path<String>,
    headers: HeaderMap,
) -> Response {
    let path = format!("/v1/prices/{id}");
    super::retrieve(&sim, &headers, &path, "price", &id, |state| {
        state.prices.get(&id).map(|price| {
            json!({
                "id": id,
                "object": "price",
                "active": true,
                "currency": price.currency,
                "unit_amount": price.unit_amount,
                "unit_amount_decimal": price.unit_amount.to_string(),
                "product": price.product,
                "recurring": { "interval": price.interval, "interval_count": 1 },
                "type": "recurring",
                "livemode": false,
            })
        })
    })
    .await
}

#[derive(Deserialize)]
struct PlanChange {
    unit_amount: i64,
    #[serde(default)]
    product: Option<String>,
    #[serde(default)]
    at_period_end: bool,
}

/// A plan change: now, with its proration invoice paid, or at the period's end.
async fn change_plan(
    State(sim): State<Sim>,
    Path(id): Path<String>,
    Json(change): Json<PlanChange>,
) -> Response {
    let mut state = sim.lock();
    let Some((billing, new)) = state.new_price(&id, change.unit_amount, change.product) else {
        return sim_error(
            StatusCode::NOT_FOUND,
            &format!("No such subscription: '{id}'"),
        );
    };
    if change.at_period_end {
        // Stripe's update without proration: the item's price changes now (its
        // `customer.subscription.updated` says so), the next renewal bills it.
        if let Some(b) = state.billing.get_mut(&id) {
            b.price = new;
        }
        state.subscription_changed(&id, "customer.subscription.updated", |_| {});
        return StatusCode::NO_CONTENT.into_response();
    }
    let now = state.time_of(billing.clock.as_deref());
    let (start, end) = (billing.period_start, billing.period_end);
    let left = (end - now).clamp(0, end - start);
    let share = |amount: i64| amount * left / (end - start).max(1);
    if let Some(b) = state.billing.get_mut(&id) {
        b.price = new.clone();
    }
    let at = state.stamp(&id);
    let invoice = state.invoice(
        &id,
        "subscription_update",
        &[
            (
                -share(billing.price.unit_amount),
                now,
                end,
                &billing.price,
                true,
            ),
            (share(new.unit_amount), now, end, &new, true),
        ],
        true,
        at,
    );
    state.subscription_changed(&id, "customer.subscription.updated", |_| {});
    state.event_at("invoice.created", invoice.clone(), at);
    for (kind, object) in state.invoice_paid_events(&invoice, at) {
        state.event_at(kind, object, at);
    }
    Json(invoice).into_response()
}
