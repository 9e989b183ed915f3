-- Shim memory (seed 003, issue 6): deterministic entity memory per
-- (tenant, subject, project) and the outcomes of fired provisions. Times
-- are BIGINT microseconds since the epoch; resolved_at 0 means pending.

-- One row per remembered entity; a sighting is one upsert on the key.
CREATE TABLE shim_entities (
    tenant      TEXT NOT NULL,
    subject     TEXT NOT NULL,
    project     TEXT NOT NULL,
    kind        TEXT NOT NULL,
    value       TEXT NOT NULL,
    first_seen  BIGINT NOT NULL,
    last_seen   BIGINT NOT NULL,
    hits        BIGINT NOT NULL,
    PRIMARY KEY (tenant, subject, project, kind, value)
);

CREATE INDEX shim_entities_recent ON shim_entities (tenant, subject, last_seen);

-- One row per provision fired on a turn (receipt ids are ULIDs, so
-- ordering by receipt is ordering by time). Resolving a conversation's
-- pending rows is one conditional UPDATE on outcome = 'pending'.
CREATE TABLE shim_outcomes (
    tenant           TEXT NOT NULL,
    receipt          TEXT NOT NULL,
    provision        TEXT NOT NULL,
    conversation     TEXT NOT NULL,
    subject          TEXT NOT NULL,
    project          TEXT NOT NULL,
    version          BIGINT NOT NULL,
    builtin          INTEGER NOT NULL,
    outcome          TEXT NOT NULL,
    error_signature  TEXT NOT NULL,
    next_receipt     TEXT NOT NULL,
    fired_at         BIGINT NOT NULL,
    resolved_at      BIGINT NOT NULL,
    PRIMARY KEY (tenant, receipt, provision)
);

CREATE INDEX shim_outcomes_pending ON shim_outcomes (tenant, conversation, outcome);
CREATE INDEX shim_outcomes_subject ON shim_outcomes (tenant, subject, receipt);

-- What the last sync of each record did (shim.SyncMark): the source
-- version taken and the local version it wrote. One upsert per write.
CREATE TABLE shim_sync_marks (
    tenant          TEXT NOT NULL,
    kind            TEXT NOT NULL,
    id              TEXT NOT NULL,
    source_version  BIGINT NOT NULL,
    local_version   BIGINT NOT NULL,
    PRIMARY KEY (tenant, kind, id)
);
