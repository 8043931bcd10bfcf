-- no-transaction
-- The subscriptions list shows the most recently changed first: walked in this index's order,
-- a page reads its rows and stops, instead of sorting every subscription first. Built without
-- blocking writes (CONCURRENTLY, hence outside a transaction); an index only, so a previous
-- version runs unchanged beside it.
CREATE INDEX CONCURRENTLY IF NOT EXISTS subscriptions_updated
    ON subscriptions (updated_at DESC, subscription_id);
