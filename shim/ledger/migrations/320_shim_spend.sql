-- The shim's LLM gateway: spend reservations and their settlements in
-- integer microdollars, running totals per key and tenant per UTC day and
-- month (the budgets are checked against them by one conditional upsert
-- each), and rate-limit holds on upstream model identities shared by every
-- process.

-- One row per attempt. state: reserved (the call is in flight), settled
-- (settled holds the cost of the usage), released (the attempt failed and
-- costs nothing).
CREATE TABLE shim_spend (
    id          TEXT PRIMARY KEY,
    tenant      TEXT NOT NULL,
    key_id      TEXT NOT NULL,
    model       TEXT NOT NULL,
    day         TEXT NOT NULL,
    month       TEXT NOT NULL,
    reserved    BIGINT NOT NULL,
    settled     BIGINT,
    state       TEXT NOT NULL,
    created_at  BIGINT NOT NULL,
    updated_at  BIGINT NOT NULL
);

CREATE INDEX shim_spend_by_key ON shim_spend (tenant, key_id, model, created_at);

-- scope is key:<id> or tenant:<slot>; period is 2026-11-30 (a day) or
-- 2026-11 (a month). amount is what is reserved and not yet settled plus
-- what is settled.
CREATE TABLE shim_spend_totals (
    scope   TEXT NOT NULL,
    period  TEXT NOT NULL,
    amount  BIGINT NOT NULL,
    PRIMARY KEY (scope, period)
);

CREATE TABLE shim_holds (
    identity  TEXT PRIMARY KEY,
    until_at  BIGINT NOT NULL
);
