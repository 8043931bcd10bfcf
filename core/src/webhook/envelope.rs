//! The few fields of a Stripe Event that ingestion needs, parsed leniently: an event type or
//! field no SDK model knows must never make a valid delivery fail.

use serde::Deserialize;

use crate::ids::{EventId, IdError, ObjectId};

/// The event types Claimcheck acts on; every other type is recorded as ignored.
pub const ACTING_TYPES: [&str; 4] = [
    "checkout.session.completed",
    "checkout.session.async_payment_succeeded",
    "checkout.session.async_payment_failed",
    "charge.refunded",
];

/// A parsed Stripe Event envelope.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Envelope {
    pub id: EventId,
    pub event_type: String,
    /// Stripe's `created`, unix seconds.
    pub created: i64,
    pub livemode: bool,
    pub api_version: Option<String>,
    /// `data.object.id`; some event types carry objects without one.
    pub object_id: Option<ObjectId>,
    /// `data.object.object`, e.g. `checkout.session`.
    pub object_kind: String,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EnvelopeError {
    #[error("the payload is not a Stripe event: {0}")]
    Json(String),
    #[error("the payload's {0}")]
    Id(#[from] IdError),
    #[error("a {event_type} event must carry data.object.id")]
    MissingObjectId { event_type: String },
    #[error("the event type is empty")]
    EmptyType,
}

#[derive(Deserialize)]
struct RawEvent {
    id: String,
    #[serde(rename = "type")]
    event_type: String,
    created: i64,
    livemode: bool,
    #[serde(default)]
    api_version: Option<String>,
    data: RawData,
}

#[derive(Deserialize)]
struct RawData {
    object: RawObject,
}

#[derive(Deserialize)]
struct RawObject {
    #[serde(default)]
    id: Option<String>,
    object: String,
}

impl Envelope {
    pub fn parse(body: &[u8]) -> Result<Envelope, EnvelopeError> {
        let raw: RawEvent =
            serde_json::from_slice(body).map_err(|e| EnvelopeError::Json(e.to_string()))?;
        if raw.event_type.is_empty() {
            return Err(EnvelopeError::EmptyType);
        }
        let object_id = raw.data.object.id.map(ObjectId::parse).transpose()?;
        let envelope = Envelope {
            id: EventId::parse(raw.id)?,
            event_type: raw.event_type,
            created: raw.created,
            livemode: raw.livemode,
            api_version: raw.api_version,
            object_id,
            object_kind: raw.data.object.object,
        };
        if envelope.is_acting() && envelope.object_id.is_none() {
            return Err(EnvelopeError::MissingObjectId {
                event_type: envelope.event_type,
            });
        }
        Ok(envelope)
    }

    /// Whether Claimcheck claims and fulfils this event type.
    pub fn is_acting(&self) -> bool {
        ACTING_TYPES.contains(&self.event_type.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_fields_and_types_parse() {
        let body = br#"{"id":"evt_1","type":"brand.new.type","created":1,"livemode":false,
            "api_version":"2099-01-01.future","data":{"object":{"object":"thing","new":[1]}},
            "surprise":{"a":1}}"#;
        let envelope = Envelope::parse(body).unwrap();
        assert_eq!(envelope.event_type, "brand.new.type");
        assert_eq!(envelope.object_id, None);
        assert!(!envelope.is_acting());
    }

    #[test]
    fn acting_events_need_an_object_id() {
        let body = br#"{"id":"evt_1","type":"charge.refunded","created":1,"livemode":false,
            "data":{"object":{"object":"charge"}}}"#;
        assert!(matches!(
            Envelope::parse(body),
            Err(EnvelopeError::MissingObjectId { .. })
        ));
    }

    #[test]
    fn malformed_payloads_are_errors() {
        assert!(matches!(Envelope::parse(b"{"), Err(EnvelopeError::Json(_))));
        assert!(matches!(
            Envelope::parse(br#"{"id":"evt_1"}"#),
            Err(EnvelopeError::Json(_))
        ));
        let no_id = br#"{"id":"","type":"x","created":1,"livemode":false,"data":{"object":{"object":"o"}}}"#;
        assert!(matches!(Envelope::parse(no_id), Err(EnvelopeError::Id(_))));
    }
}
