//! The audit log's vocabulary: who did what to which target, why, and what came of it.

use std::fmt;

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
    fn actors_are_named_as_the_audit_log_shows_them() {
        assert_eq!(Actor::Cli("ops".into()).to_string(), "cli:ops");
        assert_eq!(Actor::Dashboard("ana".into()).to_string(), "dashboard:ana");
        assert_eq!(Actor::Dashboard("ana".into()).operator(), Some("ana"));
        assert_eq!(Actor::Cli("ops".into()).operator(), None);
    }
}
