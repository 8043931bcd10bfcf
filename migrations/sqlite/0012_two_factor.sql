-- Two-factor sign-in. The TOTP secret (base32) is set when an operator starts enrolling and
-- counts once confirmed with a code (totp_enabled_at); the last accepted time step keeps a
-- code from being accepted twice.
ALTER TABLE operators ADD COLUMN totp_secret TEXT;
ALTER TABLE operators ADD COLUMN totp_enabled_at BIGINT;
ALTER TABLE operators ADD COLUMN totp_last_step BIGINT;

-- One-time recovery codes, as SHA-256 hashes; a used one keeps its row with used_at.
CREATE TABLE recovery_codes (
    username   TEXT   NOT NULL REFERENCES operators (username) ON DELETE CASCADE,
    code_hash  TEXT   NOT NULL,
    -- Unix epoch milliseconds.
    created_at BIGINT NOT NULL,
    used_at    BIGINT,
    PRIMARY KEY (username, code_hash)
);
