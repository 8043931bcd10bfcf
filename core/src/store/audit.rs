//! The audit log: appended to by every operator action, read by the dashboard and CLI.

use serde::Serialize;

use super::Audit;
use crate::audit::AuditRecord;
use crate::error::StoreError;

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

const INSERT_AUDIT: &str = "\
    INSERT INTO audit_log (at, actor, action, target, reason, outcome) \
    VALUES ($1, $2, $3, $4, $5, $6)";

impl Audit<'_> {
    /// Appends `entry` to the audit log, stamped `at` (unix ms).
    pub async fn record(self, entry: &AuditRecord<'_>, at: i64) -> Result<(), StoreError> {
        let actor = entry.actor.to_string();
        on_pool!(self, pool => {
            sqlx::query(INSERT_AUDIT)
                .bind(at)
                .bind(&actor)
                .bind(entry.action.as_str())
                .bind(entry.target)
                .bind(entry.reason)
                .bind(entry.outcome)
                .execute(pool)
                .await
                .map(|_| ())
        })?;
        Ok(())
    }

    /// Appends `entry` as part of the bulk re-drive `batch_id`.
    pub async fn record_in_batch(
        self,
        entry: &AuditRecord<'_>,
        batch_id: &str,
        at: i64,
    ) -> Result<(), StoreError> {
        const SQL: &str = "INSERT INTO audit_log (at, actor, action, target, reason, outcome, \
                           batch_id) VALUES ($1, $2, $3, $4, $5, $6, $7)";
        let actor = entry.actor.to_string();
        on_pool!(self, pool => {
            sqlx::query(SQL)
                .bind(at)
                .bind(&actor)
                .bind(entry.action.as_str())
                .bind(entry.target)
                .bind(entry.reason)
                .bind(entry.outcome)
                .bind(batch_id)
                .execute(pool)
                .await
                .map(|_| ())
        })?;
        Ok(())
    }

    /// Every audit entry about `target` (an event id, an order id, an operator), oldest
    /// first.
    pub async fn about(self, target: &str) -> Result<Vec<AuditEntry>, StoreError> {
        const SQL: &str = "SELECT id, at, actor, action, target, reason, outcome FROM audit_log \
                           WHERE target = $1 ORDER BY id";
        let entries = on_pool!(self, pool => {
            sqlx::query_as(SQL).bind(target).fetch_all(pool).await
        })?;
        Ok(entries)
    }

    /// The audit log, newest first, `limit` entries older than `before` (an id) if given.
    pub async fn newest(
        self,
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
