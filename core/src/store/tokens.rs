//! API tokens, stored as hashes.

use std::collections::HashSet;

use serde::Serialize;

use super::Tokens;
use super::query::{Sql, Tx, sql};
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
        let token: Option<TokenView> = self.pool.on().optional(sql(SQL).bind(token_hash)).await?;
        if let Some(token) = token
            .as_ref()
            .filter(|token| stale(token.last_used_at, now))
        {
            self.pool
                .on()
                .execute(touch(&token.token_id, now))
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

/// A token in use is read on every request and its last use written at most once a minute:
/// the write is skipped when the row read shows a recent use (on SQLite every UPDATE, even one
/// that matches nothing, waits for the database's one writer). Two requests that both read a
/// stale time both send it; the statement's condition lets only the first write.
fn stale(last_used_at: Option<i64>, now: i64) -> bool {
    last_used_at.is_none_or(|used| used < now - TOUCH_EVERY_MS)
}

fn touch(token_id: &str, now: i64) -> Sql<'_> {
    const TOUCH: &str = "UPDATE api_tokens SET last_used_at = $2 \
                         WHERE token_id = $1 AND (last_used_at IS NULL OR last_used_at < $3)";
    sql(TOUCH)
        .bind(token_id)
        .bind(now)
        .bind(now - TOUCH_EVERY_MS)
}

/// The live tokens among the hashes in `param` (read with [`Tx::in_list`]): hash, id, last
/// use. A write's batch reads its callers' tokens with its accounts, in its own transaction,
/// without a round trip of their own ([`live`] then tells which are live).
pub(super) fn live_sql(tx: &Tx, param: &str) -> String {
    format!(
        "SELECT token_hash, token_id, last_used_at FROM api_tokens \
         WHERE {} AND revoked_at IS NULL",
        tx.in_list("token_hash", param)
    )
}

/// A token [`live_sql`] found.
pub(super) struct LiveToken {
    pub(super) hash: String,
    pub(super) token_id: String,
    pub(super) last_used_at: Option<i64>,
}

/// The hashes of `found`, their last use written inside `tx` as [`Tokens::authenticate`]
/// writes it.
pub(super) async fn live(
    tx: &mut Tx,
    found: Vec<LiveToken>,
    now: i64,
) -> Result<HashSet<String>, StoreError> {
    let mut live = HashSet::with_capacity(found.len());
    for token in found {
        if stale(token.last_used_at, now) {
            tx.on().execute(touch(&token.token_id, now)).await?;
        }
        live.insert(token.hash);
    }
    Ok(live)
}
