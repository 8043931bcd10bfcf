-- A customer's page and the search by e-mail list what the order API was asked for them:
-- found without reading every ask.
CREATE INDEX IF NOT EXISTS subscription_checkouts_customer
    ON subscription_checkouts (customer_email);
