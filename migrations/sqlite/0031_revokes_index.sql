-- The credits_owed alert sums the balances of customers with a revoke, at every check: the
-- revokes (refunds and disputes, few) found without reading the whole ledger.
CREATE INDEX IF NOT EXISTS credit_ledger_revokes
    ON credit_ledger (order_id) WHERE kind = 'revoke';
