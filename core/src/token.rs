//! API tokens for the shop's backend: `cct_<id>_<secret>`, 128 random bits of secret. Only a
//! SHA-256 of the whole token is stored; a token with that much entropy needs no slow hash.

use std::fmt;

use sha2::{Digest, Sha256};

/// A freshly made token: shown once, then only its hash is kept.
pub struct NewToken {
    pub token_id: String,
    pub token: String,
}

impl fmt::Debug for NewToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("NewToken")
            .field("token_id", &self.token_id)
            .finish_non_exhaustive()
    }
}

#[derive(Debug, thiserror::Error)]
#[error("the operating system's random source failed: {0}")]
pub struct RandomError(String);

/// Fills `buf` from the operating system's random source.
pub fn fill_random(buf: &mut [u8]) -> Result<(), RandomError> {
    getrandom::fill(buf).map_err(|e| RandomError(e.to_string()))
}

fn random_hex(bytes: usize) -> Result<String, RandomError> {
    let mut buf = vec![0u8; bytes];
    fill_random(&mut buf)?;
    Ok(hex(&buf))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// A random identifier with a prefix (`ord_…`), for orders the shop did not name.
pub fn random_id(prefix: &str) -> Result<String, RandomError> {
    Ok(format!("{prefix}_{}", random_hex(12)?))
}

/// A random identifier led by `at` (Unix ms, 12 hex digits, then 80 random bits): ids made
/// later sort later, so an index's new rows go to its last page instead of a random one (as
/// a UUIDv7 does), and a writer that inserts many at once dirties a few pages, not one each.
pub fn ordered_id(prefix: &str, at: i64) -> Result<String, RandomError> {
    let at = u64::try_from(at).unwrap_or_default() & 0xffff_ffff_ffff;
    Ok(format!("{prefix}_{at:012x}{}", random_hex(10)?))
}

impl NewToken {
    pub fn generate() -> Result<NewToken, RandomError> {
        let token_id = random_hex(6)?;
        let token = format!("cct_{token_id}_{}", random_hex(16)?);
        Ok(NewToken { token_id, token })
    }
}

/// The stored form of a token.
pub fn token_hash(token: &str) -> String {
    hex(&Sha256::digest(token.as_bytes()))
}

/// SHA-256 (hex) of anything, e.g. the parameters of an outgoing request.
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex(&Sha256::digest(bytes))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_distinct_prefixed_and_hash_stably() {
        let a = NewToken::generate().unwrap();
        let b = NewToken::generate().unwrap();
        assert_ne!(a.token, b.token);
        assert!(a.token.starts_with(&format!("cct_{}_", a.token_id)));
        assert_eq!(a.token.len(), 4 + 12 + 1 + 32);
        assert_eq!(token_hash(&a.token), token_hash(&a.token));
        assert_ne!(token_hash(&a.token), token_hash(&b.token));
        assert!(!format!("{a:?}").contains(&a.token));
    }

    #[test]
    fn ordered_ids_sort_by_their_instant_and_stay_distinct() {
        let at = 1_800_000_000_000;
        let (a, b, later) = (
            ordered_id("sp", at).unwrap(),
            ordered_id("sp", at).unwrap(),
            ordered_id("sp", at + 1).unwrap(),
        );
        assert_ne!(a, b);
        assert!(a < later && b < later);
        assert!(a.starts_with("sp_01a3185c5000"));
        assert_eq!(a.len(), 3 + 12 + 20);
    }
}
