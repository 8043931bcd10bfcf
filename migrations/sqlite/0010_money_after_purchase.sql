-- Money after the purchase: partial and several refunds per charge, failed refunds, disputes.
--
-- * A claim's twin key becomes (object id, event type, action_key), a per-type function of
--   the event (see the engine's webhook::envelope): `(object id, event type)` named one
--   action only for types that happen once per object; `charge.refunded` recurs on one
--   charge, once per refund, and its action_key is the cumulative amount_refunded.
-- * The ledger keeps one row per (order, kind, step): an unlock, then revoke / restore /
--   dispute steps, each naming the event or Idempotency-Key behind it.
-- * Orders remember what their money says: the largest cumulative refunded amount seen and
--   the dispute; failed refunds are kept one row per refund.
--
-- SQLite cannot change a UNIQUE or CHECK constraint in place: the three tables are rebuilt.
-- `orders` is referenced by other tables' foreign keys, and migrations run inside a
-- transaction (where foreign keys cannot be switched off): the checks are deferred to the
-- commit, the rows are kept aside, the table is dropped and made anew under its own name, so
-- every reference finds its row again before the commit checks.
PRAGMA defer_foreign_keys = ON;

CREATE TABLE processed_stripe_events_v10 (
    event_id          TEXT    PRIMARY KEY NOT NULL,
    event_type        TEXT    NOT NULL,
    object_id         TEXT    NOT NULL,
    -- What tells two actions of one type on one object apart ('' for types that happen once
    -- per object; charge.refunded: the cumulative amount_refunded, which each refund raises).
    action_key        TEXT    NOT NULL,
    status            TEXT    NOT NULL DEFAULT 'processing'
                              CHECK (status IN ('processing', 'processed', 'failed')),
    lease_owner       TEXT,
    lease_expires_at  BIGINT,
    attempts          BIGINT  NOT NULL DEFAULT 0,
    next_attempt_at   BIGINT  NOT NULL,
    last_error        TEXT,
    stripe_created    BIGINT  NOT NULL,
    livemode          BOOLEAN NOT NULL,
    received_at       BIGINT  NOT NULL,
    deliveries        BIGINT  NOT NULL DEFAULT 1,
    processed_at      BIGINT,
    payload           TEXT    NOT NULL,
    -- Unique per action: twin Event objects for one action are claimed once. Leading with
    -- the object id, the one index also serves the events list's search by object.
    UNIQUE (object_id, event_type, action_key)
);
INSERT INTO processed_stripe_events_v10
    (event_id, event_type, object_id, action_key, status, lease_owner, lease_expires_at,
     attempts, next_attempt_at, last_error, stripe_created, livemode, received_at, deliveries,
     processed_at, payload)
SELECT event_id, event_type, object_id,
       CASE WHEN event_type = 'charge.refunded'
              THEN COALESCE(CAST(json_extract(payload, '$.data.object.amount_refunded') AS TEXT), 'full')
              ELSE '' END,
       status, lease_owner, lease_expires_at, attempts, next_attempt_at, last_error,
       stripe_created, livemode, received_at, deliveries, processed_at, payload
FROM processed_stripe_events;
DROP TABLE processed_stripe_events;
ALTER TABLE processed_stripe_events_v10 RENAME TO processed_stripe_events;
CREATE INDEX processed_stripe_events_due ON processed_stripe_events (status, next_attempt_at);
CREATE INDEX processed_stripe_events_recent ON processed_stripe_events (received_at, event_id);
CREATE INDEX processed_stripe_events_status_recent
    ON processed_stripe_events (status, received_at, event_id);

CREATE TABLE orders_v9 AS SELECT * FROM orders;
DROP TABLE orders;
CREATE TABLE orders (
    order_id            TEXT    PRIMARY KEY NOT NULL,
    checkout_session_id TEXT    UNIQUE,
    payment_intent_id   TEXT    UNIQUE,
    customer_id         TEXT,
    customer_email      TEXT,
    package             TEXT,
    credits             BIGINT  NOT NULL,
    -- awaiting_payment | payment_failed | paid | partially_refunded | refunded | disputed |
    -- chargeback (the engine's money::OrderStatus)
    status              TEXT    NOT NULL
                        CHECK (status IN ('awaiting_payment', 'payment_failed', 'paid',
                                          'partially_refunded', 'refunded', 'disputed',
                                          'chargeback')),
    payment_status      TEXT    NOT NULL,
    created_at          BIGINT  NOT NULL,
    updated_at          BIGINT  NOT NULL,
    -- What was charged, in the currency's minor unit: the order API's price, else the
    -- session's amount_total or the charge's amount.
    amount              BIGINT,
    currency            TEXT,
    checkout_url        TEXT,
    -- The largest cumulative refunded amount seen (charge.refunded's amount_refunded, or the
    -- total after a refund Claimcheck made). Only grows, so refunds in any order converge.
    amount_refunded     BIGINT  NOT NULL DEFAULT 0,
    -- The charge's dispute (dp_…) and where it stands: open | won | lost.
    dispute_id          TEXT,
    dispute_status      TEXT    CHECK (dispute_status IN ('open', 'won', 'lost')),
    -- When the current Checkout Session expires (unix ms); a new one is opened after that.
    checkout_expires_at BIGINT,
    -- Which Checkout Session this is: 1, then 2 after the first expired (its key gets `:2`).
    checkout_generation BIGINT  NOT NULL DEFAULT 1
);
INSERT INTO orders
    (order_id, checkout_session_id, payment_intent_id, customer_id, customer_email, package,
     credits, status, payment_status, created_at, updated_at, amount, currency, checkout_url,
     amount_refunded)
SELECT order_id, checkout_session_id, payment_intent_id, customer_id, customer_email, package,
       credits, status, payment_status, created_at, updated_at, amount, currency, checkout_url,
       -- A refund before this version was a full one.
       CASE WHEN status = 'refunded' THEN COALESCE(amount, 1) ELSE 0 END
FROM orders_v9;
DROP TABLE orders_v9;
CREATE INDEX orders_customer_email ON orders (customer_email);
CREATE INDEX orders_customer_id ON orders (customer_id) WHERE customer_id IS NOT NULL;

CREATE TABLE credit_ledger_v10 (
    id              INTEGER PRIMARY KEY AUTOINCREMENT,
    order_id        TEXT    NOT NULL REFERENCES orders (order_id),
    -- unlock (+) | revoke (−, money refunded) | restore (+, a refund failed) |
    -- dispute_hold (−) | dispute_release (+, the dispute was won)
    kind            TEXT    NOT NULL CHECK (kind IN ('unlock', 'revoke', 'restore',
                                                     'dispute_hold', 'dispute_release')),
    delta           BIGINT  NOT NULL,
    customer_email  TEXT,
    customer_id     TEXT,
    -- The event whose fulfilment wrote this entry; NULL for a step written by a call
    -- Claimcheck made (which names its Idempotency-Key instead).
    event_id        TEXT,
    created_at      BIGINT  NOT NULL,
    idempotency_key TEXT,
    -- What makes a step one step: '' for the unlock, else the event id or Idempotency-Key.
    step            TEXT    NOT NULL DEFAULT '',
    -- The money behind the step, in minor units (refunded so far, failed refund, disputed).
    amount          BIGINT,
    UNIQUE (order_id, kind, step)
);
INSERT INTO credit_ledger_v10 (id, order_id, kind, delta, customer_email, customer_id, event_id,
                               created_at, idempotency_key, step, amount)
SELECT l.id, l.order_id, l.kind, l.delta, l.customer_email, l.customer_id, l.event_id,
       l.created_at, l.idempotency_key,
       CASE WHEN l.kind = 'unlock' THEN ''
            ELSE COALESCE(l.event_id, l.idempotency_key, '') END,
       CASE WHEN l.kind = 'revoke' THEN o.amount END
FROM credit_ledger l JOIN orders o ON o.order_id = l.order_id;
DROP TABLE credit_ledger;
ALTER TABLE credit_ledger_v10 RENAME TO credit_ledger;
CREATE INDEX credit_ledger_customer_email ON credit_ledger (customer_email);
CREATE INDEX credit_ledger_created ON credit_ledger (created_at);

-- Refunds that failed after they were made (refund.failed): their money came back, and so do
-- the credits revoked for it. One row per refund, whatever the number of events.
CREATE TABLE failed_refunds (
    refund_id   TEXT    PRIMARY KEY NOT NULL,
    order_id    TEXT    NOT NULL REFERENCES orders (order_id),
    -- Minor units.
    amount      BIGINT  NOT NULL,
    event_id    TEXT    NOT NULL,
    created_at  BIGINT  NOT NULL
);
CREATE INDEX failed_refunds_order ON failed_refunds (order_id);

-- A refund request remembers its amount (to send the same request again after a crash); a
-- Checkout Session replaced after it expired is marked so.
ALTER TABLE stripe_requests ADD COLUMN amount BIGINT;
ALTER TABLE stripe_requests ADD COLUMN expired_at BIGINT;
