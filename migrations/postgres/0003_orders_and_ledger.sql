-- Orders as Stripe Checkout tells us about them, and the append-only credit ledger that a
-- customer's balance is derived from.

CREATE TABLE orders (
    -- The shop's order id: the session's metadata.order_id, else its client_reference_id.
    order_id            TEXT    PRIMARY KEY NOT NULL,
    checkout_session_id TEXT    UNIQUE,
    -- Links a charge.refunded (which carries no session) back to its order.
    payment_intent_id   TEXT    UNIQUE,
    customer_id         TEXT,
    customer_email      TEXT,
    package             TEXT,
    -- Credits this order unlocks once paid.
    credits             BIGINT  NOT NULL,
    -- awaiting_payment | paid | payment_failed | refunded
    status              TEXT    NOT NULL
                        CHECK (status IN ('awaiting_payment', 'paid', 'payment_failed', 'refunded')),
    -- Stripe's payment_status as last seen: paid | unpaid | no_payment_required
    payment_status      TEXT    NOT NULL,
    -- Unix epoch milliseconds.
    created_at          BIGINT  NOT NULL,
    updated_at          BIGINT  NOT NULL
);

CREATE INDEX orders_customer_email ON orders (customer_email);
CREATE INDEX orders_customer_id ON orders (customer_id);

-- Append-only: rows are inserted, never updated or deleted. One unlock and at most one
-- revoke per order, whatever the number of events, workers or re-drives.
CREATE TABLE credit_ledger (
    id              BIGINT  GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    order_id        TEXT    NOT NULL REFERENCES orders (order_id),
    -- unlock (positive delta) | revoke (negative delta)
    kind            TEXT    NOT NULL CHECK (kind IN ('unlock', 'revoke')),
    delta           BIGINT  NOT NULL,
    customer_email  TEXT,
    customer_id     TEXT,
    -- The event whose fulfilment wrote this entry.
    event_id        TEXT    NOT NULL,
    created_at      BIGINT  NOT NULL,
    UNIQUE (order_id, kind)
);

CREATE INDEX credit_ledger_customer_email ON credit_ledger (customer_email);
