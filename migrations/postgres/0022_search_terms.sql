-- What each claim's payload names that support staff search by (the customer's e-mail, the
-- shop's order id, the Stripe objects it refers to), written in the claim's own transaction,
-- so that a payment that is stuck, failed or never fulfilled is found by the e-mail the
-- customer gives. E-mails are stored lowercased; ids as Stripe sent them.
CREATE TABLE claim_terms (
    -- Byte order ("C"), so that an id prefix is one range of the primary key's index.
    term     TEXT NOT NULL COLLATE "C",
    event_id TEXT NOT NULL,
    -- email, order, session, payment_intent, charge, refund, dispute, customer, invoice,
    -- subscription or object.
    kind     TEXT NOT NULL,
    PRIMARY KEY (term, event_id)
);
CREATE INDEX claim_terms_event ON claim_terms (event_id);

-- Claims written before this migration, or by a version that does not know the terms, are
-- indexed by a background task that reads their payloads; it finds them by this flag.
ALTER TABLE processed_stripe_events ADD COLUMN terms_indexed BOOLEAN NOT NULL DEFAULT FALSE;
CREATE INDEX processed_stripe_events_unindexed ON processed_stripe_events (received_at)
    WHERE NOT terms_indexed;
