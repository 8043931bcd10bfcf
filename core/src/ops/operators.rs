//! Adding operators and changing their access.

use std::fmt;
use std::str::FromStr;

use super::{Actor, OpsError};
use crate::audit::{AuditAction, AuditRecord};
use crate::auth::{Role, hash_password};
use crate::clock::now_ms;
use crate::store::Store;

/// An operator's sign-in name: 1 to 64 characters, no whitespace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Username(String);

impl Username {
    pub fn parse(text: &str) -> Result<Username, OpsError> {
        let name = text.trim();
        if name.is_empty() || name.chars().count() > 64 || name.contains(char::is_whitespace) {
            return Err(OpsError::Invalid(
                "a username is 1 to 64 characters, no spaces".into(),
            ));
        }
        Ok(Username(name.to_owned()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for Username {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// What an admin changes about another operator's access.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AccessChange {
    Disable,
    Enable,
    Remove,
    /// Forget the authenticator and recovery codes: set up again at the next sign-in.
    ResetTwoFactor,
}

impl AccessChange {
    pub fn as_str(self) -> &'static str {
        match self {
            AccessChange::Disable => "disable",
            AccessChange::Enable => "enable",
            AccessChange::Remove => "remove",
            AccessChange::ResetTwoFactor => "reset-2fa",
        }
    }

    /// The audit log's name for it.
    fn audit_action(self) -> AuditAction {
        match self {
            AccessChange::Disable => AuditAction::OperatorDisable,
            AccessChange::Enable => AuditAction::OperatorEnable,
            AccessChange::Remove => AuditAction::OperatorRemove,
            AccessChange::ResetTwoFactor => AuditAction::OperatorResetTwoFactor,
        }
    }

    /// What was done, for the operator who asked.
    pub fn done(self) -> &'static str {
        match self {
            AccessChange::Disable => "disabled",
            AccessChange::Enable => "enabled",
            AccessChange::Remove => "removed",
            AccessChange::ResetTwoFactor => {
                "two-factor sign-in reset (set it up again after signing in)"
            }
        }
    }
}

impl FromStr for AccessChange {
    type Err = OpsError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        [
            AccessChange::Disable,
            AccessChange::Enable,
            AccessChange::Remove,
            AccessChange::ResetTwoFactor,
        ]
        .into_iter()
        .find(|change| change.as_str() == s)
        .ok_or_else(|| OpsError::Invalid(format!("unknown access change '{s}'")))
    }
}

/// Adds an operator with `password` (hashed off the async threads) and audits it.
pub async fn add_operator(
    store: &Store,
    actor: &Actor,
    username: &Username,
    role: Role,
    password: String,
) -> Result<(), OpsError> {
    let hash = tokio::task::spawn_blocking(move || hash_password(&password))
        .await
        .map_err(|e| OpsError::Invalid(format!("hashing the password failed: {e}")))??;
    if !store
        .operators()
        .add(username.as_str(), &hash, role, now_ms())
        .await?
    {
        return Err(OpsError::OperatorExists(username.to_string()));
    }
    store
        .audit()
        .record(
            &AuditRecord {
                actor,
                action: AuditAction::OperatorAdd,
                target: username.as_str(),
                reason: &format!("role {role}"),
                outcome: "done",
            },
            now_ms(),
        )
        .await?;
    Ok(())
}

/// Disables, enables, removes an operator or resets their second factor, and audits it. A
/// dashboard operator cannot change their own access (nobody locks themselves out).
pub async fn change_access(
    store: &Store,
    actor: &Actor,
    username: &Username,
    change: AccessChange,
) -> Result<(), OpsError> {
    if actor.operator() == Some(username.as_str()) {
        return Err(OpsError::SelfLockout);
    }
    let name = username.as_str();
    let done = match change {
        AccessChange::Disable => store.operators().set_disabled(name, true, now_ms()).await?,
        AccessChange::Enable => {
            store
                .operators()
                .set_disabled(name, false, now_ms())
                .await?
        }
        AccessChange::Remove => store.operators().remove(name).await?,
        AccessChange::ResetTwoFactor => store.operators().reset_two_factor(name).await?,
    };
    if !done {
        return Err(OpsError::NoOperator(username.to_string()));
    }
    store
        .audit()
        .record(
            &AuditRecord {
                actor,
                action: change.audit_action(),
                target: name,
                reason: "",
                outcome: "done",
            },
            now_ms(),
        )
        .await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn usernames_are_one_to_sixty_four_characters_without_spaces() {
        assert_eq!(Username::parse("  ana ").unwrap().as_str(), "ana");
        assert!(Username::parse("").is_err());
        assert!(Username::parse("a b").is_err());
        assert!(Username::parse(&"x".repeat(65)).is_err());
        assert!(Username::parse(&"ä".repeat(64)).is_ok());
    }

    #[test]
    fn access_changes_round_trip_through_their_names() {
        for change in [
            AccessChange::Disable,
            AccessChange::Enable,
            AccessChange::Remove,
            AccessChange::ResetTwoFactor,
        ] {
            assert_eq!(change.as_str().parse::<AccessChange>().unwrap(), change);
        }
        assert!("delete".parse::<AccessChange>().is_err());
    }
}
