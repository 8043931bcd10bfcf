//! One handle on the database, SQLite or PostgreSQL, with the migrations of both embedded.
//!
//! Queries are written once in the SQL both backends accept (`$1` placeholders, integer
//! millisecond timestamps) and run through [`query`] on whichever backend is open. Where the
//! backends must differ (row locking, arrays or JSON for a batch) a method matches on the
//! pool itself, or a statement trait per backend binds the statements that one chain, written
//! once, puts together (ingestion, fulfilment, money).

use std::str::FromStr;
use std::time::Duration;

use sqlx::ConnectOptions;
use sqlx::migrate::Migrator;
use sqlx::postgres::{PgConnectOptions, PgPool, PgPoolOptions};

use crate::claim::{ClaimCounts, ClaimState};
use crate::database_url::{Backend, DatabaseUrl};
use crate::error::StoreError;
use query::sql;

static SQLITE_MIGRATIONS: Migrator = sqlx::migrate!("../migrations/sqlite");
static POSTGRES_MIGRATIONS: Migrator = sqlx::migrate!("../migrations/postgres");

mod alerts;
mod audit;
mod bulk_redrive;
mod claim_state;
mod credits;
mod deliveries;
mod fulfilling;
mod health;
mod history;
mod lanes;
mod leasing;
mod money;
mod operators;
mod outgoing;
mod query;
mod reconcile;
mod resolution;
mod sqlite;
mod subscribing;
mod subscription_checkouts;
mod subscription_views;
mod summaries;
mod timeline;
mod tokens;
mod views;

pub use alerts::{AlertDeliveryView, AlertView, DueDelivery, Noted};
pub use audit::AuditEntry;
pub use bulk_redrive::{BatchItemView, BatchView, CancelMark, Recorded, SelectedClaim};
pub use credits::CreditWriter;
pub use deliveries::{ClaimOutcome, ClaimSource, DELIVERIES_KEPT_PER_EVENT, WriteOp, WriteResult};
pub use fulfilling::Fulfilled;
pub use health::{WriteHealth, Writes};
pub use history::{DayFigures, History};
pub use lanes::BatchWriter;
pub use leasing::LeasedClaim;
pub use operators::{OperatorCredentials, OperatorView};
pub use outgoing::{NewOrder, OrderCreation, RequestOutcome, RequestStatus, StripeRequestView};
pub use reconcile::ReconcileRunView;
pub use subscription_checkouts::{NewSubscriptionCheckout, SubscriptionCheckoutView};
pub use subscription_views::{
    GrantView, ScheduledChange, SubscriptionFilter, SubscriptionView, UnplannedRenewal,
};
pub use summaries::ClaimSummary;
pub use timeline::{LoggedDelivery, OrderHistory, TIMELINE_ROWS};
pub use tokens::TokenView;
pub use views::{
    CUSTOMER_CLAIMS, ClaimView, CustomerView, DeliveryView, EventFilter, LedgerEntryView,
    NotRefundable, OrderFilter, OrderLine, OrderView,
};

#[derive(Clone)]
enum Pool {
    Sqlite(sqlite::SqliteDb),
    Postgres(PgPool),
}

/// Opens a transaction that will write (on SQLite, on its one writer connection).
trait BeginWrite {
    type Db: sqlx::Database;

    fn begin_write(
        &self,
    ) -> impl Future<Output = Result<sqlx::Transaction<'static, Self::Db>, sqlx::Error>> + Send;
}

impl BeginWrite for PgPool {
    type Db = sqlx::Postgres;

    fn begin_write(
        &self,
    ) -> impl Future<Output = Result<sqlx::Transaction<'static, sqlx::Postgres>, sqlx::Error>> + Send
    {
        self.begin()
    }
}

/// A boxed statement of a backend's transaction, for the traits that bind one statement per
/// method so that the logic chaining them is written once: a named future type keeps the
/// worker's future `Send` for every lifetime (an `impl Future` in a trait does not, yet).
type Write<'a, T> =
    std::pin::Pin<Box<dyn std::future::Future<Output = Result<T, StoreError>> + Send + 'a>>;

/// Whether a connection coming back to its pool may be used again: not if it is still inside
/// a transaction. A COMMIT that fails (a full disk) can leave it there: SQLite may have rolled
/// the transaction back itself, so the ROLLBACK sent when the transaction is dropped fails
/// too, and every later BEGIN on that connection would fail for good. Such a connection is
/// closed and the pool opens a fresh one. The ping first lets a ROLLBACK still queued on the
/// connection run, so that only one that really stayed inside is closed.
async fn still_usable<C: sqlx::Connection>(conn: &mut C) -> Result<bool, sqlx::Error> {
    if conn.is_in_transaction() {
        conn.ping().await?;
    }
    let usable = !conn.is_in_transaction();
    if !usable {
        tracing::warn!(
            "a database connection was left inside a transaction (its commit or rollback failed); \
             closing it"
        );
    }
    Ok(usable)
}

/// Connection settings that do not belong in the URL.
#[derive(Debug, Clone)]
pub struct StoreOptions {
    pub max_connections: u32,
    /// How long a caller waits for a connection before the store reports itself unavailable.
    pub acquire_timeout: Duration,
    /// How long SQLite waits for the write lock before giving up.
    pub sqlite_busy_timeout: Duration,
}

impl Default for StoreOptions {
    fn default() -> Self {
        StoreOptions {
            max_connections: 16,
            acquire_timeout: Duration::from_secs(3),
            sqlite_busy_timeout: Duration::from_secs(5),
        }
    }
}

/// Which of the embedded migrations the database has applied.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MigrationStatus {
    pub expected: usize,
    /// Versions this binary ships that the database has not applied.
    pub missing: Vec<i64>,
}

impl MigrationStatus {
    pub fn is_current(&self) -> bool {
        self.missing.is_empty()
    }
}

/// One migration as `claimcheck migrate --status` lists it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct MigrationRow {
    pub version: i64,
    pub description: String,
    /// When it was applied (the database's own words), `None` while pending.
    pub applied_on: Option<String>,
    /// Whether this binary ships it (an applied one it does not is a newer version's: a
    /// rolling deploy runs the previous version beside it).
    pub known: bool,
}

/// The store's parts, one per aggregate, each a borrowed handle on the same pool:
/// `store.claims().lease_due(…)`, `store.orders().get(…)`.
macro_rules! aggregates {
    ($($(#[$doc:meta])* $name:ident => $accessor:ident;)+) => {
        $(
            $(#[$doc])*
            #[derive(Clone, Copy)]
            pub struct $name<'s> {
                pool: &'s Pool,
            }
        )+

        impl Store {
            $(
                $(#[$doc])*
                pub fn $accessor(&self) -> $name<'_> {
                    $name { pool: &self.pool }
                }
            )+
        }
    };
}

aggregates! {
    /// Claims on Stripe events: taken from deliveries, leased, fulfilled, failed, re-driven,
    /// and read for the dashboard.
    Claims => claims;
    /// Orders and their credit ledger.
    Orders => orders;
    /// What customers do with their credits: lots, spends, holds, expiries, adjustments.
    Credits => credits;
    /// Outgoing Stripe requests, one per Idempotency-Key.
    StripeRequests => stripe_requests;
    /// Dashboard operators and their second factor.
    Operators => operators;
    /// Signed-in dashboard sessions.
    Sessions => sessions;
    /// The audit log of operator actions.
    Audit => audit;
    /// API tokens of the order API.
    Tokens => tokens;
    /// Reconcile runs and the lease that lets one run at a time.
    ReconcileRuns => reconcile_runs;
    /// Bulk re-drive batches, their claims and their runner's heartbeat.
    BulkRedrives => bulk_redrives;
    /// Alerts, their outbox of messages, and the signature failures the checks count.
    Alerts => alerts;
    /// Subscriptions as Stripe Billing's events tell them, and what each period was granted.
    Subscriptions => subscriptions;
}

/// The database, shared by every request handler and worker (cheap to clone).
#[derive(Clone)]
pub struct Store {
    pool: Pool,
    health: std::sync::Arc<WriteHealth>,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store")
            .field("backend", &self.backend())
            .finish_non_exhaustive()
    }
}

/// The level sqlx logs each statement of the store at (target `sqlx::query`): TRACE, below
/// the statements of anything else in the process, so the store's own can be told apart (the
/// statement snapshot records them). Slow statements stay warnings.
const STATEMENT_LOG_LEVEL: log::LevelFilter = log::LevelFilter::Trace;

impl Store {
    /// Opens a pool for `url` without touching the schema.
    ///
    /// SQLite runs in WAL mode with `synchronous=FULL` (a committed claim survives a power
    /// cut), a busy timeout and foreign keys on, reads on a pool and writes on one connection
    /// (`sqlite`); its file and folder are created if missing.
    pub async fn connect(url: &DatabaseUrl, options: &StoreOptions) -> Result<Store, StoreError> {
        let pool = match url.backend() {
            Backend::Sqlite => Pool::Sqlite(sqlite::SqliteDb::connect(url, options).await?),
            Backend::Postgres => {
                let connect = PgConnectOptions::from_str(url.expose())
                    .map_err(StoreError::Connect)?
                    .log_statements(STATEMENT_LOG_LEVEL);
                let pool = PgPoolOptions::new()
                    .max_connections(options.max_connections)
                    .acquire_timeout(options.acquire_timeout)
                    .after_release(|conn, _| Box::pin(still_usable(conn)))
                    .connect_with(connect)
                    .await
                    .map_err(StoreError::Connect)?;
                Pool::Postgres(pool)
            }
        };
        Ok(Store {
            pool,
            health: Default::default(),
        })
    }

    /// Whether the database takes writes, as this process's last writes found it.
    pub fn write_health(&self) -> &WriteHealth {
        &self.health
    }

    pub fn backend(&self) -> Backend {
        match self.pool {
            Pool::Sqlite(_) => Backend::Sqlite,
            Pool::Postgres(_) => Backend::Postgres,
        }
    }

    fn migrator(&self) -> &'static Migrator {
        match self.pool {
            Pool::Sqlite(_) => &SQLITE_MIGRATIONS,
            Pool::Postgres(_) => &POSTGRES_MIGRATIONS,
        }
    }

    /// Applies every embedded migration the database lacks. Safe to run from several
    /// instances at once: sqlx takes an advisory lock on PostgreSQL.
    pub async fn migrate(&self) -> Result<(), StoreError> {
        let migrator = self.migrator();
        match &self.pool {
            Pool::Sqlite(db) => migrator.run(db.writer()).await,
            Pool::Postgres(pool) => migrator.run(pool).await,
        }?;
        Ok(())
    }

    /// Compares the applied migrations with the ones this binary ships. A database that is
    /// reachable but has never been migrated reports every migration as missing; one that
    /// cannot be reached is an error.
    pub async fn migration_status(&self) -> Result<MigrationStatus, StoreError> {
        let shipped: Vec<MigrationRow> = self
            .migrations()
            .await?
            .into_iter()
            .filter(|m| m.known)
            .collect();
        Ok(MigrationStatus {
            expected: shipped.len(),
            missing: shipped
                .iter()
                .filter(|m| m.applied_on.is_none())
                .map(|m| m.version)
                .collect(),
        })
    }

    /// Every migration this binary ships and every one the database has applied, by version.
    pub async fn migrations(&self) -> Result<Vec<MigrationRow>, StoreError> {
        let applied: Vec<(i64, String, String)> = if self.has_migrations_table().await? {
            self.pool
                .on()
                .all(sql(
                    "SELECT version, description, CAST(installed_on AS TEXT) \
                     FROM _sqlx_migrations WHERE success = TRUE",
                ))
                .await?
        } else {
            Vec::new()
        };
        let mut rows: Vec<MigrationRow> = self
            .migrator()
            .iter()
            .filter(|m| m.migration_type.is_up_migration())
            .map(|m| MigrationRow {
                version: m.version,
                description: m.description.to_string(),
                applied_on: applied
                    .iter()
                    .find(|(v, _, _)| *v == m.version)
                    .map(|(_, _, on)| on.clone()),
                known: true,
            })
            .collect();
        for (version, description, on) in applied {
            if !rows.iter().any(|r| r.version == version) {
                rows.push(MigrationRow {
                    version,
                    description,
                    applied_on: Some(on),
                    known: false,
                });
            }
        }
        rows.sort_by_key(|r| r.version);
        Ok(rows)
    }

    async fn has_migrations_table(&self) -> Result<bool, StoreError> {
        let exists: bool = match &self.pool {
            Pool::Sqlite(pool) => {
                sqlx::query_scalar(
                    "SELECT EXISTS (SELECT 1 FROM sqlite_master \
                     WHERE type = 'table' AND name = '_sqlx_migrations')",
                )
                .fetch_one(pool)
                .await?
            }
            Pool::Postgres(pool) => {
                sqlx::query_scalar("SELECT to_regclass('_sqlx_migrations') IS NOT NULL")
                    .fetch_one(pool)
                    .await?
            }
        };
        Ok(exists)
    }

    /// Writes a consistent copy of a SQLite database to `path` while it serves (`VACUUM
    /// INTO`: one read transaction, so the copy is the database at one moment).
    pub async fn backup_into(&self, path: &str) -> Result<(), StoreError> {
        match &self.pool {
            Pool::Sqlite(db) => {
                sqlx::query("VACUUM INTO $1")
                    .bind(path)
                    .execute(db.readers())
                    .await?;
                Ok(())
            }
            Pool::Postgres(_) => Err(StoreError::Unsupported(
                "a PostgreSQL database is backed up with pg_dump",
            )),
        }
    }

    /// Prunes what is older than `before` (unix ms) and no longer needed: delivery log rows,
    /// and the payloads of processed claims (the claim rows stay, so a late retry still
    /// dedupes). At most `batch` rows per statement, each in its own short transaction, so
    /// ingestion is never held up for long. Returns (deliveries deleted, payloads pruned).
    pub async fn prune(&self, before: i64, batch: i64) -> Result<(u64, u64), StoreError> {
        const DELIVERIES: &str = "DELETE FROM webhook_deliveries WHERE id IN \
            (SELECT id FROM webhook_deliveries WHERE received_at < $1 ORDER BY received_at LIMIT $2)";
        const PAYLOADS: &str = "UPDATE processed_stripe_events SET payload = '' \
            WHERE event_id IN (SELECT event_id FROM processed_stripe_events \
              WHERE received_at < $1 AND status = 'processed' AND payload <> '' \
              ORDER BY received_at LIMIT $2)";
        let mut totals = (0, 0);
        for (statement, total) in [(DELIVERIES, &mut totals.0), (PAYLOADS, &mut totals.1)] {
            loop {
                let n = self
                    .pool
                    .on()
                    .execute(sql(statement).bind(before).bind(batch))
                    .await?;
                *total += n;
                if n < u64::try_from(batch).unwrap_or(u64::MAX) {
                    break;
                }
                // Let queued deliveries through between batches.
                tokio::task::yield_now().await;
            }
        }
        Ok(totals)
    }

    /// Waits for in-flight queries and closes every connection.
    pub async fn close(&self) {
        match &self.pool {
            Pool::Sqlite(db) => db.close().await,
            Pool::Postgres(pool) => pool.close().await,
        }
    }
}

impl Claims<'_> {
    /// How many claims are in each state at `now_ms`.
    pub async fn counts(&self, now_ms: i64) -> Result<ClaimCounts, StoreError> {
        const SQL: &str = concat!(
            "SELECT ",
            claim_state::claim_state_sql!("$1"),
            " AS state, COUNT(*) AS n FROM processed_stripe_events GROUP BY 1"
        );
        let rows: Vec<(String, i64)> = self.pool.on().all(sql(SQL).bind(now_ms)).await?;
        let mut counts = ClaimCounts::default();
        for (state, n) in rows {
            let state = ClaimState::from_str(&state).map_err(StoreError::UnknownValue)?;
            counts.add(state, n);
        }
        Ok(counts)
    }

    /// How many claims are in each state that is not done (all but processed), at `now_ms`:
    /// one count per state, each a range of the status index, so the claims page's tabs
    /// never count the processed millions.
    pub async fn waiting_counts(&self, now_ms: i64) -> Result<ClaimCounts, StoreError> {
        let mut counts = ClaimCounts::default();
        for state in ClaimState::ALL
            .into_iter()
            .filter(|s| *s != ClaimState::Processed)
        {
            let statement = format!(
                "SELECT COUNT(*) FROM processed_stripe_events WHERE {}",
                claim_state::in_state(state, "$1")
            );
            let n: i64 = self.pool.on().value(sql(&statement).bind(now_ms)).await?;
            counts.add(state, n);
        }
        Ok(counts)
    }
}
