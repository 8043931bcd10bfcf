//! Two-factor sign-in: time-based codes from an authenticator app (RFC 6238: six digits,
//! 30-second steps, HMAC-SHA-1, one step of clock skew either way) and ten one-time
//! recovery codes. The store remembers the last accepted step, so a code is never accepted
//! twice; recovery codes are kept as SHA-256 hashes (they carry 50 random bits each, so a
//! slow hash would add nothing).

use std::fmt;
use std::str::FromStr;

use qrcode::QrCode;
use qrcode::render::svg;
use sha2::{Digest, Sha256};
use totp_rs::{Algorithm, Builder, Secret, Totp};

use crate::auth::Role;
use crate::token::RandomError;

/// Shown in authenticator apps next to the account.
const ISSUER: &str = "Claimcheck";
/// How many recovery codes an operator gets.
pub const RECOVERY_CODES: usize = 10;

/// Who must sign in with a second factor (`CLAIMCHECK_REQUIRE_2FA`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum TwoFactorPolicy {
    /// Nobody must, anybody may.
    #[default]
    Off,
    /// Admins must.
    Admin,
    /// Every operator must.
    All,
}

impl TwoFactorPolicy {
    /// Whether an operator with `role` must have a second factor to use the dashboard.
    pub fn requires(self, role: Role) -> bool {
        match self {
            TwoFactorPolicy::Off => false,
            TwoFactorPolicy::Admin => role == Role::Admin,
            TwoFactorPolicy::All => true,
        }
    }
}

impl fmt::Display for TwoFactorPolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            TwoFactorPolicy::Off => "off",
            TwoFactorPolicy::Admin => "admin",
            TwoFactorPolicy::All => "all",
        })
    }
}

impl FromStr for TwoFactorPolicy {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim() {
            "off" | "" => Ok(TwoFactorPolicy::Off),
            "admin" => Ok(TwoFactorPolicy::Admin),
            "all" => Ok(TwoFactorPolicy::All),
            other => Err(format!("'{other}' is not off, admin or all")),
        }
    }
}

/// A TOTP secret (160 random bits), as base32 text.
#[derive(Clone, PartialEq, Eq)]
pub struct TotpSecret(String);

impl fmt::Debug for TotpSecret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("TotpSecret(***)")
    }
}

/// Why a stored secret cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the stored two-factor secret is unusable: {0}")]
pub struct BadSecret(String);

impl TotpSecret {
    pub fn generate() -> Result<TotpSecret, RandomError> {
        let mut bytes = [0u8; 20];
        crate::token::fill_random(&mut bytes)?;
        Ok(TotpSecret(Secret::new_stack(bytes).to_base32()))
    }

    /// A secret as stored (base32).
    pub fn from_base32(text: impl Into<String>) -> TotpSecret {
        TotpSecret(text.into())
    }

    pub fn as_base32(&self) -> &str {
        &self.0
    }

    fn totp(&self, username: &str) -> Result<Totp, BadSecret> {
        let secret = Secret::try_from_base32(&self.0).map_err(|e| BadSecret(format!("{e:?}")))?;
        Builder::new()
            .with_algorithm(Algorithm::SHA1)
            .with_digits(6)
            .with_skew(1)
            .with_step_duration(30)
            .with_secret(secret)
            .with_issuer(Some(ISSUER))
            .with_account_name(username)
            .build()
            .map_err(|e| BadSecret(e.to_string()))
    }

    /// The `otpauth://` URI authenticator apps read from the QR code.
    pub fn otpauth_uri(&self, username: &str) -> Result<String, BadSecret> {
        self.totp(username)?
            .to_url()
            .map_err(|e| BadSecret(e.to_string()))
    }

    /// The QR code of [`TotpSecret::otpauth_uri`], drawn as SVG (no image crate, no script).
    pub fn qr_svg(&self, username: &str) -> Result<String, BadSecret> {
        let uri = self.otpauth_uri(username)?;
        let code = QrCode::new(uri.as_bytes()).map_err(|e| BadSecret(e.to_string()))?;
        Ok(code
            .render::<svg::Color<'_>>()
            .min_dimensions(200, 200)
            .quiet_zone(true)
            .build())
    }

    /// The time step (`unix seconds / 30`) a code belongs to, if it is valid at `now_secs`
    /// (one step of skew either way). The caller accepts each step once.
    pub fn check(&self, code: &str, now_secs: i64) -> Option<i64> {
        let code: String = code.chars().filter(|c| !c.is_whitespace()).collect();
        if code.len() != 6 || !code.chars().all(|c| c.is_ascii_digit()) {
            return None;
        }
        let totp = self.totp("").ok()?;
        let now = u64::try_from(now_secs).ok()?;
        totp.check(&code, now)
            .and_then(|step| i64::try_from(step).ok())
    }

    /// The code an authenticator app shows at `now_secs`.
    pub fn code_at(&self, now_secs: i64) -> Result<String, BadSecret> {
        let now = u64::try_from(now_secs).map_err(|e| BadSecret(e.to_string()))?;
        Ok(self.totp("")?.generate(now).to_string())
    }
}

/// Recovery codes just made, handed to the one page view that shows them (they are never
/// stored in the clear).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FreshRecoveryCodes(pub Vec<String>);

/// The signed-in operator must enrol a second factor before anything else
/// (`CLAIMCHECK_REQUIRE_2FA`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MustEnrol;

/// Ten fresh recovery codes (`xxxxx-xxxxx`, lowercase base32).
pub fn new_recovery_codes() -> Result<Vec<String>, RandomError> {
    const ALPHABET: &[u8; 32] = b"abcdefghijklmnopqrstuvwxyz234567";
    (0..RECOVERY_CODES)
        .map(|_| {
            let mut bytes = [0u8; 10];
            crate::token::fill_random(&mut bytes)?;
            let chars: String = bytes
                .iter()
                .map(|b| char::from(ALPHABET[usize::from(b & 31)]))
                .collect();
            Ok(format!("{}-{}", &chars[..5], &chars[5..]))
        })
        .collect()
}

/// What is stored of a recovery code: case, spaces and dashes do not matter.
pub fn recovery_hash(code: &str) -> String {
    let normalized: String = code
        .chars()
        .filter(|c| c.is_ascii_alphanumeric())
        .map(|c| c.to_ascii_lowercase())
        .collect();
    Sha256::digest(normalized.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_match_rfc_6238() {
        // RFC 6238 appendix B, SHA-1, secret "12345678901234567890", 8 digits there: the
        // last six of 94287082 at T = 59.
        let secret = TotpSecret(Secret::new_stack(*b"12345678901234567890").to_base32());
        assert_eq!(secret.code_at(59).unwrap(), "287082");
        assert_eq!(secret.check("287082", 59), Some(1));
        assert_eq!(
            secret.check("287 082", 59 + 30),
            Some(1),
            "one step of skew"
        );
        assert_eq!(secret.check("287082", 59 + 90), None);
        assert_eq!(secret.check("28708", 59), None);
        assert_eq!(secret.check("abcdef", 59), None);
    }

    #[test]
    fn secrets_are_random_and_draw_a_qr_code() {
        let a = TotpSecret::generate().unwrap();
        let b = TotpSecret::generate().unwrap();
        assert_ne!(a, b);
        assert_eq!(a.as_base32().len(), 32);
        let uri = a.otpauth_uri("anna").unwrap();
        assert!(uri.starts_with("otpauth://totp/Claimcheck:anna?"), "{uri}");
        assert!(uri.contains(&format!("secret={}", a.as_base32())), "{uri}");
        let svg = a.qr_svg("anna").unwrap();
        assert!(svg.contains("<svg") && !svg.contains("<script"));
        assert!(!format!("{a:?}").contains(a.as_base32()));
    }

    #[test]
    fn recovery_codes_are_distinct_and_hashed_loosely() {
        let codes = new_recovery_codes().unwrap();
        assert_eq!(codes.len(), RECOVERY_CODES);
        let mut unique = codes.clone();
        unique.dedup();
        assert_eq!(unique.len(), RECOVERY_CODES);
        assert_eq!(recovery_hash("abcde-fghij"), recovery_hash(" ABCDE FGHIJ "));
        assert_ne!(recovery_hash("abcde-fghij"), recovery_hash("abcde-fghik"));
    }

    #[test]
    fn the_policy_says_who_needs_a_second_factor() {
        let admin: TwoFactorPolicy = "admin".parse().unwrap();
        assert!(admin.requires(Role::Admin));
        assert!(!admin.requires(Role::Support));
        assert!(
            "all"
                .parse::<TwoFactorPolicy>()
                .unwrap()
                .requires(Role::Viewer)
        );
        assert!(!TwoFactorPolicy::Off.requires(Role::Admin));
        assert!("sometimes".parse::<TwoFactorPolicy>().is_err());
    }
}
