//! Operators of the dashboard: roles (shared with the browser), and argon2id password hashes
//! (with the storage).

#[cfg(feature = "store")]
mod password;

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

#[cfg(feature = "store")]
pub use password::{
    MAX_PASSWORD_CHARS, MIN_PASSWORD_CHARS, PasswordError, hash_password, hash_queued,
    verify_password, verify_queued,
};

/// What an operator may do. Ordered: each role can do what the ones before it can.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// Reads everything.
    Viewer,
    /// Also re-drives stuck claims, acknowledges and snoozes alerts.
    Support,
    /// Also refunds orders, resolves alerts by hand and manages operators.
    Admin,
}

impl Role {
    /// Every role, least to most.
    pub const ALL: [Role; 3] = [Role::Viewer, Role::Support, Role::Admin];

    pub fn as_str(self) -> &'static str {
        match self {
            Role::Viewer => "viewer",
            Role::Support => "support",
            Role::Admin => "admin",
        }
    }

    /// Whether this role may do what `needed` may. The one place the role order is
    /// decided: the dashboard's actions, its pages and the server functions all ask here.
    pub fn allows(self, needed: Role) -> bool {
        self >= needed
    }

    /// May re-drive stuck claims.
    pub fn can_redrive(self) -> bool {
        self.allows(Role::Support)
    }

    /// May refund orders, reconcile and manage operators.
    pub fn can_administer(self) -> bool {
        self.allows(Role::Admin)
    }
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Role {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Role::ALL
            .into_iter()
            .find(|role| role.as_str() == s)
            .ok_or_else(|| format!("unknown role '{s}' (viewer, support or admin)"))
    }
}

/// The operator behind a dashboard request, once the session is checked.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SignedIn {
    pub username: String,
    pub role: Role,
    /// Their language, if they chose one (else the browser's).
    pub language: Option<crate::language::Language>,
    /// Their time zone (IANA name), if they chose one (else Europe/Zurich).
    pub time_zone: Option<String>,
}

/// Why a request was refused before it did anything.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AccessRefused {
    /// Nobody is signed in.
    SignIn,
    /// Signed in, with too small a role.
    Role { needed: Role, have: Role },
}

/// The operator of a request, if one is signed in with at least `needed`: the one guard
/// every dashboard entry point (pages' server functions, form actions) asks.
pub fn require(operator: Option<&SignedIn>, needed: Role) -> Result<&SignedIn, AccessRefused> {
    match operator {
        None => Err(AccessRefused::SignIn),
        Some(op) if !op.role.allows(needed) => Err(AccessRefused::Role {
            needed,
            have: op.role,
        }),
        Some(op) => Ok(op),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roles_are_ordered() {
        assert!(Role::Admin.allows(Role::Support));
        assert!(Role::Support.allows(Role::Viewer));
        assert!(!Role::Viewer.allows(Role::Support));
        assert_eq!("support".parse::<Role>().unwrap(), Role::Support);
        assert!("root".parse::<Role>().is_err());
    }
}
