-- What a worker leases, each in the order it is taken, so that a lease reads a batch of
-- index entries instead of every claim still in flight (the old (status, next_attempt_at)
-- index made the lease read and sort the whole backlog).
DROP INDEX IF EXISTS processed_stripe_events_due;
-- Pending claims, oldest due first.
CREATE INDEX processed_stripe_events_pending
    ON processed_stripe_events (next_attempt_at, received_at)
    WHERE status = 'processing' AND lease_expires_at IS NULL;
-- Leased claims by lease expiry: the stale ones (expired) come first, for the rescue and
-- the sweep that fails those out of attempts.
CREATE INDEX processed_stripe_events_leased
    ON processed_stripe_events (lease_expires_at)
    WHERE status = 'processing' AND lease_expires_at IS NOT NULL;

-- Payloads (a few KB of JSON each) compressed with lz4 rather than pglz: several times
-- cheaper to compress on every claim and to read back on every lease. A server built
-- without lz4 keeps pglz.
DO $$
BEGIN
    ALTER TABLE processed_stripe_events ALTER COLUMN payload SET COMPRESSION lz4;
EXCEPTION WHEN OTHERS THEN
    RAISE NOTICE 'lz4 is not available; payloads stay compressed with pglz';
END $$;
