-- Dashboard operators (argon2id password hashes) and their login sessions.

CREATE TABLE operators (
    username      TEXT    PRIMARY KEY NOT NULL,
    -- PHC string: $argon2id$v=19$m=…,t=…,p=…$salt$hash
    password_hash TEXT    NOT NULL,
    -- viewer (read) | support (re-drive) | admin (refunds, operators)
    role          TEXT    NOT NULL CHECK (role IN ('viewer', 'support', 'admin')),
    -- Unix epoch milliseconds.
    created_at    BIGINT  NOT NULL,
    disabled_at   BIGINT
);

-- tower-sessions records: the session id is random (128 bits); data is its JSON record.
CREATE TABLE dashboard_sessions (
    id          TEXT    PRIMARY KEY NOT NULL,
    data        TEXT    NOT NULL,
    -- Unix epoch milliseconds; expired rows are deleted on the way.
    expires_at  BIGINT  NOT NULL
);

CREATE INDEX dashboard_sessions_expiry ON dashboard_sessions (expires_at);

CREATE INDEX audit_log_at ON audit_log (at);
