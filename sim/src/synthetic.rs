//! Synthetic history for `bench-dashboard`: many processed claims with their orders and the
//! search terms their payloads would name (the customer's e-mail, the order id), written in
//! bulk by the database itself, straight into the schema the migrations made.

use claimcheck_core::{Backend, DatabaseUrl};
use sqlx::{Database, Executor, IntoArguments, Pool};

/// Customers the synthetic orders are spread over (each has `claims / CUSTOMERS` orders).
pub const SYNTHETIC_CUSTOMERS: i64 = 50_000;

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

/// Brings the synthetic history up to `claims` claims (one order each, a thousandth of them
/// failed), received 10 ms apart from `since`; returns how many it added. Runs in chunks so
/// that neither backend holds one huge transaction.
pub async fn seed(database: &DatabaseUrl, claims: i64, since: i64) -> Result<i64, sqlx::Error> {
    match database.backend() {
        Backend::Sqlite => {
            let pool = sqlx::SqlitePool::connect(database.expose()).await?;
            let added = seed_on(
                &pool,
                [CLAIMS_SQLITE, ORDERS_SQLITE, TERMS_SQLITE],
                claims,
                since,
            )
            .await;
            pool.close().await;
            added
        }
        Backend::Postgres => {
            let pool = sqlx::PgPool::connect(database.expose()).await?;
            let added = seed_on(
                &pool,
                [CLAIMS_POSTGRES, ORDERS_POSTGRES, TERMS_POSTGRES],
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
    inserts: [&str; 3],
    claims: i64,
    since: i64,
) -> Result<i64, sqlx::Error>
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
    Ok((claims - have).max(0))
}
