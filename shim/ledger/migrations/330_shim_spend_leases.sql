-- Budget leases of the shim's gateway: a process takes a slice of a
-- running total (shim_spend_totals) in one write and serves its attempts'
-- reservations from it in memory. amount is what the lease still holds in
-- the total: its unused part plus what attempts carved from it and have not
-- settled. A settlement moves the attempt's part from the lease to the
-- spend; returning the lease takes its unused part out of the total. state:
-- open, or released (the stale sweep took what it held out of the total:
-- the process that held it is gone).
CREATE TABLE shim_spend_leases (
    id          TEXT PRIMARY KEY,
    scope       TEXT NOT NULL,
    period      TEXT NOT NULL,
    amount      BIGINT NOT NULL,
    state       TEXT NOT NULL,
    created_at  BIGINT NOT NULL,
    updated_at  BIGINT NOT NULL
);

CREATE INDEX shim_spend_leases_by_state ON shim_spend_leases (state, updated_at);
