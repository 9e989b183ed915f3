-- A change counter for API keys: every revocation bumps it in the same
-- transaction, and every process polls it (SQLite) or is told (Postgres
-- NOTIFY caduceus_keys) so its key cache forgets revoked keys at once.
CREATE TABLE key_changes (
    id  INTEGER PRIMARY KEY,
    n   BIGINT NOT NULL
);

INSERT INTO key_changes (id, n) VALUES (1, 0);
