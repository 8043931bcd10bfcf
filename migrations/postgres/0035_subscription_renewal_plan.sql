-- The plan a subscription's next renewal bills, as its latest status event names it (its
-- first item's price). Differing from the plan its current period was paid at, it is a change
-- taking effect at the period's end, shown as scheduled. One nullable column: a previous
-- version neither reads nor writes it.
ALTER TABLE subscriptions ADD COLUMN IF NOT EXISTS renewal_plan TEXT;
