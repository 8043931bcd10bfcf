-- no-transaction
-- The credits_owed alert sums the balances of customers with a revoke, at every check: the
-- revokes (refunds and disputes, few) found without reading the whole ledger. Built without
-- blocking writes (CONCURRENTLY, hence outside a transaction).
CREATE INDEX CONCURRENTLY IF NOT EXISTS credit_ledger_revokes
    ON credit_ledger (order_id) WHERE kind = 'revoke';
