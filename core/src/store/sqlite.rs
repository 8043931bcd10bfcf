//! SQLite with one writer: reads go to a pool of connections, every statement that may write
//! goes to a single connection, so the process's writers (the ingestion lane, the workers,
//! the dashboard's actions) queue in order for it instead of meeting on SQLite's write lock.
//!
//! On the lock they would wait in SQLite's busy handler, which sleeps in growing steps (up
//! to 100 ms) and lets a newcomer overtake: the ingestion tail under load was those sleeps.
//! Waiting for the one writer connection is a fair queue on the pool's semaphore, woken the
//! moment the connection comes back. The busy timeout stays for writers in other processes
//! (the command line, a backup).

use std::str::FromStr;

use futures_core::future::BoxFuture;
use futures_core::stream::BoxStream;
use sqlx::sqlite::{
    SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions, SqliteQueryResult,
    SqliteRow, SqliteStatement, SqliteSynchronous, SqliteTypeInfo,
};
use sqlx::{ConnectOptions, Describe, Either, Execute, Executor, Sqlite};

use super::{BeginWrite, StoreOptions};
use crate::database_url::DatabaseUrl;
use crate::error::StoreError;

/// The readers and the one writer on the same database file.
#[derive(Debug, Clone)]
pub(super) struct SqliteDb {
    readers: SqlitePool,
    writer: SqlitePool,
}

impl SqliteDb {
    pub(super) async fn connect(
        url: &DatabaseUrl,
        options: &StoreOptions,
    ) -> Result<SqliteDb, StoreError> {
        let connect = SqliteConnectOptions::from_str(url.expose())
            .map_err(StoreError::Connect)?
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            .synchronous(SqliteSynchronous::Full)
            .busy_timeout(options.sqlite_busy_timeout)
            .foreign_keys(true)
            .log_statements(super::STATEMENT_LOG_LEVEL);
        let in_memory = url.expose().contains(":memory:") || url.expose().contains("mode=memory");
        let folder = connect
            .get_filename()
            .parent()
            .filter(|d| !in_memory && !d.as_os_str().is_empty());
        if let Some(dir) = folder {
            std::fs::create_dir_all(dir).map_err(|source| StoreError::CreateDir {
                path: dir.display().to_string(),
                source,
            })?;
        }
        let pool = |max_connections: u32| {
            SqlitePoolOptions::new()
                .max_connections(max_connections)
                .acquire_timeout(options.acquire_timeout)
                // A connection to a local file does not go away; pinging it on every acquire
                // is a hand-over to its thread and back for nothing.
                .test_before_acquire(false)
                // Nor does it need reaping: without an idle timeout and a lifetime the pool
                // runs no maintenance task, whose idle sweep can spin for good at exit
                // (sqlx 0.8.6, launchbadge/sqlx#3645: a CLI command that never ended).
                .idle_timeout(None)
                .max_lifetime(None)
                .after_release(|conn, _| Box::pin(super::still_usable(conn)))
                .connect_with(connect.clone())
        };
        // The writer first: it creates the file and switches it to WAL.
        let writer = pool(1).await.map_err(StoreError::Connect)?;
        // An in-memory database lives and dies with its one connection.
        let readers = if in_memory {
            writer.clone()
        } else {
            pool(options.max_connections.max(1))
                .await
                .map_err(StoreError::Connect)?
        };
        Ok(SqliteDb { readers, writer })
    }

    /// The connection a statement runs on: only a plain `SELECT` can be read on the side;
    /// anything else (INSERT, UPDATE, DELETE, a `WITH` that may write, PRAGMA) is the
    /// writer's.
    fn pick(&self, sql: &str) -> &SqlitePool {
        let first = sql
            .trim_start()
            .split(|c: char| !c.is_ascii_alphabetic())
            .next()
            .unwrap_or_default();
        if first.eq_ignore_ascii_case("select") {
            &self.readers
        } else {
            &self.writer
        }
    }

    /// The readers alone, for what only reads however it is spelled (`VACUUM INTO` copies
    /// the database inside one read transaction and must not hold the writer up).
    pub(super) fn readers(&self) -> &SqlitePool {
        &self.readers
    }

    /// The writer alone (migrations).
    pub(super) fn writer(&self) -> &SqlitePool {
        &self.writer
    }

    pub(super) async fn close(&self) {
        self.readers.close().await;
        self.writer.close().await;
    }
}

impl BeginWrite for SqliteDb {
    type Db = Sqlite;

    /// `BEGIN IMMEDIATE` on the writer: the write lock is taken up front, so a transaction
    /// never has to upgrade a read lock (and fail with SQLITE_BUSY) halfway.
    fn begin_write(
        &self,
    ) -> impl Future<Output = Result<sqlx::Transaction<'static, Sqlite>, sqlx::Error>> + Send {
        self.writer.begin_with("BEGIN IMMEDIATE")
    }
}

impl<'p> Executor<'p> for &'p SqliteDb {
    type Database = Sqlite;

    fn fetch_many<'e, 'q: 'e, E>(
        self,
        query: E,
    ) -> BoxStream<'e, Result<Either<SqliteQueryResult, SqliteRow>, sqlx::Error>>
    where
        'p: 'e,
        E: 'q + Execute<'q, Sqlite>,
    {
        self.pick(query.sql()).fetch_many(query)
    }

    fn fetch_optional<'e, 'q: 'e, E>(
        self,
        query: E,
    ) -> BoxFuture<'e, Result<Option<SqliteRow>, sqlx::Error>>
    where
        'p: 'e,
        E: 'q + Execute<'q, Sqlite>,
    {
        self.pick(query.sql()).fetch_optional(query)
    }

    fn prepare_with<'e, 'q: 'e>(
        self,
        sql: &'q str,
        parameters: &'e [SqliteTypeInfo],
    ) -> BoxFuture<'e, Result<SqliteStatement<'q>, sqlx::Error>>
    where
        'p: 'e,
    {
        self.pick(sql).prepare_with(sql, parameters)
    }

    fn describe<'e, 'q: 'e>(
        self,
        sql: &'q str,
    ) -> BoxFuture<'e, Result<Describe<Sqlite>, sqlx::Error>>
    where
        'p: 'e,
    {
        self.pick(sql).describe(sql)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn only_plain_selects_are_read_on_the_side() {
        let dir = tempfile::tempdir().unwrap();
        let url: DatabaseUrl = format!("sqlite://{}/t.db", dir.path().display())
            .parse()
            .unwrap();
        let db = SqliteDb::connect(&url, &StoreOptions::default())
            .await
            .unwrap();
        let writer = |sql: &str| std::ptr::eq(db.pick(sql), &db.writer);
        assert!(!writer("SELECT 1"));
        assert!(!writer("  select * FROM t"));
        assert!(!writer("\n\tSELECT(1)"));
        for sql in [
            "INSERT INTO t VALUES (1)",
            "UPDATE t SET a = 1",
            "DELETE FROM t",
            "WITH x AS (SELECT 1) UPDATE t SET a = 1",
            "REPLACE INTO t VALUES (1)",
            "PRAGMA optimize",
            "",
        ] {
            assert!(writer(sql), "{sql}");
        }
    }
}
