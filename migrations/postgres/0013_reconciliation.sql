-- Reconciliation: events Stripe gave up delivering are found by listing them from the API and
-- claimed through the same path as a delivery. Where a claim and a delivery came from:
-- 'webhook' (Stripe delivered it) or 'reconcile' (Claimcheck fetched it from the API).
ALTER TABLE processed_stripe_events ADD COLUMN source TEXT NOT NULL DEFAULT 'webhook';
ALTER TABLE webhook_deliveries ADD COLUMN source TEXT NOT NULL DEFAULT 'webhook';

-- The one reconciler state: where the next run starts, and who runs now (a lease, so that
-- several instances run one at a time).
CREATE TABLE reconcile_state (
    id           INTEGER PRIMARY KEY CHECK (id = 1),
    -- Unix seconds: the next run lists events created since this (minus the overlap).
    cursor       BIGINT,
    lease_owner  TEXT,
    -- Unix epoch milliseconds.
    lease_until  BIGINT
);
INSERT INTO reconcile_state (id) VALUES (1);

-- Every run and what it found.
CREATE TABLE reconcile_runs (
    id              BIGINT  GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    -- Unix epoch milliseconds.
    started_at      BIGINT  NOT NULL,
    finished_at     BIGINT  NOT NULL,
    -- Unix seconds: events created since this were listed.
    since           BIGINT  NOT NULL,
    -- reconciler (the periodic task), cli:<user>, dashboard:<operator>
    actor           TEXT    NOT NULL,
    dry_run         BOOLEAN NOT NULL,
    listed          BIGINT  NOT NULL,
    already_claimed BIGINT  NOT NULL,
    -- Claimed by this run (a dry run: would have been).
    claimed         BIGINT  NOT NULL,
    -- Why the run failed; NULL when it succeeded.
    error           TEXT
);
CREATE INDEX reconcile_runs_started ON reconcile_runs (started_at);
