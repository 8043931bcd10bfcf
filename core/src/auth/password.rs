//! argon2id password hashes for operators.

use argon2::password_hash::rand_core::OsRng;
use argon2::password_hash::{PasswordHash, PasswordHasher, PasswordVerifier, SaltString};
use argon2::{Algorithm, Argon2, Params, Version};

#[derive(Debug, thiserror::Error)]
pub enum PasswordError {
    #[error("a password needs at least {min} characters")]
    TooShort { min: usize },
    #[error("cannot hash the password: {0}")]
    Hash(String),
}

pub const MIN_PASSWORD_CHARS: usize = 12;

/// argon2id with OWASP's recommended minimum: 19 MiB of memory, 2 passes, 1 lane.
fn hasher() -> Argon2<'static> {
    let params = Params::new(19 * 1024, 2, 1, None).unwrap_or_default();
    Argon2::new(Algorithm::Argon2id, Version::V0x13, params)
}

/// A PHC string (`$argon2id$v=19$m=19456,t=2,p=1$…`) for a new password. CPU-heavy: call it
/// off the async runtime's threads.
pub fn hash_password(password: &str) -> Result<String, PasswordError> {
    if password.chars().count() < MIN_PASSWORD_CHARS {
        return Err(PasswordError::TooShort {
            min: MIN_PASSWORD_CHARS,
        });
    }
    let salt = SaltString::generate(&mut OsRng);
    hasher()
        .hash_password(password.as_bytes(), &salt)
        .map(|hash| hash.to_string())
        .map_err(|e| PasswordError::Hash(e.to_string()))
}

/// A hash nobody's password matches, checked for unknown usernames so that they take as long
/// as a wrong password.
const DECOY_HASH: &str = "$argon2id$v=19$m=19456,t=2,p=1$c2FsdHNhbHRzYWx0c2FsdA$\
    m3OV3ciB0kexLHEoySvP5YSrvF3sRKeLq/lVkpb8J4g";

/// Whether `password` matches `hash` (`None`: no such user; the decoy is checked instead, so
/// both take the same time). CPU-heavy, like [`hash_password`].
pub fn verify_password(password: &str, hash: Option<&str>) -> bool {
    let candidate = hash.unwrap_or(DECOY_HASH);
    let matches = PasswordHash::new(candidate)
        .map(|parsed| {
            hasher()
                .verify_password(password.as_bytes(), &parsed)
                .is_ok()
        })
        .unwrap_or(false);
    matches && hash.is_some()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hashes_are_argon2id_with_owasp_parameters_and_verify() {
        let hash = hash_password("correct horse battery").unwrap();
        assert!(
            hash.starts_with("$argon2id$v=19$m=19456,t=2,p=1$"),
            "{hash}"
        );
        assert!(verify_password("correct horse battery", Some(&hash)));
        assert!(!verify_password("wrong horse battery", Some(&hash)));
        assert!(!verify_password("correct horse battery", None));
        assert_ne!(hash, hash_password("correct horse battery").unwrap());
        assert!(matches!(
            hash_password("short"),
            Err(PasswordError::TooShort { .. })
        ));
    }

    #[test]
    fn the_decoy_parses_so_unknown_users_cost_a_full_check() {
        assert!(PasswordHash::new(DECOY_HASH).is_ok());
    }
}
