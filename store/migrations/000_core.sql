-- Core tables: API keys, the audit trail and its per-tenant chain heads, and
-- the HUX idempotency ledger. Times are BIGINT microseconds since the epoch.

CREATE TABLE api_keys (
    id           TEXT PRIMARY KEY,
    tenant       TEXT NOT NULL,
    secret_hash  TEXT NOT NULL,
    scopes       TEXT NOT NULL,
    harness      TEXT NOT NULL DEFAULT '',
    run_context  TEXT NOT NULL DEFAULT '',
    created_at   BIGINT NOT NULL,
    revoked_at   BIGINT
);

-- One row per tenant: where its chain ends. Appends lock this row (Postgres
-- FOR UPDATE; SQLite's write lock), so a chain never forks, and the head lets
-- verification notice records removed from the end.
CREATE TABLE audit_heads (
    tenant  TEXT PRIMARY KEY,
    seq     BIGINT NOT NULL,
    hash    TEXT NOT NULL
);

-- body is the canonical JSON that is hashed; the other columns index it and
-- are checked against it by verification.
CREATE TABLE audit_records (
    tenant     TEXT NOT NULL,
    seq        BIGINT NOT NULL,
    id         TEXT NOT NULL UNIQUE,
    at         TEXT NOT NULL,
    action     TEXT NOT NULL,
    resource   TEXT NOT NULL,
    outcome    TEXT NOT NULL,
    body       TEXT NOT NULL,
    prev_hash  TEXT NOT NULL,
    hash       TEXT NOT NULL,
    PRIMARY KEY (tenant, seq)
);

CREATE TABLE idempotency (
    tenant      TEXT NOT NULL,
    scope       TEXT NOT NULL,
    key         TEXT NOT NULL,
    body_hash   TEXT NOT NULL,
    result      TEXT,
    created_at  BIGINT NOT NULL,
    PRIMARY KEY (tenant, scope, key)
);
