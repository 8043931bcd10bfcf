//! argon2id password hashes for operators, and the limit on how many are computed at once:
//! each takes 19 MiB and a core for a while, so a burst of sign-ins (64 wrong passwords at
//! once) must queue on a few threads of its own, not take the memory.

use std::cell::RefCell;

use argon2::password_hash::rand_core::OsRng;
use argon2::password_hash::{Output, ParamsString, PasswordHash, SaltString};
use argon2::{Algorithm, Argon2, Block, Params, Version};

#[derive(Debug, thiserror::Error)]
pub enum PasswordError {
    #[error("a password needs at least {min} characters")]
    TooShort { min: usize },
    #[error("a password has at most {max} characters")]
    TooLong { max: usize },
    #[error("cannot hash the password: {0}")]
    Hash(String),
}

pub const MIN_PASSWORD_CHARS: usize = 12;
/// Longer passwords are refused at creation and at sign-in alike (before any hashing), so an
/// operator can never be given a password they cannot sign in with.
pub const MAX_PASSWORD_CHARS: usize = 1024;

/// The threads that compute hashes: one per core (at most four), started on first use, for
/// the life of the process. A fixed few threads bound the memory as well as the work: each
/// keeps one workspace ([`WORKSPACE`]), where hashes on a pool of blocking threads left
/// several hashes' worth of freed memory in each thread's allocator arena (a burst of 64
/// wrong passwords: 440 MB).
fn hashers() -> &'static std::sync::mpsc::Sender<Box<dyn FnOnce() + Send>> {
    static HASHERS: std::sync::OnceLock<std::sync::mpsc::Sender<Box<dyn FnOnce() + Send>>> =
        std::sync::OnceLock::new();
    HASHERS.get_or_init(|| {
        let (jobs, queue) = std::sync::mpsc::channel::<Box<dyn FnOnce() + Send>>();
        let queue = std::sync::Arc::new(std::sync::Mutex::new(queue));
        // One per core, at most four: each keeps its 19 MiB workspace for good.
        let cores = std::thread::available_parallelism().map_or(1, usize::from);
        for i in 0..cores.clamp(1, 4) {
            let queue = std::sync::Arc::clone(&queue);
            let started = std::thread::Builder::new()
                .name(format!("password-hash-{i}"))
                .spawn(move || {
                    loop {
                        let job = match queue.lock() {
                            Ok(queue) => queue.recv(),
                            Err(poisoned) => poisoned.into_inner().recv(),
                        };
                        match job {
                            // A job that panics must not take its thread along: the answer
                            // is dropped (the caller sees no match) and the next job runs.
                            Ok(job) => {
                                let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(job));
                            }
                            Err(_) => return,
                        }
                    }
                });
            if let Err(error) = started {
                tracing::error!(%error, "cannot start a password hashing thread");
            }
        }
        jobs
    })
}

/// Runs `work` on one of the hashing threads, in turn with the hashes already queued;
/// `None` if no hashing thread could run it.
async fn limited<T: Send + 'static>(work: impl FnOnce() -> T + Send + 'static) -> Option<T> {
    let (answer, answered) = tokio::sync::oneshot::channel();
    hashers()
        .send(Box::new(move || {
            let _ = answer.send(work());
        }))
        .ok()?;
    answered.await.ok()
}

/// [`hash_password`] off the async threads, queued behind the hashes already running.
pub async fn hash_queued(password: String) -> Result<String, PasswordError> {
    limited(move || hash_password(&password))
        .await
        .unwrap_or_else(|| {
            Err(PasswordError::Hash(
                "the hashing task did not finish".into(),
            ))
        })
}

/// [`verify_password`] off the async threads, queued behind the hashes already running. A
/// password over [`MAX_PASSWORD_CHARS`] matches nothing and is not hashed at all.
pub async fn verify_queued(password: String, hash: Option<String>) -> bool {
    if password.chars().count() > MAX_PASSWORD_CHARS {
        return false;
    }
    limited(move || verify_password(&password, hash.as_deref()))
        .await
        .unwrap_or(false)
}

/// argon2id with OWASP's recommended minimum: 19 MiB of memory, 2 passes, 1 lane.
fn hasher() -> Argon2<'static> {
    let params = Params::new(19 * 1024, 2, 1, None).unwrap_or_default();
    Argon2::new(Algorithm::Argon2id, Version::V0x13, params)
}

thread_local! {
    /// Argon2's 19 MiB of working memory, kept by each thread that hashes and reused for
    /// every hash it computes: the memory a burst of sign-ins can take is one workspace per
    /// hashing thread, allocated once, whatever the allocator would make of 19 MiB allocated
    /// and freed again and again.
    static WORKSPACE: RefCell<Vec<Block>> = const { RefCell::new(Vec::new()) };
}

/// Hashes `password` with `argon` into `out`, in this thread's workspace. A hash stored with
/// more memory than ours (not one we made) gets memory of its own for the one computation.
fn compute(argon: &Argon2<'_>, password: &[u8], salt: &[u8], out: &mut [u8]) -> bool {
    let need = argon.params().block_count();
    if need > hasher().params().block_count() {
        let mut blocks = vec![Block::default(); need];
        return argon
            .hash_password_into_with_memory(password, salt, out, &mut blocks[..])
            .is_ok();
    }
    WORKSPACE.with_borrow_mut(|blocks| {
        if blocks.len() < need {
            blocks.resize(need, Block::default());
        }
        argon
            .hash_password_into_with_memory(password, salt, out, &mut blocks[..need])
            .is_ok()
    })
}

/// A PHC string (`$argon2id$v=19$m=19456,t=2,p=1$…`) for a new password. CPU-heavy: call it
/// off the async runtime's threads ([`hash_queued`]).
pub fn hash_password(password: &str) -> Result<String, PasswordError> {
    let chars = password.chars().count();
    if chars < MIN_PASSWORD_CHARS {
        return Err(PasswordError::TooShort {
            min: MIN_PASSWORD_CHARS,
        });
    }
    if chars > MAX_PASSWORD_CHARS {
        return Err(PasswordError::TooLong {
            max: MAX_PASSWORD_CHARS,
        });
    }
    let failed = |e: &dyn std::fmt::Display| PasswordError::Hash(e.to_string());
    let salt = SaltString::generate(&mut OsRng);
    let mut salt_bytes = [0u8; 64];
    let salt_bytes = salt.decode_b64(&mut salt_bytes).map_err(|e| failed(&e))?;
    let argon = hasher();
    let mut out = [0u8; Params::DEFAULT_OUTPUT_LEN];
    if !compute(&argon, password.as_bytes(), salt_bytes, &mut out) {
        return Err(PasswordError::Hash("argon2 refused its input".into()));
    }
    let phc = PasswordHash {
        algorithm: Algorithm::Argon2id.ident(),
        version: Some(Version::V0x13.into()),
        params: ParamsString::try_from(argon.params()).map_err(|e| failed(&e))?,
        salt: Some(salt.as_salt()),
        hash: Some(Output::new(&out).map_err(|e| failed(&e))?),
    };
    Ok(phc.to_string())
}

/// A hash nobody's password matches, checked for unknown usernames so that they take as long
/// as a wrong password.
const DECOY_HASH: &str = "$argon2id$v=19$m=19456,t=2,p=1$c2FsdHNhbHRzYWx0c2FsdA$\
    m3OV3ciB0kexLHEoySvP5YSrvF3sRKeLq/lVkpb8J4g";

/// Whether `password` matches `hash` (`None`: no such user; the decoy is checked instead, so
/// both take the same time). CPU-heavy, like [`hash_password`]; the comparison is constant
/// time.
pub fn verify_password(password: &str, hash: Option<&str>) -> bool {
    let matches = || {
        let parsed = PasswordHash::new(hash.unwrap_or(DECOY_HASH)).ok()?;
        let (salt, expected) = (parsed.salt?, parsed.hash?);
        let algorithm = Algorithm::try_from(parsed.algorithm).ok()?;
        let version = match parsed.version {
            Some(version) => Version::try_from(version).ok()?,
            None => Version::default(),
        };
        let params = Params::try_from(&parsed).ok()?;
        let mut salt_bytes = [0u8; 64];
        let salt = salt.decode_b64(&mut salt_bytes).ok()?;
        let mut out = vec![0u8; expected.len()];
        let argon = Argon2::new(algorithm, version, params);
        compute(&argon, password.as_bytes(), salt, &mut out)
            .then(|| Output::new(&out).ok())
            .flatten()
            .map(|computed| computed == expected)
    };
    matches().unwrap_or(false) && hash.is_some()
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
        assert!(matches!(
            hash_password(&"x".repeat(MAX_PASSWORD_CHARS + 1)),
            Err(PasswordError::TooLong { .. })
        ));
        assert!(hash_password(&"x".repeat(MAX_PASSWORD_CHARS)).is_ok());
    }

    #[test]
    fn the_decoy_parses_so_unknown_users_cost_a_full_check() {
        assert!(PasswordHash::new(DECOY_HASH).is_ok());
    }

    #[test]
    fn hashes_are_those_of_the_argon2_crate_both_ways() {
        use argon2::password_hash::{PasswordHasher, PasswordVerifier};
        // Made by the crate's own hasher (as hashes were before the workspace): verified here.
        let salt = SaltString::generate(&mut OsRng);
        let theirs = hasher()
            .hash_password(b"correct horse battery", &salt)
            .unwrap()
            .to_string();
        assert!(verify_password("correct horse battery", Some(&theirs)));
        assert!(!verify_password("correct horse batterx", Some(&theirs)));
        // Made here: verified by the crate.
        let ours = hash_password("correct horse battery").unwrap();
        let parsed = PasswordHash::new(&ours).unwrap();
        assert!(
            hasher()
                .verify_password(b"correct horse battery", &parsed)
                .is_ok()
        );
        // Other parameters than ours (less memory, more passes) still verify.
        let light = Argon2::new(
            Algorithm::Argon2id,
            Version::V0x13,
            Params::new(8 * 1024, 3, 1, None).unwrap(),
        )
        .hash_password(b"correct horse battery", &salt)
        .unwrap()
        .to_string();
        assert!(verify_password("correct horse battery", Some(&light)));
        assert!(!verify_password(
            "correct horse battery",
            Some("$argon2id$garbage")
        ));
    }
}
