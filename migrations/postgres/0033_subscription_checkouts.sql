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
-- the subscription's reference, so it no longer refers to orders only. The previous version
-- writes only orders' requests and reads the rest as rows it does not link.
ALTER TABLE stripe_requests DROP CONSTRAINT IF EXISTS stripe_requests_order_id_fkey;
