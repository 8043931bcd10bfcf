-- Deliveries of a type this version ignores keep their payload (for 30 days), so that a later
-- version that acts on the type adopts them instead of losing them; `adopted_at` says when one
-- did (its payload is dropped then). Nullable columns only: the previous version neither
-- reads nor writes them.
ALTER TABLE webhook_deliveries ADD COLUMN payload TEXT;
ALTER TABLE webhook_deliveries ADD COLUMN adopted_at BIGINT;
