-- The paper broker's state is updated with a conditional UPDATE on its
-- version (compare-and-swap), so processes sharing one database never lose
-- or double a fill: a writer whose version is stale re-reads and retries.
ALTER TABLE executor_broker_state ADD COLUMN version BIGINT NOT NULL DEFAULT 1;
