-- Claims on Stripe events: the row that makes every acting event durable before Stripe gets
-- its 2xx, and that the worker leases while it fulfils the order behind it.
-- All times are unix epoch milliseconds (UTC) so both backends share one query text.
CREATE TABLE processed_stripe_events (
    -- Stripe's `evt_…` id: one claim per event, whatever the number of deliveries.
    event_id          TEXT    PRIMARY KEY NOT NULL,
    event_type        TEXT    NOT NULL,
    -- `data.object.id` (e.g. `cs_…`): with event_type, catches twin Event objects for one action.
    object_id         TEXT    NOT NULL,
    -- 'processing' (pending, running or stale, told apart by the lease), 'processed', 'failed'.
    status            TEXT    NOT NULL DEFAULT 'processing'
                              CHECK (status IN ('processing', 'processed', 'failed')),
    -- Who holds the claim and until when; NULL while pending.
    lease_owner       TEXT,
    lease_expires_at  BIGINT,
    attempts          BIGINT  NOT NULL DEFAULT 0,
    -- Earliest time a worker may take the claim again (backoff after a failure).
    next_attempt_at   BIGINT  NOT NULL,
    last_error        TEXT,
    -- Stripe's `created` (unix seconds) and `livemode` from the envelope.
    stripe_created    BIGINT  NOT NULL,
    livemode          BOOLEAN NOT NULL,
    received_at       BIGINT  NOT NULL,
    -- Signed deliveries of this event so far (retries, resends, replays).
    deliveries        BIGINT  NOT NULL DEFAULT 1,
    processed_at      BIGINT,
    -- The raw event JSON exactly as delivered.
    payload           TEXT    NOT NULL,
    UNIQUE (object_id, event_type)
);

-- Workers look for pending claims that are due.
CREATE INDEX processed_stripe_events_due ON processed_stripe_events (status, next_attempt_at);
