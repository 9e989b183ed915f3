package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/shared"

	"github.com/caduceus-dev/caduceus/contract"
	"github.com/caduceus-dev/caduceus/relay/gateway"
	"github.com/caduceus-dev/caduceus/store/storetest"
	"github.com/caduceus-dev/caduceus/trail"
)

// TestConversationTrailEndToEnd follows one conversation through every
// gate of one `caduceus serve` (SQLite): a signed Telegram webhook reaches
// a gateway adapter; the agent side calls the shim with the session key
// (the official openai-go client, against a fake upstream: once with
// X-Caduceus-Conversation, once naming it in the OpenAI metadata), applies
// a trader decision and an executor tick over HTTP with the header, a tick
// over MCP with _meta, a tick from the CLI with HERMES_SESSION_KEY and
// HERMES_CRON_RUN_ID, and sends the reply out to the (fake) Bot API. Then
// GET /v1/trail/conversations/{session key} lists every one of them in order with
// verified audit ids that are the audit trail's, `caduceus trace` prints
// the same, and another tenant's key sees none of it.
func TestConversationTrailEndToEnd(t *testing.T) {
	t.Run("sqlite", func(t *testing.T) { testConversationTrail(t, "") })
	if dsn := os.Getenv(storetest.EnvPostgres); dsn != "" {
		t.Run("postgres", func(t *testing.T) { testConversationTrail(t, storetest.FreshSchema(t, dsn)) })
	}
}

// testConversationTrail runs the end-to-end trail test on SQLite in the
// data directory (pg "") or on the Postgres store pg.
func testConversationTrail(t *testing.T, pg string) {
	tg := &fakeTelegram{}
	tgSrv := httptest.NewServer(tg)
	defer tgSrv.Close()
	up := &fakeProvider{name: "openai"}
	up.last.Store("")
	upstream := httptest.NewServer(up)
	defer upstream.Close()

	secret := "a-shared-gateway-secret-of-40-characters"
	cfg := filepath.Join(t.TempDir(), "caduceus.yaml")
	os.WriteFile(cfg, []byte(fmt.Sprintf(`relay:
  telegram_base_url: %s
  gateways:
    gw-a: {tenant: slot-1, secrets: ["env:GW_A_SECRET"]}
  telegram:
    acmebot: {token: "env:TG_TOKEN", secret_token: "tg-webhook-secret", tenant: slot-1, parse_mode: plain}
shim:
  routes:
    openai: {kind: openai, base_url: %s/v1, key_env: UPSTREAM_KEY, models: [gpt-4.1-mini]}
  plans:
    standard:
      failover: none
      models:
        gpt-4.1-mini: [{route: openai}]
  prices:
    openai/gpt-4.1-mini: {input: 0.40, cached_input: 0.10, output: 1.60, max_output_tokens: 32768}
`, tgSrv.URL, upstream.URL)), 0o600)
	env := map[string]string{"GW_A_SECRET": secret, "TG_TOKEN": "123:TGTOKEN", "UPSTREAM_KEY": "sk-upstream-secret"}
	getenv := func(k string) string { return env[k] }
	args := []string{"--config", cfg, "--skills", exSkills, "--scenario", exScenario}
	if pg != "" {
		args = append(args, "--store", pg)
	}
	in := startEnv(t, getenv, args...)
	// Where the CLI finds the same store.
	at := []string{"--data", in.data}
	if pg != "" {
		at = []string{"--store", pg}
	}
	cli := func(t *testing.T, args ...string) (int, string, string) { return cli(t, append(args, at...)...) }
	cliEnv := func(t *testing.T, env map[string]string, args ...string) (int, string, string) {
		return cliEnv(t, env, append(args, at...)...)
	}

	if code, out, errOut := cli(t, "trader", "import", "testdata/strategies.yaml"); code != 0 {
		t.Fatalf("import: %d %s %s", code, out, errOut)
	}
	_, out, _ := cli(t, "keys", "create", "--tenant", "slot-1", "--scopes", "route,operate", "--context", "cron", "--harness", "autotrader", "--models", "openai/gpt-4.1-mini")
	agentKey := strings.TrimSpace(out)
	_, out, _ = cli(t, "keys", "create", "--tenant", "slot-1", "--scopes", "route,configure", "--harness", "claude-code")
	configKey := strings.TrimSpace(out)
	_, out, _ = cli(t, "keys", "create", "--tenant", "slot-2", "--scopes", "route,operate")
	otherKey := strings.TrimSpace(out)
	// A rule that fires on the user's words, so the LLM turn has one.
	if status, body := in.do(t, "POST", "/v1/provisions", configKey,
		json.RawMessage(`{"id":"PROV-DEPLOY","triggers":{"keyword":{"any":["deploy"]}},"action":"shim","context_refs":["verb:deploy"]}`),
		"X-Caduceus-Harness", "claude-code"); status != 201 {
		t.Fatalf("provision: %d %v", status, body)
	}
	if status, body := in.do(t, "POST", "/v1/context", configKey,
		json.RawMessage(`{"ref":"verb:deploy","kind":"verb","title":"Deploying","body":"Deploy with make deploy-staging first."}`),
		"X-Caduceus-Harness", "claude-code"); status != 201 {
		t.Fatalf("context: %d %v", status, body)
	}

	// 1. The user writes on Telegram; the gateway adapter receives it.
	a, events, stop := connectAdapter(t, in.url, "gw-a", secret, "telegram", "acmebot")
	update := `{"update_id":1,"message":{"message_id":77,"from":{"id":42,"first_name":"Al"},"chat":{"id":42,"type":"private"},"date":1700000000,"text":"please deploy the payments service"}}`
	req, _ := http.NewRequest("POST", in.url+"/hooks/telegram/acmebot", strings.NewReader(update))
	req.Header.Set("X-Telegram-Bot-Api-Secret-Token", "tg-webhook-secret")
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("webhook: %v %v", resp, err)
	}
	resp.Body.Close()
	var ev gateway.Inbound
	select {
	case ev = <-events:
	case <-time.After(10 * time.Second):
		t.Fatal("no event reached the gateway")
	}
	key := ev.SessionKey
	if key != "agent:main:telegram:dm:42" || ev.Event.Text != "please deploy the payments service" {
		t.Fatalf("event %+v key %q", ev.Event, key)
	}

	// 2. The agent's LLM turns through the shim, named by the session key.
	oc := openai.NewClient(option.WithBaseURL(in.url+"/v1/"), option.WithAPIKey(agentKey), option.WithMaxRetries(0))
	var hr *http.Response
	completion, err := oc.Chat.Completions.New(t.Context(), openai.ChatCompletionNewParams{Model: "gpt-4.1-mini",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage(ev.Event.Text)}},
		option.WithHeader(contract.HeaderConversation, key), option.WithResponseInto(&hr))
	if err != nil || completion.Choices[0].Message.Content != "from openai" {
		t.Fatalf("LLM turn: %v %+v", err, completion)
	}
	conv := contract.ConversationFor("slot-1", key)
	if got := hr.Header.Get(contract.HeaderConversation); got != conv {
		t.Errorf("shim answered conversation %q, want %q", got, conv)
	}
	// The same conversation named by the OpenAI metadata instead.
	_, err = oc.Chat.Completions.New(t.Context(), openai.ChatCompletionNewParams{Model: "gpt-4.1-mini",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage(ev.Event.Text), openai.AssistantMessage("from openai"), openai.UserMessage("and then?")},
		Metadata: shared.Metadata{"conversation": key}}, option.WithResponseInto(&hr))
	if err != nil || hr.Header.Get(contract.HeaderConversation) != conv {
		t.Fatalf("LLM turn named in metadata: %v, conversation %q", err, hr.Header.Get(contract.HeaderConversation))
	}

	// A malformed name is refused in the protocol's envelope, naming it.
	_, err = oc.Chat.Completions.New(t.Context(), openai.ChatCompletionNewParams{Model: "gpt-4.1-mini",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")}}, option.WithHeader(contract.HeaderConversation, "a\tb"))
	var oe *openai.Error
	if !errors.As(err, &oe) || oe.StatusCode != 400 || !strings.Contains(oe.RawJSON(), contract.HeaderConversation) {
		t.Errorf("conversation header with a tab: %v", err)
	}

	// 3. A trader decision and an executor tick over HTTP, with the header.
	decision, _ := os.ReadFile("testdata/decision.json")
	if status, body := in.do(t, "POST", "/v1/trader/decisions", agentKey, json.RawMessage(decision), contract.HeaderConversation, key); status != 200 || body["status"] != "applied" {
		t.Fatalf("decision: %d %v", status, body)
	}
	payload, _ := os.ReadFile(exPayload)
	tick := map[string]any{"payload": json.RawMessage(payload)}
	if status, body := in.do(t, "POST", "/v1/executor/ticks", agentKey, tick, contract.HeaderConversation, key); status != 200 || !strings.Contains(mustJSON(body["actions"]), `"status":"placed"`) {
		t.Fatalf("tick: %d %v", status, body)
	}
	// A bad header is refused, naming it, and files nothing.
	if status, body := in.do(t, "POST", "/v1/executor/ticks", agentKey, tick, contract.HeaderConversation, strings.Repeat("k", 600)); status != 400 || !strings.Contains(mustJSON(body), contract.HeaderConversation) {
		t.Errorf("oversized conversation header: %d %v", status, body)
	}
	// Over MCP, named in _meta.
	sess := mcpSession(t, in, agentKey)
	res, err := sess.CallTool(t.Context(), &mcp.CallToolParams{Name: "execute_intents", Arguments: tick, Meta: mcp.Meta{"conversation": key}})
	if err != nil || res.IsError {
		t.Fatalf("MCP tick: %v %+v", err, res)
	}
	res, err = sess.CallTool(t.Context(), &mcp.CallToolParams{Name: "execute_intents", Arguments: tick, Meta: mcp.Meta{"conversation": 7}})
	if err != nil || !res.IsError || !strings.Contains(res.Content[0].(*mcp.TextContent).Text, "_meta.conversation") {
		t.Errorf("MCP tick with a non-string _meta.conversation: %v %+v", err, res)
	}
	if code, _, errOut := cli(t, "trader", "apply", "--payload", "testdata/decision.json", "--conversation", "bad\x01name"); code != 2 || !strings.Contains(errOut, "--conversation") {
		t.Errorf("trader apply with a bad --conversation: %d %s", code, errOut)
	}
	// From the CLI, named by the Hermes environment, in a cron run.
	code, out, errOut := cliEnv(t, map[string]string{"HERMES_SESSION_KEY": key, "HERMES_CRON_RUN_ID": "cron-run-7"},
		"exec", "--payload", exPayload, "--skills", exSkills, "--scenario", exScenario)
	if code != 0 {
		t.Fatalf("exec: %d %s %s", code, out, errOut)
	}

	// 4. The reply goes out.
	if r := a.Send(t.Context(), "42", "deployed to staging", "", nil); !r.Success || !strings.Contains(tg.seen(), "deployed to staging") {
		t.Fatalf("reply: %+v; bot API saw %s", r, tg.seen())
	}
	stop()

	// The trail, by URL-escaped session key.
	wantKinds := []string{trail.KindInbound, trail.KindLLMTurn, trail.KindLLMTurn, trail.KindDecision, trail.KindTick, trail.KindTick, trail.KindTick, trail.KindOutbound}
	wantGates := []trail.Gate{trail.GateRelay, trail.GateShim, trail.GateShim, trail.GateTrader, trail.GateExecutor, trail.GateExecutor, trail.GateExecutor, trail.GateRelay}
	var tr trail.Trail
	getJSON(t, in, "/v1/trail/conversations/"+url.PathEscape(key), agentKey, 200, &tr)
	if tr.ConversationID != conv || tr.SessionKey != key || tr.Tenant != "slot-1" || !tr.Verified || len(tr.Events) != len(wantKinds) {
		t.Fatalf("trail: %s", mustJSON(tr))
	}
	// The audit ids are the audit trail's records, in chain order.
	_, tail, _ := cli(t, "audit", "tail", "--tenant", "slot-1", "--json", "-n", "1000")
	var prevSeq int64
	for i, e := range tr.Events {
		if e.Kind != wantKinds[i] || e.Gate != wantGates[i] || !e.Verified || e.AuditSeq <= prevSeq || !strings.Contains(tail, `"id":"`+e.AuditID+`"`) {
			t.Errorf("event %d: %s; want %s/%s, verified, after seq %d, in the audit trail", i, mustJSON(e), wantGates[i], wantKinds[i], prevSeq)
		}
		prevSeq = e.AuditSeq
	}
	if d := mustJSON(tr.Events[1].Detail); !strings.Contains(d, "PROV-DEPLOY") || !strings.Contains(tr.Events[1].Summary, "PROV-DEPLOY") ||
		!strings.Contains(d, `"settled_microdollars":`) || !strings.Contains(tr.Events[1].Summary, "spent $0.000") {
		t.Errorf("LLM turn without its fired rule and spend: %s", mustJSON(tr.Events[1]))
	}
	if d := mustJSON(tr.Events[3].Detail); !strings.Contains(d, `"validation"`) || !strings.Contains(tr.Events[3].Summary, "applied") {
		t.Errorf("decision without its validation: %s", mustJSON(tr.Events[3]))
	}
	if d := mustJSON(tr.Events[4].Detail); !strings.Contains(d, `"status":"placed"`) || !strings.Contains(d, `"order_id":"`) {
		t.Errorf("tick without its intents' outcome and order: %s", mustJSON(tr.Events[4]))
	}
	if tr.Events[6].RunID != "cron-run-7" {
		t.Errorf("CLI tick run id %q", tr.Events[6].RunID)
	}
	if !strings.Contains(tr.Events[7].Summary, "sent as message 501") {
		t.Errorf("outbound: %s", mustJSON(tr.Events[7]))
	}
	// By conv_ id the same; in the recent list, with its gates.
	var byID trail.Trail
	getJSON(t, in, "/v1/trail/conversations/"+conv, agentKey, 200, &byID)
	if mustJSON(byID.Events) != mustJSON(tr.Events) {
		t.Errorf("by conv_ id: %s", mustJSON(byID))
	}
	var list struct{ Conversations []trail.Summary }
	getJSON(t, in, "/v1/trail/conversations", agentKey, 200, &list)
	if i := slices.IndexFunc(list.Conversations, func(s trail.Summary) bool { return s.ConversationID == conv }); i < 0 ||
		list.Conversations[i].Events < len(wantKinds) || mustJSON(list.Conversations[i].Gates) != `["relay","shim","trader","executor"]` {
		t.Errorf("recent conversations: %s", mustJSON(list))
	}

	// Another tenant's key: not found, and not listed.
	getJSON(t, in, "/v1/trail/conversations/"+url.PathEscape(key), otherKey, 404, nil)
	getJSON(t, in, "/v1/trail/conversations/"+conv, otherKey, 404, nil)
	var others struct{ Conversations []trail.Summary }
	getJSON(t, in, "/v1/trail/conversations", otherKey, 200, &others)
	if strings.Contains(mustJSON(others), conv) || strings.Contains(mustJSON(others), key) {
		t.Errorf("slot-2 lists slot-1's conversation: %s", mustJSON(others))
	}
	if status, _ := in.do(t, "GET", "/v1/trail/conversations?tenant=slot-1", otherKey, nil); status != 403 {
		t.Errorf("slot-2 asked for slot-1's list: %d", status)
	}

	// The admin key reads every tenant's; ?tenant= narrows it.
	var asAdmin trail.Trail
	getJSON(t, in, "/v1/trail/conversations/"+url.PathEscape(key), in.adminKey, 200, &asAdmin)
	if asAdmin.ConversationID != conv || len(asAdmin.Events) != len(tr.Events) {
		t.Errorf("admin read: %s", mustJSON(asAdmin))
	}
	getJSON(t, in, "/v1/trail/conversations/"+url.PathEscape(key)+"?tenant=slot-2", in.adminKey, 404, nil)

	// `caduceus trace` prints the same events, in the same order.
	code, out, errOut = cli(t, "trace", key, "--tenant", "slot-1")
	if code != 0 || !strings.Contains(out, "conversation "+conv+" (session "+key+")") || !strings.Contains(out, "verified through every event") {
		t.Fatalf("trace: %d\n%s\n%s", code, out, errOut)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")[3:]
	if len(lines) != len(tr.Events) {
		t.Fatalf("trace printed %d events, want %d:\n%s", len(lines), len(tr.Events), out)
	}
	for i, e := range tr.Events {
		if !strings.Contains(lines[i], e.AuditID) || !strings.Contains(lines[i], e.Kind) || !strings.Contains(lines[i], " ok ") {
			t.Errorf("trace line %d %q, want %s %s ok", i, lines[i], e.Kind, e.AuditID)
		}
	}
	code, out, _ = cli(t, "trace", key, "--tenant", "slot-1", "--json")
	var traced trail.Trail
	if err := json.Unmarshal([]byte(out), &traced); code != 0 || err != nil || mustJSON(traced) != mustJSON(tr) {
		t.Errorf("trace --json differs from the API:\n%s\n%s", out, mustJSON(tr))
	}
	if code, _, errOut := cli(t, "trace", key, "--tenant", "slot-2"); code != 1 || !strings.Contains(errOut, "no conversation") {
		t.Errorf("trace in another tenant: %d %s", code, errOut)
	}
	if code, out, _ := cli(t, "trace", "--tenant", "slot-1"); code != 0 || !strings.Contains(out, conv) || !strings.Contains(out, "relay,shim,trader,executor") {
		t.Errorf("trace list: %d %s", code, out)
	}
}

// getJSON GETs path with key, wants status, and decodes the body into v.
func getJSON(t *testing.T, in *instance, path, key string, status int, v any) {
	t.Helper()
	req, _ := http.NewRequestWithContext(t.Context(), "GET", in.url+path, nil)
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != status {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("GET %s: %d, want %d: %s", path, resp.StatusCode, status, b)
	}
	if v != nil {
		if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
	}
}
