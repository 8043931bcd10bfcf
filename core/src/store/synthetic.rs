//! Synthetic history for benchmarks: many processed claims with their orders, written in bulk
//! by the database itself. Never used by the product's own paths.

use super::{Pool, Store};
use crate::error::StoreError;

/// Customers the synthetic orders are spread over (each has `claims / CUSTOMERS` orders).
pub const SYNTHETIC_CUSTOMERS: i64 = 50_000;

const CLAIMS_POSTGRES: &str = "\
    INSERT INTO processed_stripe_events (event_id, event_type, object_id, action_key, status, \
        attempts, next_attempt_at, stripe_created, livemode, received_at, processed_at, payload) \
    SELECT 'evt_syn_' || i, 'checkout.session.completed', 'cs_syn_' || i, \
        '', \
        CASE WHEN i % 1000 = 0 THEN 'failed' ELSE 'processed' END, 1, 0, 0, FALSE, \
        $2 + i * 10, $2 + i * 10 + 5, '{}' \
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
        attempts, next_attempt_at, stripe_created, livemode, received_at, processed_at, payload) \
    SELECT 'evt_syn_' || i, 'checkout.session.completed', 'cs_syn_' || i, \
        '', \
        CASE WHEN i % 1000 = 0 THEN 'failed' ELSE 'processed' END, 1, 0, 0, FALSE, \
        $2 + i * 10, $2 + i * 10 + 5, '{}' \
    FROM s WHERE true ON CONFLICT DO NOTHING";

const ORDERS_SQLITE: &str = "\
    WITH RECURSIVE s(i) AS (SELECT $3 UNION ALL SELECT i + 1 FROM s WHERE i < $1) \
    INSERT INTO orders (order_id, checkout_session_id, payment_intent_id, customer_email, \
        package, credits, status, payment_status, created_at, updated_at) \
    SELECT 'ord_syn_' || i, 'cs_syn_' || i, 'pi_syn_' || i, \
        'customer' || (i % $4) || '@example.ch', 'thesis-40', 40, 'paid', 'paid', \
        $2 + i * 10, $2 + i * 10 \
    FROM s WHERE true ON CONFLICT DO NOTHING";

impl Store {
    /// Brings the synthetic history up to `claims` claims (one order each, a thousandth of
    /// them failed), received 10 ms apart from `since`; returns how many it added. Runs in
    /// chunks so that neither backend holds one huge transaction.
    pub async fn seed_synthetic(&self, claims: i64, since: i64) -> Result<i64, StoreError> {
        const COUNT: &str = "SELECT COUNT(*) FROM processed_stripe_events \
                             WHERE event_id LIKE 'evt_syn_%'";
        let have: i64 = on_pool!(self, pool => sqlx::query_scalar(COUNT).fetch_one(pool).await)?;
        let (claims_sql, orders_sql) = match self.pool {
            Pool::Sqlite(_) => (CLAIMS_SQLITE, ORDERS_SQLITE),
            Pool::Postgres(_) => (CLAIMS_POSTGRES, ORDERS_POSTGRES),
        };
        let mut from = have + 1;
        while from <= claims {
            let to = (from + 99_999).min(claims);
            for sql in [claims_sql, orders_sql] {
                on_pool!(self, pool => {
                    sqlx::query(sql)
                        .bind(to)
                        .bind(since)
                        .bind(from)
                        .bind(SYNTHETIC_CUSTOMERS)
                        .execute(pool)
                        .await
                        .map(|_| ())
                })?;
            }
            from = to + 1;
        }
        // Fresh statistics, as autovacuum (PostgreSQL) or an operator's ANALYZE (SQLite)
        // would give a database after a bulk load; without them the planner guesses.
        on_pool!(self, pool => sqlx::query("ANALYZE").execute(pool).await.map(|_| ()))?;
        Ok((claims - have).max(0))
    }
}
