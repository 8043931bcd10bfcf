-- Orders created through the order API carry their price and Checkout URL; refunds made by
-- Claimcheck write revoke entries that no event stands behind; every outgoing Stripe POST is
-- recorded under its Idempotency-Key before it is sent; the shop's backend authenticates with
-- hashed API tokens.

ALTER TABLE orders ADD COLUMN amount BIGINT;
ALTER TABLE orders ADD COLUMN currency TEXT;
ALTER TABLE orders ADD COLUMN checkout_url TEXT;

-- A revoke written by a refund call names the request instead of an event. SQLite cannot drop
-- NOT NULL in place: the ledger (which nothing references) is rebuilt.
CREATE TABLE credit_ledger_v5 (
    id              INTEGER PRIMARY KEY AUTOINCREMENT,
    order_id        TEXT    NOT NULL REFERENCES orders (order_id),
    kind            TEXT    NOT NULL CHECK (kind IN ('unlock', 'revoke')),
    delta           BIGINT  NOT NULL,
    customer_email  TEXT,
    customer_id     TEXT,
    event_id        TEXT,
    created_at      BIGINT  NOT NULL,
    idempotency_key TEXT,
    UNIQUE (order_id, kind)
);
INSERT INTO credit_ledger_v5 (id, order_id, kind, delta, customer_email, customer_id, event_id,
                              created_at)
    SELECT id, order_id, kind, delta, customer_email, customer_id, event_id, created_at
    FROM credit_ledger;
DROP TABLE credit_ledger;
ALTER TABLE credit_ledger_v5 RENAME TO credit_ledger;
CREATE INDEX credit_ledger_customer_email ON credit_ledger (customer_email);

CREATE TABLE stripe_requests (
    -- Derived from the operation and the order (checkout-session:<order_id>, refund:<order_id>):
    -- one row per business operation, however often it is sent.
    idempotency_key   TEXT    PRIMARY KEY NOT NULL,
    -- checkout_session | refund
    operation         TEXT    NOT NULL,
    order_id          TEXT    NOT NULL REFERENCES orders (order_id),
    -- SHA-256 (hex) of the form body first sent under this key.
    params_hash       TEXT    NOT NULL,
    -- pending: recorded, not answered yet; indeterminate: a timeout, a dropped connection or a
    -- 5xx, so Stripe may or may not have acted: only a retry with this key tells;
    -- succeeded; failed: Stripe refused (4xx), retrying would change nothing.
    status            TEXT    NOT NULL
                      CHECK (status IN ('pending', 'indeterminate', 'succeeded', 'failed')),
    attempts          BIGINT  NOT NULL DEFAULT 0,
    http_status       BIGINT,
    stripe_request_id TEXT,
    -- The object Stripe created (cs_…, re_…).
    object_id         TEXT,
    -- Stripe's error type, code and message, or what went wrong on the way.
    error             TEXT,
    -- Unix epoch milliseconds.
    created_at        BIGINT  NOT NULL,
    updated_at        BIGINT  NOT NULL
);

CREATE INDEX stripe_requests_order ON stripe_requests (order_id);

CREATE TABLE api_tokens (
    -- Public part of the token (cct_<id>_<secret>), shown in listings.
    token_id    TEXT    PRIMARY KEY NOT NULL,
    name        TEXT    NOT NULL,
    -- SHA-256 (hex) of the whole token; the token itself is shown once and never stored.
    token_hash  TEXT    NOT NULL UNIQUE,
    created_at  BIGINT  NOT NULL,
    last_used_at BIGINT,
    revoked_at  BIGINT
);
