//! Dashboard operators, their sessions, and the audit log as operators read it.

use serde::Serialize;

use super::{BeginWrite, Store};
use crate::auth::Role;
use crate::error::StoreError;

/// An operator as the dashboard and CLI show it: never the hash.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct OperatorView {
    pub username: String,
    pub role: Role,
    pub created_at: i64,
    pub disabled_at: Option<i64>,
}

/// An operator with the hash, for checking a password.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OperatorCredentials {
    pub operator: OperatorView,
    pub password_hash: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, sqlx::FromRow)]
pub struct AuditEntry {
    pub id: i64,
    pub at: i64,
    pub actor: String,
    pub action: String,
    pub target: String,
    pub reason: String,
    pub outcome: String,
}

type OperatorRow = (String, String, String, i64, Option<i64>);

fn operator_row(row: OperatorRow) -> Result<OperatorCredentials, StoreError> {
    let (username, password_hash, role, created_at, disabled_at) = row;
    Ok(OperatorCredentials {
        operator: OperatorView {
            role: role.parse().map_err(StoreError::Corrupt)?,
            username,
            created_at,
            disabled_at,
        },
        password_hash,
    })
}

const OPERATOR_COLUMNS: &str = "username, password_hash, role, created_at, disabled_at";

const DELETE_SESSIONS_OF: &str = "DELETE FROM dashboard_sessions WHERE username = $1";

impl Store {
    /// Adds an operator; `false` if the username is taken.
    pub async fn add_operator(
        &self,
        username: &str,
        password_hash: &str,
        role: Role,
        now: i64,
    ) -> Result<bool, StoreError> {
        const SQL: &str = "INSERT INTO operators (username, password_hash, role, created_at) \
                           VALUES ($1, $2, $3, $4) ON CONFLICT (username) DO NOTHING";
        let n = on_pool!(self, pool => {
            sqlx::query(SQL).bind(username).bind(password_hash).bind(role.as_str()).bind(now)
                .execute(pool).await.map(|r| r.rows_affected())
        })?;
        Ok(n == 1)
    }

    pub async fn operator(
        &self,
        username: &str,
    ) -> Result<Option<OperatorCredentials>, StoreError> {
        let sql = format!("SELECT {OPERATOR_COLUMNS} FROM operators WHERE username = $1");
        let row: Option<OperatorRow> = on_pool!(self, pool => {
            sqlx::query_as(&sql).bind(username).fetch_optional(pool).await
        })?;
        row.map(operator_row).transpose()
    }

    pub async fn operators(&self) -> Result<Vec<OperatorView>, StoreError> {
        let sql = format!("SELECT {OPERATOR_COLUMNS} FROM operators ORDER BY username");
        let rows: Vec<OperatorRow> = on_pool!(self, pool => {
            sqlx::query_as(&sql).fetch_all(pool).await
        })?;
        rows.into_iter()
            .map(|row| operator_row(row).map(|c| c.operator))
            .collect()
    }

    /// Replaces an operator's password hash; `false` if there is no such operator.
    pub async fn set_operator_password(
        &self,
        username: &str,
        password_hash: &str,
    ) -> Result<bool, StoreError> {
        const SQL: &str = "UPDATE operators SET password_hash = $2 WHERE username = $1";
        let n = on_pool!(self, pool => {
            sqlx::query(SQL).bind(username).bind(password_hash).execute(pool).await
                .map(|r| r.rows_affected())
        })?;
        Ok(n == 1)
    }

    /// Disables (or enables again) an operator; `false` if there is no such operator. A
    /// disabled operator's sessions end with it.
    pub async fn set_operator_disabled(
        &self,
        username: &str,
        disabled: bool,
        now: i64,
    ) -> Result<bool, StoreError> {
        const SQL: &str = "UPDATE operators SET disabled_at = $2 WHERE username = $1";
        let at = disabled.then_some(now);
        let n = on_pool!(self, pool => {
            let mut tx = pool.begin_write().await?;
            let n = sqlx::query(SQL).bind(username).bind(at).execute(&mut *tx).await?
                .rows_affected();
            if disabled {
                sqlx::query(DELETE_SESSIONS_OF).bind(username).execute(&mut *tx).await?;
            }
            tx.commit().await?;
            n
        });
        Ok(n == 1)
    }

    /// Removes an operator and every session of theirs.
    pub async fn remove_operator(&self, username: &str) -> Result<bool, StoreError> {
        const SQL: &str = "DELETE FROM operators WHERE username = $1";
        let n = on_pool!(self, pool => {
            let mut tx = pool.begin_write().await?;
            let n = sqlx::query(SQL).bind(username).execute(&mut *tx).await?.rows_affected();
            sqlx::query(DELETE_SESSIONS_OF).bind(username).execute(&mut *tx).await?;
            tx.commit().await?;
            n
        });
        Ok(n == 1)
    }

    /// Ends every session of `username` (sign out everywhere); returns how many.
    pub async fn delete_sessions_of(&self, username: &str) -> Result<u64, StoreError> {
        let n = on_pool!(self, pool => {
            sqlx::query(DELETE_SESSIONS_OF).bind(username).execute(pool).await
                .map(|r| r.rows_affected())
        })?;
        Ok(n)
    }

    /// A live session record (its JSON), if any.
    pub async fn load_session(&self, id: &str, now: i64) -> Result<Option<String>, StoreError> {
        const SQL: &str = "SELECT data FROM dashboard_sessions WHERE id = $1 AND expires_at > $2";
        let data = on_pool!(self, pool => {
            sqlx::query_scalar(SQL).bind(id).bind(now).fetch_optional(pool).await
        })?;
        Ok(data)
    }

    /// Writes a session record of `username` (if signed in). With `create`, only if the id
    /// is new; otherwise only if the session still exists: a request that loaded a session
    /// before it was ended (signed out, its operator disabled) cannot bring it back when it
    /// finishes. Returns whether it was written.
    pub async fn save_session(
        &self,
        id: &str,
        data: &str,
        username: Option<&str>,
        expires_at: i64,
        create: bool,
    ) -> Result<bool, StoreError> {
        const CREATE: &str = "INSERT INTO dashboard_sessions (id, data, expires_at, username) \
                              VALUES ($1, $2, $3, $4) ON CONFLICT (id) DO NOTHING";
        const SAVE: &str = "UPDATE dashboard_sessions \
                            SET data = $2, expires_at = $3, username = $4 WHERE id = $1";
        let sql = if create { CREATE } else { SAVE };
        let n = on_pool!(self, pool => {
            sqlx::query(sql).bind(id).bind(data).bind(expires_at).bind(username)
                .execute(pool).await.map(|r| r.rows_affected())
        })?;
        Ok(n == 1)
    }

    pub async fn delete_session(&self, id: &str) -> Result<(), StoreError> {
        const SQL: &str = "DELETE FROM dashboard_sessions WHERE id = $1";
        on_pool!(self, pool => sqlx::query(SQL).bind(id).execute(pool).await.map(|_| ()))?;
        Ok(())
    }

    pub async fn delete_expired_sessions(&self, now: i64) -> Result<u64, StoreError> {
        const SQL: &str = "DELETE FROM dashboard_sessions WHERE expires_at <= $1";
        let n = on_pool!(self, pool => {
            sqlx::query(SQL).bind(now).execute(pool).await.map(|r| r.rows_affected())
        })?;
        Ok(n)
    }

    /// Every audit entry about `target` (an event id, an order id, an operator), oldest
    /// first.
    pub async fn audit_for(&self, target: &str) -> Result<Vec<AuditEntry>, StoreError> {
        const SQL: &str = "SELECT id, at, actor, action, target, reason, outcome FROM audit_log \
                           WHERE target = $1 ORDER BY id";
        let entries = on_pool!(self, pool => {
            sqlx::query_as(SQL).bind(target).fetch_all(pool).await
        })?;
        Ok(entries)
    }

    /// The audit log, newest first, `limit` entries older than `before` (an id) if given.
    pub async fn audit_log(
        &self,
        before: Option<i64>,
        limit: i64,
    ) -> Result<Vec<AuditEntry>, StoreError> {
        const SQL: &str = "SELECT id, at, actor, action, target, reason, outcome FROM audit_log \
                           WHERE $1 IS NULL OR id < $1 ORDER BY id DESC LIMIT $2";
        let entries = on_pool!(self, pool => {
            sqlx::query_as(SQL).bind(before).bind(limit).fetch_all(pool).await
        })?;
        Ok(entries)
    }
}
