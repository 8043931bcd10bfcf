-- Most Checkout orders have no Stripe customer (guest checkout): an index over all the NULLs
-- makes the column look unselective, and SQLite's planner then scans the table for
-- `customer_id = ?`. Indexing only the orders that have one keeps the lookup an index seek.
DROP INDEX orders_customer_id;
CREATE INDEX orders_customer_id ON orders (customer_id) WHERE customer_id IS NOT NULL;
