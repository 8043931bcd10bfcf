//! Adding operators and changing their access.

use std::fmt;
use std::str::FromStr;

use super::{Actor, OpsError};
use crate::audit::{AuditAction, AuditRecord};
use crate::auth::{Role, hash_queued};
use crate::clock::now_ms;
use crate::store::Store;

/// An operator's sign-in name: 1 to 64 characters in Unicode's normal form (NFKC, so a
/// full-width "ａｄｍｉｎ" is "admin"), letters and digits of one script (UTS #39's
/// highly restrictive level: Latin may mix with Han, Kana or Hangul, never with Cyrillic or
/// Greek, so "аdmin" with a Cyrillic "а" is refused) and `.`, `-`, `_`, `@`, `+`; no spaces,
/// control or invisible characters.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Username(String);

/// The punctuation a username may hold besides letters and digits (an e-mail as a name).
const USERNAME_PUNCTUATION: &[char] = &['.', '-', '_', '@', '+'];

impl Username {
    pub fn parse(text: &str) -> Result<Username, OpsError> {
        use unicode_security::{
            GeneralSecurityProfile, RestrictionLevel, RestrictionLevelDetection,
        };

        let name = Username::normal_form(text);
        if name.is_empty() || name.chars().count() > 64 {
            return Err(OpsError::Invalid(
                "a username is 1 to 64 characters, no spaces".into(),
            ));
        }
        if crate::text::has_hidden_characters(&name, false)
            || !name
                .chars()
                .all(|c| USERNAME_PUNCTUATION.contains(&c) || c.identifier_allowed())
        {
            return Err(OpsError::Invalid(
                "a username holds letters, digits and . - _ @ + only: no spaces, symbols, \
                 control or invisible characters"
                    .into(),
            ));
        }
        let letters: String = name
            .chars()
            .filter(|c| !USERNAME_PUNCTUATION.contains(c))
            .collect();
        if !letters
            .as_str()
            .check_restriction_level(RestrictionLevel::HighlyRestrictive)
        {
            return Err(OpsError::Invalid(
                "a username is written in one script: letters of different alphabets that look \
                 alike (a Cyrillic а among Latin letters) are refused"
                    .into(),
            ));
        }
        Ok(Username(name))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// `text` as a name is looked up: trimmed, in Unicode's normal form (NFKC). Sign-in
    /// looks names up this way, so an operator types them as they like.
    pub fn normal_form(text: &str) -> String {
        use unicode_normalization::UnicodeNormalization;
        text.trim().nfkc().collect()
    }

    /// What the name looks like: UTS #39's confusable skeletons of it as written, in lower
    /// and in upper case. Two names look alike on screen when they share one ("admin" and
    /// "adrnin", "ADMIN" and "ADMlN", "admin" and "ADMlN" through "ADMIN").
    fn looks(&self) -> [String; 3] {
        let skeleton = |text: &str| unicode_security::skeleton(text).collect::<String>();
        [
            skeleton(&self.0),
            skeleton(&self.0.to_lowercase()),
            skeleton(&self.0.to_uppercase()),
        ]
    }

    /// Whether the two names could be taken for each other.
    fn looks_like(&self, other: &Username) -> bool {
        let theirs = other.looks();
        self.looks().iter().any(|look| theirs.contains(look))
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
    let existing = store.operators().list().await?;
    if let Some(other) = existing.iter().find(|op| {
        op.username != username.as_str() && username.looks_like(&Username(op.username.clone()))
    }) {
        return Err(OpsError::Invalid(format!(
            "'{username}' looks too much like the existing operator '{}': choose another name",
            other.username
        )));
    }
    let hash = hash_queued(password).await?;
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
        assert_eq!(
            Username::parse("anna.meier@shop.ch").unwrap().as_str(),
            "anna.meier@shop.ch"
        );
    }

    #[test]
    fn usernames_are_normalised_and_misleading_ones_refused() {
        // Full-width letters are the ASCII ones.
        assert_eq!(Username::parse("ａｄｍｉｎ").unwrap().as_str(), "admin");
        // A Cyrillic "а" among Latin letters; a right-to-left override; a zero-width space.
        for name in [
            "аdmin",
            "admin\u{202E}",
            "ad\u{200B}min",
            "admin\nINFO",
            "a<b>",
            "root;",
        ] {
            assert!(Username::parse(name).is_err(), "{name:?}");
        }
        // One script at a time is fine, and Latin with Han.
        for name in ["андрей", "zoë", "李明", "li李明", "hans-peter_2"] {
            assert!(Username::parse(name).is_ok(), "{name:?}");
        }
        let alike = |a: &str, b: &str| {
            Username::parse(a)
                .unwrap()
                .looks_like(&Username::parse(b).unwrap())
        };
        assert!(alike("admin", "adrnin"));
        assert!(alike("Admin", "admin"));
        assert!(alike("ADMlN", "admin"));
        assert!(alike("paypaI", "paypal"));
        assert!(!alike("admin", "anna"));
        assert!(!alike("anna", "hanna"));
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
