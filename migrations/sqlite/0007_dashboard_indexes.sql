-- The dashboard's events list: newest first and its keyset pages, and the same within one
-- stored status (processed, failed; pending, running and stale are 'processing').
CREATE INDEX processed_stripe_events_recent ON processed_stripe_events (received_at, event_id);
CREATE INDEX processed_stripe_events_status_recent
    ON processed_stripe_events (status, received_at, event_id);
