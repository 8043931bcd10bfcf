-- The time from which a subscription's recorded plan and period end hold: a status event's
-- `created`, a paid invoice's period start (or its prorated change's). A later write moves
-- them only from a time no earlier, so two invoices of one period worked out of order, or a
-- late older status event, never move an upgrade back. A nullable column: a previous version
-- neither reads nor writes it (until it is set, the status's time stands in).
ALTER TABLE subscriptions ADD COLUMN plan_as_of BIGINT;
