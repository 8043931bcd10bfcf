//! The few fields of a Stripe Event that ingestion needs, parsed leniently: an event type or
//! field no SDK model knows must never make a valid delivery fail.

use serde::Deserialize;

use crate::event_kind::{ActionStep, EventKind};
use crate::ids::{EventId, IdError, ObjectId};
use crate::webhook::terms::{NamedFields, Term};

/// What names the one action an acting event describes: twin Event objects for one action
/// carry the same key and are claimed once. The step is each kind's
/// ([`EventKind::action_step`]): `<type>:<object id>` for what happens once per object,
/// `<type>:<charge id>:<amount_refunded>` for `charge.refunded`,
/// `<type>:<subscription id>:<created>:<state digest>` for a subscription's status events.
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
    /// once per object, the cumulative `amount_refunded` for `charge.refunded`, the event's
    /// `created` and a digest of the state it sets for a subscription's status events. With the type
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
    created: i64,
    step: ActionStep,
    object_id: &ObjectId,
    object: &RawObject,
) -> Result<ActionKey, EnvelopeError> {
    let key = match step {
        ActionStep::AmountRefunded => {
            let amount = object.amount_refunded.filter(|a| *a >= 0).ok_or_else(|| {
                EnvelopeError::MissingField {
                    event_type: event_type.to_owned(),
                    field: "data.object.amount_refunded",
                }
            })?;
            amount.to_string()
        }
        ActionStep::EventCreated => format!("{created}:{}", object.state_digest()),
        ActionStep::OncePerObject => String::new(),
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
    /// Stripe's type, as sent (unknown types too: they are recorded as they came).
    pub event_type: String,
    /// The type, if this version knows it.
    pub kind: Option<EventKind>,
    /// Stripe's `created`, unix seconds.
    pub created: i64,
    pub livemode: bool,
    pub api_version: Option<String>,
    /// `data.object.id`; some event types carry objects without one.
    pub object_id: Option<ObjectId>,
    /// `data.object.object`, e.g. `checkout.session`; empty when the object names none.
    pub object_kind: String,
    /// For an acting type, the action it describes (see [`ActionKey`]).
    pub action_key: Option<ActionKey>,
    /// What the object names that support staff may search by, each once.
    pub terms: Vec<Term>,
    /// Why a payment failed, as Stripe says it (a payment intent's `last_payment_error`, a
    /// charge's `failure_message`, with the decline code), when the object carries one.
    pub failure: Option<String>,
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
    /// Stripe always names it; an event without it is still recorded, never refused.
    #[serde(default)]
    object: String,
    /// charge.refunded: the cumulative amount refunded, which names the refund.
    #[serde(default)]
    amount_refunded: Option<i64>,
    /// A payment intent's failure (read leniently: its shape is Stripe's, not ours).
    #[serde(default)]
    last_payment_error: Option<serde_json::Value>,
    /// A charge's failure.
    #[serde(default)]
    failure_message: Option<serde_json::Value>,
    #[serde(default)]
    failure_code: Option<serde_json::Value>,
    #[serde(default)]
    outcome: Option<serde_json::Value>,
    /// A subscription's state, which tells two changes of one second apart.
    #[serde(default)]
    status: Option<serde_json::Value>,
    #[serde(default)]
    cancel_at_period_end: Option<serde_json::Value>,
    #[serde(default)]
    current_period_end: Option<serde_json::Value>,
    #[serde(default)]
    items: Option<serde_json::Value>,
    /// A subscription schedule's phases, which tell two of its changes apart.
    #[serde(default)]
    phases: Option<serde_json::Value>,
    /// What the object names for the search (e-mail, order id, related objects).
    #[serde(flatten)]
    named: NamedFields,
}

/// A failure reason is kept at most this long: one sentence and its code.
const MAX_FAILURE_CHARS: usize = 300;

impl RawObject {
    /// 12 hex digits of SHA-256 over what a subscription's status event sets (status,
    /// cancellation, period end, each item's price and quantity; a schedule's status and
    /// phases): twins of one change carry the same, two changes within one second of
    /// Stripe's clock do not.
    fn state_digest(&self) -> String {
        let text = |value: Option<&serde_json::Value>| match value {
            None | Some(serde_json::Value::Null) => String::new(),
            Some(serde_json::Value::String(s)) => s.clone(),
            Some(other) => other.to_string(),
        };
        let items = self
            .items
            .as_ref()
            .and_then(|items| items.get("data"))
            .and_then(serde_json::Value::as_array);
        let mut period_end = text(self.current_period_end.as_ref());
        let mut state = format!(
            "{}|{}",
            text(self.status.as_ref()),
            text(self.cancel_at_period_end.as_ref())
        );
        for item in items.into_iter().flatten() {
            let price = item.get("price");
            // From 2025-03-31 the period is on the items; before, on the subscription.
            if period_end.is_empty() {
                period_end = text(item.get("current_period_end"));
            }
            state.push_str(&format!(
                "|{}:{}:{}:{}",
                text(price.and_then(|p| p.get("id"))),
                text(price.and_then(|p| p.get("unit_amount"))),
                text(price.and_then(|p| p.get("currency"))),
                text(item.get("quantity"))
            ));
        }
        state.push_str(&format!("|{period_end}"));
        // Only a schedule carries phases: a subscription's digest is the one it always was.
        if let Some(phases) = self.phases.as_ref().and_then(serde_json::Value::as_array) {
            for phase in phases {
                let prices: Vec<String> = phase
                    .get("items")
                    .and_then(serde_json::Value::as_array)
                    .into_iter()
                    .flatten()
                    .map(|item| {
                        let price = item.get("price");
                        let id = price.and_then(|p| p.get("id")).or(price);
                        format!("{}x{}", text(id), text(item.get("quantity")))
                    })
                    .collect();
                state.push_str(&format!(
                    "|{}-{}:{}",
                    text(phase.get("start_date")),
                    text(phase.get("end_date")),
                    prices.join(",")
                ));
            }
        }
        crate::token::sha256_hex(state.as_bytes())[..12].to_owned()
    }

    /// `message (code)` from whichever failure the object carries; `None` without one.
    fn failure(&self) -> Option<String> {
        fn text(value: Option<&serde_json::Value>) -> Option<&str> {
            value
                .and_then(serde_json::Value::as_str)
                .map(str::trim)
                .filter(|s| !s.is_empty())
        }
        let (message, code) = match &self.last_payment_error {
            Some(error) if error.is_object() => (
                text(error.get("message")),
                text(error.get("decline_code")).or(text(error.get("code"))),
            ),
            _ => (
                text(self.failure_message.as_ref()),
                text(
                    self.outcome
                        .as_ref()
                        .and_then(|outcome| outcome.get("reason")),
                )
                .or(text(self.failure_code.as_ref())),
            ),
        };
        let reason = match (message, code) {
            (Some(message), Some(code)) => format!("{message} ({code})"),
            (Some(message), None) => message.to_owned(),
            (None, Some(code)) => code.to_owned(),
            (None, None) => return None,
        };
        Some(reason.chars().take(MAX_FAILURE_CHARS).collect())
    }
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
        let kind = EventKind::parse(&raw.event_type);
        let action_key = match kind.and_then(EventKind::action_step) {
            Some(step) => {
                let id = object_id
                    .as_ref()
                    .ok_or_else(|| EnvelopeError::MissingObjectId {
                        event_type: raw.event_type.clone(),
                    })?;
                Some(action_key(&raw.event_type, raw.created, step, id, &object)?)
            }
            None => None,
        };
        let failure = object.failure();
        Ok(Envelope {
            id: EventId::parse(raw.id)?,
            event_type: raw.event_type,
            kind,
            created: raw.created,
            livemode: raw.livemode,
            api_version: raw.api_version,
            object_id,
            terms: object.named.terms(object.id.as_deref()),
            object_kind: object.object,
            action_key,
            failure,
        })
    }

    /// Whether Claimcheck claims and fulfils this event type.
    pub fn is_acting(&self) -> bool {
        self.kind.is_some_and(EventKind::is_acting)
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
    fn an_object_that_names_no_kind_parses() {
        let body = br#"{"id":"evt_1","type":"checkout.session.completed","created":1,
            "livemode":false,"data":{"object":{"id":"cs_1","payment_status":"paid"}}}"#;
        let envelope = Envelope::parse(body).unwrap();
        assert_eq!(envelope.object_kind, "");
        assert_eq!(
            envelope.action_key.map(|k| k.to_string()).as_deref(),
            Some("checkout.session.completed:cs_1")
        );
    }

    #[test]
    fn a_failed_payment_carries_its_reason() {
        let body = br#"{"id":"evt_1","type":"payment_intent.payment_failed","created":1,
            "livemode":false,"data":{"object":{"id":"pi_1","object":"payment_intent",
            "last_payment_error":{"code":"card_declined","decline_code":"insufficient_funds",
            "message":"Your card has insufficient funds."}}}}"#;
        assert_eq!(
            Envelope::parse(body).unwrap().failure.as_deref(),
            Some("Your card has insufficient funds. (insufficient_funds)")
        );
        let body = br#"{"id":"evt_2","type":"charge.failed","created":1,"livemode":false,
            "data":{"object":{"id":"py_1","object":"charge","failure_code":"insufficient_funds",
            "failure_message":"The account has insufficient funds to cover the debit."}}}"#;
        assert_eq!(
            Envelope::parse(body).unwrap().failure.as_deref(),
            Some("The account has insufficient funds to cover the debit. (insufficient_funds)")
        );
        // Any other shape is no reason, never an error.
        let body = br#"{"id":"evt_3","type":"charge.failed","created":1,"livemode":false,
            "data":{"object":{"id":"py_1","object":"charge","failure_message":7,
            "last_payment_error":null}}}"#;
        assert_eq!(Envelope::parse(body).unwrap().failure, None);
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
        // Every state of one subscription is its own action; an invoice is paid once.
        let subscription = r#"{"id":"sub_1","object":"subscription"}"#;
        let at = |created: i64| {
            event("customer.subscription.updated", subscription)
                .replace(r#""created":1,"#, &format!(r#""created":{created},"#))
        };
        let updated = key_of(&at(1_768_288_001));
        assert!(
            updated.starts_with("customer.subscription.updated:sub_1:1768288001:"),
            "{updated}"
        );
        assert_ne!(key_of(&at(1)), key_of(&at(2)));
        // Two changes in one second are two actions; twins of one change (another event id,
        // the same state) are one, whatever else their envelopes carry.
        let state = |status: &str, cancel: bool, amount: i64| {
            format!(
                r#"{{"id":"sub_1","object":"subscription","status":"{status}",
                   "cancel_at_period_end":{cancel},"items":{{"data":[{{"quantity":1,
                   "current_period_end":1769584000,
                   "price":{{"id":"price_1","unit_amount":{amount},"currency":"chf"}}}}]}}}}"#
            )
        };
        let same_second = |object: &str, id: &str| {
            event("customer.subscription.updated", object).replace("evt_1", id)
        };
        let cancel = key_of(&same_second(&state("active", true, 3900), "evt_1"));
        let twin = key_of(&same_second(&state("active", true, 3900), "evt_2"));
        assert_eq!(cancel, twin);
        for other in [
            state("active", false, 3900),
            state("past_due", true, 3900),
            state("active", true, 8900),
        ] {
            assert_ne!(key_of(&same_second(&other, "evt_3")), cancel, "{other}");
        }
        let invoice = r#"{"id":"in_1","object":"invoice"}"#;
        assert_eq!(key_of(&event("invoice.paid", invoice)), "invoice.paid:in_1");
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
