//! API tokens, stored as hashes.

use serde::Serialize;

use super::Tokens;
use super::query::sql;
use crate::error::StoreError;
use crate::token::{NewToken, token_hash};

/// A token as listed: never the token itself.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, sqlx::FromRow)]
pub struct TokenView {
    pub token_id: String,
    pub name: String,
    pub created_at: i64,
    pub last_used_at: Option<i64>,
    pub revoked_at: Option<i64>,
}

/// How often a token's last use is written, at most.
const TOUCH_EVERY_MS: i64 = 60_000;

impl Tokens<'_> {
    /// Keeps `token` (its id and the hash of its secret, never the secret) under `name`.
    pub async fn insert(self, token: &NewToken, name: &str, now: i64) -> Result<(), StoreError> {
        const SQL: &str = "INSERT INTO api_tokens (token_id, name, token_hash, created_at) \
                           VALUES ($1, $2, $3, $4)";
        let hash = token_hash(&token.token);
        self.pool
            .on()
            .execute(
                sql(SQL)
                    .bind(&token.token_id)
                    .bind(name)
                    .bind(&hash)
                    .bind(now),
            )
            .await
            .map(|_| ())?;
        Ok(())
    }

    /// The live token with this hash, if any; its last use is updated at most once a minute.
    pub async fn authenticate(
        self,
        token_hash: &str,
        now: i64,
    ) -> Result<Option<TokenView>, StoreError> {
        const SQL: &str = "SELECT token_id, name, created_at, last_used_at, revoked_at \
                           FROM api_tokens WHERE token_hash = $1 AND revoked_at IS NULL";
        const TOUCH: &str = "UPDATE api_tokens SET last_used_at = $2 \
                             WHERE token_id = $1 AND (last_used_at IS NULL OR last_used_at < $3)";
        let token: Option<TokenView> = self.pool.on().optional(sql(SQL).bind(token_hash)).await?;
        // A token in use is read on every request and written at most once a minute: the
        // write is skipped when the row read shows a recent use (on SQLite every UPDATE, even
        // one that matches nothing, waits for the database's one writer). Two requests that
        // both read a stale time both send it; the condition lets only the first write.
        let stale_before = now - TOUCH_EVERY_MS;
        if let Some(token) = token
            .as_ref()
            .filter(|token| token.last_used_at.is_none_or(|used| used < stale_before))
        {
            self.pool
                .on()
                .execute(
                    sql(TOUCH)
                        .bind(token.token_id.as_str())
                        .bind(now)
                        .bind(stale_before),
                )
                .await
                .map(|_| ())?;
        }
        Ok(token)
    }

    pub async fn list(self) -> Result<Vec<TokenView>, StoreError> {
        const SQL: &str = "SELECT token_id, name, created_at, last_used_at, revoked_at \
                           FROM api_tokens ORDER BY created_at, token_id";
        let tokens = self.pool.on().all(sql(SQL)).await?;
        Ok(tokens)
    }

    /// Revokes a token; `false` if no live token has this id.
    pub async fn revoke(self, token_id: &str, now: i64) -> Result<bool, StoreError> {
        const SQL: &str = "UPDATE api_tokens SET revoked_at = $2 \
                           WHERE token_id = $1 AND revoked_at IS NULL";
        let n = self
            .pool
            .on()
            .execute(sql(SQL).bind(token_id).bind(now))
            .await?;
        Ok(n == 1)
    }
}
