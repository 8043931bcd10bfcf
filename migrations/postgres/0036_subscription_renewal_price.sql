-- The price a subscription's next renewal bills when no plan of the shop has it (its latest
-- status event names no plan): shown before the renewal, whose invoice will grant nothing
-- until a plan with that price is configured. Two nullable columns: a previous version
-- neither reads nor writes them.
ALTER TABLE subscriptions ADD COLUMN IF NOT EXISTS renewal_price_amount BIGINT;
ALTER TABLE subscriptions ADD COLUMN IF NOT EXISTS renewal_price_currency TEXT;
