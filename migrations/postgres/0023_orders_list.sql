-- The orders list, newest first, in pages (keyset on created_at, order_id): one range of an
-- index for the whole list and one per status filter.
CREATE INDEX orders_created ON orders (created_at, order_id);
CREATE INDEX orders_status_created ON orders (status, created_at, order_id);
