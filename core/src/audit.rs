//! The audit log's vocabulary: who did what to which target, why, and what came of it.

use std::fmt;

/// Who asked, as the audit log names them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Actor {
    /// A command run on the server's machine, by this OS user.
    Cli(String),
    /// A signed-in dashboard operator.
    Dashboard(String),
    /// The shop's backend, through the order API with this API token (its public id).
    Api(String),
}

impl Actor {
    /// The OS user running this command (`$USER`, else `unknown`).
    pub fn cli() -> Actor {
        Actor::Cli(std::env::var("USER").unwrap_or_else(|_| "unknown".into()))
    }

    /// The actor named `name` as [`Actor`]'s `Display` writes it (`cli:…`, `dashboard:…`); a
    /// name without either prefix is taken as a command's.
    pub fn named(name: &str) -> Actor {
        if let Some(username) = name.strip_prefix("dashboard:") {
            Actor::Dashboard(username.to_owned())
        } else if let Some(token) = name.strip_prefix("api:") {
            Actor::Api(token.to_owned())
        } else {
            Actor::Cli(name.strip_prefix("cli:").unwrap_or(name).to_owned())
        }
    }

    /// The dashboard operator, if it is one.
    pub fn operator(&self) -> Option<&str> {
        match self {
            Actor::Dashboard(username) => Some(username),
            Actor::Cli(_) | Actor::Api(_) => None,
        }
    }
}

impl fmt::Display for Actor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Actor::Cli(user) => write!(f, "cli:{user}"),
            Actor::Dashboard(username) => write!(f, "dashboard:{username}"),
            Actor::Api(token) => write!(f, "api:{token}"),
        }
    }
}

/// The longest reason an operator may give: enough for a sentence or two and a ticket link,
/// not a document in the audit log.
pub const MAX_REASON_CHARS: usize = 1000;

/// Why a reason given for an audited action is not taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum ReasonError {
    #[error("a reason is required")]
    Missing,
    #[error("a reason has at most {max} characters")]
    TooLong { max: usize },
}

/// The reason given for an audited action, as it is kept: trimmed, not empty, at most
/// [`MAX_REASON_CHARS`] characters. Every action that asks for a reason checks it here.
pub fn reason(text: &str) -> Result<&str, ReasonError> {
    let text = text.trim();
    if text.is_empty() {
        Err(ReasonError::Missing)
    } else if text.chars().count() > MAX_REASON_CHARS {
        Err(ReasonError::TooLong {
            max: MAX_REASON_CHARS,
        })
    } else {
        Ok(text)
    }
}

/// What an audited action was; its name is what the `action` column holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AuditAction {
    OperatorAdd,
    OperatorDisable,
    OperatorEnable,
    OperatorRemove,
    OperatorResetTwoFactor,
    TwoFactorEnrol,
    TokenCreate,
    TokenRevoke,
    Redrive,
    BulkRedrive,
    BulkRedriveCancel,
    BulkRedriveResume,
    Refund,
    Reconcile,
    ClaimResolve,
    ClaimReopen,
    AlertAcknowledge,
    AlertSnooze,
    AlertResolve,
    CreditAdjust,
    SubscriptionCancel,
}

impl AuditAction {
    pub fn as_str(self) -> &'static str {
        match self {
            AuditAction::OperatorAdd => "operator_add",
            AuditAction::OperatorDisable => "operator_disable",
            AuditAction::OperatorEnable => "operator_enable",
            AuditAction::OperatorRemove => "operator_remove",
            AuditAction::OperatorResetTwoFactor => "operator_reset_2fa",
            AuditAction::TwoFactorEnrol => "two_factor_enrol",
            AuditAction::TokenCreate => "token_create",
            AuditAction::TokenRevoke => "token_revoke",
            AuditAction::Redrive => "redrive",
            AuditAction::BulkRedrive => "bulk_redrive",
            AuditAction::BulkRedriveCancel => "bulk_redrive_cancel",
            AuditAction::BulkRedriveResume => "bulk_redrive_resume",
            AuditAction::Refund => "refund",
            AuditAction::Reconcile => "reconcile",
            AuditAction::ClaimResolve => "claim_resolve",
            AuditAction::ClaimReopen => "claim_reopen",
            AuditAction::AlertAcknowledge => "alert_acknowledge",
            AuditAction::AlertSnooze => "alert_snooze",
            AuditAction::AlertResolve => "alert_resolve",
            AuditAction::CreditAdjust => "credit_adjust",
            AuditAction::SubscriptionCancel => "subscription_cancel",
        }
    }
}

/// One entry to append to the audit log; named fields, so no two of them can be swapped
/// unnoticed.
#[derive(Debug, Clone, Copy)]
pub struct AuditRecord<'a> {
    pub actor: &'a Actor,
    pub action: AuditAction,
    /// What it was done to: an event id, an order id, an operator, a token id.
    pub target: &'a str,
    /// Why, in the operator's words (may be empty where none is asked for).
    pub reason: &'a str,
    pub outcome: &'a str,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn actors_read_back_as_they_are_written() {
        for actor in [
            Actor::Cli("root".into()),
            Actor::Dashboard("ada".into()),
            Actor::Api("cct_4f2a".into()),
        ] {
            assert_eq!(Actor::named(&actor.to_string()), actor);
        }
        assert_eq!(Actor::named("bench"), Actor::Cli("bench".into()));
    }

    #[test]
    fn reasons_are_required_trimmed_and_bounded() {
        assert_eq!(reason("  customer called  "), Ok("customer called"));
        assert_eq!(reason(" \n "), Err(ReasonError::Missing));
        assert_eq!(
            reason(&"é".repeat(MAX_REASON_CHARS)).map(str::len),
            Ok(2 * MAX_REASON_CHARS)
        );
        assert_eq!(
            reason(&"x".repeat(MAX_REASON_CHARS + 1)),
            Err(ReasonError::TooLong {
                max: MAX_REASON_CHARS
            })
        );
    }

    #[test]
    fn actors_are_named_as_the_audit_log_shows_them() {
        assert_eq!(Actor::Cli("ops".into()).to_string(), "cli:ops");
        assert_eq!(Actor::Dashboard("ana".into()).to_string(), "dashboard:ana");
        assert_eq!(Actor::Dashboard("ana".into()).operator(), Some("ana"));
        assert_eq!(Actor::Cli("ops".into()).operator(), None);
    }
}
