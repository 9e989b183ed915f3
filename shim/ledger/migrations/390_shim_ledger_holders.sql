-- The processes holding budget leases (a lease's id is its holder, '_' and
-- a number), each with when it last said it was alive (Beat, every sweep
-- interval of `caduceus serve`). The sweep releases the open leases of a
-- holder not seen for a while: its process died, and what its leases held
-- goes back to the budgets.
CREATE TABLE shim_ledger_holders (
    holder  TEXT PRIMARY KEY,
    seen_at BIGINT NOT NULL
);
