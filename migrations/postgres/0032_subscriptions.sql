-- Subscriptions: what Stripe Billing's events say of each, and the credits each paid invoice
-- granted per period. Only new tables and one new nullable column: a previous version neither
-- reads nor writes them.

-- One row per Stripe subscription, written by whichever of its events comes first (a paid
-- invoice, a status event, its Checkout Session) and completed by the others.
CREATE TABLE subscriptions (
    subscription_id     TEXT    PRIMARY KEY NOT NULL,
    -- The shop's reference (metadata.subscription_ref, or the session's
    -- client_reference_id).
    subscription_ref    TEXT,
    customer_id         TEXT,
    customer_email      TEXT,
    -- The plan of its latest state (the first item's price), else of its latest grant.
    plan                TEXT,
    -- Stripe's status as its latest status event says (NULL until one came).
    status              TEXT,
    -- Stripe's created (unix seconds) of that event: an older one never overwrites it.
    status_as_of        BIGINT,
    current_period_end  BIGINT,
    cancel_at_period_end BIGINT  NOT NULL DEFAULT 0,
    -- The invoice whose payment failed and is not paid yet; since when (unix seconds).
    unpaid_invoice      TEXT,
    unpaid_since        BIGINT,
    created_at          BIGINT  NOT NULL,
    updated_at          BIGINT  NOT NULL
);
CREATE INDEX subscriptions_ref ON subscriptions (subscription_ref);
CREATE INDEX subscriptions_customer ON subscriptions (customer_email);

-- Append-only: what each paid invoice granted each period it pays for, after the period's
-- cap (its highest plan's credits). Keyed by invoice, so a paid invoice grants once; the cap
-- reads the period's earlier rows, so no invoice takes a period past its ceiling.
CREATE TABLE subscription_grants (
    subscription_id     TEXT    NOT NULL,
    -- The period, in Stripe's seconds: periods are told apart by their end.
    period_end          BIGINT  NOT NULL,
    -- period (a plan's credits for a whole period) | proration (a change inside it)
    step                TEXT    NOT NULL CHECK (step IN ('period', 'proration')),
    invoice_id          TEXT    NOT NULL,
    period_start        BIGINT  NOT NULL,
    plan                TEXT    NOT NULL,
    from_plan           TEXT,
    -- What the invoice entitles the period to, and what the cap let through.
    entitled            BIGINT  NOT NULL,
    credits             BIGINT  NOT NULL,
    ceiling             BIGINT  NOT NULL,
    event_id            TEXT    NOT NULL,
    created_at          BIGINT  NOT NULL,
    PRIMARY KEY (subscription_id, period_end, step, invoice_id)
);
CREATE INDEX subscription_grants_invoice ON subscription_grants (invoice_id);

-- A paid subscription invoice is an order (its id the invoice's): its credits are its
-- grants, and refunds and disputes of its payment act on it as on any order.
ALTER TABLE orders ADD COLUMN subscription_id TEXT;
