//! Property tests of the two parsers that read what anyone on the internet can send: the
//! `Stripe-Signature` header and the event envelope. Whatever the input, no panic; and the
//! verdicts are the ones Stripe's contract gives.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use claimcheck_core::EventKind;
use claimcheck_core::webhook::{Envelope, SignatureError, SignatureVerifier, SigningSecret};
use proptest::prelude::*;

const TOLERANCE: u64 = 300;
const NOW: i64 = 1_764_400_000;

fn verifier(secrets: &[String]) -> SignatureVerifier {
    SignatureVerifier::new(
        secrets
            .iter()
            .map(|s| SigningSecret::new(s.clone()).unwrap())
            .collect(),
        Duration::from_secs(TOLERANCE),
    )
    .unwrap()
}

fn secret() -> impl Strategy<Value = String> {
    "[A-Za-z0-9]{8,40}".prop_map(|s| format!("whsec_{s}"))
}

/// Items Stripe may add that a verifier must ignore: other schemes, unknown keys, noise
/// (never a second timestamp: Stripe sends one).
fn noise() -> impl Strategy<Value = Vec<String>> {
    prop::collection::vec(
        prop_oneof![
            "v0=[0-9a-f]{64}".prop_map(String::from),
            "v2=[0-9a-f]{10}".prop_map(String::from),
            "[a-z]{1,3}=[ -+/-~]{0,12}".prop_map(String::from),
            "[ -+/-~]{0,8}".prop_map(String::from),
        ]
        .prop_filter("one timestamp", |item| !item.starts_with("t=")),
        0..4,
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// No header, however malformed, makes the verifier panic, and random text never passes.
    #[test]
    fn any_header_is_a_verdict_never_a_panic(header in "\\PC{0,200}", body in prop::collection::vec(any::<u8>(), 0..200)) {
        let verifier = verifier(&["whsec_fixed_for_this_test".into()]);
        let verdict = verifier.verify(Some(&header), &body, NOW);
        prop_assert!(verdict.is_err());
    }

    /// A header carrying a v1 made with any configured secret over `t.body`, among any
    /// noise and in any position, verifies exactly when it is not older than the tolerance;
    /// a v1 made with a secret that is not configured, or over another body, never does.
    #[test]
    fn the_verdict_follows_stripes_contract(
        secrets in prop::collection::vec(secret(), 1..3),
        other in secret(),
        signer in 0usize..3,
        age in -1000i64..1000,
        body in prop::collection::vec(any::<u8>(), 0..300),
        noise in noise(),
        position in 0usize..5,
    ) {
        let verifier = verifier(&secrets);
        let signing = &secrets[signer % secrets.len()];
        let timestamp = NOW - age;
        let good = SigningSecret::new(signing.clone()).unwrap().sign(timestamp, &body);
        let v1 = good.split(',').find(|i| i.starts_with("v1=")).unwrap().to_owned();
        let mut items = noise.clone();
        items.insert(position.min(items.len()), v1.clone());
        items.insert(0, format!("t={timestamp}"));
        let header = items.join(",");
        let verdict = verifier.verify(Some(&header), &body, NOW);
        if age <= TOLERANCE as i64 {
            prop_assert!(verdict.is_ok(), "{header}: {verdict:?}");
        } else {
            let too_old = matches!(verdict, Err(SignatureError::TooOld { .. }));
            prop_assert!(too_old, "{header}: {verdict:?}");
        }

        if !secrets.contains(&other) {
            let forged = SigningSecret::new(other).unwrap().sign(timestamp, &body);
            prop_assert!(verifier.verify(Some(&forged), &body, NOW).is_err());
        }
        let mut tampered = body.clone();
        tampered.push(b'x');
        prop_assert!(verifier.verify(Some(&header), &tampered, NOW).is_err());
    }

    /// Any bytes are an envelope or an error, never a panic.
    #[test]
    fn any_bytes_are_an_envelope_or_an_error(body in prop::collection::vec(any::<u8>(), 0..400)) {
        let _ = Envelope::parse(&body);
    }

    /// Any event of Stripe's shape parses, with an action key exactly for the acting types
    /// (charge.refunded needs its amount_refunded).
    #[test]
    fn events_of_stripes_shape_parse_with_their_action_key(
        id in "evt_[A-Za-z0-9]{1,40}",
        kind in prop_oneof![
            prop::sample::select(EventKind::ALL.to_vec()).prop_map(|k| k.as_str().to_owned()),
            "[a-z]{1,10}\\.[a-z_]{1,20}".prop_map(String::from),
        ],
        object_id in "[a-z]{2,3}_[A-Za-z0-9]{1,30}",
        amount_refunded in prop::option::of(0i64..1_000_000),
        created in any::<i64>(),
        livemode in any::<bool>(),
        // A field of its own: one named like a field the event carries would replace it.
        extra in "[a-z_]{1,10}".prop_filter("a field of its own", |name| {
            !["id", "object", "type", "created", "livemode", "data", "amount_refunded"]
                .contains(&name.as_str())
        }),
    ) {
        let mut object = serde_json::json!({ "id": object_id, "object": "thing", extra.clone(): [1, {"x": null}] });
        if let Some(amount) = amount_refunded {
            object["amount_refunded"] = serde_json::json!(amount);
        }
        let body = serde_json::json!({
            "id": id, "type": kind, "created": created, "livemode": livemode,
            "data": { "object": object }, extra: "surprise",
        });
        let parsed = Envelope::parse(body.to_string().as_bytes());
        let acting = EventKind::parse(&kind).is_some_and(EventKind::is_acting);
        if kind == "charge.refunded" && amount_refunded.is_none() {
            prop_assert!(parsed.is_err());
        } else {
            let envelope = parsed.unwrap();
            prop_assert_eq!(envelope.id.as_str(), id.as_str());
            prop_assert_eq!(envelope.created, created);
            prop_assert_eq!(envelope.is_acting(), acting);
            if acting {
                let key = envelope.action_key.unwrap().to_string();
                let prefix = format!("{kind}:{object_id}");
                prop_assert!(key.starts_with(&prefix), "{} {}", key, prefix);
            }
        }
    }
}
