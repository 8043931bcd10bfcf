-- no-transaction
-- The ignored deliveries whose payload is still kept (for adoption, then forgotten after 30
-- days): a small partial index. Built without blocking writes (CONCURRENTLY, hence outside a
-- transaction), so a running previous version keeps taking deliveries meanwhile.
CREATE INDEX CONCURRENTLY IF NOT EXISTS webhook_deliveries_kept_payload
    ON webhook_deliveries (received_at) WHERE payload IS NOT NULL;
