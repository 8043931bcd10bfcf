-- no-transaction
-- A customer's page and the search by e-mail list what the order API was asked for them:
-- found without reading every ask. Built without blocking writes (CONCURRENTLY, hence outside
-- a transaction).
CREATE INDEX CONCURRENTLY IF NOT EXISTS subscription_checkouts_customer
    ON subscription_checkouts (customer_email);
