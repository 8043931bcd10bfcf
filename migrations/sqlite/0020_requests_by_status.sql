-- The dashboard's list of outgoing Stripe requests by status (the indeterminate ones first of
-- all: the alert about them links there), the most recently updated first.
CREATE INDEX stripe_requests_status ON stripe_requests (status, updated_at);
