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

-- What tells two actions of one type on one object apart ('' for types that happen once per
-- object; charge.refunded: the cumulative amount_refunded, which each refund raises).
ALTER TABLE processed_stripe_events ADD COLUMN action_key TEXT;
UPDATE processed_stripe_events
SET action_key = CASE WHEN event_type = 'charge.refunded'
              THEN COALESCE(CAST(payload::jsonb #>> '{data,object,amount_refunded}' AS TEXT), 'full')
              ELSE '' END;
ALTER TABLE processed_stripe_events ALTER COLUMN action_key SET NOT NULL;
-- Unique per action: twin Event objects for one action are claimed once. Leading with the
-- object id, the one index also serves the events list's search by object.
ALTER TABLE processed_stripe_events
    ADD CONSTRAINT processed_stripe_events_action UNIQUE (object_id, event_type, action_key);
ALTER TABLE processed_stripe_events
    DROP CONSTRAINT processed_stripe_events_object_id_event_type_key;

ALTER TABLE orders DROP CONSTRAINT orders_status_check;
-- awaiting_payment | payment_failed | paid | partially_refunded | refunded | disputed |
-- chargeback (the engine's money::OrderStatus)
ALTER TABLE orders ADD CONSTRAINT orders_status_check
    CHECK (status IN ('awaiting_payment', 'payment_failed', 'paid', 'partially_refunded',
                      'refunded', 'disputed', 'chargeback'));
-- The largest cumulative refunded amount seen (charge.refunded's amount_refunded, or the
-- total after a refund Claimcheck made). Only grows, so refunds in any order converge.
ALTER TABLE orders ADD COLUMN amount_refunded BIGINT NOT NULL DEFAULT 0;
-- A refund before this version was a full one.
UPDATE orders SET amount_refunded = COALESCE(amount, 1) WHERE status = 'refunded';
-- The charge's dispute (dp_…) and where it stands.
ALTER TABLE orders ADD COLUMN dispute_id TEXT;
ALTER TABLE orders ADD COLUMN dispute_status TEXT
    CHECK (dispute_status IN ('open', 'won', 'lost'));
-- When the current Checkout Session expires (unix ms); a new one is opened after that.
ALTER TABLE orders ADD COLUMN checkout_expires_at BIGINT;
-- Which Checkout Session this is: 1, then 2 after the first expired (its key gets `:2`).
ALTER TABLE orders ADD COLUMN checkout_generation BIGINT NOT NULL DEFAULT 1;

ALTER TABLE credit_ledger DROP CONSTRAINT credit_ledger_kind_check;
-- unlock (+) | revoke (−, money refunded) | restore (+, a refund failed) |
-- dispute_hold (−) | dispute_release (+, the dispute was won)
ALTER TABLE credit_ledger ADD CONSTRAINT credit_ledger_kind_check
    CHECK (kind IN ('unlock', 'revoke', 'restore', 'dispute_hold', 'dispute_release'));
-- What makes a step one step: '' for the unlock, else the event id or Idempotency-Key.
ALTER TABLE credit_ledger ADD COLUMN step TEXT NOT NULL DEFAULT '';
-- The money behind the step, in minor units (refunded so far, failed refund, disputed).
ALTER TABLE credit_ledger ADD COLUMN amount BIGINT;
UPDATE credit_ledger l
SET step = COALESCE(l.event_id, l.idempotency_key, ''), amount = o.amount
FROM orders o
WHERE o.order_id = l.order_id AND l.kind = 'revoke';
ALTER TABLE credit_ledger DROP CONSTRAINT credit_ledger_order_id_kind_key;
ALTER TABLE credit_ledger ADD CONSTRAINT credit_ledger_order_id_kind_step_key
    UNIQUE (order_id, kind, step);

-- Refunds that failed after they were made (refund.failed): their money came back, and so do
-- the credits revoked for it. One row per refund, whatever the number of events.
CREATE TABLE failed_refunds (
    refund_id   TEXT    PRIMARY KEY NOT NULL,
    order_id    TEXT    NOT NULL REFERENCES orders (order_id),
    -- Minor units.
    amount      BIGINT  NOT NULL,
    event_id    TEXT    NOT NULL,
    -- Unix epoch milliseconds.
    created_at  BIGINT  NOT NULL
);
CREATE INDEX failed_refunds_order ON failed_refunds (order_id);

-- A refund request remembers its amount (to send the same request again after a crash); a
-- Checkout Session replaced after it expired is marked so.
ALTER TABLE stripe_requests ADD COLUMN amount BIGINT;
ALTER TABLE stripe_requests ADD COLUMN expired_at BIGINT;
