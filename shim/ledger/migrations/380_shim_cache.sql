-- The plans' response caches: an answer by scope (a tenant, or a tenant's
-- key under key isolation) and request key, until it expires
-- (shim/ledger/cache.go).
CREATE TABLE shim_cache (
  scope        TEXT    NOT NULL,
  key          TEXT    NOT NULL,
  receipt      TEXT    NOT NULL,
  status       INTEGER NOT NULL,
  content_type TEXT    NOT NULL,
  body         TEXT    NOT NULL,
  final        TEXT,
  expires_at   BIGINT  NOT NULL,
  PRIMARY KEY (scope, key)
);

CREATE INDEX shim_cache_expiry ON shim_cache (expires_at);
