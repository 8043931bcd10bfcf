//! What operators do, each written once: validate, act, audit. The CLI, the dashboard's
//! actions and the server functions are thin adapters over these functions. Re-drive
//! ([`crate::worker::Worker::redrive`]) and refund ([`crate::payments::refund`]) follow the
//! same shape where they live; bulk re-drive ([`bulk_redrive`]) runs each claim through
//! the single re-drive's compare-and-set.

pub mod bulk_redrive;
mod operators;
mod reconcile;
mod resolve;
mod tokens;

pub use operators::{AccessChange, Username, add_operator, change_access};
pub use reconcile::reconcile_now;
pub use resolve::{ResolveRefused, reopen_claim, resolve_claim};
pub use tokens::{TokenName, create_token, revoke_token};

pub use crate::audit::Actor;

use crate::auth::PasswordError;
use crate::error::StoreError;

/// Why an operator action was not done. The text is for the operator who asked.
#[derive(Debug, thiserror::Error)]
pub enum OpsError {
    #[error("{0}")]
    Invalid(String),
    #[error("no operator {0}")]
    NoOperator(String),
    #[error("operator {0} exists already")]
    OperatorExists(String),
    #[error("you cannot lock yourself out")]
    SelfLockout,
    #[error("no live token with id {0}")]
    NoToken(String),
    #[error(transparent)]
    Password(#[from] PasswordError),
    #[error("no randomness for a new secret: {0}")]
    Random(String),
    #[error("the database is unavailable")]
    Store(#[from] StoreError),
}
