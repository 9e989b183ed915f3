-- Operator console: the secret its login tokens and session cookies are
-- signed with (made once, shared by every process on the database, so a
-- login URL minted by the CLI works on any server), and the nonce of every
-- login token redeemed, so a token works once across every process.
-- Times are BIGINT microseconds since the epoch.

CREATE TABLE console_secret (
    id          INTEGER PRIMARY KEY,
    secret      TEXT NOT NULL,
    created_at  BIGINT NOT NULL
);

-- The primary key makes redeeming one INSERT: a second use collides.
-- Rows are kept until the token would have expired anyway.
CREATE TABLE console_logins (
    nonce       TEXT PRIMARY KEY,
    tenant      TEXT NOT NULL,
    used_at     BIGINT NOT NULL,
    expires_at  BIGINT NOT NULL
);
CREATE INDEX console_logins_expiry ON console_logins (expires_at);
