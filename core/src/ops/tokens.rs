//! API tokens for the order API: made and revoked by admins, each audited.

use super::{Actor, OpsError};
use crate::audit::{AuditAction, AuditRecord};
use crate::clock::now_ms;
use crate::store::Store;
use crate::token::NewToken;

/// What a token is for (the shop's backend it was given to): 1 to 100 characters.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TokenName(String);

impl TokenName {
    pub fn parse(text: &str) -> Result<TokenName, OpsError> {
        let name = text.trim();
        if name.is_empty() || name.chars().count() > 100 {
            return Err(OpsError::Invalid(
                "a token's name is 1 to 100 characters".into(),
            ));
        }
        Ok(TokenName(name.to_owned()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// Makes a token; its secret is in the result and nowhere else (only its hash is stored).
pub async fn create_token(
    store: &Store,
    actor: &Actor,
    name: &TokenName,
) -> Result<NewToken, OpsError> {
    let token = NewToken::generate().map_err(|e| OpsError::Random(e.to_string()))?;
    store
        .tokens()
        .insert(&token, name.as_str(), now_ms())
        .await?;
    store
        .audit()
        .record(
            &AuditRecord {
                actor,
                action: AuditAction::TokenCreate,
                target: &token.token_id,
                reason: name.as_str(),
                outcome: "done",
            },
            now_ms(),
        )
        .await?;
    Ok(token)
}

/// Revokes a live token: requests carrying it are refused from now on.
pub async fn revoke_token(store: &Store, actor: &Actor, token_id: &str) -> Result<(), OpsError> {
    let token_id = token_id.trim();
    if !store.tokens().revoke(token_id, now_ms()).await? {
        return Err(OpsError::NoToken(token_id.to_owned()));
    }
    store
        .audit()
        .record(
            &AuditRecord {
                actor,
                action: AuditAction::TokenRevoke,
                target: token_id,
                reason: "",
                outcome: "done",
            },
            now_ms(),
        )
        .await?;
    Ok(())
}
