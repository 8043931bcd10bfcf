-- The overview's "credits unlocked today".
CREATE INDEX credit_ledger_created ON credit_ledger (created_at);
