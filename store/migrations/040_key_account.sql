-- A key may be bound to one broker account: its executor ticks (HTTP and
-- MCP) trade that account, and a tick naming another is refused. Empty: not
-- bound. Stored as the key's harness and run context are; keys made before
-- this migration have none.
ALTER TABLE api_keys ADD COLUMN account TEXT NOT NULL DEFAULT '';
