-- The gateway's settlements that a turn's commit left to its process
-- (shim_spend_journal.go): the receipt that recorded them carries them in
-- ledger (JSON) until the process has written their spend rows, totals
-- and leases, in a later transaction of its own, and clears it. A process
-- that died first leaves them there, and the stale sweep writes them. The
-- partial index holds only the receipts still carrying some.
ALTER TABLE shim_receipts ADD COLUMN ledger TEXT;

CREATE INDEX shim_receipts_ledger ON shim_receipts (id) WHERE ledger IS NOT NULL;
