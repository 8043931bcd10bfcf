//! The engine's storage error.

/// What went wrong talking to the database. Callers at the edge turn it into a response
/// (usually "unavailable, retry") and log it once, with its cause.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("cannot create the folder for the SQLite file {path}")]
    CreateDir {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot connect to the database")]
    Connect(#[source] sqlx::Error),
    #[error("cannot apply the database migrations")]
    Migrate(#[from] sqlx::migrate::MigrateError),
    #[error("database query failed")]
    Query(#[from] sqlx::Error),
    #[error("the database writer has stopped")]
    WriterStopped,
    /// A stored state, kind or name this version does not know (a newer version wrote it, or
    /// someone edited the row).
    #[error("the database holds a value this version does not understand: {0}")]
    UnknownValue(String),
    /// A stored id that no longer parses.
    #[error("the database holds an unusable {what}")]
    BadStoredId {
        what: &'static str,
        #[source]
        source: crate::ids::IdError,
    },
    /// Stored JSON that is not the shape this version reads.
    #[error("the database holds {what} that is not the JSON this version reads: {message}")]
    BadStoredJson { what: &'static str, message: String },
    /// A value of ours that could not be encoded to be stored.
    #[error("cannot encode {what} to store it: {message}")]
    Encode { what: &'static str, message: String },
    /// A row that must be there is not (another process removed it, or the database lost it).
    #[error("{0} is not in the database, though it must be")]
    Missing(String),
    /// Two things the database holds contradict each other.
    #[error("the database contradicts itself: {0}")]
    Inconsistent(String),
    /// An amount or count beyond what can be computed with.
    #[error("{0}: an amount beyond what can be counted")]
    OutOfRange(String),
    /// Something this backend does not do.
    #[error("not possible on this database: {0}")]
    Unsupported(&'static str),
    /// The operating system gave no randomness for a new id.
    #[error("no randomness for a new id: {0}")]
    Random(String),
}

impl StoreError {
    /// Whether the database refused the write for lack of space: SQLite's SQLITE_FULL (13)
    /// or an I/O error of its file system saying so, PostgreSQL's `disk_full` (53100), or
    /// the operating system's ENOSPC on the connection's own I/O. Writes go through again once
    /// space is freed; nothing needs restarting.
    pub fn is_storage_full(&self) -> bool {
        const ENOSPC: i32 = 28;
        let error = match self {
            StoreError::Query(error) | StoreError::Connect(error) => error,
            _ => return false,
        };
        match error {
            sqlx::Error::Io(io) => io.raw_os_error() == Some(ENOSPC),
            sqlx::Error::Database(db) => {
                let code = db.code().unwrap_or_default();
                if db
                    .try_downcast_ref::<sqlx::postgres::PgDatabaseError>()
                    .is_some()
                {
                    code == "53100"
                } else {
                    // SQLITE_FULL, and SQLITE_IOERR_WRITE (778) / SQLITE_IOERR_FSYNC (1034)
                    // when the file system ran out under the WAL.
                    code.parse::<i32>()
                        .is_ok_and(|c| c & 0xff == 13 || c == 778 || c == 1034)
                        || db.message().contains("disk is full")
                }
            }
            _ => false,
        }
    }

    /// Whether the database was unreachable or busy rather than the query wrong: SQLite's
    /// write lock held too long, PostgreSQL restarting, failing over or refusing connections,
    /// a connection lost, the pool out of connections, the disk full. Asking again later can
    /// succeed.
    pub fn is_transient(&self) -> bool {
        if self.is_storage_full() {
            return true;
        }
        let error = match self {
            StoreError::Query(error) | StoreError::Connect(error) => error,
            StoreError::WriterStopped => return true,
            StoreError::CreateDir { .. }
            | StoreError::Migrate(_)
            | StoreError::UnknownValue(_)
            | StoreError::BadStoredId { .. }
            | StoreError::BadStoredJson { .. }
            | StoreError::Encode { .. }
            | StoreError::Missing(_)
            | StoreError::Inconsistent(_)
            | StoreError::OutOfRange(_)
            | StoreError::Unsupported(_)
            | StoreError::Random(_) => {
                return false;
            }
        };
        match error {
            sqlx::Error::Io(_)
            | sqlx::Error::PoolTimedOut
            | sqlx::Error::PoolClosed
            | sqlx::Error::WorkerCrashed
            | sqlx::Error::Protocol(_) => true,
            sqlx::Error::Database(db) => {
                let code = db.code().unwrap_or_default();
                if let Some(pg) = db.try_downcast_ref::<sqlx::postgres::PgDatabaseError>() {
                    // Connection exceptions (08), serialization failures and deadlocks (40),
                    // insufficient resources (53), operator intervention such as an
                    // administrator's shutdown or a server starting up (57P0x); and any
                    // error that ended the connection (FATAL: a database not accepting
                    // connections, say).
                    use sqlx::postgres::PgSeverity;
                    matches!(pg.severity(), PgSeverity::Fatal | PgSeverity::Panic)
                        || ["08", "40", "53", "57P0"]
                            .iter()
                            .any(|class| code.starts_with(class))
                } else {
                    // SQLite: SQLITE_BUSY (5) and SQLITE_LOCKED (6), extended codes included.
                    code.parse::<i32>().is_ok_and(|c| matches!(c & 0xff, 5 | 6))
                }
            }
            _ => false,
        }
    }
}
