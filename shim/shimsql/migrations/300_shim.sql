-- Shim (seed 003): provisions, context entries, the once-per-conversation
-- ledger and receipts, all keyed by tenant. doc is the record's JSON; the
-- version column is the CAS counter, checked and bumped by one conditional
-- UPDATE. Times are BIGINT microseconds since the epoch.

CREATE TABLE shim_provisions (
    tenant      TEXT NOT NULL,
    id          TEXT NOT NULL,
    version     BIGINT NOT NULL,
    doc         TEXT NOT NULL,
    updated_at  BIGINT NOT NULL,
    PRIMARY KEY (tenant, id)
);

CREATE TABLE shim_context (
    tenant      TEXT NOT NULL,
    ref         TEXT NOT NULL,
    version     BIGINT NOT NULL,
    doc         TEXT NOT NULL,
    updated_at  BIGINT NOT NULL,
    PRIMARY KEY (tenant, ref)
);

-- One row per (tenant, conversation, provision) that was shimmed: the
-- primary key makes the mark an insert-if-absent.
CREATE TABLE shim_ledger (
    tenant        TEXT NOT NULL,
    conversation  TEXT NOT NULL,
    provision     TEXT NOT NULL,
    version       BIGINT NOT NULL,
    at            BIGINT NOT NULL,
    PRIMARY KEY (tenant, conversation, provision)
);

-- Receipt ids are ULIDs: ordering by id is ordering by time.
CREATE TABLE shim_receipts (
    tenant    TEXT NOT NULL,
    id        TEXT NOT NULL,
    at        TEXT NOT NULL,
    decision  TEXT NOT NULL,
    doc       TEXT NOT NULL,
    PRIMARY KEY (tenant, id)
);
