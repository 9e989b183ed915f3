-- The conversation a record belongs to, copied from its provenance
-- (conversation_id, session_id) when it is appended, so one conversation's
-- trail is an index range rather than a scan of every body. The body stays
-- the truth: readers decode it and check it agrees.
ALTER TABLE audit_records ADD COLUMN conversation_id TEXT;
ALTER TABLE audit_records ADD COLUMN session_id TEXT;

-- Partial: records outside any conversation (replays, admin writes, most
-- cron ticks) add no index page to their append.
CREATE INDEX audit_records_conversation ON audit_records (tenant, conversation_id, seq) WHERE conversation_id IS NOT NULL;
