-- A batch's id can never be NULL, on SQLite as on PostgreSQL. SQLite lets a TEXT PRIMARY KEY
-- hold NULL (a legacy quirk: only INTEGER PRIMARY KEY implies NOT NULL), so 0015's
-- `batch_id TEXT PRIMARY KEY` accepted what PostgreSQL's refuses; the schema parity test
-- (core/tests/store.rs) found it. Claimcheck never wrote a NULL id, so the rows are kept as
-- they are.
--
-- SQLite cannot add NOT NULL in place: the table is rebuilt under its own name. The items
-- reference it, and migrations run inside a transaction: the foreign-key checks are deferred
-- to the commit, by when every item finds its batch again.
PRAGMA defer_foreign_keys = ON;

CREATE TABLE bulk_redrives_v21 (
    -- bulk_<random>
    batch_id         TEXT    PRIMARY KEY NOT NULL,
    -- cli:<login> or dashboard:<operator>
    actor            TEXT    NOT NULL,
    reason           TEXT    NOT NULL,
    -- The filter that selected the claims (JSON, as the engine's BulkFilter writes it).
    filter           TEXT    NOT NULL,
    -- Claims selected when the operator confirmed.
    total            BIGINT  NOT NULL,
    -- Claims this batch ran to processed, ran and saw fail, or found taken or done by
    -- someone else (another batch, a worker) and left alone.
    processed        BIGINT  NOT NULL DEFAULT 0,
    failed           BIGINT  NOT NULL DEFAULT 0,
    skipped          BIGINT  NOT NULL DEFAULT 0,
    -- running | cancelled | finished. A running batch whose heartbeat lapsed (its process
    -- died or shut down) is shown as interrupted.
    state            TEXT    NOT NULL,
    -- Who runs it and until when its heartbeat holds (unix ms); refreshed after every claim.
    runner           TEXT,
    lease_until      BIGINT,
    -- Set by a cancel; the runner stops before its next claim.
    cancel_requested_by TEXT,
    -- Unix epoch milliseconds.
    created_at       BIGINT  NOT NULL,
    finished_at      BIGINT
);
INSERT INTO bulk_redrives_v21 (batch_id, actor, reason, filter, total, processed, failed,
                               skipped, state, runner, lease_until, cancel_requested_by,
                               created_at, finished_at)
SELECT batch_id, actor, reason, filter, total, processed, failed, skipped, state, runner,
       lease_until, cancel_requested_by, created_at, finished_at
FROM bulk_redrives;
DROP TABLE bulk_redrives;
ALTER TABLE bulk_redrives_v21 RENAME TO bulk_redrives;
CREATE INDEX bulk_redrives_created ON bulk_redrives (created_at);
