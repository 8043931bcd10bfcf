-- Who did what to money or credits, when and why. Append-only.
CREATE TABLE audit_log (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    -- Unix epoch milliseconds.
    at          BIGINT  NOT NULL,
    -- The operator (dashboard user, or `cli:<login>` for the command line).
    actor       TEXT    NOT NULL,
    -- e.g. redrive
    action      TEXT    NOT NULL,
    -- What it acted on, e.g. an event id.
    target      TEXT    NOT NULL,
    reason      TEXT    NOT NULL,
    -- What came of it, in words.
    outcome     TEXT    NOT NULL
);

CREATE INDEX audit_log_target ON audit_log (target);
