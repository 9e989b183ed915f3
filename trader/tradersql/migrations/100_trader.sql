-- Trader (seed 000): concerns, strategies, stored decisions (the idempotency
-- ledger of decision_id), every decision attempt, and the runtime instances
-- the default Runtime keeps. Times are BIGINT microseconds since the epoch.

CREATE TABLE trader_concerns (
    tenant           TEXT NOT NULL,
    concern_id       TEXT NOT NULL,
    execution_state  TEXT NOT NULL,
    revision         BIGINT NOT NULL,
    updated_at       BIGINT NOT NULL,
    PRIMARY KEY (tenant, concern_id)
);

CREATE TABLE trader_strategies (
    tenant         TEXT NOT NULL,
    id             TEXT NOT NULL,
    account_id     TEXT NOT NULL,
    market_symbol  TEXT NOT NULL,
    name           TEXT NOT NULL,
    status         TEXT NOT NULL,
    runnable       BOOLEAN NOT NULL,
    risk_mode      TEXT NOT NULL,
    revision       BIGINT NOT NULL,
    updated_at     BIGINT NOT NULL,
    PRIMARY KEY (tenant, id)
);

CREATE INDEX trader_strategies_concern ON trader_strategies (tenant, account_id, market_symbol);

-- At most one current (active or paused) strategy per concern, across every
-- process sharing the database.
CREATE UNIQUE INDEX trader_strategies_current ON trader_strategies (tenant, account_id, market_symbol)
    WHERE status IN ('active', 'paused');

-- One row per decided decision_id: concurrent duplicates collide on the key.
CREATE TABLE trader_decisions (
    tenant       TEXT NOT NULL,
    decision_id  TEXT NOT NULL,
    concern_id   TEXT NOT NULL,
    fingerprint  TEXT NOT NULL,
    status       TEXT NOT NULL,
    response     TEXT NOT NULL,
    attempt_id   TEXT NOT NULL,
    created_at   BIGINT NOT NULL,
    PRIMARY KEY (tenant, decision_id)
);

-- Every call of apply_control_decision; body is the attempt as JSON.
CREATE TABLE trader_attempts (
    tenant       TEXT NOT NULL,
    id           TEXT NOT NULL,
    decision_id  TEXT NOT NULL,
    concern_id   TEXT NOT NULL,
    status       TEXT NOT NULL,
    received_at  BIGINT NOT NULL,
    body         TEXT NOT NULL,
    PRIMARY KEY (tenant, id)
);

CREATE INDEX trader_attempts_concern ON trader_attempts (tenant, concern_id, id);
CREATE INDEX trader_attempts_decision ON trader_attempts (tenant, decision_id, id);

CREATE TABLE trader_instances (
    tenant       TEXT NOT NULL,
    strategy_id  TEXT NOT NULL,
    desired      TEXT NOT NULL,
    actual       TEXT NOT NULL,
    risk_mode    TEXT NOT NULL,
    updated_at   BIGINT NOT NULL,
    PRIMARY KEY (tenant, strategy_id)
);
