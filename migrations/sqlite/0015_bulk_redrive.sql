-- Bulk re-drive: an operator re-drives every claim a filter selects, in the background, one
-- claim at a time through the same compare-and-set as a single re-drive. The batch lives
-- here, not in a process, so its progress page works from any instance and after the page
-- was closed.
CREATE TABLE bulk_redrives (
    -- bulk_<random>
    batch_id         TEXT    PRIMARY KEY,
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
CREATE INDEX bulk_redrives_created ON bulk_redrives (created_at);

-- The claims of a batch, in the order they run; outcome stays NULL until the claim's turn.
CREATE TABLE bulk_redrive_items (
    batch_id   TEXT    NOT NULL REFERENCES bulk_redrives (batch_id),
    seq        BIGINT  NOT NULL,
    event_id   TEXT    NOT NULL,
    -- processed | failed | skipped
    outcome    TEXT,
    -- The error, or why it was skipped.
    detail     TEXT,
    PRIMARY KEY (batch_id, seq)
);

-- Audit entries written by a batch name it: one per claim, and the batch's own entries.
ALTER TABLE audit_log ADD COLUMN batch_id TEXT;
CREATE INDEX audit_log_batch ON audit_log (batch_id) WHERE batch_id IS NOT NULL;
