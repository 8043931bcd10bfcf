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
    INSERT INTO audit_log (at, actor, action, target, reason, outcome, batch_id) \
    VALUES ($1, $2, $3, $4, $5, $6, $7)";

/// Appends `entry`, stamped `at` (unix ms) and naming the bulk re-drive `batch_id` if it is
/// part of one, through `executor`: a pool, or a transaction that writes more with it.
pub(super) async fn insert<'c, E, DB>(
    executor: E,
    entry: &AuditRecord<'_>,
    batch_id: Option<&str>,
    at: i64,
) -> Result<(), sqlx::Error>
where
    E: sqlx::Executor<'c, Database = DB>,
    DB: sqlx::Database,
    for<'q> <DB as sqlx::Database>::Arguments<'q>: sqlx::IntoArguments<'q, DB>,
    for<'q> i64: sqlx::Encode<'q, DB> + sqlx::Type<DB>,
    for<'q> String: sqlx::Encode<'q, DB> + sqlx::Type<DB>,
    for<'q> Option<String>: sqlx::Encode<'q, DB>,
{
    sqlx::query(INSERT_AUDIT)
        .bind(at)
        .bind(entry.actor.to_string())
        .bind(entry.action.as_str().to_owned())
        .bind(entry.target.to_owned())
        .bind(entry.reason.to_owned())
        .bind(entry.outcome.to_owned())
        .bind(batch_id.map(str::to_owned))
        .execute(executor)
        .await
        .map(|_| ())
}

impl Audit<'_> {
    /// Appends `entry` to the audit log, stamped `at` (unix ms).
    pub async fn record(self, entry: &AuditRecord<'_>, at: i64) -> Result<(), StoreError> {
        on_pool!(self, pool => insert(pool, entry, None, at).await)?;
        Ok(())
    }

    /// Appends `entry` as part of the bulk re-drive `batch_id`.
    pub async fn record_in_batch(
        self,
        entry: &AuditRecord<'_>,
        batch_id: &str,
        at: i64,
    ) -> Result<(), StoreError> {
        on_pool!(self, pool => insert(pool, entry, Some(batch_id), at).await)?;
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
