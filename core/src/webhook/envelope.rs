//! The few fields of a Stripe Event that ingestion needs, parsed leniently: an event type or
//! field no SDK model knows must never make a valid delivery fail.

use serde::Deserialize;

use crate::ids::{EventId, IdError, ObjectId};

/// The event types Claimcheck acts on; every other type is recorded as ignored.
pub const ACTING_TYPES: [&str; 7] = [
    "checkout.session.completed",
    "checkout.session.async_payment_succeeded",
    "checkout.session.async_payment_failed",
    "charge.refunded",
    "refund.failed",
    "charge.dispute.created",
    "charge.dispute.closed",
];

/// What names the one action an acting event describes: twin Event objects for one action
/// carry the same key and are claimed once. Adding an acting type means deciding its key.
///
/// | type | key | why |
/// |---|---|---|
/// | `checkout.session.*` | `<type>:<session id>` | once per session |
/// | `charge.refunded` | `<type>:<charge id>:<amount_refunded>` | sent once per refund, partial ones included, on the same charge; each raises the cumulative amount |
/// | `refund.failed` | `<type>:<refund id>` | a refund fails once |
/// | `charge.dispute.*` | `<type>:<dispute id>` | once per dispute |
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ActionKey {
    full: String,
    step: String,
}

impl ActionKey {
    /// The whole key, `<type>:<object id>[:<step>]`.
    pub fn as_str(&self) -> &str {
        &self.full
    }

    /// What tells two actions of one type on one object apart: empty for types that happen
    /// once per object, the cumulative `amount_refunded` for `charge.refunded`. With the type
    /// and the object id (stored beside it) it is the whole key.
    pub fn step(&self) -> &str {
        &self.step
    }
}

impl std::fmt::Display for ActionKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.full)
    }
}

fn action_key(
    event_type: &str,
    object_id: &ObjectId,
    object: &RawObject,
) -> Result<ActionKey, EnvelopeError> {
    let key = match event_type {
        "charge.refunded" => {
            let amount = object.amount_refunded.filter(|a| *a >= 0).ok_or_else(|| {
                EnvelopeError::MissingField {
                    event_type: event_type.to_owned(),
                    field: "data.object.amount_refunded",
                }
            })?;
            amount.to_string()
        }
        _ => String::new(),
    };
    let full = if key.is_empty() {
        format!("{event_type}:{object_id}")
    } else {
        format!("{event_type}:{object_id}:{key}")
    };
    Ok(ActionKey { full, step: key })
}

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
    /// For an acting type, the action it describes (see [`ActionKey`]).
    pub action_key: Option<ActionKey>,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EnvelopeError {
    #[error("the payload is not a Stripe event: {0}")]
    Json(String),
    #[error("the payload's {0}")]
    Id(#[from] IdError),
    #[error("a {event_type} event must carry data.object.id")]
    MissingObjectId { event_type: String },
    #[error("a {event_type} event must carry {field}")]
    MissingField {
        event_type: String,
        field: &'static str,
    },
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
    /// charge.refunded: the cumulative amount refunded, which names the refund.
    #[serde(default)]
    amount_refunded: Option<i64>,
}

impl Envelope {
    pub fn parse(body: &[u8]) -> Result<Envelope, EnvelopeError> {
        let raw: RawEvent =
            serde_json::from_slice(body).map_err(|e| EnvelopeError::Json(e.to_string()))?;
        if raw.event_type.is_empty() {
            return Err(EnvelopeError::EmptyType);
        }
        let object = raw.data.object;
        let object_id = object.id.clone().map(ObjectId::parse).transpose()?;
        let action_key = if ACTING_TYPES.contains(&raw.event_type.as_str()) {
            let id = object_id
                .as_ref()
                .ok_or_else(|| EnvelopeError::MissingObjectId {
                    event_type: raw.event_type.clone(),
                })?;
            Some(action_key(&raw.event_type, id, &object)?)
        } else {
            None
        };
        Ok(Envelope {
            id: EventId::parse(raw.id)?,
            event_type: raw.event_type,
            created: raw.created,
            livemode: raw.livemode,
            api_version: raw.api_version,
            object_id,
            object_kind: object.object,
            action_key,
        })
    }

    /// Whether Claimcheck claims and fulfils this event type.
    pub fn is_acting(&self) -> bool {
        self.action_key.is_some()
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

    fn key_of(body: &str) -> String {
        Envelope::parse(body.as_bytes())
            .unwrap()
            .action_key
            .unwrap()
            .to_string()
    }

    #[test]
    fn each_acting_type_has_its_action_key() {
        let event = |kind: &str, object: &str| {
            format!(
                r#"{{"id":"evt_1","type":"{kind}","created":1,"livemode":false,"data":{{"object":{object}}}}}"#
            )
        };
        let session = r#"{"id":"cs_1","object":"checkout.session"}"#;
        assert_eq!(
            key_of(&event("checkout.session.completed", session)),
            "checkout.session.completed:cs_1"
        );
        // Each refund of one charge is its own action; twins of one refund share the amount.
        let partial = r#"{"id":"ch_1","object":"charge","amount_refunded":2450}"#;
        let rest = r#"{"id":"ch_1","object":"charge","amount_refunded":4900}"#;
        assert_eq!(
            key_of(&event("charge.refunded", partial)),
            "charge.refunded:ch_1:2450"
        );
        assert_ne!(
            key_of(&event("charge.refunded", partial)),
            key_of(&event("charge.refunded", rest))
        );
        let refund = r#"{"id":"re_1","object":"refund","amount":100}"#;
        assert_eq!(
            key_of(&event("refund.failed", refund)),
            "refund.failed:re_1"
        );
        let dispute = r#"{"id":"dp_1","object":"dispute","amount":4900}"#;
        assert_eq!(
            key_of(&event("charge.dispute.created", dispute)),
            "charge.dispute.created:dp_1"
        );
        assert_eq!(
            key_of(&event("charge.dispute.closed", dispute)),
            "charge.dispute.closed:dp_1"
        );
        let no_amount = event("charge.refunded", r#"{"id":"ch_1","object":"charge"}"#);
        assert!(matches!(
            Envelope::parse(no_amount.as_bytes()),
            Err(EnvelopeError::MissingField { .. })
        ));
        assert_eq!(
            key_of(&String::from_utf8(fixture_bytes("charge.refunded")).unwrap()),
            "charge.refunded:ch_pub00013Mxc9vLk:4900"
        );
    }

    fn fixture_bytes(name: &str) -> Vec<u8> {
        let path = format!(
            "{}/../fixtures/stripe/events/{name}.json",
            env!("CARGO_MANIFEST_DIR")
        );
        std::fs::read(path).unwrap()
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
