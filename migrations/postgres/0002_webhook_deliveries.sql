-- Every delivery whose signature verified, and what became of it. Deliveries with a bad
-- signature are only counted (metrics) and logged: a forger cannot grow this table. Replays of
-- one event are recorded up to a cap per event id (see the engine's DELIVERIES_KEPT_PER_EVENT).
CREATE TABLE webhook_deliveries (
    id           BIGINT  GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    -- NULL when the payload could not be parsed.
    event_id     TEXT,
    event_type   TEXT,
    object_id    TEXT,
    -- claimed | duplicate_event | duplicate_action | ignored | bad_payload | livemode_mismatch
    outcome      TEXT    NOT NULL,
    -- For a duplicate action: the event id that holds the claim on (object_id, event_type).
    duplicate_of TEXT,
    -- Why a delivery was refused, in words.
    detail       TEXT,
    -- Unix epoch milliseconds.
    received_at  BIGINT  NOT NULL
);

CREATE INDEX webhook_deliveries_event ON webhook_deliveries (event_id);
CREATE INDEX webhook_deliveries_received ON webhook_deliveries (received_at);
