//! Webhook ingestion: verify the signature, read the envelope, make the claim durable. No
//! fulfilment happens here; the worker takes claims from the store.

mod envelope;
mod signature;
pub mod terms;

use std::sync::Arc;

use tokio::sync::Notify;

use crate::error::StoreError;
use crate::ids::EventId;
use crate::store::{BatchWriter, ClaimOutcome, ClaimSource, Store, WriteOp, WriteResult};

pub use crate::outcome::DeliveryOutcome;
pub use envelope::{ActionKey, Envelope, EnvelopeError};
pub use signature::{ConfigError, SignatureError, SignatureVerifier, SigningSecret};

/// Which Stripe mode this endpoint serves; events of the other mode are refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StripeMode {
    Test,
    Live,
}

impl StripeMode {
    fn is_live(self) -> bool {
        self == StripeMode::Live
    }
}

/// A delivery that Stripe may consider done (answered 2xx).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Receipt {
    pub event_id: EventId,
    pub accepted: Accepted,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Accepted {
    Claimed,
    DuplicateEvent,
    DuplicateAction { original: EventId },
    Ignored,
}

impl Receipt {
    pub fn outcome(&self) -> DeliveryOutcome {
        match self.accepted {
            Accepted::Claimed => DeliveryOutcome::Claimed,
            Accepted::DuplicateEvent => DeliveryOutcome::DuplicateEvent,
            Accepted::DuplicateAction { .. } => DeliveryOutcome::DuplicateAction,
            Accepted::Ignored => DeliveryOutcome::Ignored,
        }
    }
}

/// A delivery that is refused; Stripe will deliver it again.
#[derive(Debug, thiserror::Error)]
pub enum Refusal {
    #[error(transparent)]
    Signature(#[from] SignatureError),
    #[error("the payload is not valid UTF-8 JSON")]
    NotUtf8,
    #[error(transparent)]
    Payload(#[from] EnvelopeError),
    #[error("a {} event reached an endpoint configured for {} mode", mode_name(*event_live), mode_name(!event_live))]
    Livemode { event_live: bool },
    #[error("the claim could not be stored")]
    Storage(#[from] StoreError),
}

fn mode_name(live: bool) -> &'static str {
    if live { "live" } else { "test" }
}

impl Refusal {
    pub fn outcome(&self) -> DeliveryOutcome {
        match self {
            Refusal::Signature(_) => DeliveryOutcome::BadSignature,
            Refusal::NotUtf8 | Refusal::Payload(_) => DeliveryOutcome::BadPayload,
            Refusal::Livemode { .. } => DeliveryOutcome::LivemodeMismatch,
            Refusal::Storage(_) => DeliveryOutcome::StorageError,
        }
    }
}

/// How many PostgreSQL transactions write deliveries side by side, and how many writes
/// one of them may gather.
const POSTGRES_WRITER_LANES: usize = 4;
const MAX_WRITES_PER_COMMIT: usize = 256;

/// The ingestion service the webhook route calls.
#[derive(Debug, Clone)]
pub struct Ingestion {
    writer: BatchWriter,
    verifier: SignatureVerifier,
    mode: StripeMode,
    /// Woken for every new claim, so an idle worker starts on it at once.
    new_claim: Arc<Notify>,
}

impl Ingestion {
    /// Starts the writer lanes on the current Tokio runtime.
    pub fn new(
        store: Store,
        verifier: SignatureVerifier,
        mode: StripeMode,
        new_claim: Arc<Notify>,
    ) -> Ingestion {
        Ingestion {
            writer: BatchWriter::start(store, POSTGRES_WRITER_LANES, MAX_WRITES_PER_COMMIT),
            verifier,
            mode,
            new_claim,
        }
    }

    /// Handles one delivery: `signature` is the `Stripe-Signature` header, `body` the raw
    /// bytes, `now_ms` the time it arrived. `Ok` means the outcome is durable.
    pub async fn receive(
        &self,
        signature: Option<&str>,
        body: &[u8],
        now_ms: i64,
    ) -> Result<Receipt, Refusal> {
        self.verifier
            .verify(signature, body, now_ms.div_euclid(1000))?;
        let payload = match std::str::from_utf8(body) {
            Ok(text) => text,
            Err(_) => {
                return Err(self.refuse_signed(None, Refusal::NotUtf8, now_ms).await);
            }
        };
        let envelope = match Envelope::parse(body) {
            Ok(envelope) => envelope,
            Err(error) => return Err(self.refuse_signed(None, error.into(), now_ms).await),
        };
        if envelope.livemode != self.mode.is_live() {
            let refusal = Refusal::Livemode {
                event_live: envelope.livemode,
            };
            return Err(self.refuse_signed(Some(&envelope), refusal, now_ms).await);
        }

        let event_id = envelope.id.clone();
        let op = match (envelope.object_id.clone(), envelope.action_key.clone()) {
            (Some(object_id), Some(action_key)) => WriteOp::Claim {
                envelope,
                object_id,
                action_key,
                payload: payload.to_owned(),
                received_at: now_ms,
                source: ClaimSource::Webhook,
            },
            _ => WriteOp::Record {
                // A failed payment's reason stays with its delivery: the order's timeline
                // shows it (the Checkout Session's events do not carry it).
                detail: envelope.failure.clone(),
                envelope: Some(envelope),
                outcome: DeliveryOutcome::Ignored,
                received_at: now_ms,
                // A later version that acts on the type adopts it from here.
                payload: Some(payload.to_owned()),
            },
        };
        let accepted = match self.writer.write(op).await? {
            WriteResult::Claim(ClaimOutcome::Claimed) => {
                self.new_claim.notify_one();
                Accepted::Claimed
            }
            WriteResult::Claim(ClaimOutcome::DuplicateEvent) => Accepted::DuplicateEvent,
            WriteResult::Claim(ClaimOutcome::DuplicateAction { original }) => {
                Accepted::DuplicateAction { original }
            }
            WriteResult::Recorded => Accepted::Ignored,
        };
        Ok(Receipt { event_id, accepted })
    }

    /// Records a signed delivery that is refused, then returns the refusal. A storage
    /// failure while recording is logged: the delivery is refused either way.
    async fn refuse_signed(
        &self,
        envelope: Option<&Envelope>,
        refusal: Refusal,
        now_ms: i64,
    ) -> Refusal {
        let op = WriteOp::Record {
            envelope: envelope.cloned(),
            outcome: refusal.outcome(),
            detail: Some(refusal.to_string()),
            received_at: now_ms,
            payload: None,
        };
        if let Err(error) = self.writer.write(op).await {
            tracing::error!(
                error = &error as &dyn std::error::Error,
                "recording a refused delivery failed"
            );
        }
        refusal
    }
}
