-- The id of the Responses API answer a receipt's client got (resp_...), so
-- GET /v1/responses/{id} and its cancel reach the route that served it.
ALTER TABLE shim_receipts ADD COLUMN response_id TEXT;

CREATE INDEX shim_receipts_response ON shim_receipts (tenant, response_id) WHERE response_id IS NOT NULL;
