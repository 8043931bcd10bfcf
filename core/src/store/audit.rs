//! The audit log: appended to by every operator action, read by the dashboard and CLI.

use serde::Serialize;

use super::Audit;
use super::query::{On, sql};
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
    INSERT INTO audit_log (at, actor, action, target, reason, outcome, batch_id) \
    VALUES ($1, $2, $3, $4, $5, $6, $7)";

/// Appends `entry`, stamped `at` (unix ms) and naming the bulk re-drive `batch_id` if it is
/// part of one, on `on`: the pool, or a transaction that writes more with it.
pub(super) async fn insert(
    on: On<'_>,
    entry: &AuditRecord<'_>,
    batch_id: Option<&str>,
    at: i64,
) -> Result<(), sqlx::Error> {
    on.execute(
        sql(INSERT_AUDIT)
            .bind(at)
            .bind(entry.actor.to_string())
            .bind(entry.action.as_str())
            .bind(entry.target)
            .bind(entry.reason)
            .bind(entry.outcome)
            .bind(batch_id),
    )
    .await
    .map(|_| ())
}

impl Audit<'_> {
    /// Appends `entry` to the audit log, stamped `at` (unix ms).
    pub async fn record(self, entry: &AuditRecord<'_>, at: i64) -> Result<(), StoreError> {
        insert(self.pool.on(), entry, None, at).await?;
        Ok(())
    }

    /// Appends `entry` as part of the bulk re-drive `batch_id`.
    pub async fn record_in_batch(
        self,
        entry: &AuditRecord<'_>,
        batch_id: &str,
        at: i64,
    ) -> Result<(), StoreError> {
        insert(self.pool.on(), entry, Some(batch_id), at).await?;
        Ok(())
    }

    /// Every audit entry about `target` (an event id, an order id, an operator), oldest
    /// first.
    pub async fn about(self, target: &str) -> Result<Vec<AuditEntry>, StoreError> {
        const SQL: &str = "SELECT id, at, actor, action, target, reason, outcome FROM audit_log \
                           WHERE target = $1 ORDER BY id";
        let entries = self.pool.on().all(sql(SQL).bind(target)).await?;
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
        let entries = self
            .pool
            .on()
            .all(sql(SQL).bind(before).bind(limit))
            .await?;
        Ok(entries)
    }
}
