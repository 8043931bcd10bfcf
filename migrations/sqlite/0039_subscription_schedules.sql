-- What a subscription schedule has next for its subscription: the phase to come (when it
-- starts, the plan it bills or, with none, its price) and the time of the schedule event that
-- said so (Stripe's `created`: an older event never overwrites a newer one). Shown as a
-- scheduled change before the phase begins. Nullable columns: a previous version neither
-- reads nor writes them.
ALTER TABLE subscriptions ADD COLUMN schedule_id TEXT;
ALTER TABLE subscriptions ADD COLUMN schedule_as_of BIGINT;
ALTER TABLE subscriptions ADD COLUMN scheduled_at BIGINT;
ALTER TABLE subscriptions ADD COLUMN scheduled_plan TEXT;
ALTER TABLE subscriptions ADD COLUMN scheduled_price_amount BIGINT;
ALTER TABLE subscriptions ADD COLUMN scheduled_price_currency TEXT;
