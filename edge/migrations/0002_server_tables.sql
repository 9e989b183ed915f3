-- The edge's keys, grants and audit chain move into the server's tables
-- (store/migrations 000_core to 040_key_account, shim/shimsql's 300 to
-- 360), so one store written on the store's port (store/port,
-- shim/shimstore) serves both, and D1's schema is the server's for every
-- table the edge uses (TestD1SchemaIsTheServers). What 0001 stored is
-- copied: each key's JSON row into api_keys and its grants, each tenant's
-- grants into api_key_grants under key_id '', each chain's last record into
-- audit_heads, and the conversation and session a record names into the
-- columns that index them.

CREATE TABLE api_keys (
    id           TEXT PRIMARY KEY,
    tenant       TEXT NOT NULL,
    secret_hash  TEXT NOT NULL,
    scopes       TEXT NOT NULL,
    harness      TEXT NOT NULL DEFAULT '',
    run_context  TEXT NOT NULL DEFAULT '',
    created_at   BIGINT NOT NULL,
    revoked_at   BIGINT,
    account      TEXT NOT NULL DEFAULT ''
);

INSERT INTO api_keys (id, tenant, secret_hash, scopes, harness, run_context, created_at, revoked_at, account)
SELECT id, tenant, json_extract(doc, '$.secret_hash'),
       COALESCE((SELECT group_concat(s.value, ',') FROM json_each(keys.doc, '$.scopes') s), ''),
       COALESCE(json_extract(doc, '$.harness'), ''), COALESCE(json_extract(doc, '$.run_context'), ''),
       json_extract(doc, '$.created_at'), revoked_at, COALESCE(json_extract(doc, '$.account'), '')
FROM keys;

CREATE TABLE api_key_grants (
    tenant      TEXT NOT NULL,
    key_id      TEXT NOT NULL,
    model       TEXT NOT NULL,
    created_at  BIGINT NOT NULL,
    PRIMARY KEY (tenant, key_id, model)
);

INSERT INTO api_key_grants (tenant, key_id, model, created_at)
SELECT k.tenant, k.id, g.value, json_extract(k.doc, '$.created_at') FROM keys k, json_each(k.doc, '$.grants') g
WHERE true ON CONFLICT DO NOTHING;

INSERT INTO api_key_grants (tenant, key_id, model, created_at)
SELECT t.tenant, '', g.value, CAST(strftime('%s', 'now') AS INTEGER) * 1000000 FROM tenant_grants t, json_each(t.grants) g
WHERE true ON CONFLICT DO NOTHING;

CREATE TABLE key_changes (
    id  INTEGER PRIMARY KEY,
    n   BIGINT NOT NULL
);

INSERT INTO key_changes (id, n) VALUES (1, 0);

DROP TABLE keys;
DROP TABLE tenant_grants;

CREATE TABLE audit_heads (
    tenant  TEXT PRIMARY KEY,
    seq     BIGINT NOT NULL,
    hash    TEXT NOT NULL
);

INSERT INTO audit_heads (tenant, seq, hash)
SELECT r.tenant, r.seq, r.hash FROM audit_records r
WHERE r.seq = (SELECT MAX(seq) FROM audit_records WHERE tenant = r.tenant);

ALTER TABLE audit_records ADD COLUMN conversation_id TEXT;
ALTER TABLE audit_records ADD COLUMN session_id TEXT;

UPDATE audit_records SET conversation_id = json_extract(body, '$.provenance.conversation_id'),
    session_id = COALESCE(json_extract(body, '$.provenance.session_id'), '')
WHERE COALESCE(json_extract(body, '$.provenance.conversation_id'), '') <> '';

CREATE INDEX audit_records_conversation ON audit_records (tenant, conversation_id, seq) WHERE conversation_id IS NOT NULL;

ALTER TABLE shim_receipts ADD COLUMN ledger TEXT;

CREATE INDEX shim_receipts_ledger ON shim_receipts (id) WHERE ledger IS NOT NULL;
