-- The process (its name in shim_ledger_holders) that reserved an attempt
-- in the store rather than from a lease (a budget too tight to lease);
-- NULL for a ledger without leases. The sweep releases the open
-- reservations of a holder it takes for dead, as it releases its leases.
ALTER TABLE shim_spend ADD COLUMN holder TEXT;
CREATE INDEX shim_spend_reserved_by_holder ON shim_spend (holder) WHERE state = 'reserved';
