--
-- PostgreSQL database dump
--

\restrict bvb0dj6wxuaEhTtaMPgTeaZRFUJ8NcTddZHyJFAmfnKJX8SRXQXHpHgHfznJByS

-- Dumped from database version 15.20 (Debian 15.20-0+deb12u1)
-- Dumped by pg_dump version 15.20 (Debian 15.20-0+deb12u1)

SET statement_timeout = 0;
SET lock_timeout = 0;
SET idle_in_transaction_session_timeout = 0;
SET client_encoding = 'UTF8';
SET standard_conforming_strings = on;
SELECT pg_catalog.set_config('search_path', '', false);
SET check_function_bodies = false;
SET xmloption = content;
SET client_min_messages = warning;
SET row_security = off;

--
-- Name: caduceus_ea292f4; Type: SCHEMA; Schema: -; Owner: -
--

CREATE SCHEMA caduceus_ea292f4;


SET default_tablespace = '';

SET default_table_access_method = heap;

--
-- Name: api_keys; Type: TABLE; Schema: caduceus_ea292f4; Owner: -
--

CREATE TABLE caduceus_ea292f4.api_keys (
    id text NOT NULL,
    tenant text NOT NULL,
    secret_hash text NOT NULL,
    scopes text NOT NULL,
    harness text DEFAULT ''::text NOT NULL,
    run_context text DEFAULT ''::text NOT NULL,
    created_at bigint NOT NULL,
    revoked_at bigint
);


--
-- Name: audit_heads; Type: TABLE; Schema: caduceus_ea292f4; Owner: -
--

CREATE TABLE caduceus_ea292f4.audit_heads (
    tenant text NOT NULL,
    seq bigint NOT NULL,
    hash text NOT NULL
);


--
-- Name: audit_records; Type: TABLE; Schema: caduceus_ea292f4; Owner: -
--

CREATE TABLE caduceus_ea292f4.audit_records (
    tenant text NOT NULL,
    seq bigint NOT NULL,
    id text NOT NULL,
    at text NOT NULL,
    action text NOT NULL,
    resource text NOT NULL,
    outcome text NOT NULL,
    body text NOT NULL,
    prev_hash text NOT NULL,
    hash text NOT NULL
);


--
-- Name: executor_anomalies; Type: TABLE; Schema: caduceus_ea292f4; Owner: -
--

CREATE TABLE caduceus_ea292f4.executor_anomalies (
    tenant text NOT NULL,
    account text NOT NULL,
    ny_day text NOT NULL,
    n bigint NOT NULL,
    updated_at bigint NOT NULL
);


--
-- Name: executor_broker_state; Type: TABLE; Schema: caduceus_ea292f4; Owner: -
--

CREATE TABLE caduceus_ea292f4.executor_broker_state (
    tenant text NOT NULL,
    name text NOT NULL,
    state text NOT NULL,
    updated_at bigint NOT NULL
);


--
-- Name: executor_day_start; Type: TABLE; Schema: caduceus_ea292f4; Owner: -
--

CREATE TABLE caduceus_ea292f4.executor_day_start (
    tenant text NOT NULL,
    account text NOT NULL,
    ny_day text NOT NULL,
    start_value double precision NOT NULL,
    captured_at bigint NOT NULL
);


--
-- Name: idempotency; Type: TABLE; Schema: caduceus_ea292f4; Owner: -
--

CREATE TABLE caduceus_ea292f4.idempotency (
    tenant text NOT NULL,
    scope text NOT NULL,
    key text NOT NULL,
    body_hash text NOT NULL,
    result text,
    created_at bigint NOT NULL
);


--
-- Name: relay_buffer; Type: TABLE; Schema: caduceus_ea292f4; Owner: -
--

CREATE TABLE caduceus_ea292f4.relay_buffer (
    tenant text NOT NULL,
    id text NOT NULL,
    platform text NOT NULL,
    bot text NOT NULL,
    session_key text NOT NULL,
    event text NOT NULL,
    created_at bigint NOT NULL,
    lease_owner text DEFAULT ''::text NOT NULL,
    lease_until bigint DEFAULT 0 NOT NULL
);


--
-- Name: relay_capabilities; Type: TABLE; Schema: caduceus_ea292f4; Owner: -
--

CREATE TABLE caduceus_ea292f4.relay_capabilities (
    tenant text NOT NULL,
    session_key text NOT NULL,
    kind text NOT NULL,
    bot text NOT NULL,
    secret text NOT NULL,
    expires_at bigint NOT NULL
);


--
-- Name: relay_chats; Type: TABLE; Schema: caduceus_ea292f4; Owner: -
--

CREATE TABLE caduceus_ea292f4.relay_chats (
    tenant text NOT NULL,
    platform text NOT NULL,
    chat_id text NOT NULL,
    bound_at bigint NOT NULL
);


--
-- Name: relay_seen; Type: TABLE; Schema: caduceus_ea292f4; Owner: -
--

CREATE TABLE caduceus_ea292f4.relay_seen (
    tenant text NOT NULL,
    dedupe_key text NOT NULL,
    seen_at bigint NOT NULL
);


--
-- Name: schema_migrations; Type: TABLE; Schema: caduceus_ea292f4; Owner: -
--

CREATE TABLE caduceus_ea292f4.schema_migrations (
    name text NOT NULL,
    applied_at bigint NOT NULL
);


--
-- Name: shim_context; Type: TABLE; Schema: caduceus_ea292f4; Owner: -
--

CREATE TABLE caduceus_ea292f4.shim_context (
    tenant text NOT NULL,
    ref text NOT NULL,
    version bigint NOT NULL,
    doc text NOT NULL,
    updated_at bigint NOT NULL
);


--
-- Name: shim_entities; Type: TABLE; Schema: caduceus_ea292f4; Owner: -
--

CREATE TABLE caduceus_ea292f4.shim_entities (
    tenant text NOT NULL,
    subject text NOT NULL,
    project text NOT NULL,
    kind text NOT NULL,
    value text NOT NULL,
    first_seen bigint NOT NULL,
    last_seen bigint NOT NULL,
    hits bigint NOT NULL
);


--
-- Name: shim_ledger; Type: TABLE; Schema: caduceus_ea292f4; Owner: -
--

CREATE TABLE caduceus_ea292f4.shim_ledger (
    tenant text NOT NULL,
    conversation text NOT NULL,
    provision text NOT NULL,
    version bigint NOT NULL,
    at bigint NOT NULL
);


--
-- Name: shim_outcomes; Type: TABLE; Schema: caduceus_ea292f4; Owner: -
--

CREATE TABLE caduceus_ea292f4.shim_outcomes (
    tenant text NOT NULL,
    receipt text NOT NULL,
    provision text NOT NULL,
    conversation text NOT NULL,
    subject text NOT NULL,
    project text NOT NULL,
    version bigint NOT NULL,
    builtin integer NOT NULL,
    outcome text NOT NULL,
    error_signature text NOT NULL,
    next_receipt text NOT NULL,
    fired_at bigint NOT NULL,
    resolved_at bigint NOT NULL
);


--
-- Name: shim_provisions; Type: TABLE; Schema: caduceus_ea292f4; Owner: -
--

CREATE TABLE caduceus_ea292f4.shim_provisions (
    tenant text NOT NULL,
    id text NOT NULL,
    version bigint NOT NULL,
    doc text NOT NULL,
    updated_at bigint NOT NULL
);


--
-- Name: shim_receipts; Type: TABLE; Schema: caduceus_ea292f4; Owner: -
--

CREATE TABLE caduceus_ea292f4.shim_receipts (
    tenant text NOT NULL,
    id text NOT NULL,
    at text NOT NULL,
    decision text NOT NULL,
    doc text NOT NULL
);


--
-- Name: shim_sync_marks; Type: TABLE; Schema: caduceus_ea292f4; Owner: -
--

CREATE TABLE caduceus_ea292f4.shim_sync_marks (
    tenant text NOT NULL,
    kind text NOT NULL,
    id text NOT NULL,
    source_version bigint NOT NULL,
    local_version bigint NOT NULL
);


--
-- Name: trader_attempts; Type: TABLE; Schema: caduceus_ea292f4; Owner: -
--

CREATE TABLE caduceus_ea292f4.trader_attempts (
    tenant text NOT NULL,
    id text NOT NULL,
    decision_id text NOT NULL,
    concern_id text NOT NULL,
    status text NOT NULL,
    received_at bigint NOT NULL,
    body text NOT NULL
);


--
-- Name: trader_concerns; Type: TABLE; Schema: caduceus_ea292f4; Owner: -
--

CREATE TABLE caduceus_ea292f4.trader_concerns (
    tenant text NOT NULL,
    concern_id text NOT NULL,
    execution_state text NOT NULL,
    revision bigint NOT NULL,
    updated_at bigint NOT NULL
);


--
-- Name: trader_decisions; Type: TABLE; Schema: caduceus_ea292f4; Owner: -
--

CREATE TABLE caduceus_ea292f4.trader_decisions (
    tenant text NOT NULL,
    decision_id text NOT NULL,
    concern_id text NOT NULL,
    fingerprint text NOT NULL,
    status text NOT NULL,
    response text NOT NULL,
    attempt_id text NOT NULL,
    created_at bigint NOT NULL
);


--
-- Name: trader_instances; Type: TABLE; Schema: caduceus_ea292f4; Owner: -
--

CREATE TABLE caduceus_ea292f4.trader_instances (
    tenant text NOT NULL,
    strategy_id text NOT NULL,
    desired text NOT NULL,
    actual text NOT NULL,
    risk_mode text NOT NULL,
    updated_at bigint NOT NULL
);


--
-- Name: trader_strategies; Type: TABLE; Schema: caduceus_ea292f4; Owner: -
--

CREATE TABLE caduceus_ea292f4.trader_strategies (
    tenant text NOT NULL,
    id text NOT NULL,
    account_id text NOT NULL,
    market_symbol text NOT NULL,
    name text NOT NULL,
    status text NOT NULL,
    runnable boolean NOT NULL,
    risk_mode text NOT NULL,
    revision bigint NOT NULL,
    updated_at bigint NOT NULL
);


--
-- Data for Name: api_keys; Type: TABLE DATA; Schema: caduceus_ea292f4; Owner: -
--

COPY caduceus_ea292f4.api_keys (id, tenant, secret_hash, scopes, harness, run_context, created_at, revoked_at) FROM stdin;
1679e80100829402	slot-1	b52df3fe0c70927d8cf154992a03ec40c21c90d6d8f2b8c0dea5a780c762ceb8	admin,configure,operate,route			1796141636813316	\N
f98d9391c43bef06	slot-2	c53268c2ed59607656395b2c199410008c81d10f4ecfb1cf09b1273953170b8d	route			1796141636932615	\N
\.


--
-- Data for Name: audit_heads; Type: TABLE DATA; Schema: caduceus_ea292f4; Owner: -
--

COPY caduceus_ea292f4.audit_heads (tenant, seq, hash) FROM stdin;
slot-1	4	sha256:244837ba7f0452de2396fc3eaad9ed9df3114d8a74a829fdc557b00368165d67
slot-2	1	sha256:ad068c10b6b29debc8e316f66439c1a55e419fb33416a69f5fe72cf56898bbb7
\.


--
-- Data for Name: audit_records; Type: TABLE DATA; Schema: caduceus_ea292f4; Owner: -
--

COPY caduceus_ea292f4.audit_records (tenant, seq, id, at, action, resource, outcome, body, prev_hash, hash) FROM stdin;
slot-1	1	evt_01M8S64QB8BFMQV7S31G5YKKE8	2026-12-01T16:13:56.960148Z	trader.import	trader/import	allow	{"id":"evt_01M8S64QB8BFMQV7S31G5YKKE8","outcome":{"action":"trader.import","at":"2026-12-01T16:13:56.960148Z","identity":{"subject":"usr_1fd4be9a3e7afbc55f93e5007f274643e05b057964e4882ebc842acc8abf7b0f","surface":"api","tenant_slot":"slot-1","trust":"router"},"outcome":"allow","reason":"import","resource":"trader/import"},"payload":{"file_sha256":"sha256:a4664582be927eaa1442a6273c385f108f0e1ea498dfb81d8a7331ed93073f70","format":"yaml","result":{"concerns_created":1,"concerns_updated":0,"strategies_created":2,"strategies_updated":0,"unchanged":0}},"provenance":{"actor":{"id":"usr_1fd4be9a3e7afbc55f93e5007f274643e05b057964e4882ebc842acc8abf7b0f","type":"operator"},"recorded_at":"2026-12-01T16:13:56.960148Z","surface":"api"},"seq":1,"tenant":"slot-1"}	sha256:0000000000000000000000000000000000000000000000000000000000000000	sha256:658e560b8495b777a1e28af6f35fde6606aab592bb8c8bff4b7e1c6e9c6754a1
slot-1	2	evt_01M8S64QCH3TX51HJ2VTFZNREN	2026-12-01T16:13:57.009564Z	trader.apply	trader/decision/dec_2026_04_16_001	allow	{"id":"evt_01M8S64QCH3TX51HJ2VTFZNREN","outcome":{"action":"trader.apply","at":"2026-12-01T16:13:57.009564Z","identity":{"subject":"usr_10c82f9b360ae0620440206b02f6963d7355a3b4e888eea407fede75da6b8015","surface":"api","tenant_slot":"slot-1","trust":"router"},"outcome":"allow","reason":"applied","resource":"trader/decision/dec_2026_04_16_001"},"payload":{"action":"switch","concern_id":"qndd8o9ppop6:xrpusd","decided_at":"2026-12-01T16:13:57.009564Z","decision_id":"dec_2026_04_16_001","dry_run":false,"id":"dec_01M8S64QCH3TX51HJ2VTFZNREM","identity":{"subject":"usr_10c82f9b360ae0620440206b02f6963d7355a3b4e888eea407fede75da6b8015","surface":"api","tenant_slot":"slot-1","trust":"router"},"key_id":"1679e80100829402","override":false,"received_at":"2026-12-01T16:13:56.999361Z","request":{"account_id":"qndd8o9ppop6","action":"switch","concern_id":"qndd8o9ppop6:xrpusd","confidence":0.83,"decision_id":"dec_2026_04_16_001","dry_run":false,"expected_active_strategy_id":"9cf29124-65a7-4950-ac18-65f938e0239b","market_symbol":"xrpusd","override":false,"reason":"trend strategy still fits the directional narrative","requested_at":"2026-04-16T20:15:00Z","risk_mode":"normal","target_strategy_id":"0c555fee-e4c8-4543-ae70-c132517017e1"},"request_bytes":483,"request_sha256":"sha256:b4545c5b943f428220488cb5781e1d707ffe3c9fb20e7f1dc0fa61408a36062a","response":{"action":"switch","applied_at":"2026-12-01T16:13:57.008452Z","concern_id":"qndd8o9ppop6:xrpusd","decision_id":"dec_2026_04_16_001","dry_run":false,"errors":[],"from_strategy_id":"9cf29124-65a7-4950-ac18-65f938e0239b","ok":true,"result":{"mode_change":"applied","reconciled":true},"risk_mode":"normal","status":"applied","to_strategy_id":"0c555fee-e4c8-4543-ae70-c132517017e1","validation":{"account_match":true,"concern_match":true,"expected_active_match":true,"market_match":true,"target_exists":true,"target_runnable":true},"warnings":[]},"status":"applied"},"provenance":{"actor":{"id":"usr_10c82f9b360ae0620440206b02f6963d7355a3b4e888eea407fede75da6b8015","type":"assistant"},"recorded_at":"2026-12-01T16:13:57.009564Z","surface":"api"},"seq":2,"tenant":"slot-1"}	sha256:658e560b8495b777a1e28af6f35fde6606aab592bb8c8bff4b7e1c6e9c6754a1	sha256:08f0c4e0c9a9009bdf91912ea18634bf18a404a36137878b998d68babe2fb832
slot-1	3	evt_01M8S64QD28B1GF3VNX8GGWBQ1	2026-12-01T16:13:57.026483Z	keys.list	keys	allow	{"id":"evt_01M8S64QD28B1GF3VNX8GGWBQ1","outcome":{"action":"keys.list","at":"2026-12-01T16:13:57.026483Z","identity":{"subject":"usr_10c82f9b360ae0620440206b02f6963d7355a3b4e888eea407fede75da6b8015","surface":"api","tenant_slot":"slot-1","trust":"router"},"outcome":"allow","resource":"keys"},"seq":3,"tenant":"slot-1"}	sha256:08f0c4e0c9a9009bdf91912ea18634bf18a404a36137878b998d68babe2fb832	sha256:b49b41d94157da76f87c33affffbc73909f7f74eee36d2344f14a8b1a61e7d9d
slot-1	4	evt_01M8S64QDM0H48PSXEXX3RVG56	2026-12-01T16:13:57.04417Z	trader.list_strategies	strategies	allow	{"id":"evt_01M8S64QDM0H48PSXEXX3RVG56","outcome":{"action":"trader.list_strategies","at":"2026-12-01T16:13:57.04417Z","identity":{"subject":"usr_10c82f9b360ae0620440206b02f6963d7355a3b4e888eea407fede75da6b8015","surface":"api","tenant_slot":"slot-1","trust":"router"},"outcome":"allow","resource":"strategies"},"seq":4,"tenant":"slot-1"}	sha256:b49b41d94157da76f87c33affffbc73909f7f74eee36d2344f14a8b1a61e7d9d	sha256:244837ba7f0452de2396fc3eaad9ed9df3114d8a74a829fdc557b00368165d67
slot-2	1	evt_01M8S64QE2ED2TDAMME0VCAXTY	2026-12-01T16:13:57.057786Z	trader.list_strategies	strategies	allow	{"id":"evt_01M8S64QE2ED2TDAMME0VCAXTY","outcome":{"action":"trader.list_strategies","at":"2026-12-01T16:13:57.057786Z","identity":{"subject":"usr_b6eb4a7954807838886103961f12df18978e64e05919cd460779263fe9ebe8d0","surface":"api","tenant_slot":"slot-2","trust":"router"},"outcome":"allow","resource":"strategies"},"seq":1,"tenant":"slot-2"}	sha256:0000000000000000000000000000000000000000000000000000000000000000	sha256:ad068c10b6b29debc8e316f66439c1a55e419fb33416a69f5fe72cf56898bbb7
\.


--
-- Data for Name: executor_anomalies; Type: TABLE DATA; Schema: caduceus_ea292f4; Owner: -
--

COPY caduceus_ea292f4.executor_anomalies (tenant, account, ny_day, n, updated_at) FROM stdin;
\.


--
-- Data for Name: executor_broker_state; Type: TABLE DATA; Schema: caduceus_ea292f4; Owner: -
--

COPY caduceus_ea292f4.executor_broker_state (tenant, name, state, updated_at) FROM stdin;
\.


--
-- Data for Name: executor_day_start; Type: TABLE DATA; Schema: caduceus_ea292f4; Owner: -
--

COPY caduceus_ea292f4.executor_day_start (tenant, account, ny_day, start_value, captured_at) FROM stdin;
\.


--
-- Data for Name: idempotency; Type: TABLE DATA; Schema: caduceus_ea292f4; Owner: -
--

COPY caduceus_ea292f4.idempotency (tenant, scope, key, body_hash, result, created_at) FROM stdin;
\.


--
-- Data for Name: relay_buffer; Type: TABLE DATA; Schema: caduceus_ea292f4; Owner: -
--

COPY caduceus_ea292f4.relay_buffer (tenant, id, platform, bot, session_key, event, created_at, lease_owner, lease_until) FROM stdin;
\.


--
-- Data for Name: relay_capabilities; Type: TABLE DATA; Schema: caduceus_ea292f4; Owner: -
--

COPY caduceus_ea292f4.relay_capabilities (tenant, session_key, kind, bot, secret, expires_at) FROM stdin;
\.


--
-- Data for Name: relay_chats; Type: TABLE DATA; Schema: caduceus_ea292f4; Owner: -
--

COPY caduceus_ea292f4.relay_chats (tenant, platform, chat_id, bound_at) FROM stdin;
\.


--
-- Data for Name: relay_seen; Type: TABLE DATA; Schema: caduceus_ea292f4; Owner: -
--

COPY caduceus_ea292f4.relay_seen (tenant, dedupe_key, seen_at) FROM stdin;
\.


--
-- Data for Name: schema_migrations; Type: TABLE DATA; Schema: caduceus_ea292f4; Owner: -
--

COPY caduceus_ea292f4.schema_migrations (name, applied_at) FROM stdin;
000_core	1796141636623691
100_trader	1796141636675639
200_executor	1796141636703634
300_shim	1796141636728934
310_shim_memory	1796141636763677
400_relay	1796141636811011
\.


--
-- Data for Name: shim_context; Type: TABLE DATA; Schema: caduceus_ea292f4; Owner: -
--

COPY caduceus_ea292f4.shim_context (tenant, ref, version, doc, updated_at) FROM stdin;
\.


--
-- Data for Name: shim_entities; Type: TABLE DATA; Schema: caduceus_ea292f4; Owner: -
--

COPY caduceus_ea292f4.shim_entities (tenant, subject, project, kind, value, first_seen, last_seen, hits) FROM stdin;
\.


--
-- Data for Name: shim_ledger; Type: TABLE DATA; Schema: caduceus_ea292f4; Owner: -
--

COPY caduceus_ea292f4.shim_ledger (tenant, conversation, provision, version, at) FROM stdin;
\.


--
-- Data for Name: shim_outcomes; Type: TABLE DATA; Schema: caduceus_ea292f4; Owner: -
--

COPY caduceus_ea292f4.shim_outcomes (tenant, receipt, provision, conversation, subject, project, version, builtin, outcome, error_signature, next_receipt, fired_at, resolved_at) FROM stdin;
\.


--
-- Data for Name: shim_provisions; Type: TABLE DATA; Schema: caduceus_ea292f4; Owner: -
--

COPY caduceus_ea292f4.shim_provisions (tenant, id, version, doc, updated_at) FROM stdin;
\.


--
-- Data for Name: shim_receipts; Type: TABLE DATA; Schema: caduceus_ea292f4; Owner: -
--

COPY caduceus_ea292f4.shim_receipts (tenant, id, at, decision, doc) FROM stdin;
\.


--
-- Data for Name: shim_sync_marks; Type: TABLE DATA; Schema: caduceus_ea292f4; Owner: -
--

COPY caduceus_ea292f4.shim_sync_marks (tenant, kind, id, source_version, local_version) FROM stdin;
\.


--
-- Data for Name: trader_attempts; Type: TABLE DATA; Schema: caduceus_ea292f4; Owner: -
--

COPY caduceus_ea292f4.trader_attempts (tenant, id, decision_id, concern_id, status, received_at, body) FROM stdin;
slot-1	dec_01M8S64QCH3TX51HJ2VTFZNREM	dec_2026_04_16_001	qndd8o9ppop6:xrpusd	applied	1796141636999361	{"id":"dec_01M8S64QCH3TX51HJ2VTFZNREM","decision_id":"dec_2026_04_16_001","concern_id":"qndd8o9ppop6:xrpusd","action":"switch","status":"applied","dry_run":false,"override":false,"identity":{"tenant_slot":"slot-1","subject":"usr_10c82f9b360ae0620440206b02f6963d7355a3b4e888eea407fede75da6b8015","surface":"api","trust":"router"},"key_id":"1679e80100829402","request":{"decision_id":"dec_2026_04_16_001","concern_id":"qndd8o9ppop6:xrpusd","account_id":"qndd8o9ppop6","market_symbol":"xrpusd","action":"switch","target_strategy_id":"0c555fee-e4c8-4543-ae70-c132517017e1","expected_active_strategy_id":"9cf29124-65a7-4950-ac18-65f938e0239b","risk_mode":"normal","reason":"trend strategy still fits the directional narrative","confidence":0.83,"dry_run":false,"override":false,"requested_at":"2026-04-16T20:15:00Z"},"request_sha256":"sha256:b4545c5b943f428220488cb5781e1d707ffe3c9fb20e7f1dc0fa61408a36062a","request_bytes":483,"response":{"ok":true,"status":"applied","decision_id":"dec_2026_04_16_001","concern_id":"qndd8o9ppop6:xrpusd","action":"switch","from_strategy_id":"9cf29124-65a7-4950-ac18-65f938e0239b","to_strategy_id":"0c555fee-e4c8-4543-ae70-c132517017e1","risk_mode":"normal","dry_run":false,"validation":{"concern_match":true,"account_match":true,"market_match":true,"expected_active_match":true,"target_exists":true,"target_runnable":true},"warnings":[],"errors":[],"result":{"mode_change":"applied","reconciled":true},"applied_at":"2026-12-01T16:13:57.008452Z"},"received_at":"2026-12-01T16:13:56.999361Z","decided_at":"2026-12-01T16:13:57.009564Z","audit_id":"evt_01M8S64QCH3TX51HJ2VTFZNREN"}
\.


--
-- Data for Name: trader_concerns; Type: TABLE DATA; Schema: caduceus_ea292f4; Owner: -
--

COPY caduceus_ea292f4.trader_concerns (tenant, concern_id, execution_state, revision, updated_at) FROM stdin;
slot-1	qndd8o9ppop6:xrpusd	healthy	1	1796141636960148
\.


--
-- Data for Name: trader_decisions; Type: TABLE DATA; Schema: caduceus_ea292f4; Owner: -
--

COPY caduceus_ea292f4.trader_decisions (tenant, decision_id, concern_id, fingerprint, status, response, attempt_id, created_at) FROM stdin;
slot-1	dec_2026_04_16_001	qndd8o9ppop6:xrpusd	sha256:606f6b45835ce35b24b9bff0d9762cb9939370385d0ef908d968740789650af7	applied	{"ok":true,"status":"applied","decision_id":"dec_2026_04_16_001","concern_id":"qndd8o9ppop6:xrpusd","action":"switch","from_strategy_id":"9cf29124-65a7-4950-ac18-65f938e0239b","to_strategy_id":"0c555fee-e4c8-4543-ae70-c132517017e1","risk_mode":"normal","dry_run":false,"validation":{"concern_match":true,"account_match":true,"market_match":true,"expected_active_match":true,"target_exists":true,"target_runnable":true},"warnings":[],"errors":[],"result":{"mode_change":"applied","reconciled":true},"applied_at":"2026-12-01T16:13:57.008452Z"}	dec_01M8S64QCH3TX51HJ2VTFZNREM	1796141637009208
\.


--
-- Data for Name: trader_instances; Type: TABLE DATA; Schema: caduceus_ea292f4; Owner: -
--

COPY caduceus_ea292f4.trader_instances (tenant, strategy_id, desired, actual, risk_mode, updated_at) FROM stdin;
slot-1	9cf29124-65a7-4950-ac18-65f938e0239b	inactive	inactive	normal	1796141637008866
slot-1	0c555fee-e4c8-4543-ae70-c132517017e1	active	active	normal	1796141637009140
\.


--
-- Data for Name: trader_strategies; Type: TABLE DATA; Schema: caduceus_ea292f4; Owner: -
--

COPY caduceus_ea292f4.trader_strategies (tenant, id, account_id, market_symbol, name, status, runnable, risk_mode, revision, updated_at) FROM stdin;
slot-1	9cf29124-65a7-4950-ac18-65f938e0239b	qndd8o9ppop6	xrpusd	trend	inactive	t	normal	2	1796141637008452
slot-1	0c555fee-e4c8-4543-ae70-c132517017e1	qndd8o9ppop6	xrpusd	mean-revert	active	t	normal	2	1796141637008452
\.


--
-- Name: api_keys api_keys_pkey; Type: CONSTRAINT; Schema: caduceus_ea292f4; Owner: -
--

ALTER TABLE ONLY caduceus_ea292f4.api_keys
    ADD CONSTRAINT api_keys_pkey PRIMARY KEY (id);


--
-- Name: audit_heads audit_heads_pkey; Type: CONSTRAINT; Schema: caduceus_ea292f4; Owner: -
--

ALTER TABLE ONLY caduceus_ea292f4.audit_heads
    ADD CONSTRAINT audit_heads_pkey PRIMARY KEY (tenant);


--
-- Name: audit_records audit_records_id_key; Type: CONSTRAINT; Schema: caduceus_ea292f4; Owner: -
--

ALTER TABLE ONLY caduceus_ea292f4.audit_records
    ADD CONSTRAINT audit_records_id_key UNIQUE (id);


--
-- Name: audit_records audit_records_pkey; Type: CONSTRAINT; Schema: caduceus_ea292f4; Owner: -
--

ALTER TABLE ONLY caduceus_ea292f4.audit_records
    ADD CONSTRAINT audit_records_pkey PRIMARY KEY (tenant, seq);


--
-- Name: executor_anomalies executor_anomalies_pkey; Type: CONSTRAINT; Schema: caduceus_ea292f4; Owner: -
--

ALTER TABLE ONLY caduceus_ea292f4.executor_anomalies
    ADD CONSTRAINT executor_anomalies_pkey PRIMARY KEY (tenant, account, ny_day);


--
-- Name: executor_broker_state executor_broker_state_pkey; Type: CONSTRAINT; Schema: caduceus_ea292f4; Owner: -
--

ALTER TABLE ONLY caduceus_ea292f4.executor_broker_state
    ADD CONSTRAINT executor_broker_state_pkey PRIMARY KEY (tenant, name);


--
-- Name: executor_day_start executor_day_start_pkey; Type: CONSTRAINT; Schema: caduceus_ea292f4; Owner: -
--

ALTER TABLE ONLY caduceus_ea292f4.executor_day_start
    ADD CONSTRAINT executor_day_start_pkey PRIMARY KEY (tenant, account, ny_day);


--
-- Name: idempotency idempotency_pkey; Type: CONSTRAINT; Schema: caduceus_ea292f4; Owner: -
--

ALTER TABLE ONLY caduceus_ea292f4.idempotency
    ADD CONSTRAINT idempotency_pkey PRIMARY KEY (tenant, scope, key);


--
-- Name: relay_buffer relay_buffer_pkey; Type: CONSTRAINT; Schema: caduceus_ea292f4; Owner: -
--

ALTER TABLE ONLY caduceus_ea292f4.relay_buffer
    ADD CONSTRAINT relay_buffer_pkey PRIMARY KEY (tenant, id);


--
-- Name: relay_capabilities relay_capabilities_pkey; Type: CONSTRAINT; Schema: caduceus_ea292f4; Owner: -
--

ALTER TABLE ONLY caduceus_ea292f4.relay_capabilities
    ADD CONSTRAINT relay_capabilities_pkey PRIMARY KEY (tenant, session_key, kind);


--
-- Name: relay_chats relay_chats_pkey; Type: CONSTRAINT; Schema: caduceus_ea292f4; Owner: -
--

ALTER TABLE ONLY caduceus_ea292f4.relay_chats
    ADD CONSTRAINT relay_chats_pkey PRIMARY KEY (tenant, platform, chat_id);


--
-- Name: relay_seen relay_seen_pkey; Type: CONSTRAINT; Schema: caduceus_ea292f4; Owner: -
--

ALTER TABLE ONLY caduceus_ea292f4.relay_seen
    ADD CONSTRAINT relay_seen_pkey PRIMARY KEY (tenant, dedupe_key);


--
-- Name: schema_migrations schema_migrations_pkey; Type: CONSTRAINT; Schema: caduceus_ea292f4; Owner: -
--

ALTER TABLE ONLY caduceus_ea292f4.schema_migrations
    ADD CONSTRAINT schema_migrations_pkey PRIMARY KEY (name);


--
-- Name: shim_context shim_context_pkey; Type: CONSTRAINT; Schema: caduceus_ea292f4; Owner: -
--

ALTER TABLE ONLY caduceus_ea292f4.shim_context
    ADD CONSTRAINT shim_context_pkey PRIMARY KEY (tenant, ref);


--
-- Name: shim_entities shim_entities_pkey; Type: CONSTRAINT; Schema: caduceus_ea292f4; Owner: -
--

ALTER TABLE ONLY caduceus_ea292f4.shim_entities
    ADD CONSTRAINT shim_entities_pkey PRIMARY KEY (tenant, subject, project, kind, value);


--
-- Name: shim_ledger shim_ledger_pkey; Type: CONSTRAINT; Schema: caduceus_ea292f4; Owner: -
--

ALTER TABLE ONLY caduceus_ea292f4.shim_ledger
    ADD CONSTRAINT shim_ledger_pkey PRIMARY KEY (tenant, conversation, provision);


--
-- Name: shim_outcomes shim_outcomes_pkey; Type: CONSTRAINT; Schema: caduceus_ea292f4; Owner: -
--

ALTER TABLE ONLY caduceus_ea292f4.shim_outcomes
    ADD CONSTRAINT shim_outcomes_pkey PRIMARY KEY (tenant, receipt, provision);


--
-- Name: shim_provisions shim_provisions_pkey; Type: CONSTRAINT; Schema: caduceus_ea292f4; Owner: -
--

ALTER TABLE ONLY caduceus_ea292f4.shim_provisions
    ADD CONSTRAINT shim_provisions_pkey PRIMARY KEY (tenant, id);


--
-- Name: shim_receipts shim_receipts_pkey; Type: CONSTRAINT; Schema: caduceus_ea292f4; Owner: -
--

ALTER TABLE ONLY caduceus_ea292f4.shim_receipts
    ADD CONSTRAINT shim_receipts_pkey PRIMARY KEY (tenant, id);


--
-- Name: shim_sync_marks shim_sync_marks_pkey; Type: CONSTRAINT; Schema: caduceus_ea292f4; Owner: -
--

ALTER TABLE ONLY caduceus_ea292f4.shim_sync_marks
    ADD CONSTRAINT shim_sync_marks_pkey PRIMARY KEY (tenant, kind, id);


--
-- Name: trader_attempts trader_attempts_pkey; Type: CONSTRAINT; Schema: caduceus_ea292f4; Owner: -
--

ALTER TABLE ONLY caduceus_ea292f4.trader_attempts
    ADD CONSTRAINT trader_attempts_pkey PRIMARY KEY (tenant, id);


--
-- Name: trader_concerns trader_concerns_pkey; Type: CONSTRAINT; Schema: caduceus_ea292f4; Owner: -
--

ALTER TABLE ONLY caduceus_ea292f4.trader_concerns
    ADD CONSTRAINT trader_concerns_pkey PRIMARY KEY (tenant, concern_id);


--
-- Name: trader_decisions trader_decisions_pkey; Type: CONSTRAINT; Schema: caduceus_ea292f4; Owner: -
--

ALTER TABLE ONLY caduceus_ea292f4.trader_decisions
    ADD CONSTRAINT trader_decisions_pkey PRIMARY KEY (tenant, decision_id);


--
-- Name: trader_instances trader_instances_pkey; Type: CONSTRAINT; Schema: caduceus_ea292f4; Owner: -
--

ALTER TABLE ONLY caduceus_ea292f4.trader_instances
    ADD CONSTRAINT trader_instances_pkey PRIMARY KEY (tenant, strategy_id);


--
-- Name: trader_strategies trader_strategies_pkey; Type: CONSTRAINT; Schema: caduceus_ea292f4; Owner: -
--

ALTER TABLE ONLY caduceus_ea292f4.trader_strategies
    ADD CONSTRAINT trader_strategies_pkey PRIMARY KEY (tenant, id);


--
-- Name: relay_buffer_owner; Type: INDEX; Schema: caduceus_ea292f4; Owner: -
--

CREATE INDEX relay_buffer_owner ON caduceus_ea292f4.relay_buffer USING btree (tenant, lease_owner);


--
-- Name: relay_buffer_pending; Type: INDEX; Schema: caduceus_ea292f4; Owner: -
--

CREATE INDEX relay_buffer_pending ON caduceus_ea292f4.relay_buffer USING btree (tenant, platform, bot, id);


--
-- Name: relay_capabilities_expiry; Type: INDEX; Schema: caduceus_ea292f4; Owner: -
--

CREATE INDEX relay_capabilities_expiry ON caduceus_ea292f4.relay_capabilities USING btree (expires_at);


--
-- Name: relay_seen_at; Type: INDEX; Schema: caduceus_ea292f4; Owner: -
--

CREATE INDEX relay_seen_at ON caduceus_ea292f4.relay_seen USING btree (seen_at);


--
-- Name: shim_entities_recent; Type: INDEX; Schema: caduceus_ea292f4; Owner: -
--

CREATE INDEX shim_entities_recent ON caduceus_ea292f4.shim_entities USING btree (tenant, subject, last_seen);


--
-- Name: shim_outcomes_pending; Type: INDEX; Schema: caduceus_ea292f4; Owner: -
--

CREATE INDEX shim_outcomes_pending ON caduceus_ea292f4.shim_outcomes USING btree (tenant, conversation, outcome);


--
-- Name: shim_outcomes_subject; Type: INDEX; Schema: caduceus_ea292f4; Owner: -
--

CREATE INDEX shim_outcomes_subject ON caduceus_ea292f4.shim_outcomes USING btree (tenant, subject, receipt);


--
-- Name: trader_attempts_concern; Type: INDEX; Schema: caduceus_ea292f4; Owner: -
--

CREATE INDEX trader_attempts_concern ON caduceus_ea292f4.trader_attempts USING btree (tenant, concern_id, id);


--
-- Name: trader_attempts_decision; Type: INDEX; Schema: caduceus_ea292f4; Owner: -
--

CREATE INDEX trader_attempts_decision ON caduceus_ea292f4.trader_attempts USING btree (tenant, decision_id, id);


--
-- Name: trader_strategies_concern; Type: INDEX; Schema: caduceus_ea292f4; Owner: -
--

CREATE INDEX trader_strategies_concern ON caduceus_ea292f4.trader_strategies USING btree (tenant, account_id, market_symbol);


--
-- Name: trader_strategies_current; Type: INDEX; Schema: caduceus_ea292f4; Owner: -
--

CREATE UNIQUE INDEX trader_strategies_current ON caduceus_ea292f4.trader_strategies USING btree (tenant, account_id, market_symbol) WHERE (status = ANY (ARRAY['active'::text, 'paused'::text]));


--
-- PostgreSQL database dump complete
--

\unrestrict bvb0dj6wxuaEhTtaMPgTeaZRFUJ8NcTddZHyJFAmfnKJX8SRXQXHpHgHfznJByS

