//! Subscriptions in `simulate` (with `--stripe-sim`): sold through the targets' order API,
//! paid at the simulator on one test clock, then run [`MONTHS`] months on, each taking one
//! life: renewed every month, a renewal failed then paid on Stripe's retry, a renewal failed
//! and never paid, cancelled at the end of its second period, or (given a second plan)
//! upgraded early in its second period and moved back at that period's end. The simulator
//! makes and delivers every event; the verdict reads each back through the order API: the
//! plan's credits for every paid period, once, the upgrade's share, nothing for the unpaid
//! one.

use std::time::Duration;

use claimcheck_core::now_ms;
use serde_json::{Value, json};

use crate::SimError;

/// Months each subscription runs after its first period.
pub const MONTHS: i64 = 3;

/// What happens to one subscription over the run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Life {
    Renews,
    /// The first renewal's card fails; Stripe's retry pays it.
    RetryPaid,
    /// The first renewal's card fails and is never paid: that period grants nothing.
    Unpaid,
    /// Cancelled at the end of its second period.
    Cancelled,
    /// Upgraded to the second plan an hour into its second period (the proration paid), then
    /// moved back to its plan at that period's end, every other one without proration and
    /// the others through a subscription schedule: shown as a scheduled change until the
    /// change is made.
    Changed,
}

impl Life {
    pub const ALL: [Life; 4] = [Life::Renews, Life::RetryPaid, Life::Unpaid, Life::Cancelled];

    /// Periods paid, and Stripe's status at the end.
    fn expected(self) -> (i64, &'static str) {
        match self {
            Life::Renews | Life::RetryPaid | Life::Changed => (1 + MONTHS, "active"),
            Life::Unpaid => (MONTHS, "active"),
            Life::Cancelled => (2, "canceled"),
        }
    }
}

/// The plan upgraded to, as the targets sell it (`NAME=CREDITS:AMOUNT:CURRENCY:INTERVAL`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Upgrade {
    pub name: String,
    pub credits: i64,
    pub amount: i64,
}

impl std::str::FromStr for Upgrade {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let plans: claimcheck_core::billing::Plans = s.parse()?;
        let name = s.split_once('=').map(|(n, _)| n.trim()).unwrap_or_default();
        let plan = plans
            .get(name)
            .ok_or_else(|| format!("'{s}' is not one plan"))?;
        Ok(Upgrade {
            name: plan.name.clone(),
            credits: plan.credits,
            amount: plan.price.amount,
        })
    }
}

/// One subscription of the run.
#[derive(Debug, Clone)]
pub struct SimSubscription {
    pub reference: String,
    pub life: Life,
    pub subscription_id: String,
    pub credits_per_period: i64,
    /// What its upgrade's paid proration grants (its `Changed` life).
    pub upgrade_credits: i64,
}

impl SimSubscription {
    /// The credits its paid periods grant.
    pub fn expected_credits(&self) -> i64 {
        self.life.expected().0 * self.credits_per_period + self.upgrade_credits
    }

    /// What the order API should show once every event is fulfilled: `None` when it does.
    pub fn check(&self, shown: Option<&Value>) -> Option<String> {
        let (_, status) = self.life.expected();
        let credits = self.expected_credits();
        let unpaid = self.life == Life::Unpaid;
        let ok = shown.is_some_and(|s| {
            s["credits_granted"].as_i64() == Some(credits)
                && s["status"] == status
                && s["unpaid_invoice"].is_string() == unpaid
        });
        (!ok).then(|| {
            format!(
                "{} ({:?}): expected {status} with {credits} credits{}, found {}",
                self.reference,
                self.life,
                if unpaid {
                    " and its renewal unpaid"
                } else {
                    ""
                },
                shown.map_or_else(
                    || "no subscription".into(),
                    |s| format!(
                        "{} with {} credits, unpaid {}",
                        s["status"], s["credits_granted"], s["unpaid_invoice"]
                    )
                )
            )
        })
    }
}

/// The calls a run makes.
struct Calls<'a> {
    client: &'a reqwest::Client,
    sim: &'a str,
    target: &'a str,
    token: &'a str,
}

impl Calls<'_> {
    async fn send(&self, request: reqwest::RequestBuilder, what: &str) -> Result<Value, SimError> {
        let response = request
            .send()
            .await
            .map_err(|e| SimError::Failed(format!("{what}: {e}")))?;
        if !response.status().is_success() {
            return Err(SimError::Failed(format!(
                "{what}: HTTP {}",
                response.status()
            )));
        }
        Ok(response.json().await.unwrap_or(Value::Null))
    }

    /// Stripe's API at the simulator (form parameters, a test key).
    async fn stripe(&self, path: &str, form: &[(&str, String)]) -> Result<Value, SimError> {
        let request = self
            .client
            .post(format!("{}{path}", self.sim))
            .bearer_auth("sk_test_simulate")
            .form(form);
        self.send(request, path).await
    }

    /// The simulator's own controls.
    async fn control(&self, path: &str, body: Value) -> Result<Value, SimError> {
        let request = self.client.post(format!("{}{path}", self.sim)).json(&body);
        self.send(request, path).await
    }

    async fn order_api(&self, path: &str, body: Option<Value>) -> Result<Value, SimError> {
        let url = format!("{}{path}", self.target);
        let request = match body {
            Some(body) => self.client.post(url).json(&body),
            None => self.client.get(url),
        };
        self.send(request.bearer_auth(self.token), path).await
    }
}

/// What an upgrade paid `paid` of the full price difference grants: the difference in
/// credits in proportion, never more than the difference.
fn proration_credits(base_credits: i64, base_amount: i64, upgrade: &Upgrade, paid: i64) -> i64 {
    let credits = upgrade.credits - base_credits;
    let price = upgrade.amount - base_amount;
    if credits <= 0 || price <= 0 {
        return 0;
    }
    (credits * paid.clamp(0, price) / price).min(credits)
}

/// Sells `n` subscriptions of `plan` and runs them [`MONTHS`] months on one test clock; with
/// `upgrade`, every fifth takes the [`Life::Changed`] life.
#[allow(clippy::too_many_arguments)]
pub async fn run(
    client: &reqwest::Client,
    sim: &str,
    target: &str,
    token: &str,
    run: &str,
    plan: &str,
    upgrade: Option<&Upgrade>,
    n: usize,
) -> Result<Vec<SimSubscription>, SimError> {
    let mut lives = Life::ALL.to_vec();
    if upgrade.is_some() {
        lives.push(Life::Changed);
    }
    let calls = Calls {
        client,
        sim: sim.trim_end_matches('/'),
        target,
        token,
    };
    let start = now_ms() / 1000;
    let clock = calls
        .stripe(
            "/v1/test_helpers/test_clocks",
            &[("frozen_time", start.to_string())],
        )
        .await?;
    let clock = clock["id"].as_str().unwrap_or_default().to_owned();
    let mut sold = Vec::with_capacity(n);
    let mut base_amount = 0;
    for i in 0..n {
        let life = lives[i % lives.len()];
        let reference = format!("abo_{run}_{i:03}");
        let asked = calls
            .order_api(
                "/api/subscriptions",
                Some(json!({ "plan": plan, "subscription_ref": reference,
                             "customer_email": format!("abo{i}.{run}@example.ch") })),
            )
            .await?;
        let session = asked["checkout_session_id"].as_str().unwrap_or_default();
        calls
            .control(
                &format!("/_sim/checkout/sessions/{session}/pay"),
                json!({ "outcome": "card", "test_clock": clock }),
            )
            .await?;
        let paid = calls
            .send(
                client
                    .get(format!("{}/v1/checkout/sessions/{session}", calls.sim))
                    .bearer_auth("sk_test_simulate"),
                "the paid session",
            )
            .await?;
        let subscription_id = paid["subscription"].as_str().unwrap_or_default().to_owned();
        if matches!(life, Life::RetryPaid | Life::Unpaid) {
            calls
                .control(
                    &format!("/_sim/subscriptions/{subscription_id}/fail_next"),
                    json!({ "count": 1 }),
                )
                .await?;
        }
        sold.push(SimSubscription {
            reference,
            life,
            subscription_id,
            credits_per_period: asked["credits_per_period"].as_i64().unwrap_or(0),
            upgrade_credits: 0,
        });
        base_amount = asked["amount"].as_i64().unwrap_or(0);
        if let Some(upgrade) = upgrade
            && (upgrade.amount <= base_amount
                || upgrade.credits <= asked["credits_per_period"].as_i64().unwrap_or(0))
        {
            return Err(SimError::Failed(format!(
                "--upgrade-plan {} must cost and grant more than {plan}",
                upgrade.name
            )));
        }
    }
    let advance = format!("/v1/test_helpers/test_clocks/{clock}/advance");
    for month in 1..=MONTHS {
        let to = start + month * 30 * 86_400 + 3600;
        calls
            .stripe(&advance, &[("frozen_time", to.to_string())])
            .await?;
        if month > 1 {
            continue;
        }
        let mut changed = 0;
        for subscription in &mut sold {
            match subscription.life {
                Life::RetryPaid => {
                    // Stripe's retry pays the subscription's open invoice.
                    let invoice = open_invoice(&calls, &subscription.subscription_id).await?;
                    calls
                        .control(&format!("/_sim/invoices/{invoice}/pay"), json!({}))
                        .await?;
                }
                Life::Cancelled => {
                    // The shop cancels once the target knows the subscription started.
                    until_started(&calls, &subscription.reference).await?;
                    let path = format!("/api/subscriptions/{}/cancel", subscription.reference);
                    calls
                        .order_api(&path, Some(json!({ "at_period_end": true })))
                        .await?;
                }
                Life::Changed => {
                    let Some(upgrade) = upgrade else { continue };
                    let id = &subscription.subscription_id;
                    let change = format!("/_sim/subscriptions/{id}/change");
                    let upgraded = calls
                        .control(&change, json!({ "unit_amount": upgrade.amount }))
                        .await?;
                    subscription.upgrade_credits = proration_credits(
                        subscription.credits_per_period,
                        base_amount,
                        upgrade,
                        upgraded["amount_paid"].as_i64().unwrap_or(0),
                    );
                    // The upgrade in force, nothing waiting; then the move back waits for
                    // the period's end.
                    until_shown(&calls, &subscription.reference, &upgrade.name, None).await?;
                    changed += 1;
                    if changed % 2 == 1 {
                        calls
                            .control(
                                &change,
                                json!({ "unit_amount": base_amount, "at_period_end": true }),
                            )
                            .await?;
                    } else {
                        // Stripe's Dashboard schedules a downgrade: the phase names the price
                        // by id, which the target reads from Stripe.
                        calls
                            .control(
                                &format!("/_sim/subscriptions/{id}/schedule"),
                                json!({ "unit_amount": base_amount }),
                            )
                            .await?;
                    }
                    until_shown(&calls, &subscription.reference, &upgrade.name, Some(plan)).await?;
                }
                Life::Renews | Life::Unpaid => {}
            }
        }
    }
    Ok(sold)
}

/// Waits until the target shows the subscription `reference` in `plan`, with a change to
/// `then` scheduled for the period's end (or none).
async fn until_shown(
    calls: &Calls<'_>,
    reference: &str,
    plan: &str,
    then: Option<&str>,
) -> Result<(), SimError> {
    let mut shown = Value::Null;
    for _ in 0..600 {
        shown = calls
            .order_api(&format!("/api/subscriptions/{reference}"), None)
            .await?;
        let scheduled = &shown["scheduled_change"];
        let waits = match then {
            Some(to) => scheduled["from"] == plan && scheduled["to"] == to,
            None => scheduled.is_null(),
        };
        if shown["plan"] == plan && waits {
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    Err(SimError::Failed(format!(
        "{reference}: never shown in {plan} with {} ({shown})",
        match then {
            Some(to) => format!("a change to {to} scheduled"),
            None => "nothing scheduled".into(),
        }
    )))
}

/// Waits until the target has been told the subscription `reference` started.
async fn until_started(calls: &Calls<'_>, reference: &str) -> Result<(), SimError> {
    for _ in 0..600 {
        let shown = calls
            .order_api(&format!("/api/subscriptions/{reference}"), None)
            .await?;
        if shown["subscription_id"].is_string() {
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    Err(SimError::Failed(format!(
        "{reference}: the target never learnt that it started"
    )))
}

/// The simulator's open (failed) invoice of `subscription`.
async fn open_invoice(calls: &Calls<'_>, subscription: &str) -> Result<String, SimError> {
    let objects = calls
        .send(
            calls.client.get(format!("{}/_sim/objects", calls.sim)),
            "the simulator's objects",
        )
        .await?;
    objects["invoices"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|i| {
            i["status"] == "open"
                && i["parent"]["subscription_details"]["subscription"] == subscription
        })
        .and_then(|i| i["id"].as_str())
        .map(str::to_owned)
        .ok_or_else(|| SimError::Failed(format!("{subscription}: no failed renewal to retry")))
}
