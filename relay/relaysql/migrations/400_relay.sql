-- Relay connector state (relay.Store): the capability vault, inbound dedupe
-- keys, the buffer of events waiting for a gateway, and chat bindings.
-- Every table is keyed by tenant. Times are BIGINT microseconds since the
-- epoch.

-- One capability per (tenant, session key, kind); a newer one replaces it.
CREATE TABLE relay_capabilities (
    tenant       TEXT NOT NULL,
    session_key  TEXT NOT NULL,
    kind         TEXT NOT NULL,
    bot          TEXT NOT NULL,
    secret       TEXT NOT NULL,
    expires_at   BIGINT NOT NULL,
    PRIMARY KEY (tenant, session_key, kind)
);
CREATE INDEX relay_capabilities_expiry ON relay_capabilities (expires_at);

-- The primary key makes "first sighting" one INSERT ... ON CONFLICT DO NOTHING.
CREATE TABLE relay_seen (
    tenant      TEXT NOT NULL,
    dedupe_key  TEXT NOT NULL,
    seen_at     BIGINT NOT NULL,
    PRIMARY KEY (tenant, dedupe_key)
);
CREATE INDEX relay_seen_at ON relay_seen (seen_at);

-- Events wait here until a gateway acknowledges them. A lease (owner, until)
-- keeps two connections from receiving one event at once; it is taken with
-- one conditional UPDATE.
CREATE TABLE relay_buffer (
    tenant       TEXT NOT NULL,
    id           TEXT NOT NULL,
    platform     TEXT NOT NULL,
    bot          TEXT NOT NULL,
    session_key  TEXT NOT NULL,
    event        TEXT NOT NULL,
    created_at   BIGINT NOT NULL,
    lease_owner  TEXT NOT NULL DEFAULT '',
    lease_until  BIGINT NOT NULL DEFAULT 0,
    PRIMARY KEY (tenant, id)
);
CREATE INDEX relay_buffer_pending ON relay_buffer (tenant, platform, bot, id);
CREATE INDEX relay_buffer_owner ON relay_buffer (tenant, lease_owner);

-- Chats an inbound event of the tenant came from: outbound actions may go
-- only there (or to chats the configuration gives the tenant).
CREATE TABLE relay_chats (
    tenant    TEXT NOT NULL,
    platform  TEXT NOT NULL,
    chat_id   TEXT NOT NULL,
    bound_at  BIGINT NOT NULL,
    PRIMARY KEY (tenant, platform, chat_id)
);
