-- The ignored deliveries whose payload is still kept (for adoption, then forgotten after 30
-- days): a small partial index.
CREATE INDEX IF NOT EXISTS webhook_deliveries_kept_payload
    ON webhook_deliveries (received_at) WHERE payload IS NOT NULL;
