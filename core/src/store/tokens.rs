//! API tokens, stored as hashes.

use std::collections::HashSet;

use serde::Serialize;

use super::Tokens;
use super::query::{Arg, Sql, Tx, sql};
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

/// Of `hashes`, those of live tokens, looked up inside `tx` with one statement (a write's
/// batch checks its callers' tokens in its own transaction, without a round trip each);
/// their last use is written as [`Tokens::authenticate`] writes it. On PostgreSQL the same
/// statement takes the transaction's advisory locks on `locks` (in their order, before any
/// later statement of the transaction runs; SQLite's one writer already is the lock).
pub(super) async fn live_in(
    tx: &mut Tx,
    hashes: &[&str],
    locks: &[&str],
    now: i64,
) -> Result<HashSet<String>, StoreError> {
    let rows: Vec<(Option<String>, Option<String>, Option<i64>)> = match tx {
        // A function scan yields its rows in the array's order; the count reads every lock
        // taken, and the one row of `locked` is kept by the outer join whether any token
        // matches or not, so the locks are taken before the statement ends.
        Tx::Postgres(_) if !locks.is_empty() => {
            const SQL: &str = "WITH locked AS (SELECT COUNT(l.locked) AS n FROM \
                 (SELECT pg_advisory_xact_lock(hashtextextended(c.e, 0)) AS locked \
                  FROM unnest($2::text[]) WITH ORDINALITY AS c(e, n)) l) \
                 SELECT t.token_hash, t.token_id, t.last_used_at FROM locked \
                 LEFT JOIN api_tokens t \
                 ON t.token_hash = ANY($1::text[]) AND t.revoked_at IS NULL";
            let query = sql(SQL).bind(Arg::list(hashes)).bind(Arg::list(locks));
            tx.on().all(query).await?
        }
        _ if hashes.is_empty() => Vec::new(),
        _ => {
            let statement = format!(
                "SELECT token_hash, token_id, last_used_at FROM api_tokens \
                 WHERE {} AND revoked_at IS NULL",
                tx.in_list("token_hash", "$1")
            );
            tx.on().all(sql(statement).bind(Arg::list(hashes))).await?
        }
    };
    let mut live = HashSet::with_capacity(rows.len());
    for (hash, token_id, last_used_at) in rows {
        let (Some(hash), Some(token_id)) = (hash, token_id) else {
            continue;
        };
        if stale(last_used_at, now) {
            tx.on().execute(touch(&token_id, now)).await?;
        }
        live.insert(hash);
    }
    Ok(live)
}
