-- Caduceus at the edge (package edge): the D1 schema. The shim tables are
-- the server's (store/shimsql/migrations) with the same keys: the tenant
-- (caller scope) leads every primary key, version is the CAS counter
-- checked and bumped by one conditional UPDATE, times are INTEGER
-- microseconds since the epoch. keys, tenant_grants, audit_records and
-- idempotency are the edge's own, shaped for single statements (D1 has no
-- interactive transactions): a key is one row holding its JSON, and an
-- audit record's (tenant, seq) primary key is the chain's compare-and-set.

CREATE TABLE shim_provisions (
    tenant      TEXT NOT NULL,
    id          TEXT NOT NULL,
    version     INTEGER NOT NULL,
    doc         TEXT NOT NULL,
    updated_at  INTEGER NOT NULL,
    PRIMARY KEY (tenant, id)
);

CREATE TABLE shim_context (
    tenant      TEXT NOT NULL,
    ref         TEXT NOT NULL,
    version     INTEGER NOT NULL,
    doc         TEXT NOT NULL,
    updated_at  INTEGER NOT NULL,
    PRIMARY KEY (tenant, ref)
);

CREATE TABLE shim_ledger (
    tenant        TEXT NOT NULL,
    conversation  TEXT NOT NULL,
    provision     TEXT NOT NULL,
    version       INTEGER NOT NULL,
    at            INTEGER NOT NULL,
    PRIMARY KEY (tenant, conversation, provision)
);

CREATE TABLE shim_receipts (
    tenant       TEXT NOT NULL,
    id           TEXT NOT NULL,
    at           TEXT NOT NULL,
    decision     TEXT NOT NULL,
    doc          TEXT NOT NULL,
    response_id  TEXT,
    PRIMARY KEY (tenant, id)
);

CREATE INDEX shim_receipts_response ON shim_receipts (tenant, response_id) WHERE response_id IS NOT NULL;

CREATE TABLE shim_entities (
    tenant      TEXT NOT NULL,
    subject     TEXT NOT NULL,
    project     TEXT NOT NULL,
    kind        TEXT NOT NULL,
    value       TEXT NOT NULL,
    first_seen  INTEGER NOT NULL,
    last_seen   INTEGER NOT NULL,
    hits        INTEGER NOT NULL,
    PRIMARY KEY (tenant, subject, project, kind, value)
);

CREATE INDEX shim_entities_recent ON shim_entities (tenant, subject, last_seen);

CREATE TABLE shim_outcomes (
    tenant           TEXT NOT NULL,
    receipt          TEXT NOT NULL,
    provision        TEXT NOT NULL,
    conversation     TEXT NOT NULL,
    subject          TEXT NOT NULL,
    project          TEXT NOT NULL,
    version          INTEGER NOT NULL,
    builtin          INTEGER NOT NULL,
    outcome          TEXT NOT NULL,
    error_signature  TEXT NOT NULL,
    next_receipt     TEXT NOT NULL,
    fired_at         INTEGER NOT NULL,
    resolved_at      INTEGER NOT NULL,
    PRIMARY KEY (tenant, receipt, provision)
);

CREATE INDEX shim_outcomes_pending ON shim_outcomes (tenant, conversation, outcome);
CREATE INDEX shim_outcomes_subject ON shim_outcomes (tenant, subject, receipt);

CREATE TABLE shim_sync_marks (
    tenant          TEXT NOT NULL,
    kind            TEXT NOT NULL,
    id              TEXT NOT NULL,
    source_version  INTEGER NOT NULL,
    local_version   INTEGER NOT NULL,
    PRIMARY KEY (tenant, kind, id)
);

CREATE TABLE keys (
    id          TEXT PRIMARY KEY,
    tenant      TEXT NOT NULL,
    doc         TEXT NOT NULL,
    revoked_at  INTEGER
);

CREATE TABLE tenant_grants (
    tenant  TEXT PRIMARY KEY,
    grants  TEXT NOT NULL
);

CREATE TABLE audit_records (
    tenant     TEXT NOT NULL,
    seq        INTEGER NOT NULL,
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
    created_at  INTEGER NOT NULL,
    PRIMARY KEY (tenant, scope, key)
);
