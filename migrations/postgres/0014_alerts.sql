-- Alerts: conditions computed from the database by every instance's checker, opened once
-- per condition (whichever instance gets there first), repeated at most every interval
-- while they hold, resolved once. The messages go out per channel from an outbox, retried,
-- with their outcome kept.

-- One row per time a condition began to hold. All times are unix epoch milliseconds.
CREATE TABLE alerts (
    id               BIGINT  GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    -- failed_claims | stale_claims | deliveries_stopped | signature_failures |
    -- indeterminate_requests | reconcile_findings
    condition        TEXT    NOT NULL,
    opened_at        BIGINT  NOT NULL,
    -- Since when the condition holds as the data says (the oldest failed claim, the last
    -- accepted delivery, ...); NULL when the data does not say.
    since            BIGINT,
    -- How many things the condition counts now (claims, orders, failures, requests).
    count            BIGINT  NOT NULL,
    -- What it is, in one sentence, as of the last check.
    summary          TEXT    NOT NULL,
    -- A few of the ids concerned, one per line.
    samples          TEXT    NOT NULL DEFAULT '',
    -- The last message that went out (opened or reminder): reminders are compared with it,
    -- and the compare-and-set on it lets one instance of several send each reminder.
    last_notified_at BIGINT  NOT NULL,
    notifications    BIGINT  NOT NULL DEFAULT 1,
    checked_at       BIGINT  NOT NULL,
    resolved_at      BIGINT
);
-- At most one open alert per condition: the instance whose INSERT lands sends the message.
CREATE UNIQUE INDEX alerts_one_open ON alerts (condition) WHERE resolved_at IS NULL;
CREATE INDEX alerts_opened ON alerts (opened_at);

-- One message on one channel, and what became of it.
CREATE TABLE alert_deliveries (
    id              BIGINT  GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    -- NULL for the message of `claimcheck alerts test`.
    alert_id        BIGINT  REFERENCES alerts (id),
    -- opened | reminder | resolved | test
    kind            TEXT    NOT NULL CHECK (kind IN ('opened', 'reminder', 'resolved', 'test')),
    channel         TEXT    NOT NULL CHECK (channel IN ('email', 'webhook')),
    subject         TEXT    NOT NULL,
    body            TEXT    NOT NULL,
    -- superseded: a newer message about the same alert was queued before this one got out.
    status          TEXT    NOT NULL DEFAULT 'pending'
                            CHECK (status IN ('pending', 'sent', 'failed', 'superseded')),
    attempts        BIGINT  NOT NULL DEFAULT 0,
    next_attempt_at BIGINT  NOT NULL,
    -- Held by the instance sending it, so two instances never send one message twice.
    lease_until     BIGINT,
    last_error      TEXT,
    created_at      BIGINT  NOT NULL,
    sent_at         BIGINT
);
CREATE INDEX alert_deliveries_due ON alert_deliveries (status, next_attempt_at);
CREATE INDEX alert_deliveries_alert ON alert_deliveries (alert_id);

-- Deliveries refused for their signature, counted per minute. Each instance adds what it
-- refused since its last check (one write per check, however many forgeries arrive), so the
-- count is true across instances and cannot grow the table faster than a row a minute.
CREATE TABLE webhook_signature_failures (
    -- Unix epoch milliseconds at the start of the minute.
    minute   BIGINT PRIMARY KEY NOT NULL,
    failures BIGINT NOT NULL,
    last_at  BIGINT NOT NULL
);

-- The order API's checkout sessions by time: the "deliveries stopped" check counts them.
CREATE INDEX stripe_requests_created ON stripe_requests (created_at);
