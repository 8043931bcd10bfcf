//! `claimcheck simulate`: Stripe-like traffic for a small shop against any Claimcheck (one
//! instance or several sharing PostgreSQL), then the exactly-once verdict read back through
//! the order API.
//!
//! Each order takes one path: a card payment; a SEPA debit that succeeds later; one that
//! fails; a card payment refunded later, in full, in three parts, or in part by a refund that
//! then fails; or a card payment disputed, the dispute won or lost. Deliveries are signed like Stripe's, sent again
//! with backoff after a non-2xx answer or a timeout, duplicated (`--duplicates`), doubled by
//! a twin Event object for the same action (`--twins`), and the events of one order can
//! arrive out of order (`--reorder`).

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use claimcheck_core::backoff::Backoff;
use claimcheck_core::now_ms;
use claimcheck_core::webhook::SigningSecret;
use clap::Args;
use serde::Serialize;
use serde_json::{Value, json};

use crate::SimError;
use crate::credit_audit::read_back;
use crate::subscription_lives::{self, SimSubscription, Upgrade};

#[derive(Debug, Clone, Args)]
pub struct SimulateArgs {
    /// Base URL of a Claimcheck (its webhook at /webhooks/stripe, its order API at /api).
    /// Several, to spread the traffic over instances sharing one database.
    #[arg(long = "target", value_name = "URL", required = true)]
    pub targets: Vec<String>,
    /// The endpoint signing secret the targets accept (whsec_…).
    #[arg(long, env = "STRIPE_WEBHOOK_SECRET", hide_env_values = true)]
    pub secret: String,
    /// An API token of the targets (claimcheck tokens create), to read the orders back.
    #[arg(
        long = "api-token",
        env = "CLAIMCHECK_API_TOKEN",
        hide_env_values = true
    )]
    pub api_token: String,
    /// Orders in the simulated day.
    #[arg(long, default_value_t = 200)]
    pub orders: usize,
    /// Deliveries per second (0: as fast as the targets answer).
    #[arg(long, default_value_t = 50)]
    pub rate: u32,
    /// Share of deliveries Stripe sends again.
    #[arg(long, default_value_t = 0.2)]
    pub duplicates: f64,
    /// Share of actions that come as two distinct Event objects.
    #[arg(long, default_value_t = 0.1)]
    pub twins: f64,
    /// Share of orders whose later event arrives first.
    #[arg(long, default_value_t = 0.2)]
    pub reorder: f64,
    /// Distinguishes the ids of this run's orders and events.
    #[arg(long)]
    pub run: Option<String>,
    /// How long to wait for every order to reach its end state.
    #[arg(long, default_value_t = 60)]
    pub settle_secs: u64,
    /// A Stripe simulator (`claimcheck stripe-sim`) that the targets use as STRIPE_API_BASE:
    /// then orders are opened through the targets' order API, paid, refunded and disputed at
    /// the simulator, and every event the targets see is made and delivered by it (with the
    /// shares of duplicates and twins above). Without it, the events are made up here and
    /// delivered by this command.
    #[arg(long = "stripe-sim", value_name = "URL")]
    pub stripe_sim: Option<String>,
    /// The package ordered through the order API (with --stripe-sim).
    #[arg(long, default_value = "thesis-40")]
    pub package: String,
    /// Spends the shop makes through the spend API while the deliveries flow (each sent
    /// twice under its Idempotency-Key, spread over the customers, racing the unlocks,
    /// refunds and disputes); then every customer's ledger is read back.
    #[arg(long, default_value_t = 100)]
    pub spends: usize,
    /// Subscriptions sold through the order API (with --stripe-sim) and run three months on
    /// one of the simulator's test clocks: renewed, a renewal failed then paid on retry, one
    /// failed and never paid, one cancelled at its second period's end; each read back: the
    /// plan's credits for every paid period, once.
    #[arg(long, default_value_t = 0)]
    pub subscriptions: usize,
    /// The plan those subscriptions buy.
    #[arg(long, default_value = "thesis-monthly")]
    pub plan: String,
    /// A second plan the targets sell (`NAME=CREDITS:AMOUNT:CURRENCY:INTERVAL`): every fifth
    /// subscription is upgraded to it early in its second period (its proration paid, its
    /// share of the extra credits granted) and moved back at that period's end, which the
    /// target must show as scheduled until the renewal bills it.
    #[arg(long)]
    pub upgrade_plan: Option<Upgrade>,
}

/// What happens to one order over the day.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Journey {
    Card,
    SepaSucceeds,
    SepaFails,
    CardRefunded,
    /// Three partial refunds that add up to the whole amount.
    RefundedInParts,
    /// Half refunded, then that refund fails: the credits come back.
    RefundFails,
    DisputeWon,
    DisputeLost,
}

impl Journey {
    pub const ALL: [Journey; 8] = [
        Journey::Card,
        Journey::SepaSucceeds,
        Journey::SepaFails,
        Journey::CardRefunded,
        Journey::RefundedInParts,
        Journey::RefundFails,
        Journey::DisputeWon,
        Journey::DisputeLost,
    ];

    /// The order's status and net credits once every event is fulfilled.
    fn expected(self, credits: i64) -> (&'static str, i64) {
        match self {
            Journey::Card | Journey::SepaSucceeds | Journey::RefundFails | Journey::DisputeWon => {
                ("paid", credits)
            }
            Journey::SepaFails => ("payment_failed", 0),
            Journey::CardRefunded | Journey::RefundedInParts => ("refunded", 0),
            Journey::DisputeLost => ("chargeback", 0),
        }
    }
}

/// What every simulated order costs, in minor units.
const AMOUNT: i64 = 4900;

/// A small deterministic generator (xorshift), so a run can be replayed.
struct Dice(u64);

impl Dice {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn chance(&mut self, p: f64) -> bool {
        (self.next() % 10_000) as f64 / 10_000.0 < p
    }
}

/// One event to deliver (maybe more than once).
#[derive(Debug, Clone)]
pub struct Delivery {
    pub order: usize,
    pub body: Vec<u8>,
}

fn event(id: &str, kind: &str, created: i64, object: Value) -> Vec<u8> {
    serde_json::to_vec(&json!({
        "id": id,
        "object": "event",
        "type": kind,
        "created": created,
        "livemode": false,
        "api_version": "2025-03-31.basil",
        "data": { "object": object },
    }))
    .unwrap_or_default()
}

/// An order of the simulated day and the events Stripe sends for it.
#[derive(Debug, Clone)]
pub struct SimOrder {
    pub order_id: String,
    pub customer_email: String,
    pub journey: Journey,
    pub credits: i64,
    pub events: Vec<Vec<u8>>,
}

/// The day's orders, with their events in the order Stripe means them. Every event is stamped
/// `created` (unix seconds), so the same arguments give the same bytes.
pub fn plan_day(run: &str, orders: usize, seed: u64, created: i64) -> Vec<SimOrder> {
    let mut dice = Dice(seed | 1);
    let event = |id: &str, kind: &str, object: Value| event(id, kind, created, object);
    (0..orders)
        .map(|i| {
            let journey = match dice.next() % 20 {
                0..=10 => Journey::Card,
                11..=12 => Journey::SepaSucceeds,
                13 => Journey::SepaFails,
                14..=15 => Journey::CardRefunded,
                16 => Journey::RefundedInParts,
                17 => Journey::RefundFails,
                18 => Journey::DisputeWon,
                _ => Journey::DisputeLost,
            };
            let order_id = format!("ord_{run}_{i:05}");
            let session = format!("cs_{run}_{i:05}");
            let intent = format!("pi_{run}_{i:05}");
            let credits = [10, 40, 100][(dice.next() % 3) as usize];
            let email = format!("customer{}@{run}.example", i % 37);
            let session_object = |status: &str| {
                json!({
                    "id": session,
                    "object": "checkout.session",
                    "payment_status": status,
                    "amount_total": AMOUNT,
                    "currency": "chf",
                    "payment_intent": intent,
                    "client_reference_id": order_id,
                    "customer_email": email,
                    "metadata": { "order_id": order_id, "credits": credits.to_string() },
                })
            };
            let evt = |n: u32| format!("evt_{run}_{i:05}_{n}");
            let charge = |refunded: i64| {
                json!({
                    "id": format!("ch_{run}_{i:05}"),
                    "object": "charge",
                    "amount": AMOUNT,
                    "amount_refunded": refunded,
                    "refunded": refunded >= AMOUNT,
                    "currency": "chf",
                    "payment_intent": intent,
                })
            };
            let dispute = |status: &str| {
                json!({
                    "id": format!("dp_{run}_{i:05}"),
                    "object": "dispute",
                    "amount": AMOUNT,
                    "charge": format!("ch_{run}_{i:05}"),
                    "payment_intent": intent,
                    "status": status,
                })
            };
            let paid = || {
                event(
                    &evt(1),
                    "checkout.session.completed",
                    session_object("paid"),
                )
            };
            let events = match journey {
                Journey::Card => vec![event(
                    &evt(1),
                    "checkout.session.completed",
                    session_object("paid"),
                )],
                Journey::SepaSucceeds => vec![
                    event(
                        &evt(1),
                        "checkout.session.completed",
                        session_object("unpaid"),
                    ),
                    event(
                        &evt(2),
                        "checkout.session.async_payment_succeeded",
                        session_object("paid"),
                    ),
                ],
                Journey::SepaFails => vec![
                    event(
                        &evt(1),
                        "checkout.session.completed",
                        session_object("unpaid"),
                    ),
                    event(
                        &evt(2),
                        "checkout.session.async_payment_failed",
                        session_object("unpaid"),
                    ),
                ],
                Journey::CardRefunded => {
                    vec![paid(), event(&evt(2), "charge.refunded", charge(AMOUNT))]
                }
                Journey::RefundedInParts => vec![
                    paid(),
                    event(&evt(2), "charge.refunded", charge(1000)),
                    event(&evt(3), "charge.refunded", charge(2500)),
                    event(&evt(4), "charge.refunded", charge(AMOUNT)),
                ],
                Journey::RefundFails => vec![
                    paid(),
                    event(&evt(2), "charge.refunded", charge(AMOUNT / 2)),
                    event(
                        &evt(3),
                        "refund.failed",
                        json!({
                            "id": format!("re_{run}_{i:05}"),
                            "object": "refund",
                            "amount": AMOUNT / 2,
                            "charge": format!("ch_{run}_{i:05}"),
                            "payment_intent": intent,
                            "status": "failed",
                        }),
                    ),
                ],
                Journey::DisputeWon | Journey::DisputeLost => vec![
                    paid(),
                    event(&evt(2), "charge.dispute.created", dispute("needs_response")),
                    event(
                        &evt(3),
                        "charge.dispute.closed",
                        dispute(if journey == Journey::DisputeWon {
                            "won"
                        } else {
                            "lost"
                        }),
                    ),
                ],
            };
            SimOrder {
                order_id,
                customer_email: email,
                journey,
                credits,
                events,
            }
        })
        .collect()
}

/// The deliveries of a day: duplicates, twins and reordering applied.
pub fn deliveries(
    orders: &[SimOrder],
    duplicates: f64,
    twins: f64,
    reorder: f64,
    seed: u64,
) -> Vec<Delivery> {
    let mut dice = Dice(seed.rotate_left(17) | 1);
    let mut out = Vec::new();
    for (n, order) in orders.iter().enumerate() {
        let mut events = order.events.clone();
        if events.len() > 1 && dice.chance(reorder) {
            events.reverse();
        }
        for body in events {
            out.push(Delivery {
                order: n,
                body: body.clone(),
            });
            if dice.chance(twins) {
                // A second Event object for the same action: another id, same object.
                let mut twin: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
                if let Some(id) = twin["id"].as_str() {
                    twin["id"] = json!(format!("{id}_twin"));
                }
                out.push(Delivery {
                    order: n,
                    body: serde_json::to_vec(&twin).unwrap_or_default(),
                });
            }
            if dice.chance(duplicates) {
                out.push(Delivery {
                    order: n,
                    body: body.clone(),
                });
            }
        }
    }
    out
}

/// Delivery outcomes and latencies.
#[derive(Debug, Default)]
pub struct Sent {
    pub answered: usize,
    pub retried: usize,
    pub gave_up: usize,
    pub latencies: Vec<Duration>,
    pub statuses: BTreeMap<u16, usize>,
}

/// Delivers one event like Stripe: a fresh signature each time, again with backoff after a
/// non-2xx answer or a timeout (here up to 6 tries over about 6 seconds).
async fn deliver(
    client: &reqwest::Client,
    url: &str,
    secret: &SigningSecret,
    body: &[u8],
    sent: &mut Sent,
) {
    let backoff = Backoff::new(Duration::from_millis(100), Duration::from_secs(4));
    for attempt in 0..6 {
        if attempt > 0 {
            sent.retried += 1;
            tokio::time::sleep(backoff.delay(attempt - 1)).await;
        }
        let signature = secret.sign(now_ms() / 1000, body);
        let started = Instant::now();
        let answer = client
            .post(url)
            .header("content-type", "application/json")
            .header("stripe-signature", signature)
            .body(body.to_vec())
            .send()
            .await;
        match answer {
            Ok(response) => {
                let status = response.status().as_u16();
                *sent.statuses.entry(status).or_default() += 1;
                if response.status().is_success() {
                    sent.latencies.push(started.elapsed());
                    sent.answered += 1;
                    return;
                }
            }
            Err(_) => *sent.statuses.entry(0).or_default() += 1,
        }
    }
    sent.gave_up += 1;
}

/// The shop's own backend, spending its customers' credits through the spend API.
struct Shop<'a> {
    client: &'a reqwest::Client,
    targets: &'a [String],
    token: &'a str,
    run: &'a str,
    /// Requests sent again after a 5xx or a failed connection.
    resent: AtomicUsize,
}

/// What the shop's spends came to.
#[derive(Debug, Default)]
struct Spent {
    /// (customer, key) of each spend answered 201.
    keys: Vec<(String, String)>,
    /// Refused for want of credits.
    refused: usize,
    wrong: Vec<String>,
}

/// One answer of the spend API.
struct Answer {
    status: u16,
    replayed: bool,
    body: String,
}

impl Shop<'_> {
    /// What this run's spend keys begin with.
    fn key_prefix(&self) -> String {
        format!("spend-{}-", self.run)
    }

    /// `spends` spends of 1 to 5 credits for customers picked at random, `gap` apart: each
    /// sent to one instance, then again under its key to the next (a retry after a lost
    /// answer), whose answer must be the first one, replayed. A spend answered 201 must leave
    /// the balance and the available credits at zero or above.
    async fn spend_through_the_day(
        &self,
        customers: &[String],
        spends: usize,
        gap: Option<Duration>,
        seed: u64,
    ) -> Spent {
        let mut dice = Dice(seed.rotate_left(29) | 1);
        let mut spent = Spent::default();
        let started = Instant::now();
        for n in 0..spends {
            let Some(email) = customers.get((dice.next() % customers.len().max(1) as u64) as usize)
            else {
                break;
            };
            let credits = 1 + dice.next() % 5;
            let key = format!("{}{n:05}", self.key_prefix());
            let body = json!({ "credits": credits, "reference": format!("run-{n}") });
            let path = format!("/api/customers/{email}/spends");
            let first = self.send(n, &path, &key, &body).await;
            let again = self.send(n + 1, &path, &key, &body).await;
            match (first, again) {
                (Ok(first), Ok(again)) => {
                    if !again.replayed || again.status != first.status || again.body != first.body {
                        spent.wrong.push(format!(
                            "{key}: the retry was not the first answer (HTTP {} then {})",
                            first.status, again.status
                        ));
                    }
                    let answer: Value = serde_json::from_str(&first.body).unwrap_or_default();
                    match first.status {
                        201 => {
                            let after = |field: &str| answer[field].as_i64().unwrap_or(-1);
                            if after("balance_after") < 0 || after("available_after") < 0 {
                                spent.wrong.push(format!(
                                    "{key}: a spend left {email} at {} ({} available)",
                                    answer["balance_after"], answer["available_after"]
                                ));
                            }
                            spent.keys.push((email.clone(), key));
                        }
                        409 if answer["error"] == "insufficient_credits" => spent.refused += 1,
                        status => spent
                            .wrong
                            .push(format!("{key}: HTTP {status} ({})", first.body)),
                    }
                }
                (Err(e), _) | (_, Err(e)) => spent.wrong.push(format!("{key}: {e}")),
            }
            if let Some(gap) = gap
                && let Some(left) = (gap * (n as u32 + 1)).checked_sub(started.elapsed())
            {
                tokio::time::sleep(left).await;
            }
        }
        spent
    }

    /// One request, sent again under its key after a failed connection or a 5xx (as a shop's
    /// client retries), up to 5 tries, each to the next instance.
    async fn send(&self, n: usize, path: &str, key: &str, body: &Value) -> Result<Answer, String> {
        let backoff = Backoff::new(Duration::from_millis(100), Duration::from_secs(2));
        let mut last = String::new();
        for attempt in 0..5 {
            if attempt > 0 {
                self.resent.fetch_add(1, Ordering::Relaxed);
                tokio::time::sleep(backoff.delay(attempt - 1)).await;
            }
            let target = &self.targets[(n + attempt as usize) % self.targets.len()];
            let response = self
                .client
                .post(format!("{target}{path}"))
                .bearer_auth(self.token)
                .header("Idempotency-Key", key)
                .json(body)
                .send()
                .await;
            match response {
                Ok(response) if response.status().is_server_error() => {
                    last = format!("HTTP {}", response.status());
                }
                Ok(response) => {
                    let status = response.status().as_u16();
                    let replayed = response.headers().contains_key("idempotent-replayed");
                    let body = response.text().await.map_err(|e| e.to_string())?;
                    return Ok(Answer {
                        status,
                        replayed,
                        body,
                    });
                }
                Err(e) => last = e.to_string(),
            }
        }
        Err(last)
    }
}

/// The verdict: every order in its expected state with its expected net credits, and every
/// customer's credits adding up.
#[derive(Debug, Serialize)]
pub struct Verdict {
    pub exactly_once: bool,
    pub orders: usize,
    pub wrong: Vec<String>,
    /// Spends answered 201, and refused for want of credits (409).
    pub spends: usize,
    pub spends_refused: usize,
    /// Customers whose balance is not their ledger's sum, a key spent twice or a spend
    /// answered but missing from the ledger, a spend that took a balance below zero, a retry
    /// that was not the first answer.
    pub credits_wrong: Vec<String>,
    pub deliveries: usize,
    pub settled_after_ms: u128,
    /// Every answer the deliveries got, by status (0: no answer: a refused or cut connection,
    /// a timeout), retries included.
    pub delivery_statuses: BTreeMap<u16, usize>,
    /// Spend requests the shop sent again after a 5xx or a failed connection.
    pub spends_resent: usize,
    /// Subscriptions checked through the order API (each right, or listed in `wrong`), and
    /// the credits their paid periods are due in all.
    pub subscriptions: usize,
    pub subscription_credits: i64,
}

pub async fn run_day(args: &SimulateArgs) -> Result<Verdict, SimError> {
    let secret = SigningSecret::new(args.secret.clone())
        .map_err(|e| SimError::Config(format!("--secret: {e}")))?;
    let run = args
        .run
        .clone()
        .unwrap_or_else(|| format!("sim{}", now_ms() % 1_000_000_000));
    let seed = run.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3)
    });
    let mut orders = plan_day(&run, args.orders, seed, now_ms() / 1000);
    let plan = match &args.stripe_sim {
        Some(_) => Vec::new(),
        None => deliveries(&orders, args.duplicates, args.twins, args.reorder, seed),
    };
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(10))
        .build()
        .map_err(|e| SimError::Config(format!("HTTP client: {e}")))?;
    let targets: Vec<String> = args
        .targets
        .iter()
        .map(|t| t.trim_end_matches('/').to_owned())
        .collect();

    let started = Instant::now();
    let mut sent = Sent::default();
    let gap = (args.rate > 0).then(|| Duration::from_secs_f64(1.0 / f64::from(args.rate)));
    let mut customers: Vec<String> = Vec::new();
    for order in &orders {
        if !customers.contains(&order.customer_email) {
            customers.push(order.customer_email.clone());
        }
    }
    // The spends spread over the time the deliveries take.
    let expected = plan.len().max(orders.len());
    let spend_gap = gap.map(|gap| gap * (expected as u32) / (args.spends.max(1) as u32));
    let shop = Shop {
        client: &client,
        targets: &targets,
        token: &args.api_token,
        run: &run,
        resent: AtomicUsize::new(0),
    };
    let spending = shop.spend_through_the_day(&customers, args.spends, spend_gap, seed);
    let mut subscriptions = Vec::new();
    let delivering = async {
        if let Some(sim) = &args.stripe_sim {
            through_the_simulator(&client, args, sim, &targets, &mut orders, &mut sent).await?;
            if args.subscriptions > 0 {
                subscriptions = subscription_lives::run(
                    &client,
                    sim,
                    &targets[0],
                    &args.api_token,
                    &run,
                    &args.plan,
                    args.upgrade_plan.as_ref(),
                    args.subscriptions,
                )
                .await?;
            }
        }
        for (i, delivery) in plan.iter().enumerate() {
            let target = &targets[i % targets.len()];
            deliver(
                &client,
                &format!("{target}/webhooks/stripe"),
                &secret,
                &delivery.body,
                &mut sent,
            )
            .await;
            if let Some(gap) = gap {
                let due = gap * (i as u32 + 1);
                if let Some(left) = due.checked_sub(started.elapsed()) {
                    tokio::time::sleep(left).await;
                }
            }
        }
        Ok::<_, SimError>(())
    };
    let (delivered, spent) = tokio::join!(delivering, spending);
    delivered?;
    let sent_in = started.elapsed();

    // Read every order back until all are where they should be, or time runs out.
    let deadline = Instant::now() + Duration::from_secs(args.settle_secs);
    let mut wrong;
    loop {
        wrong = Vec::new();
        for (i, order) in orders.iter().enumerate() {
            let target = &targets[i % targets.len()];
            let (status, credits) = order.journey.expected(order.credits);
            let seen: Option<Value> = match client
                .get(format!("{target}/api/orders/{}", order.order_id))
                .bearer_auth(&args.api_token)
                .send()
                .await
            {
                Ok(response) if response.status().is_success() => response.json().await.ok(),
                Ok(response) if response.status() == reqwest::StatusCode::UNAUTHORIZED => {
                    return Err(SimError::Failed(
                        "the API token was refused (claimcheck tokens create)".into(),
                    ));
                }
                _ => None,
            };
            let ok = seen.as_ref().is_some_and(|o| {
                o["status"] == status && o["credits_granted"].as_i64() == Some(credits)
            });
            if !ok {
                wrong.push(format!(
                    "{} ({:?}): expected {status} with {credits} credits, found {}",
                    order.order_id,
                    order.journey,
                    seen.map(|o| format!("{} with {} credits", o["status"], o["credits_granted"]))
                        .unwrap_or_else(|| "no order".into())
                ));
            }
        }
        for subscription in &subscriptions {
            let path = format!("/api/subscriptions/{}", subscription.reference);
            let seen: Option<Value> = match client
                .get(format!("{}{path}", targets[0]))
                .bearer_auth(&args.api_token)
                .send()
                .await
            {
                Ok(response) if response.status().is_success() => response.json().await.ok(),
                _ => None,
            };
            wrong.extend(subscription.check(seen.as_ref()));
        }
        if wrong.is_empty() || Instant::now() > deadline {
            break;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }

    // Every customer's credits read back: the ledger adds up, and holds each spend answered
    // 201 once (and nothing else of this run's keys).
    let mut credits_wrong = spent.wrong;
    for email in &customers {
        let credits = read_back(&client, &targets[0], &args.api_token, email).await?;
        credits_wrong.extend(credits.wrong);
        let prefix = shop.key_prefix();
        let mut in_ledger: Vec<&str> = credits
            .spend_keys
            .iter()
            .map(String::as_str)
            .filter(|k| k.starts_with(&prefix))
            .collect();
        let mut answered: Vec<&str> = spent
            .keys
            .iter()
            .filter(|(who, _)| who == email)
            .map(|(_, key)| key.as_str())
            .collect();
        in_ledger.sort_unstable();
        answered.sort_unstable();
        if in_ledger != answered {
            credits_wrong.push(format!(
                "{email}: spends answered 201 under {answered:?}, the ledger has {in_ledger:?}"
            ));
        }
    }

    sent.latencies.sort();
    let pct = |p: f64| {
        let n = sent.latencies.len();
        if n == 0 {
            return Duration::ZERO;
        }
        sent.latencies[((p * n as f64).ceil() as usize).clamp(1, n) - 1]
    };
    let mut journeys: HashMap<Journey, usize> = HashMap::new();
    for order in &orders {
        *journeys.entry(order.journey).or_default() += 1;
    }
    report(&format!(
        "simulated run {run}: {} orders (card {}, SEPA ok {}, SEPA failed {}, refunded {}, \
         refunded in parts {}, refund failed {}, dispute won {}, dispute lost {}), \
         {} deliveries to {} target(s) in {:.1} s",
        orders.len(),
        journeys.get(&Journey::Card).unwrap_or(&0),
        journeys.get(&Journey::SepaSucceeds).unwrap_or(&0),
        journeys.get(&Journey::SepaFails).unwrap_or(&0),
        journeys.get(&Journey::CardRefunded).unwrap_or(&0),
        journeys.get(&Journey::RefundedInParts).unwrap_or(&0),
        journeys.get(&Journey::RefundFails).unwrap_or(&0),
        journeys.get(&Journey::DisputeWon).unwrap_or(&0),
        journeys.get(&Journey::DisputeLost).unwrap_or(&0),
        plan.len(),
        targets.len(),
        sent_in.as_secs_f64()
    ));
    report(&format!(
        "answered {} (retries {}, given up {}), ack latency p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms",
        sent.answered,
        sent.retried,
        sent.gave_up,
        pct(0.5).as_secs_f64() * 1000.0,
        pct(0.99).as_secs_f64() * 1000.0,
        sent.latencies
            .last()
            .copied()
            .unwrap_or_default()
            .as_secs_f64()
            * 1000.0
    ));
    if !subscriptions.is_empty() {
        report(&format!(
            "subscriptions: {} sold and run {} months on a test clock (renewed, paid on retry, \
             a renewal never paid, cancelled{}), {} credits for their paid periods",
            subscriptions.len(),
            subscription_lives::MONTHS,
            if args.upgrade_plan.is_some() {
                ", upgraded and moved back"
            } else {
                ""
            },
            subscriptions
                .iter()
                .map(SimSubscription::expected_credits)
                .sum::<i64>()
        ));
    }
    report(&format!(
        "spends: {} sent twice each, {} spent, {} refused for want of credits, {} customers' \
         ledgers read back",
        args.spends,
        spent.keys.len(),
        spent.refused,
        customers.len()
    ));
    let verdict = Verdict {
        exactly_once: wrong.is_empty() && sent.gave_up == 0 && credits_wrong.is_empty(),
        orders: orders.len(),
        spends: spent.keys.len(),
        spends_refused: spent.refused,
        credits_wrong,
        deliveries: plan.len(),
        settled_after_ms: started.elapsed().as_millis(),
        delivery_statuses: sent.statuses.clone(),
        spends_resent: shop.resent.load(Ordering::Relaxed),
        subscriptions: subscriptions.len(),
        subscription_credits: subscriptions
            .iter()
            .map(SimSubscription::expected_credits)
            .sum(),
        wrong,
    };
    report(&format!(
        "exactly-once verdict: {} ({} orders checked through the order API; settled {:.1} s after the first delivery)",
        verdict.exactly_once,
        verdict.orders,
        verdict.settled_after_ms as f64 / 1000.0
    ));
    for line in verdict.wrong.iter().chain(&verdict.credits_wrong).take(20) {
        report(&format!("  wrong: {line}"));
    }
    Ok(verdict)
}

/// `claimcheck simulate`: exit status 0 only with a true verdict.
pub async fn run(args: SimulateArgs) -> Result<(), SimError> {
    let verdict = run_day(&args).await?;
    if verdict.exactly_once {
        Ok(())
    } else {
        Err(SimError::Failed(format!(
            "exactly-once verdict false: {} of {} orders are not where they should be, {} \
             credit findings",
            verdict.wrong.len(),
            verdict.orders,
            verdict.credits_wrong.len()
        )))
    }
}

/// Plays the day through a Stripe simulator: each order opened through a target's order API
/// (a Checkout Session at the simulator), paid there (card, SEPA that succeeds or fails),
/// then refunded, refunded in parts, refunded by a refund that fails, or disputed, all at the
/// simulator, which makes the events and delivers them to every target like Stripe. Returns
/// once the simulator has delivered (or given up on) everything.
async fn through_the_simulator(
    client: &reqwest::Client,
    args: &SimulateArgs,
    sim: &str,
    targets: &[String],
    orders: &mut [SimOrder],
    sent: &mut Sent,
) -> Result<(), SimError> {
    let sim = sim.trim_end_matches('/');
    let failed = |what: &str, e: String| SimError::Failed(format!("simulator: {what}: {e}"));
    let post = |url: String, body: Value| {
        let client = client.clone();
        async move {
            let response = client
                .post(&url)
                .json(&body)
                .send()
                .await
                .map_err(|e| failed(&url, e.to_string()))?;
            if response.status().is_success() {
                Ok(response.json::<Value>().await.unwrap_or(Value::Null))
            } else {
                Err(failed(&url, format!("HTTP {}", response.status())))
            }
        }
    };
    for target in targets {
        post(
            format!("{sim}/_sim/webhooks"),
            json!({ "url": format!("{target}/webhooks/stripe"), "secret": args.secret }),
        )
        .await?;
    }
    post(
        format!("{sim}/_sim/delivery_faults"),
        json!({ "duplicates": args.duplicates, "twins": args.twins }),
    )
    .await?;
    let refund = |payment_intent: String, amount: i64| {
        let client = client.clone();
        let url = format!("{sim}/v1/refunds");
        async move {
            let response = client
                .post(&url)
                .bearer_auth("sk_test_simulate")
                .form(&[
                    ("payment_intent", payment_intent),
                    ("amount", amount.to_string()),
                ])
                .send()
                .await
                .map_err(|e| failed(&url, e.to_string()))?;
            if !response.status().is_success() {
                return Err(failed(&url, format!("HTTP {}", response.status())));
            }
            Ok::<Value, SimError>(response.json().await.unwrap_or(Value::Null))
        }
    };
    let counts = || async {
        client
            .get(format!("{sim}/_sim/deliveries"))
            .send()
            .await
            .map_err(|e| failed("deliveries", e.to_string()))?
            .json::<Value>()
            .await
            .map_err(|e| failed("deliveries", e.to_string()))
    };
    // Deliveries of earlier days (or of an outage just before) are not this day's.
    let before = counts().await?;
    let count = |c: &Value, field: &str| {
        (c[field].as_u64().unwrap_or(0)).saturating_sub(before[field].as_u64().unwrap_or(0))
            as usize
    };
    let gap = (args.rate > 0).then(|| Duration::from_secs_f64(1.0 / f64::from(args.rate)));
    let started = Instant::now();
    for (i, order) in orders.iter_mut().enumerate() {
        let target = &targets[i % targets.len()];
        let response = client
            .post(format!("{target}/api/orders"))
            .bearer_auth(&args.api_token)
            .json(&json!({
                "order_id": order.order_id,
                "package": args.package,
                "customer_email": order.customer_email,
            }))
            .send()
            .await
            .map_err(|e| failed("order API", e.to_string()))?;
        if response.status() == reqwest::StatusCode::UNAUTHORIZED {
            return Err(SimError::Failed(
                "the API token was refused (claimcheck tokens create)".into(),
            ));
        }
        if !response.status().is_success() {
            return Err(failed("order API", format!("HTTP {}", response.status())));
        }
        let created: Value = response
            .json()
            .await
            .map_err(|e| failed("order API", e.to_string()))?;
        order.credits = created["credits"].as_i64().unwrap_or(order.credits);
        let amount = created["amount"].as_i64().unwrap_or(4900);
        let session = created["checkout_session_id"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        let outcome = match order.journey {
            Journey::SepaSucceeds => "sepa_ok",
            Journey::SepaFails => "sepa_fail",
            _ => "card",
        };
        post(
            format!("{sim}/_sim/checkout/sessions/{session}/pay"),
            json!({ "outcome": outcome }),
        )
        .await?;
        // The simulator names the payment intent after the session.
        let intent = format!("pi_{}", session.trim_start_matches("cs_"));
        match order.journey {
            Journey::Card | Journey::SepaSucceeds | Journey::SepaFails => {}
            Journey::CardRefunded => {
                refund(intent, amount).await?;
            }
            Journey::RefundedInParts => {
                let first = amount / 5;
                let second = amount / 3;
                for part in [first, second, amount - first - second] {
                    refund(intent.clone(), part).await?;
                }
            }
            Journey::RefundFails => {
                let made = refund(intent, amount / 2).await?;
                let id = made["id"].as_str().unwrap_or_default();
                post(format!("{sim}/_sim/refunds/{id}/fail"), json!({})).await?;
            }
            Journey::DisputeWon | Journey::DisputeLost => {
                let opened = post(
                    format!("{sim}/_sim/disputes"),
                    json!({ "payment_intent": intent, "amount": amount }),
                )
                .await?;
                let id = opened["data"]["object"]["id"].as_str().unwrap_or_default();
                let status = if order.journey == Journey::DisputeWon {
                    "won"
                } else {
                    "lost"
                };
                post(
                    format!("{sim}/_sim/disputes/{id}/close"),
                    json!({ "status": status }),
                )
                .await?;
            }
        }
        if let Some(gap) = gap {
            let due = gap * (i as u32 + 1);
            if let Some(left) = due.checked_sub(started.elapsed()) {
                tokio::time::sleep(left).await;
            }
        }
    }
    // Until the simulator has delivered everything it made (or given up on it).
    let deadline = Instant::now() + Duration::from_secs(args.settle_secs);
    loop {
        let now = counts().await?;
        sent.answered = count(&now, "delivered");
        sent.gave_up = count(&now, "gave_up");
        sent.retried = count(&now, "attempts").saturating_sub(sent.answered + sent.gave_up);
        if now["pending"] == 0 || Instant::now() > deadline {
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The figures are the command's output.
#[allow(clippy::print_stdout)]
fn report(line: &str) {
    println!("{line}");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_day_is_deterministic_and_has_every_journey() {
        let a = plan_day("t", 400, 7, 1_780_000_000);
        let b = plan_day("t", 400, 7, 1_780_000_000);
        assert_eq!(a.len(), 400);
        assert!(a.iter().zip(&b).all(|(x, y)| x.events == y.events));
        for journey in Journey::ALL {
            assert!(a.iter().any(|o| o.journey == journey), "{journey:?}");
        }
        let sent = deliveries(&a, 0.2, 0.1, 0.2, 7);
        let events: usize = a.iter().map(|o| o.events.len()).sum();
        assert!(sent.len() > events, "duplicates and twins add deliveries");
        assert!(
            sent.iter()
                .any(|d| String::from_utf8_lossy(&d.body).contains("_twin"))
        );
    }
}
