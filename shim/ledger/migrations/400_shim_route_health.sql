-- The health of the routes of the plans' balanced steps, shared by every
-- process (shim/ledger/health.go): a route's failures in a row since it
-- last answered, and until when that run made it unhealthy (0: it has
-- not). A route's row is deleted when it answers.
CREATE TABLE shim_route_health (
    route            TEXT   PRIMARY KEY,
    failures         BIGINT NOT NULL,
    unhealthy_until  BIGINT NOT NULL
);
