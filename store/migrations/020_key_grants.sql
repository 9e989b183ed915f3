-- Grants: the exact provider/model pairs ("openai/gpt-4.1") a key may use
-- for operator-funded LLM turns. key_id '' grants the pair to every key of
-- the tenant. Grant changes bump key_changes, so every process re-reads the
-- keys it cached.
CREATE TABLE api_key_grants (
    tenant      TEXT NOT NULL,
    key_id      TEXT NOT NULL,
    model       TEXT NOT NULL,
    created_at  BIGINT NOT NULL,
    PRIMARY KEY (tenant, key_id, model)
);
