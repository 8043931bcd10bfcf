//! Every outgoing Stripe POST goes through [`StripeApi::send`]:
//!
//! - its Idempotency-Key is derived from the operation and the order
//!   (`checkout-session:<order_id>[:<n>]`, `refund:<order_id>:<refunded total after it>`),
//!   never from a delivery, never random;
//! - it is recorded in `stripe_requests` (key, operation, order, hash of the form body) before
//!   the first byte is sent, and every answer is written back;
//! - network errors, timeouts, 409, 429 and 5xx are retried with backoff under the SAME key;
//!   until a retry answers, the request is `indeterminate` (Stripe may have acted);
//! - a 400 `idempotency_error` (the parameters changed under one key) is a bug to surface,
//!   never a reason to make up a new key;
//! - a request that succeeded or was refused is final under its key: it is never sent again,
//!   so a key older than Stripe's 24 hours can never create a second object. An operation
//!   that Stripe refused (a 4xx: insufficient balance, a key without the permission or rolled)
//!   is asked again under its next key (`…:2`, `…:3`): safe, since nothing was made under the
//!   refused one.
//!
//! Every HTTP request it sends (retries and GETs included) is reported to its
//! [`Observer`], which the server counts in `/metrics`.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use ::stripe::{
    ApiErrorsType, Client, ClientBuilder, IdempotencyKey, RequestStrategy, StripeError,
};
use stripe_client_core::StripeRequest;

use crate::backoff::Backoff;
use crate::clock::now_ms;
use crate::error::StoreError;
use crate::observe::{Observer, StripeAnswer, Unobserved};
use crate::store::{RequestOutcome, RequestStatus, Store, StripeRequestView};
use crate::token::sha256_hex;

pub use ::stripe::Client as StripeClient;

/// The business operations Claimcheck asks Stripe for; each names its key from the order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Operation {
    /// The order's Checkout Session: generation 1, then 2, 3… each after the one before
    /// expired unpaid.
    CheckoutSession { generation: i64 },
    /// A refund of `amount` that leaves `refunded_after` refunded in total: a retry names the
    /// same total (and replays), a second partial refund a larger one (a new operation);
    /// `attempt` 2, 3… after Stripe refused the one before.
    Refund {
        amount: i64,
        refunded_after: i64,
        attempt: i64,
    },
    /// The Checkout Session (`mode=subscription`) of a subscription the shop asked for, by
    /// generation like an order's.
    SubscriptionCheckout { generation: i64 },
    /// Cancelling the subscription at the end of its period, or now; `attempt` 2, 3… after
    /// Stripe refused the one before (a refusal is final under its key).
    CancelSubscription { at_period_end: bool, attempt: i64 },
}

impl Operation {
    pub fn as_str(self) -> &'static str {
        match self {
            Operation::CheckoutSession { .. } => "checkout_session",
            Operation::Refund { .. } => "refund",
            Operation::SubscriptionCheckout { .. } => "subscription_checkout",
            Operation::CancelSubscription { .. } => "subscription_cancel",
        }
    }

    /// The Idempotency-Key of this operation for `subject`: the order, or the subscription's
    /// reference for the subscription operations.
    pub fn key(self, subject: &impl AsRef<str>) -> String {
        let subject = subject.as_ref();
        match self {
            Operation::CheckoutSession { generation } if generation <= 1 => {
                format!("checkout-session:{subject}")
            }
            Operation::CheckoutSession { generation } => {
                format!("checkout-session:{subject}:{generation}")
            }
            Operation::Refund {
                refunded_after,
                attempt,
                ..
            } => match attempt {
                ..=1 => format!("refund:{subject}:{refunded_after}"),
                n => format!("refund:{subject}:{refunded_after}:{n}"),
            },
            Operation::SubscriptionCheckout { generation } if generation <= 1 => {
                format!("subscription-checkout:{subject}")
            }
            Operation::SubscriptionCheckout { generation } => {
                format!("subscription-checkout:{subject}:{generation}")
            }
            Operation::CancelSubscription {
                at_period_end,
                attempt,
            } => {
                let when = if at_period_end { "period-end" } else { "now" };
                match attempt {
                    ..=1 => format!("subscription-cancel:{subject}:{when}"),
                    n => format!("subscription-cancel:{subject}:{when}:{n}"),
                }
            }
        }
    }

    /// The refunded total and the attempt a refund's key of `subject` names: the inverse of
    /// [`Operation::key`] for [`Operation::Refund`]. The subject is known, so an order id
    /// holding `:` reads right.
    pub fn refund_key_parts(subject: &str, key: &str) -> Option<(i64, i64)> {
        let rest = key.strip_prefix("refund:")?.strip_prefix(subject)?;
        let rest = rest.strip_prefix(':')?;
        let (total, attempt) = match rest.split_once(':') {
            Some((total, attempt)) => (total, attempt.parse().ok().filter(|n| *n > 1)?),
            None => (rest, 1),
        };
        Some((total.parse().ok()?, attempt))
    }

    /// The money the operation moves, recorded with the request so that it can be sent again
    /// unchanged.
    pub fn amount(self) -> Option<i64> {
        match self {
            Operation::Refund { amount, .. } => Some(amount),
            _ => None,
        }
    }
}

/// A Stripe secret key; never printed.
#[derive(Clone, PartialEq, Eq)]
pub struct ApiKey(String);

impl ApiKey {
    pub fn new(key: impl Into<String>) -> Result<ApiKey, String> {
        let key = key.into();
        let key = key.trim();
        if key.starts_with("sk_") || key.starts_with("rk_") {
            Ok(ApiKey(key.to_owned()))
        } else {
            Err("a Stripe secret key starts with sk_ (or rk_ for a restricted key)".into())
        }
    }
}

impl fmt::Debug for ApiKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ApiKey(***)")
    }
}

#[derive(Debug, Clone)]
pub struct StripeConfig {
    /// `https://api.stripe.com/` in production; the simulator in tests and the demo.
    pub api_base: String,
    pub api_key: ApiKey,
    /// How long one attempt may take before it counts as a timeout.
    pub timeout: Duration,
    /// Attempts per call (the first included) before the request is left indeterminate.
    pub max_attempts: u32,
    /// Wait before the second attempt; doubled each time, at most 8 s.
    pub base_backoff: Duration,
}

impl StripeConfig {
    pub const DEFAULT_API_BASE: &str = "https://api.stripe.com/";
    pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(20);
    pub const DEFAULT_MAX_ATTEMPTS: u32 = 4;
    pub const DEFAULT_BASE_BACKOFF: Duration = Duration::from_millis(500);

    pub fn new(api_key: ApiKey) -> StripeConfig {
        StripeConfig {
            api_base: StripeConfig::DEFAULT_API_BASE.into(),
            api_key,
            timeout: StripeConfig::DEFAULT_TIMEOUT,
            max_attempts: StripeConfig::DEFAULT_MAX_ATTEMPTS,
            base_backoff: StripeConfig::DEFAULT_BASE_BACKOFF,
        }
    }
}

/// Why an outgoing call did not succeed.
#[derive(Debug, thiserror::Error)]
pub enum CallError {
    #[error(
        "Stripe gave no conclusive answer to {key} after {attempts} attempt(s) (last: {last}); \
         it may or may not have acted. Asking again is safe: the same Idempotency-Key is reused"
    )]
    Indeterminate {
        key: String,
        attempts: i64,
        last: String,
    },
    #[error("Stripe refused {key}: HTTP {http_status} {error}")]
    Rejected {
        key: String,
        http_status: u16,
        error: String,
    },
    #[error(
        "Stripe says {key} was first sent with other parameters ({error}). No new key is made: \
         find what changed (configuration, order) before asking again"
    )]
    IdempotencyMismatch { key: String, error: String },
    #[error(
        "{api_base} answered {key} with an HTTP error that is not Stripe's (its body holds no \
         Stripe error), {attempts} time(s): STRIPE_API_BASE is probably wrong. The request stays \
         indeterminate under its key: once the address is right, asking again sends the same \
         key, so nothing is made twice"
    )]
    NotStripe {
        key: String,
        api_base: String,
        attempts: i64,
    },
    #[error("the Stripe client is misconfigured: {0}")]
    Config(String),
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// What a call came to.
#[derive(Debug)]
pub enum Sent<T> {
    /// Stripe answered now (a first answer or its replay of an earlier one).
    Answered(T),
    /// The request had succeeded before: it is not sent again.
    AlreadySucceeded(Box<StripeRequestView>),
}

/// The outgoing Stripe client: async-stripe's transport, Claimcheck's keys and records.
#[derive(Clone)]
pub struct StripeApi {
    client: Client,
    config: StripeConfig,
    observer: Arc<dyn Observer>,
}

impl fmt::Debug for StripeApi {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StripeApi")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

/// What to do after an attempt that did not succeed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Next {
    /// Timeout, lost connection, 409, 429, 5xx: Stripe may have acted; ask again, same key.
    Retry,
    /// An HTTP error whose body is not a Stripe error: whatever answered is not Stripe (a
    /// wrong API base), or a proxy in front of it. Asked again like [`Next::Retry`]; if it
    /// is the last answer, the caller is told it is a configuration fault.
    NotStripe,
    /// 400 `idempotency_error`: the parameters changed under the key. A bug to surface.
    Mismatch,
    /// Any other 4xx: Stripe refused; the same key would get the same answer.
    Rejected,
}

/// A failed attempt, as it is recorded and reported.
struct Failure {
    next: Next,
    http_status: Option<u16>,
    request_id: Option<String>,
    error: String,
}

/// What an attempt came back with, as the observer is told.
pub(crate) fn answer_of<T>(answer: &Result<T, StripeError>) -> StripeAnswer {
    match answer {
        Ok(_) => StripeAnswer::Status(200),
        Err(StripeError::Stripe(_, status)) => StripeAnswer::Status(*status),
        Err(StripeError::Timeout) => StripeAnswer::Timeout,
        Err(_) => StripeAnswer::Error,
    }
}

/// Stripe's request id, when an error carries one (its `request_log_url` ends in it).
/// async-stripe does not expose response headers, so successful answers have none.
fn request_id_of(log_url: Option<&str>) -> Option<String> {
    let url = log_url?;
    let start = url.find("req_")?;
    let id: String = url[start..]
        .chars()
        .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
        .collect();
    Some(id)
}

/// What async-stripe reports for a non-2xx answer whose body does not parse as Stripe's
/// error (`hyper/client.rs`); pinned with the crate's exact version.
const NOT_A_STRIPE_ERROR: &str = "error deserializing Stripe error";

fn classify(error: StripeError) -> Result<Failure, CallError> {
    let transport = |error: String| Failure {
        next: Next::Retry,
        http_status: None,
        request_id: None,
        error,
    };
    Ok(match error {
        StripeError::Stripe(api, status) => {
            let text = format!(
                "{}{}: {}",
                api.type_.as_str(),
                api.code
                    .as_ref()
                    .map(|c| format!(" ({})", c.as_str()))
                    .unwrap_or_default(),
                api.message.as_deref().unwrap_or("no message")
            );
            let next = if status == 400 && api.type_ == ApiErrorsType::IdempotencyError {
                Next::Mismatch
            } else if status == 409 || status == 429 || status >= 500 {
                Next::Retry
            } else {
                Next::Rejected
            };
            Failure {
                next,
                http_status: Some(status),
                request_id: request_id_of(api.request_log_url.as_deref()),
                error: if next == Next::Retry {
                    format!("HTTP {status} {text}")
                } else {
                    text
                },
            }
        }
        StripeError::Timeout => transport("timed out waiting for Stripe".into()),
        StripeError::ClientError(e) => transport(format!("connection to Stripe failed: {e}")),
        // async-stripe's words for a non-2xx answer whose body is not a Stripe error.
        StripeError::JSONDeserialize(e) if e == NOT_A_STRIPE_ERROR => Failure {
            next: Next::NotStripe,
            ..transport("an HTTP error that is not Stripe's (no Stripe error in its body)".into())
        },
        // An unreadable answer (a proxy's HTML error page, say): Stripe may have acted.
        StripeError::JSONDeserialize(e) => transport(format!("unreadable answer from Stripe: {e}")),
        StripeError::ConfigError(e) => return Err(CallError::Config(e)),
    })
}

impl StripeApi {
    pub fn new(config: StripeConfig) -> Result<StripeApi, CallError> {
        let mut base = config.api_base.trim().to_owned();
        if !base.ends_with('/') {
            // async-stripe appends `v1/…` to the base as it is.
            base.push('/');
        }
        let client = ClientBuilder::new(config.api_key.0.clone())
            .url(base)
            .request_strategy(RequestStrategy::Once)
            .timeout(config.timeout)
            .build()
            .map_err(|e| CallError::Config(e.to_string()))?;
        Ok(StripeApi {
            client,
            config,
            observer: Arc::new(Unobserved),
        })
    }

    /// The same client, reporting every request it sends to `observer`.
    pub fn with_observer(self, observer: Arc<dyn Observer>) -> StripeApi {
        StripeApi { observer, ..self }
    }

    pub(crate) fn client(&self) -> &Client {
        &self.client
    }

    pub(crate) fn observer(&self) -> &dyn Observer {
        self.observer.as_ref()
    }

    pub fn config(&self) -> &StripeConfig {
        &self.config
    }

    /// Sends `request` for `operation` on `subject` (an order, or a subscription's reference)
    /// under its derived key, recorded first; `object_id` reads the id of what Stripe created
    /// out of the answer.
    pub async fn send<R>(
        &self,
        store: &Store,
        operation: Operation,
        subject: &impl AsRef<str>,
        request: &R,
        object_id: impl Fn(&R::Output) -> String,
    ) -> Result<Sent<R::Output>, CallError>
    where
        R: StripeRequest,
        R::Output: miniserde::Deserialize,
    {
        let key = operation.key(subject);
        let body = request.build().body.unwrap_or_default();
        // Stripe compares parameters, not bytes; metadata maps serialize in any order.
        let mut pairs: Vec<&str> = body.split('&').collect();
        pairs.sort_unstable();
        let params_hash = sha256_hex(pairs.join("&").as_bytes());
        let record = store
            .stripe_requests()
            .record(
                &key,
                operation.as_str(),
                operation.amount(),
                subject.as_ref(),
                &params_hash,
                now_ms(),
            )
            .await?;
        // Two subjects whose keys read alike (order `o:2`'s first session and order `o`'s
        // second): the key belongs to the first, never to this call.
        if record.order_id != subject.as_ref() || record.operation != operation.as_str() {
            return Err(CallError::IdempotencyMismatch {
                error: format!(
                    "the key was recorded for {} {}, not for {} {}",
                    record.operation,
                    record.order_id,
                    operation.as_str(),
                    subject.as_ref()
                ),
                key,
            });
        }
        if let Some(done) = final_state(record)? {
            return Ok(done);
        }
        let idempotency_key = IdempotencyKey::new(key.as_str())
            .map_err(|e| CallError::Config(format!("unusable Idempotency-Key {key}: {e:?}")))?;

        let mut last = String::new();
        let mut not_stripe = false;
        let mut attempts = 0;
        for attempt in 0..self.config.max_attempts {
            if attempt > 0 {
                let backoff = Backoff::new(self.config.base_backoff, Duration::from_secs(8));
                tokio::time::sleep(backoff.delay(attempt - 1)).await;
            }
            match store
                .stripe_requests()
                .start_attempt(&key, now_ms())
                .await?
            {
                Some(n) => attempts = n,
                // Another caller finished it meanwhile.
                None => {
                    let record = store
                        .stripe_requests()
                        .get(&key)
                        .await?
                        .ok_or_else(|| StoreError::Missing(format!("stripe request {key}")))?;
                    if let Some(done) = final_state(record)? {
                        return Ok(done);
                    }
                    continue;
                }
            }
            let answer = request
                .customize()
                .request_strategy(RequestStrategy::Idempotent(idempotency_key.clone()))
                .timeout(self.config.timeout)
                .send(&self.client)
                .await;
            self.observer
                .stripe_answered(operation.as_str(), answer_of(&answer));
            let error = match answer {
                Ok(output) => {
                    let object = object_id(&output);
                    let outcome = RequestOutcome {
                        status: RequestStatus::Succeeded,
                        http_status: Some(200),
                        stripe_request_id: None,
                        object_id: Some(&object),
                        error: None,
                    };
                    store
                        .stripe_requests()
                        .record_outcome(&key, &outcome, now_ms())
                        .await?;
                    return Ok(Sent::Answered(output));
                }
                Err(error) => error,
            };
            let failure = classify(error)?;
            let error = match failure.next {
                Next::Mismatch => format!("{} (parameters hash now {params_hash})", failure.error),
                _ => failure.error,
            };
            let outcome = RequestOutcome {
                status: match failure.next {
                    Next::Retry | Next::NotStripe => RequestStatus::Indeterminate,
                    Next::Mismatch | Next::Rejected => RequestStatus::Failed,
                },
                http_status: failure.http_status,
                stripe_request_id: failure.request_id.as_deref(),
                object_id: None,
                error: Some(&error),
            };
            store
                .stripe_requests()
                .record_outcome(&key, &outcome, now_ms())
                .await?;
            not_stripe = failure.next == Next::NotStripe;
            match failure.next {
                Next::Retry | Next::NotStripe => {
                    tracing::warn!(key = ?key.as_str(), attempt = attempts, %error, "Stripe call to retry");
                    last = error;
                }
                Next::Mismatch => {
                    tracing::error!(key = ?key.as_str(), %error, "Idempotency-Key reused with other parameters");
                    return Err(CallError::IdempotencyMismatch { key, error });
                }
                Next::Rejected => {
                    return Err(CallError::Rejected {
                        key,
                        http_status: failure.http_status.unwrap_or_default(),
                        error,
                    });
                }
            }
        }
        if not_stripe {
            tracing::error!(key = ?key.as_str(), api_base = %self.config.api_base, "the Stripe API base does not answer as Stripe");
            return Err(CallError::NotStripe {
                key,
                api_base: self.config.api_base.clone(),
                attempts,
            });
        }
        Err(CallError::Indeterminate {
            key,
            attempts,
            last,
        })
    }
}

/// One page of `GET /v1/events`, the events as Stripe wrote them.
#[derive(Debug, Clone, PartialEq)]
pub struct EventPage {
    pub events: Vec<serde_json::Value>,
    pub has_more: bool,
}

/// Why listing events failed.
#[derive(Debug, thiserror::Error)]
pub enum ListError {
    #[error("Stripe refused the API key (HTTP {0}): check STRIPE_API_KEY")]
    Unauthorized(u16),
    #[error("Stripe is rate limiting us (HTTP 429)")]
    RateLimited,
    #[error("listing events failed: {0}")]
    Failed(String),
}

impl StripeApi {
    /// `GET /v1/events`: `limit` (at most 100) events of `types` created at or after
    /// `created_gte` (unix seconds), newest first, after the event `starting_after`.
    pub async fn list_events(
        &self,
        types: &[&str],
        created_gte: i64,
        starting_after: Option<&str>,
        limit: u8,
    ) -> Result<EventPage, ListError> {
        use stripe_client_core::{RequestBuilder, StripeMethod};

        let mut pairs: Vec<(&str, String)> = vec![
            ("limit", limit.clamp(1, 100).to_string()),
            ("created[gte]", created_gte.to_string()),
        ];
        pairs.extend(types.iter().map(|t| ("types[]", (*t).to_owned())));
        if let Some(after) = starting_after {
            pairs.push(("starting_after", after.to_owned()));
        }
        let mut request = RequestBuilder::new(StripeMethod::Get, "/events");
        request.query = Some(
            serde_urlencoded::to_string(&pairs).map_err(|e| ListError::Failed(e.to_string()))?,
        );
        let answer = request
            .customize::<miniserde::json::Value>()
            .timeout(self.config.timeout)
            .send(&self.client)
            .await;
        self.observer
            .stripe_answered("list_events", answer_of(&answer));
        let page = match answer {
            Ok(value) => value,
            Err(StripeError::Stripe(_, status)) if status == 401 || status == 403 => {
                return Err(ListError::Unauthorized(status));
            }
            Err(StripeError::Stripe(_, 429)) => return Err(ListError::RateLimited),
            Err(error) => return Err(ListError::Failed(error.to_string())),
        };
        // miniserde reads any JSON; serde_json is what the engine speaks.
        let page: serde_json::Value = serde_json::from_str(&miniserde::json::to_string(&page))
            .map_err(|e| ListError::Failed(format!("unreadable event list: {e}")))?;
        let events = page["data"]
            .as_array()
            .cloned()
            .ok_or_else(|| ListError::Failed("the event list has no data".into()))?;
        Ok(EventPage {
            events,
            has_more: page["has_more"].as_bool().unwrap_or(false),
        })
    }
}

/// Whether a failed request's recorded error is Stripe's `idempotency_error` (the parameters
/// changed under its key: a bug to surface) rather than a refusal of the request itself.
pub(crate) fn is_idempotency_error(error: &str) -> bool {
    error.starts_with(ApiErrorsType::IdempotencyError.as_str())
}

/// A succeeded or failed request is not sent again.
fn final_state<T>(record: StripeRequestView) -> Result<Option<Sent<T>>, CallError> {
    match record.status {
        RequestStatus::Succeeded => Ok(Some(Sent::AlreadySucceeded(Box::new(record)))),
        RequestStatus::Failed => {
            let error = record.error.unwrap_or_default();
            let http_status = record.http_status.unwrap_or_default() as u16;
            if is_idempotency_error(&error) {
                Err(CallError::IdempotencyMismatch {
                    key: record.idempotency_key,
                    error,
                })
            } else {
                Err(CallError::Rejected {
                    key: record.idempotency_key,
                    http_status,
                    error,
                })
            }
        }
        RequestStatus::Pending | RequestStatus::Indeterminate => Ok(None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::OrderId;

    #[test]
    fn a_refund_key_reads_back_as_its_total_and_attempt() {
        for order in ["ord_42", "shop:7", "o:1"] {
            for (total, attempt) in [(2450, 1), (4900, 1), (4900, 2), (1, 17)] {
                let key = Operation::Refund {
                    amount: 1,
                    refunded_after: total,
                    attempt,
                }
                .key(&order);
                assert_eq!(
                    Operation::refund_key_parts(order, &key),
                    Some((total, attempt)),
                    "{key}"
                );
            }
        }
        assert_eq!(Operation::refund_key_parts("ord_1", "refund:ord_1"), None);
        assert_eq!(
            Operation::refund_key_parts("ord_1", "refund:ord_12:5"),
            None
        );
        assert_eq!(
            Operation::refund_key_parts("ord_1", "refund:ord_1:5:1"),
            None
        );
        assert_eq!(Operation::refund_key_parts("ord_1", "refund:ord_1:x"), None);
        assert_eq!(
            Operation::refund_key_parts("ord_1", "checkout-session:ord_1:2"),
            None
        );
    }

    #[test]
    fn keys_are_derived_from_operation_and_order() {
        let order = OrderId::parse("ord_42").unwrap();
        assert_eq!(
            Operation::CheckoutSession { generation: 1 }.key(&order),
            "checkout-session:ord_42"
        );
        assert_eq!(
            Operation::CheckoutSession { generation: 2 }.key(&order),
            "checkout-session:ord_42:2"
        );
        let refund = |refunded_after, attempt| Operation::Refund {
            amount: 2450,
            refunded_after,
            attempt,
        };
        assert_eq!(refund(2450, 1).key(&order), "refund:ord_42:2450");
        assert_eq!(refund(2450, 1).amount(), Some(2450));
        assert_eq!(refund(4900, 1).key(&order), "refund:ord_42:4900");
        assert_eq!(refund(4900, 2).key(&order), "refund:ord_42:4900:2");
        let reference = crate::ids::SubscriptionRef::parse("abo-7").unwrap();
        let cancel = |at_period_end, attempt| Operation::CancelSubscription {
            at_period_end,
            attempt,
        };
        assert_eq!(
            cancel(true, 1).key(&reference),
            "subscription-cancel:abo-7:period-end"
        );
        assert_eq!(
            cancel(false, 1).key(&reference),
            "subscription-cancel:abo-7:now"
        );
        assert_eq!(
            cancel(false, 2).key(&reference),
            "subscription-cancel:abo-7:now:2"
        );
        assert_eq!(
            Operation::SubscriptionCheckout { generation: 2 }.key(&reference),
            "subscription-checkout:abo-7:2"
        );
    }

    #[test]
    fn request_id_is_read_from_the_log_url() {
        assert_eq!(
            request_id_of(Some(
                "https://dashboard.stripe.com/test/logs/req_abc123?t=1700000000"
            )),
            Some("req_abc123".into())
        );
        assert_eq!(request_id_of(None), None);
    }

    #[test]
    fn api_keys_are_checked_and_never_printed() {
        assert!(ApiKey::new("pk_test_1").is_err());
        let key = ApiKey::new("sk_test_secret").unwrap();
        assert!(!format!("{key:?}").contains("secret"));
    }
}
