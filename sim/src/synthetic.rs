//! Synthetic history for `bench-dashboard`: many processed claims with their orders and the
//! search terms their payloads would name (the customer's e-mail, the order id), and a
//! subscription for every [`CLAIMS_PER_SUBSCRIPTION`] claims with a year of monthly grants,
//! written in bulk by the database itself, straight into the schema the migrations made.

use claimcheck_core::{Backend, DatabaseUrl};
use sqlx::{Database, Executor, IntoArguments, Pool};

/// Customers the synthetic orders are spread over (each has `claims / CUSTOMERS` orders).
pub const SYNTHETIC_CUSTOMERS: i64 = 50_000;

/// One synthetic subscription (`sub_syn_<i>`) for every this many claims, the claim `i`'s
/// (`i` a multiple of 20): every other one on the plan `thesis-monthly` (`i` a multiple of
/// 40; the rest `thesis-team`), one in fifty past due (`i` a multiple of 1,000); each with
/// twelve monthly grants.
pub const CLAIMS_PER_SUBSCRIPTION: i64 = 20;

/// Grants a synthetic subscription holds (a year of monthly periods).
const GRANTS_PER_SUBSCRIPTION: i64 = 12;

const CLAIMS_POSTGRES: &str = "\
    INSERT INTO processed_stripe_events (event_id, event_type, object_id, action_key, status, \
        attempts, next_attempt_at, stripe_created, livemode, received_at, processed_at, payload, \
        terms_indexed) \
    SELECT 'evt_syn_' || i, 'checkout.session.completed', 'cs_syn_' || i, \
        '', \
        CASE WHEN i % 1000 = 0 THEN 'failed' ELSE 'processed' END, 1, 0, 0, FALSE, \
        $2 + i * 10, $2 + i * 10 + 5, '{}', TRUE \
    FROM generate_series($3::bigint, $1::bigint) AS s(i) ON CONFLICT DO NOTHING";

const ORDERS_POSTGRES: &str = "\
    INSERT INTO orders (order_id, checkout_session_id, payment_intent_id, customer_email, \
        package, credits, status, payment_status, created_at, updated_at) \
    SELECT 'ord_syn_' || i, 'cs_syn_' || i, 'pi_syn_' || i, \
        'customer' || (i % $4) || '@example.ch', 'thesis-40', 40, 'paid', 'paid', \
        $2 + i * 10, $2 + i * 10 \
    FROM generate_series($3::bigint, $1::bigint) AS s(i) ON CONFLICT DO NOTHING";

const CLAIMS_SQLITE: &str = "\
    WITH RECURSIVE s(i) AS (SELECT $3 UNION ALL SELECT i + 1 FROM s WHERE i < $1) \
    INSERT INTO processed_stripe_events (event_id, event_type, object_id, action_key, status, \
        attempts, next_attempt_at, stripe_created, livemode, received_at, processed_at, payload, \
        terms_indexed) \
    SELECT 'evt_syn_' || i, 'checkout.session.completed', 'cs_syn_' || i, \
        '', \
        CASE WHEN i % 1000 = 0 THEN 'failed' ELSE 'processed' END, 1, 0, 0, FALSE, \
        $2 + i * 10, $2 + i * 10 + 5, '{}', TRUE \
    FROM s WHERE true ON CONFLICT DO NOTHING";

const ORDERS_SQLITE: &str = "\
    WITH RECURSIVE s(i) AS (SELECT $3 UNION ALL SELECT i + 1 FROM s WHERE i < $1) \
    INSERT INTO orders (order_id, checkout_session_id, payment_intent_id, customer_email, \
        package, credits, status, payment_status, created_at, updated_at) \
    SELECT 'ord_syn_' || i, 'cs_syn_' || i, 'pi_syn_' || i, \
        'customer' || (i % $4) || '@example.ch', 'thesis-40', 40, 'paid', 'paid', \
        $2 + i * 10, $2 + i * 10 \
    FROM s WHERE true ON CONFLICT DO NOTHING";

const SUBSCRIPTION_COLUMNS: &str = "\
    INSERT INTO subscriptions (subscription_id, subscription_ref, customer_id, customer_email, \
        plan, status, status_as_of, current_period_end, unpaid_invoice, unpaid_since, \
        created_at, updated_at) \
    SELECT 'sub_syn_' || i, 'ref_syn_' || i, 'cus_syn_' || i, \
        'customer' || (i % $4) || '@example.ch', \
        CASE WHEN i % 40 = 0 THEN 'thesis-monthly' ELSE 'thesis-team' END, \
        CASE WHEN i % 1000 = 0 THEN 'past_due' ELSE 'active' END, ($2 + i * 10) / 1000, \
        ($2 + i * 10) / 1000 + 2592000, \
        CASE WHEN i % 1000 = 0 THEN 'in_syn_' || i || '_unpaid' END, \
        CASE WHEN i % 1000 = 0 THEN ($2 + i * 10) / 1000 END, $2 + i * 10, $2 + i * 10 ";

/// The grants of a synthetic subscription's year: `n` of the twelve periods ending
/// `n` months after its creation.
const GRANT_COLUMNS: &str = "\
    INSERT INTO subscription_grants (subscription_id, period_end, step, invoice_id, \
        period_start, plan, entitled, credits, ceiling, event_id, created_at) \
    SELECT 'sub_syn_' || i, ($2 + i * 10) / 1000 + n * 2592000, 'period', \
        'in_syn_' || i || '_' || n, ($2 + i * 10) / 1000 + (n - 1) * 2592000, \
        CASE WHEN i % 40 = 0 THEN 'thesis-monthly' ELSE 'thesis-team' END, 40, 40, 40, \
        'evt_syn_' || i || '_' || n, $2 + i * 10 + n ";

/// Each claim's search terms: its customer's e-mail and its order id ($2 is unused, bound
/// for the one argument list every statement here takes).
const TERMS_POSTGRES: &str = "\
    INSERT INTO claim_terms (term, event_id, kind) \
    SELECT t.term, 'evt_syn_' || i, t.kind FROM generate_series($3::bigint, $1::bigint) AS s(i) \
    CROSS JOIN LATERAL (VALUES ('customer' || (i % $4) || '@example.ch', 'email'), \
                               ('ord_syn_' || i, 'order')) AS t(term, kind) \
    WHERE $2::bigint IS NOT NULL ON CONFLICT DO NOTHING";

const TERMS_SQLITE: &str = "\
    WITH RECURSIVE s(i) AS (SELECT $3 UNION ALL SELECT i + 1 FROM s WHERE i < $1) \
    INSERT INTO claim_terms (term, event_id, kind) \
    SELECT 'customer' || (i % $4) || '@example.ch', 'evt_syn_' || i, 'email' FROM s \
    WHERE $2 IS NOT NULL \
    UNION ALL SELECT 'ord_syn_' || i, 'evt_syn_' || i, 'order' FROM s WHERE true \
    ON CONFLICT DO NOTHING";

fn subscriptions_postgres() -> String {
    format!(
        "{SUBSCRIPTION_COLUMNS} FROM generate_series($3::bigint, $1::bigint) AS s(i) \
         WHERE i % {CLAIMS_PER_SUBSCRIPTION} = 0 AND $4::bigint > 0 ON CONFLICT DO NOTHING"
    )
}

fn grants_postgres() -> String {
    format!(
        "{GRANT_COLUMNS} FROM generate_series($3::bigint, $1::bigint) AS s(i) \
         CROSS JOIN generate_series(1, {GRANTS_PER_SUBSCRIPTION}) AS p(n) \
         WHERE i % {CLAIMS_PER_SUBSCRIPTION} = 0 AND $4::bigint > 0 ON CONFLICT DO NOTHING"
    )
}

fn subscriptions_sqlite() -> String {
    format!(
        "WITH RECURSIVE s(i) AS (SELECT $3 UNION ALL SELECT i + 1 FROM s WHERE i < $1) \
         {SUBSCRIPTION_COLUMNS} FROM s WHERE i % {CLAIMS_PER_SUBSCRIPTION} = 0 AND $4 > 0 \
         ON CONFLICT DO NOTHING"
    )
}

fn grants_sqlite() -> String {
    format!(
        "WITH RECURSIVE s(i) AS (SELECT $3 UNION ALL SELECT i + 1 FROM s WHERE i < $1), \
         p(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM p WHERE n < {GRANTS_PER_SUBSCRIPTION}) \
         {GRANT_COLUMNS} FROM s CROSS JOIN p WHERE i % {CLAIMS_PER_SUBSCRIPTION} = 0 \
         AND $4 > 0 ON CONFLICT DO NOTHING"
    )
}

/// What [`seed`] did.
#[derive(Debug, Clone, Copy)]
pub struct Seeded {
    /// Claims (with their orders) added.
    pub claims: i64,
    /// Synthetic subscriptions the database holds now.
    pub subscriptions: i64,
}

/// Brings the synthetic history up to `claims` claims (one order each, a thousandth of them
/// failed; a subscription every [`CLAIMS_PER_SUBSCRIPTION`]), received 10 ms apart from
/// `since`. Runs in chunks so that neither backend holds one huge transaction.
pub async fn seed(database: &DatabaseUrl, claims: i64, since: i64) -> Result<Seeded, sqlx::Error> {
    match database.backend() {
        Backend::Sqlite => {
            let pool = sqlx::SqlitePool::connect(database.expose()).await?;
            let (subscriptions, grants) = (subscriptions_sqlite(), grants_sqlite());
            let added = seed_on(
                &pool,
                [
                    CLAIMS_SQLITE,
                    ORDERS_SQLITE,
                    TERMS_SQLITE,
                    &subscriptions,
                    &grants,
                ],
                claims,
                since,
            )
            .await;
            pool.close().await;
            added
        }
        Backend::Postgres => {
            let pool = sqlx::PgPool::connect(database.expose()).await?;
            let (subscriptions, grants) = (subscriptions_postgres(), grants_postgres());
            let added = seed_on(
                &pool,
                [
                    CLAIMS_POSTGRES,
                    ORDERS_POSTGRES,
                    TERMS_POSTGRES,
                    &subscriptions,
                    &grants,
                ],
                claims,
                since,
            )
            .await;
            pool.close().await;
            added
        }
    }
}

async fn seed_on<DB>(
    pool: &Pool<DB>,
    inserts: [&str; 5],
    claims: i64,
    since: i64,
) -> Result<Seeded, sqlx::Error>
where
    DB: Database,
    for<'c> &'c Pool<DB>: Executor<'c, Database = DB>,
    for<'q> <DB as Database>::Arguments<'q>: IntoArguments<'q, DB>,
    i64: for<'q> sqlx::Encode<'q, DB> + sqlx::Decode<'static, DB> + sqlx::Type<DB>,
    (i64,): for<'r> sqlx::FromRow<'r, DB::Row>,
{
    const COUNT: &str = "SELECT COUNT(*) FROM processed_stripe_events \
                         WHERE event_id LIKE 'evt_syn_%'";
    let (have,): (i64,) = sqlx::query_as(COUNT).fetch_one(pool).await?;
    let mut from = have + 1;
    while from <= claims {
        let to = (from + 99_999).min(claims);
        for sql in inserts {
            sqlx::query(sql)
                .bind(to)
                .bind(since)
                .bind(from)
                .bind(SYNTHETIC_CUSTOMERS)
                .execute(pool)
                .await?;
        }
        from = to + 1;
    }
    // Fresh statistics, as autovacuum (PostgreSQL) or an operator's ANALYZE (SQLite) would
    // give a database after a bulk load; without them the planner guesses.
    sqlx::query("ANALYZE").execute(pool).await?;
    let (subscriptions,): (i64,) =
        sqlx::query_as("SELECT COUNT(*) FROM subscriptions WHERE subscription_id LIKE 'sub_syn_%'")
            .fetch_one(pool)
            .await?;
    Ok(Seeded {
        claims: (claims - have).max(0),
        subscriptions,
    })
}
