-- The subscriptions list shows the most recently changed first: walked in this index's order,
-- a page reads its rows and stops, instead of sorting every subscription first. An index
-- only: a previous version runs unchanged beside it.
CREATE INDEX IF NOT EXISTS subscriptions_updated
    ON subscriptions (updated_at DESC, subscription_id);
