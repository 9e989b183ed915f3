-- The ref_ids of a keyed tick (seed 001: place_args.ref_id = uuid4()), one
-- per intent, as a JSON array of strings, kept beside the tick's key in the
-- idempotency ledger (scope executor.tick): the first run of a key writes
-- them (INSERT ... ON CONFLICT DO NOTHING), a run that takes over the key's
-- expired claim reads them back and places under the same ref_ids. A
-- released key's row is deleted with it; a completed key's is kept.
CREATE TABLE executor_tick_refs (
    tenant      TEXT NOT NULL,
    key         TEXT NOT NULL,
    refs        TEXT NOT NULL,
    created_at  BIGINT NOT NULL,
    PRIMARY KEY (tenant, key)
);
