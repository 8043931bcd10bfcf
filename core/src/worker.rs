//! The fulfilment worker: lease a due claim, fulfil it, record the outcome; repeat while
//! there is work, then wait to be woken (a new claim in this process) or for the next poll
//! (claims from other instances, backoffs coming due, stale leases).
//!
//! `run_once` leases a batch and works it (`lease` and `work` apart, for drills that act
//! between the two); `run` is the loop. Every attempt is reported to the worker's
//! [`Observer`] (the server's metrics); nobody's by default.
//!
//! Attempts count fulfilment failures only: a database that is busy, restarting or failing
//! over is waited out, within the lease, and a claim given back because the database stayed
//! away keeps its attempts.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{Notify, watch};

use crate::audit::{Actor, AuditAction, AuditRecord};
use crate::backoff::{self, Backoff};
use crate::billing::Plans;
use crate::claim::ClaimState;
use crate::clock::now_ms;
use crate::error::StoreError;
use crate::fulfilment::{Packages, Plan, plan};
use crate::ids::EventId;
use crate::observe::{Observer, Unobserved};
pub use crate::report::Attempt;
use crate::store::{Fulfilled, LeasedClaim, Store};
use crate::stripe::StripeApi;

/// A failed claim is tried again at most this long after its last attempt.
const MAX_RETRY_BACKOFF: Duration = Duration::from_secs(3600);

/// How a failed attempt that will be retried is logged.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Retry {
    /// Something an operator may need to look at.
    Warn,
    /// A wait Stripe's delivery order makes normal (a refund before its order's payment):
    /// below `warn`, until the attempts run out.
    ExpectedWait,
    /// Nothing a retry could change (the payload contradicts what is stored): the claim
    /// fails at once.
    Never,
}

/// Fulfilment workers `serve` runs unless told otherwise.
pub const DEFAULT_WORKERS: usize = 2;

#[derive(Debug, Clone)]
pub struct WorkerConfig {
    /// How long a leased claim belongs to its worker (the fulfilment budget).
    pub lease: Duration,
    /// Attempts before a claim is `failed` and waits for an operator.
    pub max_attempts: i64,
    /// Backoff after the first failure; doubles with each further one (capped at an hour).
    pub base_backoff: Duration,
    /// Whether stale claims (lease expired) are taken again automatically.
    pub auto_rescue: bool,
    /// Claims leased and committed together.
    pub batch_size: i64,
    /// How often an idle worker looks for work it was not woken for.
    pub poll_interval: Duration,
    /// After a batch that was not full, how long a busy worker lets claims gather before it
    /// leases again. Under load this turns many small batches (a lease and a commit each)
    /// into few large ones; an idle worker woken by a claim still takes it at once.
    pub gather: Duration,
    pub packages: Packages,
    pub plans: Plans,
    /// Where a paid invoice that names no customer has its subscription read from (`GET
    /// /v1/subscriptions/{id}`: its metadata may carry the order API's reference).
    pub stripe: Option<StripeApi>,
}

impl Default for WorkerConfig {
    fn default() -> Self {
        WorkerConfig {
            lease: Duration::from_secs(60),
            max_attempts: 8,
            base_backoff: Duration::from_secs(2),
            auto_rescue: true,
            batch_size: 128,
            poll_interval: Duration::from_secs(1),
            gather: Duration::from_millis(10),
            packages: Packages::default(),
            plans: Plans::default(),
            stripe: None,
        }
    }
}

/// Why a re-drive did not run.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RedriveRefused {
    #[error("no claim has event id {0}")]
    NotFound(String),
    #[error("the claim is already processed; nothing to do")]
    AlreadyProcessed,
    #[error("the claim was resolved without re-driving; reopen it first")]
    Resolved,
    #[error("the claim is being worked on by {owner} right now; try again once its lease ends")]
    Running { owner: String },
    #[error(transparent)]
    Reason(#[from] crate::audit::ReasonError),
}

/// What a re-drive came to, in the audit log's words.
pub(crate) fn describe(result: &Result<Attempt, RedriveRefused>) -> String {
    match result {
        Ok(Attempt::Processed { .. }) => "processed".to_owned(),
        Ok(Attempt::Failed { error, .. }) => format!("failed: {error}"),
        Ok(Attempt::LeaseLost { .. }) => "lease lost".to_owned(),
        Ok(Attempt::Deferred { .. }) => {
            "deferred: the database was unavailable; it will run again".to_owned()
        }
        Err(refused) => format!("refused: {refused}"),
    }
}

/// Claims leased by one worker, and when.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Leased {
    pub claims: Vec<LeasedClaim>,
    pub leased_at: i64,
}

#[derive(Debug, Clone)]
pub struct Worker {
    store: Store,
    owner: String,
    config: WorkerConfig,
    observer: Arc<dyn Observer>,
}

impl Worker {
    pub fn new(store: Store, owner: impl Into<String>, config: WorkerConfig) -> Worker {
        Worker {
            store,
            owner: owner.into(),
            config,
            observer: Arc::new(Unobserved),
        }
    }

    /// The same worker, reporting every attempt to `observer`.
    pub fn with_observer(self, observer: Arc<dyn Observer>) -> Worker {
        Worker { observer, ..self }
    }

    /// Reports what became of `claim` and hands the attempt on.
    fn observed(&self, claim: &LeasedClaim, attempt: Attempt) -> Attempt {
        self.observer.attempt_ended(claim, &attempt);
        attempt
    }

    fn lease_ms(&self) -> i64 {
        i64::try_from(self.config.lease.as_millis()).unwrap_or(i64::MAX / 2)
    }

    /// Leases up to a batch of due claims and works them; empty when nothing is due.
    pub async fn run_once(&self) -> Result<Vec<Attempt>, StoreError> {
        let claims = self.lease().await?;
        self.work_leased(claims).await
    }

    /// Leases up to a batch of due claims to this worker.
    pub async fn lease(&self) -> Result<Leased, StoreError> {
        let leased_at = now_ms();
        let claims = self
            .store
            .claims()
            .lease_due(
                &self.owner,
                leased_at,
                self.lease_ms(),
                self.config.auto_rescue,
                self.config.max_attempts,
                self.config.batch_size.max(1),
            )
            .await?;
        Ok(Leased { claims, leased_at })
    }

    /// Works leased claims. Their effects are committed together; a batch that cannot be (a
    /// lease lost, a storage error) is worked again claim by claim, each with its own answer.
    pub async fn work_leased(&self, leased: Leased) -> Result<Vec<Attempt>, StoreError> {
        let Leased { claims, leased_at } = leased;
        if claims.is_empty() {
            return Ok(Vec::new());
        }
        // Storage errors are waited out until shortly before the lease ends.
        let deadline = leased_at + self.lease_ms() - self.lease_ms() / 10;
        crate::failpoint::hit("after-lease").await;
        let mut attempts = Vec::with_capacity(claims.len());
        let mut planned = Vec::with_capacity(claims.len());
        // Reads from Stripe start and end within the first half of the lease; past it, the
        // claims wait for their next attempt.
        let ask_until = leased_at + self.lease_ms() / 2;
        for claim in claims {
            match self.plan(&claim, ask_until).await {
                Ok(plan) => planned.push((claim, plan)),
                Err(error) => attempts.push(self.fail(claim, error).await?),
            }
        }
        if planned.len() > 1 {
            let batch: Vec<(&LeasedClaim, &Plan)> = planned.iter().map(|(c, p)| (c, p)).collect();
            let fulfilled = self
                .store
                .claims()
                .fulfil_batch(&batch, &self.owner, now_ms())
                .await;
            self.store.write_health().observe(&fulfilled, now_ms());
            match fulfilled {
                Ok(Some(results)) => {
                    for ((claim, _), fulfilled) in planned.into_iter().zip(results) {
                        attempts.push(self.settle(claim, Ok(fulfilled)).await?);
                    }
                    return Ok(attempts);
                }
                Ok(None) => {}
                Err(error) => {
                    tracing::warn!(
                        error = &error as &dyn std::error::Error,
                        claims = planned.len(),
                        "a batch of fulfilments failed; working them one by one"
                    );
                }
            }
        }
        for (claim, plan) in planned {
            let fulfilled = self.fulfil_waiting(&claim, &plan, deadline).await;
            attempts.push(self.settle(claim, fulfilled).await?);
        }
        Ok(attempts)
    }

    /// What `claim` does. A subscription schedule's next phase that names prices by id only
    /// has them read from Stripe (until `ask_until`); one not read leaves the claim to be
    /// retried. A paid invoice whose credits name no customer (no e-mail on it, no
    /// order-API reference in its subscription's metadata) and whose subscription nothing
    /// here knows yet has the subscription read from Stripe (until `ask_until`, unix ms),
    /// whose metadata may carry the reference; if that fails, the store says so and the claim
    /// is retried.
    async fn plan(&self, claim: &LeasedClaim, ask_until: i64) -> Result<Plan, String> {
        let mut planned = plan(
            &claim.event_type,
            &claim.payload,
            &self.config.packages,
            &self.config.plans,
        )
        .map_err(|error| error.to_string())?;
        if let (Plan::Schedule(change), Some(api)) = (&mut planned, &self.config.stripe) {
            for price_id in change.unpriced() {
                // A GET: given up at the budget's end without harm; the store then writes
                // nothing and the claim is retried.
                let budget = u64::try_from(ask_until - now_ms()).unwrap_or(0);
                let asked =
                    tokio::time::timeout(Duration::from_millis(budget), api.price(&price_id)).await;
                match asked {
                    Ok(Ok(price)) => change.priced(&price_id, &price, &self.config.plans),
                    Ok(Err(error)) => {
                        tracing::warn!(error = %error, price = %price_id, "reading a price from Stripe failed");
                        break;
                    }
                    Err(_) => {
                        tracing::warn!(price = %price_id, "Stripe did not answer about a price within half the lease");
                        break;
                    }
                }
            }
        }
        if let (Plan::Invoice(paid), Some(api)) = (&mut planned, &self.config.stripe) {
            let invoice = &mut paid.invoice;
            let nameless = invoice.customer_email.is_none()
                && !invoice.metadata.contains_key(crate::billing::REF_KEY)
                && paid.grants.iter().any(|g| g.credits > 0);
            let in_time = now_ms() < ask_until;
            if let Some(subscription_id) = invoice
                .subscription_id
                .clone()
                .filter(|_| nameless && in_time)
            {
                let known = matches!(
                    self.store.subscriptions().get(&subscription_id).await,
                    Ok(Some(s)) if s.customer_email.is_some() || s.subscription_ref.is_some()
                );
                if !known {
                    // A GET: given up at the budget's end without harm.
                    let budget = u64::try_from(ask_until - now_ms()).unwrap_or(0);
                    let asked = tokio::time::timeout(
                        Duration::from_millis(budget),
                        api.subscription_reference(&subscription_id),
                    )
                    .await;
                    match asked {
                        Ok(Ok(Some(reference))) => {
                            invoice
                                .metadata
                                .insert(crate::billing::REF_KEY.to_owned(), reference);
                        }
                        Ok(Ok(None)) => {}
                        Ok(Err(error)) => tracing::warn!(
                            error = %error,
                            subscription = %subscription_id,
                            "reading a subscription from Stripe failed"
                        ),
                        Err(_) => tracing::warn!(
                            subscription = %subscription_id,
                            "Stripe did not answer about a subscription within half the lease"
                        ),
                    }
                }
            }
        }
        Ok(planned)
    }

    /// Works one leased claim (re-drive).
    async fn work(&self, claim: LeasedClaim) -> Result<Attempt, StoreError> {
        let deadline = now_ms() + self.lease_ms() - self.lease_ms() / 10;
        crate::failpoint::hit("after-lease").await;
        match self.plan(&claim, now_ms() + self.lease_ms() / 2).await {
            Err(error) => self.fail(claim, error).await,
            Ok(plan) => {
                let fulfilled = self.fulfil_waiting(&claim, &plan, deadline).await;
                self.settle(claim, fulfilled).await
            }
        }
    }

    /// Fulfils one claim, waiting out a database that is busy or away (backoff from 50 ms,
    /// doubling to 2 s) until `deadline`; any other error is returned at once.
    async fn fulfil_waiting(
        &self,
        claim: &LeasedClaim,
        plan: &Plan,
        deadline: i64,
    ) -> Result<Fulfilled, StoreError> {
        let backoff = Backoff::new(Duration::from_millis(50), Duration::from_secs(2));
        let mut retry = 0;
        loop {
            let fulfilled = self
                .store
                .claims()
                .fulfil(claim, &self.owner, plan, now_ms())
                .await;
            self.store.write_health().observe(&fulfilled, now_ms());
            match fulfilled {
                Err(error) if error.is_transient() => {
                    let wait = backoff.delay(retry);
                    retry += 1;
                    if now_ms() + backoff::millis(wait) >= deadline {
                        return Err(error);
                    }
                    tracing::warn!(
                        error = &error as &dyn std::error::Error,
                        event_id = %claim.event_id,
                        "the database is unavailable; waiting to fulfil again"
                    );
                    tokio::time::sleep(wait).await;
                }
                other => return other,
            }
        }
    }

    /// Turns what fulfilment did into an attempt, recording a failure where there was one.
    async fn settle(
        &self,
        claim: LeasedClaim,
        fulfilled: Result<Fulfilled, StoreError>,
    ) -> Result<Attempt, StoreError> {
        match fulfilled {
            Ok(Fulfilled::Processed) => {
                tracing::debug!(event_id = %claim.event_id, event_type = ?claim.event_type, "claim processed");
                let event_id = claim.event_id.clone();
                Ok(self.observed(&claim, Attempt::Processed { event_id }))
            }
            Ok(Fulfilled::LeaseLost) => {
                tracing::warn!(event_id = %claim.event_id, "lease lost before completion; nothing written");
                let event_id = claim.event_id.clone();
                Ok(self.observed(&claim, Attempt::LeaseLost { event_id }))
            }
            Ok(Fulfilled::CustomerUnknown { invoice_id }) => {
                let error = format!(
                    "invoice {invoice_id} names no customer yet (no e-mail on it, no Checkout Session of its subscription, no subscription_ref the order API was asked for, in the invoice or, when this worker could ask, in Stripe's subscription); retried while attempts last, then failed for an operator to re-drive once an event names the customer"
                );
                self.fail(claim, error).await
            }
            Ok(Fulfilled::PriceUnknown {
                schedule_id,
                price_id,
            }) => {
                let error = format!(
                    "subscription schedule {schedule_id}: its next phase bills price {price_id}, which its event names by id only and this worker could not read from Stripe yet (no API key, an error from Stripe, or no answer within half the lease); retried while attempts last"
                );
                self.fail(claim, error).await
            }
            Ok(Fulfilled::PaymentTaken {
                invoice_id,
                payment_intent,
                order_id,
            }) => {
                let error = format!(
                    "payment {payment_intent} already belongs to order {order_id}, so invoice {invoice_id} cannot be recorded as paid by it: the event contradicts what Stripe sent before. Nothing was written and it is not retried; compare both in Stripe's Dashboard, and re-drive once the cause is known"
                );
                self.fail_as(claim, error, Retry::Never).await
            }
            Ok(Fulfilled::OrderNotFound { payment_intent }) => {
                let error = format!(
                    "no order is paid by {payment_intent} yet; its checkout session event may still be on the way"
                );
                // Stripe sends in any order: a wait, not something for an operator, until
                // the attempts run out.
                self.fail_as(claim, error, Retry::ExpectedWait).await
            }
            Err(error) if error.is_transient() => {
                // The database stayed away for the whole lease: give the claim back without
                // counting the attempt against it.
                tracing::error!(error = &error as &dyn std::error::Error, event_id = %claim.event_id, "the database stayed unavailable; the claim is given back");
                let next =
                    now_ms() + i64::try_from(self.config.base_backoff.as_millis()).unwrap_or(0);
                self.store
                    .claims()
                    .release_uncounted(&claim.event_id, &self.owner, next, &error.to_string())
                    .await?;
                let event_id = claim.event_id.clone();
                Ok(self.observed(&claim, Attempt::Deferred { event_id }))
            }
            Err(error) => {
                tracing::error!(error = &error as &dyn std::error::Error, event_id = %claim.event_id, "fulfilment failed");
                self.fail(claim, format!("storage error: {error}")).await
            }
        }
    }

    /// Records a failed attempt: retried after an exponential backoff, or failed for good.
    async fn fail(&self, claim: LeasedClaim, error: String) -> Result<Attempt, StoreError> {
        self.fail_as(claim, error, Retry::Warn).await
    }

    /// [`Worker::fail`], logged as `retry` says while the claim is to be retried (a claim
    /// that gave up is always a warning).
    async fn fail_as(
        &self,
        claim: LeasedClaim,
        error: String,
        retry: Retry,
    ) -> Result<Attempt, StoreError> {
        let backoff = Backoff::new(self.config.base_backoff, MAX_RETRY_BACKOFF);
        let next = now_ms() + backoff.after_attempts_ms(claim.attempts);
        let max_attempts = match retry {
            Retry::Never => 0,
            Retry::Warn | Retry::ExpectedWait => self.config.max_attempts,
        };
        let gave_up = self
            .store
            .claims()
            .record_failure(&claim.event_id, &self.owner, &error, next, max_attempts)
            .await?;
        let event_id = claim.event_id.clone();
        let attempt = match gave_up {
            None => Attempt::LeaseLost { event_id },
            Some(false) if retry == Retry::ExpectedWait => {
                tracing::info!(event_id = %claim.event_id, attempts = claim.attempts, %error, "fulfilment waits for an event still to come");
                Attempt::Failed {
                    event_id,
                    error,
                    gave_up: false,
                }
            }
            Some(gave_up) => {
                tracing::warn!(event_id = %claim.event_id, attempts = claim.attempts, gave_up, %error, "fulfilment attempt failed");
                Attempt::Failed {
                    event_id,
                    error,
                    gave_up,
                }
            }
        };
        Ok(self.observed(&claim, attempt))
    }

    /// Runs `event_id` now, through the same path as the worker loop, on behalf of `actor`,
    /// and records who asked, why and what came of it in the audit log. The lease is taken
    /// with a compare-and-set: of two concurrent re-drives (or a re-drive and a worker) one
    /// runs and the other is refused.
    pub async fn redrive(
        &self,
        event_id: &EventId,
        actor: &Actor,
        reason: &str,
    ) -> Result<Result<Attempt, RedriveRefused>, StoreError> {
        let reason = match crate::audit::reason(reason) {
            Ok(reason) => reason,
            Err(refused) => return Ok(Err(refused.into())),
        };
        let owner = format!("redrive:{actor}:{}", now_ms());
        let result = self.take_and_work(event_id, owner).await?;
        let outcome = describe(&result);
        self.store
            .audit()
            .record(
                &AuditRecord {
                    actor,
                    action: AuditAction::Redrive,
                    target: event_id.as_str(),
                    reason: reason.trim(),
                    outcome: &outcome,
                },
                now_ms(),
            )
            .await?;
        Ok(result)
    }

    /// Takes the lease on `event_id` with re-drive's compare-and-set, as `owner`, and works
    /// the claim through the worker's path; refused (and nothing written) if it is processed
    /// or someone holds a live lease. Not audited: the callers audit in their own words.
    pub(crate) async fn take_and_work(
        &self,
        event_id: &EventId,
        owner: String,
    ) -> Result<Result<Attempt, RedriveRefused>, StoreError> {
        let taken = self
            .store
            .claims()
            .take_for_redrive(event_id, &owner, now_ms(), self.lease_ms())
            .await?;
        match taken {
            Some(claim) => {
                let runner = Worker {
                    owner,
                    ..self.clone()
                };
                Ok(Ok(runner.work(claim).await?))
            }
            None => Ok(Err(
                match self.store.claims().get(event_id, now_ms()).await? {
                    None => RedriveRefused::NotFound(event_id.to_string()),
                    Some(claim) if claim.status == ClaimState::Processed => {
                        RedriveRefused::AlreadyProcessed
                    }
                    Some(claim) if claim.status == ClaimState::Resolved => RedriveRefused::Resolved,
                    Some(claim) => RedriveRefused::Running {
                        owner: claim.lease_owner.unwrap_or_default(),
                    },
                },
            )),
        }
    }

    /// The stale sweep: claims whose lease expired on their last attempt become `failed`
    /// (below that, `run_once` rescues them when auto-rescue is on).
    pub async fn sweep(&self) -> Result<u64, StoreError> {
        let failed = self
            .store
            .claims()
            .fail_exhausted_stale(now_ms(), self.config.max_attempts)
            .await?;
        if failed > 0 {
            tracing::warn!(failed, "stale claims out of attempts marked failed");
        }
        Ok(failed)
    }

    /// Works until `stop` turns true: drains due claims (full batches back to back, a short
    /// gather after a partial one), sweeps stale ones when idle, then sleeps until woken or
    /// the poll interval passes. A storage error pauses for the poll
    /// interval.
    pub async fn run(self, wake: Arc<Notify>, mut stop: watch::Receiver<bool>) {
        while !*stop.borrow() {
            match self.run_once().await {
                // A full batch: more is waiting.
                Ok(attempts) if attempts.len() as i64 >= self.config.batch_size => continue,
                Ok(attempts) if !attempts.is_empty() => {
                    tokio::select! {
                        () = tokio::time::sleep(self.config.gather) => {}
                        _ = stop.changed() => {}
                    }
                    continue;
                }
                Ok(_) => {
                    // Off the busy path: a write that usually finds nothing to do.
                    if let Err(error) = self.sweep().await {
                        tracing::error!(error = &error as &dyn std::error::Error, worker = %self.owner, "stale sweep failed");
                    }
                }
                Err(error) => {
                    tracing::error!(error = &error as &dyn std::error::Error, worker = %self.owner, "worker cannot reach the database");
                }
            }
            tokio::select! {
                () = wake.notified() => {}
                () = tokio::time::sleep(self.config.poll_interval) => {}
                _ = stop.changed() => {}
            }
        }
    }
}
