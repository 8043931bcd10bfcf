//! Stripe's webhook signature scheme, exactly as Stripe's official libraries check it.
//!
//! `Stripe-Signature: t=<unix seconds>,v1=<hex>[,v1=<hex>…][,v0=…]`. Each v1 is the lowercase
//! hex HMAC-SHA256, keyed with the whole `whsec_…` string, of `"<t>." + raw body`. Several v1
//! appear while a secret is rotated: any match accepts. Every other scheme is ignored.
//! Comparison is in constant time. Only timestamps older than the tolerance are refused, as
//! the official SDK does.

use std::fmt;
use std::time::Duration;

use hmac::{Hmac, Mac};
use sha2::Sha256;
use subtle::ConstantTimeEq;

type HmacSha256 = Hmac<Sha256>;

/// One endpoint signing secret (`whsec_…`). Never printed.
#[derive(Clone, PartialEq, Eq)]
pub struct SigningSecret(String);

impl SigningSecret {
    pub fn new(secret: impl Into<String>) -> Result<SigningSecret, ConfigError> {
        let secret = secret.into();
        let secret = secret.trim();
        if secret.is_empty() {
            return Err(ConfigError::EmptySecret);
        }
        Ok(SigningSecret(secret.to_owned()))
    }

    fn mac(&self, timestamp: &str, body: &[u8]) -> [u8; 32] {
        // HMAC accepts keys of any length, so this cannot fail.
        let mut mac = HmacSha256::new_from_slice(self.0.as_bytes())
            .unwrap_or_else(|_| unreachable!("HMAC takes keys of any length"));
        mac.update(timestamp.as_bytes());
        mac.update(b".");
        mac.update(body);
        mac.finalize().into_bytes().into()
    }

    /// The header Stripe would send for `body` at `timestamp` (tests, load generators).
    pub fn sign(&self, timestamp: i64, body: &[u8]) -> String {
        let mac = self.mac(&timestamp.to_string(), body);
        format!("t={timestamp},v1={}", to_hex(&mac))
    }
}

impl fmt::Debug for SigningSecret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("SigningSecret(***)")
    }
}

/// What the endpoint accepts: one or more secrets (rotation) and a recency window.
#[derive(Debug, Clone)]
pub struct SignatureVerifier {
    secrets: Vec<SigningSecret>,
    tolerance: Duration,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    #[error("a webhook signing secret is empty")]
    EmptySecret,
    #[error("no webhook signing secret is configured (STRIPE_WEBHOOK_SECRET)")]
    NoSecret,
    #[error("the signature tolerance must be at least one second")]
    ZeroTolerance,
}

/// Why a delivery's signature was refused. The messages go back to the sender: they name
/// the problem, never a secret or the expected signature.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SignatureError {
    #[error("the Stripe-Signature header is missing")]
    MissingHeader,
    #[error("the Stripe-Signature header has no valid timestamp (t=…)")]
    NoTimestamp,
    #[error("the Stripe-Signature header has no v1 signature")]
    NoV1Signature,
    #[error("the signature timestamp is {age_secs} s old, beyond the {tolerance_secs} s tolerance")]
    TooOld { age_secs: i64, tolerance_secs: u64 },
    #[error("no v1 signature matches the payload for any configured signing secret")]
    NoMatch,
}

impl SignatureVerifier {
    /// Stripe's SDKs refuse signatures older than this by default.
    pub const DEFAULT_TOLERANCE: Duration = Duration::from_secs(300);

    pub fn new(
        secrets: Vec<SigningSecret>,
        tolerance: Duration,
    ) -> Result<SignatureVerifier, ConfigError> {
        if secrets.is_empty() {
            return Err(ConfigError::NoSecret);
        }
        if tolerance.as_secs() == 0 {
            return Err(ConfigError::ZeroTolerance);
        }
        Ok(SignatureVerifier { secrets, tolerance })
    }

    /// The secret new signatures are made with (the first one configured).
    pub fn primary_secret(&self) -> &SigningSecret {
        &self.secrets[0]
    }

    /// Checks `header` against the raw `body` at `now` (unix seconds).
    pub fn verify(
        &self,
        header: Option<&str>,
        body: &[u8],
        now: i64,
    ) -> Result<(), SignatureError> {
        let header = header.ok_or(SignatureError::MissingHeader)?;
        let parsed = ParsedHeader::parse(header)?;
        let matched = self.secrets.iter().any(|secret| {
            let expected = to_hex(&secret.mac(parsed.timestamp_text, body));
            parsed
                .v1
                .iter()
                // Checks every candidate: the time taken does not depend on which matched.
                .fold(false, |found, candidate| {
                    found | bool::from(expected.as_bytes().ct_eq(candidate.as_bytes()))
                })
        });
        if !matched {
            return Err(SignatureError::NoMatch);
        }
        let age_secs = now - parsed.timestamp;
        let tolerance_secs = self.tolerance.as_secs();
        if age_secs > i64::try_from(tolerance_secs).unwrap_or(i64::MAX) {
            return Err(SignatureError::TooOld {
                age_secs,
                tolerance_secs,
            });
        }
        Ok(())
    }
}

struct ParsedHeader<'a> {
    timestamp: i64,
    /// The timestamp as sent: the signed message uses these exact characters.
    timestamp_text: &'a str,
    v1: Vec<&'a str>,
}

impl<'a> ParsedHeader<'a> {
    fn parse(header: &'a str) -> Result<ParsedHeader<'a>, SignatureError> {
        let mut timestamp = None;
        let mut v1 = Vec::new();
        for item in header.split(',') {
            let Some((key, value)) = item.split_once('=') else {
                continue;
            };
            match key {
                "t" => timestamp = Some(value),
                "v1" => v1.push(value),
                _ => {}
            }
        }
        let timestamp_text = timestamp.ok_or(SignatureError::NoTimestamp)?;
        let timestamp = timestamp_text
            .parse::<i64>()
            .map_err(|_| SignatureError::NoTimestamp)?;
        if v1.is_empty() {
            return Err(SignatureError::NoV1Signature);
        }
        Ok(ParsedHeader {
            timestamp,
            timestamp_text,
            v1,
        })
    }
}

fn to_hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(bytes.len() * 2);
    for byte in bytes {
        out.push(char::from(DIGITS[usize::from(byte >> 4)]));
        out.push(char::from(DIGITS[usize::from(byte & 0x0f)]));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn verifier(secrets: &[&str], tolerance_secs: u64) -> SignatureVerifier {
        SignatureVerifier::new(
            secrets
                .iter()
                .map(|s| SigningSecret::new(*s).unwrap())
                .collect(),
            Duration::from_secs(tolerance_secs),
        )
        .unwrap()
    }

    #[test]
    fn a_signature_made_by_sign_verifies() {
        let v = verifier(&["whsec_a"], 300);
        let header = v.primary_secret().sign(1_000, b"{}");
        assert_eq!(v.verify(Some(&header), b"{}", 1_000), Ok(()));
    }

    #[test]
    fn tolerance_refuses_only_what_is_older_than_it() {
        let v = verifier(&["whsec_a"], 300);
        let header = v.primary_secret().sign(1_000, b"{}");
        assert_eq!(v.verify(Some(&header), b"{}", 1_299), Ok(()));
        assert_eq!(v.verify(Some(&header), b"{}", 1_300), Ok(()));
        assert_eq!(
            v.verify(Some(&header), b"{}", 1_301),
            Err(SignatureError::TooOld {
                age_secs: 301,
                tolerance_secs: 300
            })
        );
        // A timestamp ahead of our clock (skew) is accepted, as Stripe's SDK does.
        assert_eq!(v.verify(Some(&header), b"{}", 900), Ok(()));
    }

    #[test]
    fn any_configured_secret_may_match() {
        let old = verifier(&["whsec_old"], 300);
        let header = old.primary_secret().sign(5, b"x");
        let both = verifier(&["whsec_new", "whsec_old"], 300);
        assert_eq!(both.verify(Some(&header), b"x", 5), Ok(()));
        let new_only = verifier(&["whsec_new"], 300);
        assert_eq!(
            new_only.verify(Some(&header), b"x", 5),
            Err(SignatureError::NoMatch)
        );
    }

    #[test]
    fn header_shape_errors_are_told_apart() {
        let v = verifier(&["whsec_a"], 300);
        assert_eq!(v.verify(None, b"", 0), Err(SignatureError::MissingHeader));
        assert_eq!(
            v.verify(Some("v1=abc"), b"", 0),
            Err(SignatureError::NoTimestamp)
        );
        assert_eq!(
            v.verify(Some("t=x,v1=abc"), b"", 0),
            Err(SignatureError::NoTimestamp)
        );
        assert_eq!(
            v.verify(Some("t=1,v0=abc"), b"", 0),
            Err(SignatureError::NoV1Signature)
        );
    }

    #[test]
    fn configuration_mistakes_are_refused() {
        assert_eq!(
            SigningSecret::new("  ").unwrap_err(),
            ConfigError::EmptySecret
        );
        assert_eq!(
            SignatureVerifier::new(vec![], Duration::from_secs(300)).unwrap_err(),
            ConfigError::NoSecret
        );
        let secret = SigningSecret::new("whsec_a").unwrap();
        assert_eq!(
            SignatureVerifier::new(vec![secret], Duration::ZERO).unwrap_err(),
            ConfigError::ZeroTolerance
        );
        assert_eq!(
            format!("{:?}", SigningSecret::new("whsec_a").unwrap()),
            "SigningSecret(***)"
        );
    }
}
