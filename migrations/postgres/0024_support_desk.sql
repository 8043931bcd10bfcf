-- The support desk: claims an operator resolved without re-driving them, where each claim
-- came from, and a payment's own events found by the object they are about. Only expanding:
-- a version that knows none of these columns keeps working (it sees a resolved claim as
-- failed, which it still is).

-- A failed claim that can never succeed, set aside by an admin: still status 'failed', so
-- its history stays whole, but shown as resolved and left out of alerts and re-drives.
-- Reversible: clearing resolved_at makes it failed again. Unix epoch milliseconds.
ALTER TABLE processed_stripe_events ADD COLUMN resolved_at BIGINT;
-- The audit log's actor name (dashboard:<operator>, cli:<user>) and the reason given.
ALTER TABLE processed_stripe_events ADD COLUMN resolved_by TEXT;
ALTER TABLE processed_stripe_events ADD COLUMN resolution TEXT;

-- For a claim the reconciler made (source 'reconcile'): the run that recovered it, by the
-- run's key (reconcile_runs.run_key), so an alert can link to exactly what one run found.
ALTER TABLE processed_stripe_events ADD COLUMN source_run TEXT;
CREATE INDEX processed_stripe_events_source_run ON processed_stripe_events (source_run)
    WHERE source_run IS NOT NULL;
-- The lease owner's token the run worked under; NULL for runs recorded before it.
ALTER TABLE reconcile_runs ADD COLUMN run_key TEXT;
CREATE UNIQUE INDEX reconcile_runs_key ON reconcile_runs (run_key);

-- Deliveries by the object they are about (a payment intent's own telemetry events on its
-- order's timeline: why a debit failed) and by type (the search finds ignored types).
CREATE INDEX webhook_deliveries_object ON webhook_deliveries (object_id);
CREATE INDEX webhook_deliveries_type ON webhook_deliveries (event_type, received_at);
