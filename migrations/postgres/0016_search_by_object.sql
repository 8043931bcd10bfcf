-- The header search follows a refund or session id to the order whose request made it.
CREATE INDEX IF NOT EXISTS stripe_requests_object ON stripe_requests (object_id)
    WHERE object_id IS NOT NULL;
