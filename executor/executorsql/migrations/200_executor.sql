-- Executor state (seed 001), per tenant, broker account and New York
-- trading day ("2006-01-02"). Times are BIGINT microseconds since the epoch.

-- The daily-loss breaker's base: the account value the first tick of the
-- day saw. INSERT ... ON CONFLICT DO NOTHING: the first writer wins.
CREATE TABLE executor_day_start (
    tenant       TEXT NOT NULL,
    account      TEXT NOT NULL,
    ny_day       TEXT NOT NULL,
    start_value  DOUBLE PRECISION NOT NULL,
    captured_at  BIGINT NOT NULL,
    PRIMARY KEY (tenant, account, ny_day)
);

-- Review anomalies counted by cron ticks; three halt placement for the day.
-- Incremented with one UPSERT, so concurrent ticks never lose a count.
CREATE TABLE executor_anomalies (
    tenant      TEXT NOT NULL,
    account     TEXT NOT NULL,
    ny_day      TEXT NOT NULL,
    n           BIGINT NOT NULL,
    updated_at  BIGINT NOT NULL,
    PRIMARY KEY (tenant, account, ny_day)
);

-- The state of a simulated broker (the paper broker's JSON snapshot).
CREATE TABLE executor_broker_state (
    tenant      TEXT NOT NULL,
    name        TEXT NOT NULL,
    state       TEXT NOT NULL,
    updated_at  BIGINT NOT NULL,
    PRIMARY KEY (tenant, name)
);
