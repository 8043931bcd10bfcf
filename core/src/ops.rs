//! What operators do, each written once: validate, act, audit. The CLI, the dashboard's
//! actions and the server functions are thin adapters over these functions. Re-drive
//! ([`crate::worker::Worker::redrive`]) and refund ([`crate::payments::refund`]) follow the
//! same shape where they live.

mod operators;
mod reconcile;
mod tokens;

use std::fmt;

pub use operators::{AccessChange, Username, add_operator, change_access};
pub use reconcile::reconcile_now;
pub use tokens::{TokenName, create_token, revoke_token};

use crate::auth::PasswordError;
use crate::error::StoreError;

/// Who asked, as the audit log names them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Actor {
    /// A command run on the server's machine, by this OS user.
    Cli(String),
    /// A signed-in dashboard operator.
    Dashboard(String),
}

impl Actor {
    /// The OS user running this command (`$USER`, else `unknown`).
    pub fn cli() -> Actor {
        Actor::Cli(std::env::var("USER").unwrap_or_else(|_| "unknown".into()))
    }

    /// The dashboard operator, if it is one.
    pub fn operator(&self) -> Option<&str> {
        match self {
            Actor::Dashboard(username) => Some(username),
            Actor::Cli(_) => None,
        }
    }
}

impl fmt::Display for Actor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Actor::Cli(user) => write!(f, "cli:{user}"),
            Actor::Dashboard(username) => write!(f, "dashboard:{username}"),
        }
    }
}

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn actors_are_named_as_the_audit_log_shows_them() {
        assert_eq!(Actor::Cli("ops".into()).to_string(), "cli:ops");
        assert_eq!(Actor::Dashboard("ana".into()).to_string(), "dashboard:ana");
        assert_eq!(Actor::Dashboard("ana".into()).operator(), Some("ana"));
        assert_eq!(Actor::Cli("ops".into()).operator(), None);
    }
}
