-- The rate limits' windows: requests and tokens per scope (a key or a
-- tenant) and UTC minute, shared by every process (shim/ledger/rates.go).
CREATE TABLE shim_rates (
  scope    TEXT   NOT NULL,
  minute   BIGINT NOT NULL,
  requests BIGINT NOT NULL DEFAULT 0,
  tokens   BIGINT NOT NULL DEFAULT 0,
  PRIMARY KEY (scope, minute)
);
