//! `claimcheck demo`: a living system in one command. SQLite in a local data folder, the
//! server, the Stripe API simulator, and a day of a small shop played against the real
//! webhook endpoint with real signatures: card and SEPA payments, failed debits, refunds,
//! Stripe-style retries, duplicates, twins, out-of-order arrival, orders opened through the
//! order API and refunded through the outgoing client (in part, in two steps, one refund that
//! fails), disputes won and lost with the events the simulator makes for them, subscriptions
//! sold beside the packages and run three months on a test clock, and one worker crash that
//! leaves a stale claim for an operator to re-drive. Ctrl-C stops everything; running it again
//! resumes with the same data, login and secrets, and plays another day.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use claimcheck_core::audit::Actor;
use claimcheck_core::auth::{Role, hash_password};
use claimcheck_core::money::OrderStatus;
use claimcheck_core::payments;
use claimcheck_core::stripe::{ApiKey, StripeApi, StripeConfig};
use claimcheck_core::token::{NewToken, random_id};
use claimcheck_core::webhook::SigningSecret;
use claimcheck_core::{ClaimState, DatabaseUrl, EventId, OrderId, Store, StoreOptions, now_ms};
use clap::Args;
use serde::{Deserialize, Serialize};
use serde_json::json;

use crate::credit_audit::read_back;
use crate::simulate::{SimulateArgs, run_day};
use crate::stripe_sim::StripeSim;
use crate::{Host, SimError};

#[derive(Debug, Clone, Args)]
pub struct DemoArgs {
    /// Where the demo keeps its database and its login (created if missing; reused).
    #[arg(long = "data-dir", default_value = "data/demo")]
    pub data_dir: PathBuf,
    /// Address of the dashboard.
    #[arg(long, env = "CLAIMCHECK_BIND", default_value = "127.0.0.1:3000")]
    pub bind: SocketAddr,
    /// Folder with the built dashboard assets, instead of the ones the binary carries.
    #[arg(long = "site-root", env = "LEPTOS_SITE_ROOT")]
    pub site_root: Option<PathBuf>,
    /// Orders in the simulated day.
    #[arg(long, default_value_t = 120)]
    pub orders: usize,
    /// Deliveries per second while the day plays (0: as fast as possible).
    #[arg(long, default_value_t = 20)]
    pub rate: u32,
    /// Play the day, check the invariants, print them and exit (for scripts and tests).
    #[arg(long)]
    pub exit_after_day: bool,
}

/// What a second run needs to find again.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct DemoState {
    webhook_secret: String,
    api_token: String,
    username: String,
    password: String,
    days: u32,
}

const PACKAGES: &str = "thesis-40=40:4900:chf,thesis-100=100:9900:chf";
/// The plan the demo's shop sells beside the packages.
const PLANS: &str = "thesis-monthly=40:3900:chf:month";
/// Subscriptions sold each day, one of each life `simulate` gives them.
const SUBSCRIPTIONS: usize = 4;

fn fail(context: &str) -> impl Fn(String) -> SimError + '_ {
    move |e| SimError::Failed(format!("demo: {context}: {e}"))
}

/// The demo's Claimcheck, as `claimcheck serve` flags.
#[derive(Debug, Clone)]
struct ServeFlags {
    database_url: DatabaseUrl,
    bind: String,
    /// Where customers come back after Checkout: the dashboard the demo prints.
    shop: SocketAddr,
    site_root: Option<PathBuf>,
    webhook_secret: String,
    stripe_api_base: String,
    workers: usize,
}

impl ServeFlags {
    fn with_bind(&self, bind: &str) -> ServeFlags {
        ServeFlags {
            bind: bind.to_owned(),
            ..self.clone()
        }
    }

    fn with_workers(&self, workers: usize) -> ServeFlags {
        ServeFlags {
            workers,
            ..self.clone()
        }
    }

    fn args(&self) -> Vec<String> {
        let mut args = vec![
            format!("--database-url={}", self.database_url.expose()),
            format!("--bind={}", self.bind),
            format!("--webhook-secret={}", self.webhook_secret),
            format!("--workers={}", self.workers),
            // The crashed worker's claim stays stale for an operator to see and re-drive.
            "--auto-rescue=false".into(),
            "--retry-backoff-ms=500".into(),
            format!("--packages={PACKAGES}"),
            format!("--plans={PLANS}"),
            "--stripe-api-key=sk_test_demo".into(),
            format!("--stripe-api-base={}", self.stripe_api_base),
            "--stripe-timeout-ms=5000".into(),
            format!(
                "--checkout-success-url=http://{}/?paid={{CHECKOUT_SESSION_ID}}",
                self.shop
            ),
            format!("--checkout-cancel-url=http://{}/", self.shop),
            // The day's outage is repaired by a reconcile run the demo makes itself.
            "--reconcile-interval=0".into(),
            // No balancer to tell: Ctrl-C stops at once.
            "--shutdown-grace=0s".into(),
        ];
        if let Some(root) = &self.site_root {
            args.push(format!("--site-root={}", root.display()));
        }
        args
    }
}

/// Writes the demo's own lines to stdout: they are its output.
#[allow(clippy::print_stdout)]
fn say(line: &str) {
    println!("{line}");
}

async fn load_state(dir: &Path, store: &Store) -> Result<DemoState, SimError> {
    let path = dir.join("demo.json");
    if let Ok(text) = std::fs::read_to_string(&path) {
        return serde_json::from_str(&text).map_err(|e| fail("demo.json")(e.to_string()));
    }
    let token = NewToken::generate().map_err(|e| fail("token")(e.to_string()))?;
    // The days already played in this database (each left its crashed worker's claim), so
    // that a lost demo.json does not replay a day's order ids.
    let mut days = 0;
    while store
        .claims()
        .get(
            &EventId::parse(crash_event(days + 1)).map_err(|e| fail("crash")(e.to_string()))?,
            now_ms(),
        )
        .await
        .map_err(|e| fail("database")(e.to_string()))?
        .is_some()
    {
        days += 1;
    }
    let state = DemoState {
        webhook_secret: format!(
            "whsec_{}",
            random_id("demo").map_err(|e| fail("secret")(e.to_string()))?
        ),
        api_token: token.token.clone(),
        username: "demo".into(),
        password: random_id("pw").map_err(|e| fail("password")(e.to_string()))?,
        days,
    };
    let password = state.password.clone();
    let hash = tokio::task::spawn_blocking(move || hash_password(&password))
        .await
        .map_err(|e| fail("password")(e.to_string()))?
        .map_err(|e| fail("password")(e.to_string()))?;
    let wrap = |e: claimcheck_core::StoreError| fail("database")(e.to_string());
    // A data folder that lost its demo.json keeps its operator: give it the new password.
    if !store
        .operators()
        .add(&state.username, &hash, Role::Admin, now_ms())
        .await
        .map_err(wrap)?
    {
        store
            .operators()
            .set_password(&state.username, &hash)
            .await
            .map_err(wrap)?;
    }
    store
        .tokens()
        .insert(&token, "demo shop", now_ms())
        .await
        .map_err(wrap)?;
    save_state(dir, &state)?;
    Ok(state)
}

fn save_state(dir: &Path, state: &DemoState) -> Result<(), SimError> {
    let text = serde_json::to_string_pretty(state).map_err(|e| fail("demo.json")(e.to_string()))?;
    std::fs::write(dir.join("demo.json"), text).map_err(|e| fail("demo.json")(e.to_string()))
}

fn signed(secret: &SigningSecret, body: &[u8]) -> String {
    secret.sign(now_ms() / 1000, body)
}

async fn post_event(
    client: &reqwest::Client,
    base: &str,
    secret: &SigningSecret,
    body: &serde_json::Value,
) -> Result<(), SimError> {
    let bytes = serde_json::to_vec(body).map_err(|e| fail("event")(e.to_string()))?;
    let response = client
        .post(format!("{base}/webhooks/stripe"))
        .header("content-type", "application/json")
        .header("stripe-signature", signed(secret, &bytes))
        .body(bytes)
        .send()
        .await
        .map_err(|e| fail("webhook")(e.to_string()))?;
    if response.status().is_success() {
        Ok(())
    } else {
        Err(fail("webhook")(format!("HTTP {}", response.status())))
    }
}

/// A paid Checkout Session for the demo's `thesis-40` package ([`PACKAGES`]: 40 credits for
/// CHF 49), as Stripe sends it: with its amount, currency and package, so that the order it
/// becomes shows what was paid and can be refunded.
fn paid_session(order: &str, session: &str, email: &str) -> serde_json::Value {
    json!({
        "id": format!("evt_demo_paid_{order}"),
        "object": "event",
        "type": "checkout.session.completed",
        "created": now_ms() / 1000,
        "livemode": false,
        "data": { "object": {
            "id": session,
            "object": "checkout.session",
            "payment_status": "paid",
            "payment_intent": format!("pi_demo_{order}"),
            "client_reference_id": order,
            "customer_email": email,
            "amount_total": 4900,
            "currency": "chf",
            "metadata": { "order_id": order, "package": "thesis-40", "credits": "40" },
        }},
    })
}

/// The event whose worker crashes on `day`.
fn crash_event(day: u32) -> String {
    format!("evt_demo_crash_d{day}")
}

/// A worker takes the day's crash event and dies holding the lease: a real process, parked
/// at the `after-lease` failpoint and killed, on a server with no workers of its own.
async fn stage_worker_crash(
    host: &dyn Host,
    serve: &ServeFlags,
    secret: &SigningSecret,
    client: &reqwest::Client,
    store: &Store,
    day: u32,
) -> Result<(), SimError> {
    let crash = crash_event(day);
    let event = EventId::parse(crash.as_str()).map_err(|e| fail("crash")(e.to_string()))?;
    if store
        .claims()
        .get(&event, now_ms())
        .await
        .map_err(|e| fail("crash")(e.to_string()))?
        .is_some()
    {
        return Ok(());
    }
    let server = host
        .serve(serve.with_bind("127.0.0.1:0").with_workers(0).args())
        .await?;
    let order = format!("ord_demo_crash_d{day}");
    let mut body = paid_session(
        &order,
        &format!("cs_demo_crash_d{day}"),
        "crash@demo.example",
    );
    body["id"] = json!(crash);
    post_event(client, &server.base_url(), secret, &body).await?;
    let exe = std::env::current_exe().map_err(|e| fail("crash")(e.to_string()))?;
    let mut doomed = tokio::process::Command::new(exe)
        .args([
            "claims",
            "redrive",
            crash.as_str(),
            "--reason",
            "demo: a worker takes it and dies",
        ])
        .env("DATABASE_URL", serve.database_url.expose())
        .env("CLAIMCHECK_FAILPOINT", "after-lease")
        .env("CLAIMCHECK_LEASE_SECS", "1")
        .env("RUST_LOG", "off")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| fail("crash")(e.to_string()))?;
    let leased = async {
        loop {
            match store.claims().get(&event, now_ms()).await {
                Ok(Some(claim)) if claim.lease_owner.is_some() => return,
                _ => tokio::time::sleep(Duration::from_millis(50)).await,
            }
        }
    };
    tokio::time::timeout(Duration::from_secs(20), leased)
        .await
        .map_err(|_| fail("crash")("the doomed worker never took the lease".into()))?;
    doomed
        .kill()
        .await
        .map_err(|e| fail("crash")(e.to_string()))?;
    server.stop().await?;
    // Its one-second lease runs out: the claim is stale until someone re-drives it.
    tokio::time::sleep(Duration::from_millis(1100)).await;
    Ok(())
}

/// What happens to an order-API order after it is paid (the money's later life).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum AfterPurchase {
    Kept,
    /// Half back, then the rest: two refunds on one charge.
    RefundedInTwoSteps,
    /// Half back, then that refund fails at the customer's bank.
    RefundFails,
    DisputeWon,
    DisputeLost,
}

impl AfterPurchase {
    const DAY: [AfterPurchase; 6] = [
        AfterPurchase::Kept,
        AfterPurchase::RefundedInTwoSteps,
        AfterPurchase::DisputeWon,
        AfterPurchase::RefundFails,
        AfterPurchase::DisputeLost,
        AfterPurchase::RefundedInTwoSteps,
    ];

    /// The order's status and net credits (of 40) once every event is fulfilled.
    fn expected(self) -> (OrderStatus, i64) {
        match self {
            AfterPurchase::Kept | AfterPurchase::RefundFails | AfterPurchase::DisputeWon => {
                (OrderStatus::Paid, 40)
            }
            AfterPurchase::RefundedInTwoSteps => (OrderStatus::Refunded, 0),
            AfterPurchase::DisputeLost => (OrderStatus::Chargeback, 0),
        }
    }
}

/// Delivers the events the simulator made that were not delivered yet, in order.
async fn deliver_sim_events(
    client: &reqwest::Client,
    sim: &str,
    base: &str,
    secret: &SigningSecret,
    delivered: &mut std::collections::HashSet<String>,
) -> Result<(), SimError> {
    let events: Vec<serde_json::Value> = client
        .get(format!("{sim}/_sim/events"))
        .send()
        .await
        .and_then(reqwest::Response::error_for_status)
        .map_err(|e| fail("simulator")(e.to_string()))?
        .json()
        .await
        .map_err(|e| fail("simulator")(e.to_string()))?;
    for event in events {
        let id = event["id"].as_str().unwrap_or_default().to_owned();
        if delivered.insert(id) {
            post_event(client, base, secret, &event).await?;
        }
    }
    Ok(())
}

/// Asks the simulator for a money change; the answer is the Event object it made.
async fn sim_post(
    client: &reqwest::Client,
    url: String,
    body: serde_json::Value,
) -> Result<serde_json::Value, SimError> {
    client
        .post(url)
        .json(&body)
        .send()
        .await
        .and_then(reqwest::Response::error_for_status)
        .map_err(|e| fail("simulator")(e.to_string()))?
        .json()
        .await
        .map_err(|e| fail("simulator")(e.to_string()))
}

/// Orders opened through the order API (a Checkout Session at the simulator each), paid
/// through their webhook, then given a later life ([`AfterPurchase`]): refunds through the
/// outgoing client (partial, several, one that fails) and disputes won and lost, each
/// followed by the events the simulator makes for it. Returns how many were opened, how
/// many refunded through the client, and the orders not in their expected state at the end.
async fn api_orders(
    base: &str,
    state: &DemoState,
    secret: &SigningSecret,
    client: &reqwest::Client,
    store: &Store,
    stripe: &StripeApi,
    day: u32,
) -> Result<(usize, usize, Vec<String>), SimError> {
    let sim = stripe.config().api_base.trim_end_matches('/').to_owned();
    let mut delivered = std::collections::HashSet::new();
    let (mut opened, mut refunded) = (0, 0);
    let mut expected = Vec::new();
    for (i, after) in AfterPurchase::DAY.into_iter().enumerate() {
        let order = format!("ord_demo_d{day}_api{i}");
        let email = format!("shop{i}@demo.example");
        let response = client
            .post(format!("{base}/api/orders"))
            .bearer_auth(&state.api_token)
            .json(&json!({ "order_id": order, "package": "thesis-40", "customer_email": email }))
            .send()
            .await
            .map_err(|e| fail("order API")(e.to_string()))?;
        if !response.status().is_success() {
            return Err(fail("order API")(format!("HTTP {}", response.status())));
        }
        let created: serde_json::Value = response
            .json()
            .await
            .map_err(|e| fail("order API")(e.to_string()))?;
        opened += 1;
        let session = created["checkout_session_id"].as_str().unwrap_or_default();
        post_event(client, base, secret, &paid_session(&order, session, &email)).await?;
        let order_id = OrderId::parse(order.as_str()).map_err(|e| fail("order")(e.to_string()))?;
        expected.push((order_id.clone(), after));
        if after == AfterPurchase::Kept {
            continue;
        }
        // The webhook's worker pays the order first.
        for _ in 0..100 {
            if let Ok(Some(o)) = store.orders().get(&order_id).await
                && o.status == OrderStatus::Paid
            {
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let refund = |amount: Option<i64>| {
            let order_id = order_id.clone();
            async move {
                payments::refund(
                    store,
                    stripe,
                    &order_id,
                    amount,
                    &Actor::Cli("demo".into()),
                    "customer asked",
                )
                .await
                .map_err(|e| fail("refund")(e.to_string()))
            }
        };
        let payment_intent = format!("pi_demo_{order}");
        match after {
            AfterPurchase::Kept => {}
            AfterPurchase::RefundedInTwoSteps => {
                refund(Some(2450)).await?;
                refund(None).await?;
                refunded += 1;
            }
            AfterPurchase::RefundFails => {
                let done = refund(Some(2450)).await?;
                let refund_id = done.refund_id.unwrap_or_default();
                deliver_sim_events(client, &sim, base, secret, &mut delivered).await?;
                sim_post(
                    client,
                    format!("{sim}/_sim/refunds/{refund_id}/fail"),
                    json!({}),
                )
                .await?;
                refunded += 1;
            }
            AfterPurchase::DisputeWon | AfterPurchase::DisputeLost => {
                let opened = sim_post(
                    client,
                    format!("{sim}/_sim/disputes"),
                    json!({ "payment_intent": payment_intent, "amount": 4900 }),
                )
                .await?;
                let dispute = opened["data"]["object"]["id"].as_str().unwrap_or_default();
                let status = if after == AfterPurchase::DisputeWon {
                    "won"
                } else {
                    "lost"
                };
                sim_post(
                    client,
                    format!("{sim}/_sim/disputes/{dispute}/close"),
                    json!({ "status": status }),
                )
                .await?;
            }
        }
        deliver_sim_events(client, &sim, base, secret, &mut delivered).await?;
    }
    // Every order in its expected state, with its expected credits, once the workers are
    // through.
    let mut wrong = Vec::new();
    for _ in 0..200 {
        wrong.clear();
        for (order_id, after) in &expected {
            let (status, credits) = after.expected();
            match store.orders().get(order_id).await {
                Ok(Some(o)) if o.status == status && o.credits_granted == credits => {}
                Ok(Some(o)) => wrong.push(format!(
                    "{order_id}: {} with {} credits, expected {status} with {credits}",
                    o.status, o.credits_granted
                )),
                _ => wrong.push(format!("{order_id}: missing")),
            }
        }
        if wrong.is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    Ok((opened, refunded, wrong))
}

/// What the demo's shop did with its customers' credits in a day.
#[derive(Debug, Default)]
struct SpendDay {
    /// Spends and captures made (201).
    spends: usize,
    /// Requests sent again under their key and answered with the first answer.
    replays: usize,
    /// Spends refused for want of credits (409), as they should be.
    refused: usize,
    /// What did not add up.
    wrong: Vec<String>,
}

/// The shop spends its customers' credits as a thesis checker would: runs paid for at once,
/// runs through a hold that are captured (part of it) or released when the check fails,
/// every request sent twice under its key (a retry after a timeout), and one run larger than
/// what is left. Then each customer's ledger is read back: it sums to the balance, by kind
/// `unlocked − revoked − spent − expired + adjusted`, and no key spent twice.
async fn shop_spends(
    base: &str,
    state: &DemoState,
    client: &reqwest::Client,
    day: u32,
) -> Result<SpendDay, SimError> {
    let mut done = SpendDay::default();
    for email in ["shop0@demo.example", "shop2@demo.example"] {
        let key = |what: &str| format!("demo-d{day}-{email}-{what}");
        // Sends `body` to `path` twice under `key`: the second must be the first's answer.
        let twice = async |path: String, key: String, body: serde_json::Value| {
            let mut answers = Vec::new();
            for _ in 0..2 {
                let response = client
                    .post(format!("{base}{path}"))
                    .bearer_auth(&state.api_token)
                    .header("Idempotency-Key", &key)
                    .json(&body)
                    .send()
                    .await
                    .map_err(|e| fail("spend API")(e.to_string()))?;
                let replayed = response.headers().contains_key("idempotent-replayed");
                let status = response.status().as_u16();
                let text = response
                    .text()
                    .await
                    .map_err(|e| fail("spend API")(e.to_string()))?;
                answers.push((status, replayed, text));
            }
            Ok::<_, SimError>(answers)
        };
        let mut check = |answers: &[(u16, bool, String)], expected: u16, what: &str| {
            let first = &answers[0];
            let again = &answers[1];
            if first.0 != expected {
                done.wrong
                    .push(format!("{email} {what}: HTTP {} ({})", first.0, first.2));
            } else if !again.1 || again.0 != first.0 || again.2 != first.2 {
                done.wrong.push(format!(
                    "{email} {what}: the retry was not the first answer"
                ));
            } else {
                done.replays += 1;
            }
            serde_json::from_str::<serde_json::Value>(&first.2).unwrap_or_default()
        };
        let spends = format!("/api/customers/{email}/spends");
        let holds = format!("/api/customers/{email}/holds");
        let run = twice(
            spends.clone(),
            key("run"),
            json!({ "credits": 2, "reference": format!("run-d{day}") }),
        )
        .await?;
        check(&run, 201, "run");
        let hold = twice(
            holds.clone(),
            key("hold1"),
            json!({ "credits": 5, "reference": format!("check-d{day}-1") }),
        )
        .await?;
        let hold = check(&hold, 201, "hold");
        let hold_id = hold["hold_id"].as_str().unwrap_or("hold_0").to_owned();
        let capture = twice(
            format!("/api/holds/{hold_id}/capture"),
            key("capture1"),
            json!({ "credits": 3 }),
        )
        .await?;
        check(&capture, 200, "capture");
        let failed = twice(
            holds,
            key("hold2"),
            json!({ "credits": 4, "reference": format!("check-d{day}-2") }),
        )
        .await?;
        let failed = check(&failed, 201, "failed check's hold");
        let failed_id = failed["hold_id"].as_str().unwrap_or("hold_0").to_owned();
        let release = twice(
            format!("/api/holds/{failed_id}/release"),
            key("release2"),
            json!({}),
        )
        .await?;
        check(&release, 200, "release");
        let big = twice(
            spends,
            key("big"),
            json!({ "credits": 100_000, "reference": "too big" }),
        )
        .await?;
        check(&big, 409, "a run larger than the balance");
        done.spends += 2;
        done.refused += 1;

        // The ledger read back.
        let credits = read_back(client, base, &state.api_token, email).await?;
        done.wrong.extend(credits.wrong);
    }
    Ok(done)
}

/// One outage a day that only reconciliation repairs: Stripe (the simulator, delivering to
/// this server) cannot reach the webhook while two customers pay; it retries on its schedule
/// (three days, compressed) and gives up; the reconciler lists the events from the API and
/// claims them. Returns how many it recovered.
async fn outage_repaired_by_reconcile(
    base: &str,
    state: &DemoState,
    client: &reqwest::Client,
    store: &Store,
    stripe: &StripeApi,
    day: u32,
) -> Result<u64, SimError> {
    let sim = stripe.config().api_base.trim_end_matches('/').to_owned();
    sim_post(
        client,
        format!("{sim}/_sim/outage"),
        json!({ "seconds": 3600, "mode": "refused" }),
    )
    .await
    .ok();
    let mut sessions = Vec::new();
    for i in 0..2 {
        let response = client
            .post(format!("{base}/api/orders"))
            .bearer_auth(&state.api_token)
            .json(&json!({
                "order_id": format!("ord_demo_d{day}_outage{i}"),
                "package": "thesis-40",
                "customer_email": format!("weekend{i}@demo.example"),
            }))
            .send()
            .await
            .map_err(|e| fail("order API")(e.to_string()))?;
        let created: serde_json::Value = response
            .json()
            .await
            .map_err(|e| fail("order API")(e.to_string()))?;
        let session = created["checkout_session_id"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        let paid = client
            .post(format!("{sim}/_sim/checkout/sessions/{session}/pay"))
            .json(&json!({ "outcome": "card" }))
            .send()
            .await
            .map_err(|e| fail("simulator")(e.to_string()))?;
        if !paid.status().is_success() {
            return Err(fail("simulator")(format!("pay: HTTP {}", paid.status())));
        }
        sessions.push(session);
    }
    // Stripe gives up on them.
    for _ in 0..600 {
        let counts: serde_json::Value = client
            .get(format!(
                "{sim}/_sim/deliveries?kind=checkout.session.completed"
            ))
            .send()
            .await
            .map_err(|e| fail("simulator")(e.to_string()))?
            .json()
            .await
            .map_err(|e| fail("simulator")(e.to_string()))?;
        if counts["pending"] == 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    client
        .post(format!("{sim}/_sim/outage"))
        .json(&json!({ "seconds": 0 }))
        .send()
        .await
        .map_err(|e| fail("simulator")(e.to_string()))?;
    let report = claimcheck_core::reconcile::run(
        store,
        stripe,
        &claimcheck_core::reconcile::ReconcileConfig::default(),
        "demo:reconciler",
        None,
        false,
    )
    .await
    .map_err(|e| fail("reconcile")(e.to_string()))?;
    say(&format!(
        "  an outage kept Stripe from delivering {} payment(s) until it gave up; \
         reconciliation recovered {} event(s) from Stripe's API",
        sessions.len(),
        report.claimed
    ));
    Ok(report.claimed)
}

/// What the demo checks once the day is played.
#[derive(Debug, Serialize)]
pub struct DemoReport {
    pub day: u32,
    pub exactly_once: bool,
    pub api_orders: usize,
    pub api_refunds: usize,
    /// Order-API orders whose money did not end where it should (refunds, disputes).
    pub money_wrong: Vec<String>,
    /// Events recovered by reconciliation after the day's outage.
    pub outage_recovered: u64,
    pub stale_claim: String,
    pub stale_claim_state: String,
    /// Spends and captures the shop made through the spend API, retries answered with the
    /// first answer, runs refused for want of credits, and what did not add up in the
    /// customers' ledgers (empty: each balance is its ledger's sum, no key spent twice).
    pub spends: usize,
    pub spend_replays: usize,
    pub spends_refused: usize,
    pub credits_wrong: Vec<String>,
    /// The day's subscriptions, run three months each on a test clock, and the credits their
    /// paid periods are due (each checked through the order API: see `exactly_once`).
    pub subscriptions: usize,
    pub subscription_credits: i64,
}

pub async fn run(args: DemoArgs, host: &dyn Host) -> Result<(), SimError> {
    std::fs::create_dir_all(&args.data_dir).map_err(|e| fail("data folder")(e.to_string()))?;
    let database_url: claimcheck_core::DatabaseUrl =
        format!("sqlite://{}/claimcheck.db", args.data_dir.display())
            .parse()
            .map_err(|e| fail("data folder")(format!("{e}")))?;
    let store = Store::connect(&database_url, &StoreOptions::default())
        .await
        .map_err(|e| fail("database")(e.to_string()))?;
    store
        .migrate()
        .await
        .map_err(|e| fail("database")(e.to_string()))?;
    let mut state = load_state(&args.data_dir, &store).await?;
    state.days += 1;
    save_state(&args.data_dir, &state)?;

    // Stripe's three days of retries in about four seconds.
    let sim = StripeSim::start_with(
        ([127, 0, 0, 1], 0).into(),
        crate::stripe_sim::SimOptions {
            webhooks: Vec::new(),
            time_scale: 60_000.0,
        },
    )
    .await?;
    let stripe = StripeApi::new(StripeConfig {
        api_base: sim.base_url(),
        timeout: Duration::from_secs(5),
        ..StripeConfig::new(ApiKey::new("sk_test_demo").map_err(fail("key"))?)
    })
    .map_err(|e| fail("Stripe client")(e.to_string()))?;
    let secret = SigningSecret::new(state.webhook_secret.clone())
        .map_err(|e| fail("secret")(e.to_string()))?;
    let serve = ServeFlags {
        database_url: database_url.clone(),
        bind: args.bind.to_string(),
        shop: args.bind,
        site_root: args.site_root.clone(),
        webhook_secret: state.webhook_secret.clone(),
        stripe_api_base: sim.base_url(),
        workers: 2,
    };
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(10))
        .build()
        .map_err(|e| fail("HTTP client")(e.to_string()))?;

    stage_worker_crash(host, &serve, &secret, &client, &store, state.days).await?;
    let server = host.serve(serve.args()).await?;
    let base = server.base_url();
    // Stripe knows the endpoint (and its secret) from before: the simulator delivers what it
    // makes, like Stripe does.
    client
        .post(format!("{}/_sim/webhooks", sim.base_url()))
        .json(&json!({
            "url": format!("{base}/webhooks/stripe"),
            "secret": state.webhook_secret,
        }))
        .send()
        .await
        .map_err(|e| fail("simulator")(e.to_string()))?;
    say(&format!(
        "\nClaimcheck demo (day {}): dashboard at {base}/\n  sign in as {} / {}\n  \
         Stripe simulator at {}; data in {}\n  playing a day of the shop now; Ctrl-C stops \
         (run it again to resume)\n",
        state.days,
        state.username,
        state.password,
        sim.base_url(),
        args.data_dir.display()
    ));

    let day = SimulateArgs {
        targets: vec![base.clone()],
        secret: state.webhook_secret.clone(),
        api_token: state.api_token.clone(),
        orders: args.orders,
        rate: args.rate,
        duplicates: 0.2,
        twins: 0.1,
        reorder: 0.2,
        run: Some(format!("d{}", state.days)),
        settle_secs: 120,
        // Every event of the day is made and delivered by the simulator, like Stripe would.
        stripe_sim: Some(sim.base_url()),
        package: "thesis-40".into(),
        // The day's customers spend too, racing their refunds and disputes.
        spends: args.orders / 2,
        subscriptions: SUBSCRIPTIONS,
        plan: "thesis-monthly".into(),
        upgrade_plan: None,
    };
    let play = async {
        let (opened, refunded, mut money_wrong) =
            api_orders(&base, &state, &secret, &client, &store, &stripe, state.days).await?;
        let spent = shop_spends(&base, &state, &client, state.days).await?;
        let outage_recovered =
            outage_repaired_by_reconcile(&base, &state, &client, &store, &stripe, state.days)
                .await?;
        // The recovered payments are fulfilled like any other.
        for i in 0..2 {
            let order = OrderId::parse(format!("ord_demo_d{}_outage{i}", state.days))
                .map_err(|e| fail("order")(e.to_string()))?;
            let mut paid = false;
            for _ in 0..200 {
                if let Ok(Some(o)) = store.orders().get(&order).await
                    && o.status == OrderStatus::Paid
                    && o.credits_granted == 40
                {
                    paid = true;
                    break;
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            if !paid {
                money_wrong.push(format!("{order}: not recovered after the outage"));
            }
        }
        let verdict = run_day(&day).await?;
        let crash = crash_event(state.days);
        let claim = store
            .claims()
            .get(
                &EventId::parse(crash.as_str()).map_err(|e| fail("crash")(e.to_string()))?,
                now_ms(),
            )
            .await
            .map_err(|e| fail("database")(e.to_string()))?;
        Ok::<_, SimError>(DemoReport {
            day: state.days,
            exactly_once: verdict.exactly_once && money_wrong.is_empty() && spent.wrong.is_empty(),
            api_orders: opened,
            api_refunds: refunded,
            money_wrong,
            outage_recovered,
            stale_claim: crash,
            stale_claim_state: claim.map_or_else(|| "missing".into(), |c| c.status.to_string()),
            spends: spent.spends,
            spend_replays: spent.replays,
            spends_refused: spent.refused,
            credits_wrong: spent
                .wrong
                .into_iter()
                .chain(verdict.credits_wrong)
                .collect(),
            subscriptions: verdict.subscriptions,
            subscription_credits: verdict.subscription_credits,
        })
    };
    let report = tokio::select! {
        report = play => Some(report?),
        _ = host.stop_signal() => None,
    };
    if let Some(report) = &report {
        let stale = report.stale_claim_state == ClaimState::Stale.as_str();
        say(&format!(
            "day {} played: {} orders through the order API ({} refunded); {} subscriptions run \
             three months ({} credits); {} spends of credits ({} retries answered once, {} \
             refused); exactly-once {}; crashed worker's claim {} is {}{}",
            report.day,
            report.api_orders,
            report.api_refunds,
            report.subscriptions,
            report.subscription_credits,
            report.spends,
            report.spend_replays,
            report.spends_refused,
            report.exactly_once,
            report.stale_claim,
            report.stale_claim_state,
            if stale {
                " (re-drive it from the Claims page)"
            } else {
                ""
            }
        ));
        if args.exit_after_day {
            say(&serde_json::to_string(report).map_err(|e| fail("report")(e.to_string()))?);
        }
    }
    if report.is_some() && !args.exit_after_day {
        say("the dashboard keeps running; Ctrl-C stops it");
        host.stop_signal().await;
    }
    server.stop().await?;
    sim.run_until(async {}).await?;
    store.close().await;
    Ok(())
}
