-- Subscriptions the shop asks for through the order API (`POST /api/subscriptions`): the
-- shop's reference, plan and customer before Stripe knows them, and the Checkout Session
-- opened for them (the same generations as an order's). A new table; the previous version
-- neither reads nor writes it.
CREATE TABLE subscription_checkouts (
    subscription_ref    TEXT    PRIMARY KEY NOT NULL,
    plan                TEXT    NOT NULL,
    customer_email      TEXT    NOT NULL,
    -- The plan as it was sold: a retry sends the same parameters under the same key.
    credits             BIGINT  NOT NULL,
    amount              BIGINT  NOT NULL,
    currency            TEXT    NOT NULL,
    billing_interval    TEXT    NOT NULL,
    checkout_generation BIGINT  NOT NULL DEFAULT 1,
    checkout_session_id TEXT,
    checkout_url        TEXT,
    checkout_expires_at BIGINT,
    created_at          BIGINT  NOT NULL,
    updated_at          BIGINT  NOT NULL
);

-- A subscription's outgoing requests (its Checkout Session, its cancellation) are recorded
-- under its reference: `order_id` names the order or, for the `subscription_*` operations,
-- the subscription's reference, so it no longer refers to orders only. SQLite drops a
-- foreign key by rebuilding the table (same columns, same indexes).
CREATE TABLE stripe_requests_v33 (
    idempotency_key   TEXT    PRIMARY KEY NOT NULL,
    operation         TEXT    NOT NULL,
    order_id          TEXT    NOT NULL,
    params_hash       TEXT    NOT NULL,
    status            TEXT    NOT NULL
                      CHECK (status IN ('pending', 'indeterminate', 'succeeded', 'failed')),
    attempts          BIGINT  NOT NULL DEFAULT 0,
    http_status       BIGINT,
    stripe_request_id TEXT,
    object_id         TEXT,
    error             TEXT,
    created_at        BIGINT  NOT NULL,
    updated_at        BIGINT  NOT NULL,
    amount            BIGINT,
    expired_at        BIGINT
);
INSERT INTO stripe_requests_v33 (idempotency_key, operation, order_id, params_hash, status,
                                 attempts, http_status, stripe_request_id, object_id, error,
                                 created_at, updated_at, amount, expired_at)
    SELECT idempotency_key, operation, order_id, params_hash, status, attempts, http_status,
           stripe_request_id, object_id, error, created_at, updated_at, amount, expired_at
    FROM stripe_requests;
DROP TABLE stripe_requests;
ALTER TABLE stripe_requests_v33 RENAME TO stripe_requests;
CREATE INDEX stripe_requests_order ON stripe_requests (order_id);
CREATE INDEX stripe_requests_created ON stripe_requests (created_at);
CREATE INDEX stripe_requests_object ON stripe_requests (object_id) WHERE object_id IS NOT NULL;
CREATE INDEX stripe_requests_status ON stripe_requests (status, updated_at);
