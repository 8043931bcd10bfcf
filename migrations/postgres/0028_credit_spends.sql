-- Spending credits: lots, spends, holds and the answers kept under Idempotency-Keys. Only new
-- tables: a previous version neither reads nor writes them (its balance is the order ledger's,
-- which spends do not touch).

-- What one grant put in a customer's balance: an order's unlock (`order:<order id>`, its
-- credits are the order's own ledger rows) or an adjustment (`adjust:<movement id>`, its
-- credits here). Created when the customer's credits are first moved or read after the unlock.
CREATE TABLE credit_lots (
    lot_id          TEXT    PRIMARY KEY NOT NULL,
    customer_email  TEXT    NOT NULL,
    order_id        TEXT    REFERENCES orders (order_id),
    -- Adjustment lots only; an order lot's credits are its ledger rows.
    credits         BIGINT  NOT NULL DEFAULT 0,
    -- What spends, negative adjustments and the expiry took from it: the sum of its
    -- credit_draws, kept here by the transaction that draws (under the customer's lock).
    drawn           BIGINT  NOT NULL DEFAULT 0,
    -- The part of `drawn` that expiry took (so that credits a refund or a dispute moves after
    -- the expiry are expired again, or given back, and the lot owes only what was spent).
    expired_credits BIGINT  NOT NULL DEFAULT 0,
    -- Unix ms; NULL: the credits never expire.
    expires_at      BIGINT,
    -- When the expiry was written (once; the rest of the lot in an `expire` movement).
    expired_at      BIGINT,
    created_at      BIGINT  NOT NULL
);
CREATE INDEX credit_lots_customer ON credit_lots (customer_email);
CREATE INDEX credit_lots_due ON credit_lots (expires_at) WHERE expired_at IS NULL;

-- Append-only: every change of a balance that is not an order's money. The order ledger
-- (credit_ledger) and these rows together sum to the balance.
CREATE TABLE credit_movements (
    id              BIGINT  GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    -- sp_… (a spend or a hold's capture), exp_<lot> (expiry, once per lot), adj_… .
    movement_id     TEXT    NOT NULL UNIQUE,
    customer_email  TEXT    NOT NULL,
    -- spend (−) | expire (−) | adjust (±)
    kind            TEXT    NOT NULL CHECK (kind IN ('spend', 'expire', 'adjust')),
    delta           BIGINT  NOT NULL,
    reference       TEXT,
    -- The shop's JSON object, as sent.
    metadata        TEXT,
    hold_id         TEXT,
    lot_id          TEXT,
    -- Who and why (adjustments).
    actor           TEXT,
    reason          TEXT,
    idempotency_key TEXT,
    created_at      BIGINT  NOT NULL
);
CREATE INDEX credit_movements_customer ON credit_movements (customer_email, created_at);
-- The search box finds a customer by a spend's reference or Idempotency-Key.
CREATE INDEX credit_movements_reference ON credit_movements (reference);
CREATE INDEX credit_movements_key ON credit_movements (idempotency_key);

-- Which lots a movement drew from.
CREATE TABLE credit_draws (
    movement_id     TEXT    NOT NULL,
    lot_id          TEXT    NOT NULL,
    credits         BIGINT  NOT NULL,
    PRIMARY KEY (movement_id, lot_id)
);
CREATE INDEX credit_draws_lot ON credit_draws (lot_id);

-- Credits reserved for work that may fail: captured (a spend) or released, once, or expired.
CREATE TABLE credit_holds (
    hold_id         TEXT    PRIMARY KEY NOT NULL,
    customer_email  TEXT    NOT NULL,
    credits         BIGINT  NOT NULL,
    reference       TEXT    NOT NULL,
    metadata        TEXT,
    -- active | captured | released | expired
    status          TEXT    NOT NULL
                    CHECK (status IN ('active', 'captured', 'released', 'expired')),
    captured        BIGINT,
    -- The capture's spend.
    spend_id        TEXT,
    expires_at      BIGINT  NOT NULL,
    created_at      BIGINT  NOT NULL,
    settled_at      BIGINT
);
CREATE INDEX credit_holds_customer ON credit_holds (customer_email, status);
CREATE INDEX credit_holds_reference ON credit_holds (reference);
CREATE INDEX credit_holds_due ON credit_holds (expires_at) WHERE status = 'active';

-- The answer given under each Idempotency-Key of the spend API, replayed byte for byte.
CREATE TABLE credit_requests (
    -- Where the key came from: api (every token of the shop), dashboard, cli.
    scope           TEXT    NOT NULL,
    idempotency_key TEXT    NOT NULL,
    -- SHA-256 of the operation and its parameters: another body under the key is refused.
    request_hash    TEXT    NOT NULL,
    status          INTEGER NOT NULL,
    body            TEXT    NOT NULL,
    created_at      BIGINT  NOT NULL,
    PRIMARY KEY (scope, idempotency_key)
);
CREATE INDEX credit_requests_created ON credit_requests (created_at);
