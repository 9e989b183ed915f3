-- A settlement the gateway estimated (a stream cut short before its usage
-- came: the client went away, or the upstream broke it off) rather than
-- read from the upstream's usage: 1, else 0. /v1/spend reports how much of
-- the settled spend is estimated.
ALTER TABLE shim_spend ADD COLUMN estimated INTEGER NOT NULL DEFAULT 0;
