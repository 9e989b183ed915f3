package main

import (
	"bytes"
	"encoding/json"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

const (
	exSkills   = "../../executor/testdata/skills"
	exScenario = "../../executor/testdata/brokers/base.yaml"
	exPayload  = "../../executor/testdata/payloads/buy_spy.json"
)

func cliEnv(t *testing.T, env map[string]string, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(t.Context(), args, func(k string) string { return env[k] }, strings.NewReader(""), &out, &errb)
	return code, out.String(), errb.String()
}

type envelope struct {
	Aborted *string `json:"aborted"`
	Context string  `json:"context"`
	Actions []struct {
		Symbol string `json:"symbol"`
		Status string `json:"status"`
	} `json:"actions"`
}

func TestExecCommand(t *testing.T) {
	data := t.TempDir()
	cron := map[string]string{"HERMES_CRON_RUN_ID": "run-1", "HERMES_PROFILE": "autotrader"}
	code, out, errOut := cliEnv(t, cron, "exec", "--data", data, "--payload", exPayload, "--skills", exSkills, "--scenario", exScenario)
	if code != 0 {
		t.Fatalf("exec: %d %s", code, errOut)
	}
	var env envelope
	if err := json.Unmarshal([]byte(out), &env); err != nil {
		t.Fatalf("not an envelope: %s", out)
	}
	if env.Aborted != nil || env.Context != "cron" || len(env.Actions) != 1 || env.Actions[0].Status != "placed" {
		t.Fatalf("cron tick: %s", out)
	}
	// --context may only make it stricter: claude-code never places.
	_, out, _ = cliEnv(t, cron, "exec", "--data", data, "--payload", exPayload, "--skills", exSkills, "--scenario", exScenario, "--context", "claude-code")
	json.Unmarshal([]byte(out), &env)
	if env.Context != "claude-code" || env.Actions[0].Status == "placed" {
		t.Errorf("stricter context placed: %s", out)
	}
	// An abort is a normal outcome: exit 0 with the envelope.
	code, out, _ = cliEnv(t, cron, "exec", "--data", data, "--payload", exPayload, "--skills", t.TempDir(), "--scenario", exScenario)
	json.Unmarshal([]byte(out), &env)
	if code != 0 || env.Aborted == nil {
		t.Errorf("missing manifest: exit %d, %s", code, out)
	}
	// Not a payload at all: exit 2, a message, nothing on stdout.
	bad := t.TempDir() + "/bad.json"
	os.WriteFile(bad, []byte(`{"strategy": 7}`), 0o600)
	if code, out, errOut := cliEnv(t, cron, "exec", "--data", data, "--payload", bad, "--skills", exSkills, "--scenario", exScenario); code != 2 || out != "" || !strings.Contains(errOut, "strategy") {
		t.Errorf("bad payload: %d %q %q", code, out, errOut)
	}
	if code, _, _ := cli(t, "audit", "verify", "--data", data); code != 0 {
		t.Error("audit chain broken after exec")
	}
}

func TestExecutorOverHTTPAndMCP(t *testing.T) {
	in := start(t, "--skills", exSkills, "--scenario", exScenario)
	payload, _ := os.ReadFile(exPayload)
	body := map[string]any{"payload": json.RawMessage(payload)}
	_, cronKey, _ := cli(t, "keys", "create", "--data", in.data, "--tenant", "slot-1", "--scopes", "operate", "--context", "cron", "--harness", "autotrader")
	_, analystKey, _ := cli(t, "keys", "create", "--data", in.data, "--tenant", "slot-1", "--scopes", "operate", "--harness", "autotrader")
	status, resp := in.do(t, "POST", "/v1/executor/ticks", strings.TrimSpace(cronKey), body)
	if status != 200 || resp["context"] != "cron" || !strings.Contains(mustJSON(resp["actions"]), `"status":"placed"`) {
		t.Fatalf("cron key tick: %d %v", status, resp)
	}
	// A key without a run context is the analyst: never places.
	status, resp = in.do(t, "POST", "/v1/executor/ticks", strings.TrimSpace(analystKey), body)
	if status != 200 || resp["context"] != "claude-code" || strings.Contains(mustJSON(resp["actions"]), `"status":"placed"`) {
		t.Fatalf("analyst key tick: %d %v", status, resp)
	}
	if status, resp := in.do(t, "POST", "/v1/executor/ticks", strings.TrimSpace(cronKey), map[string]any{"payload": "nope"}); status != 400 {
		t.Errorf("bad tick body: %d %v", status, resp)
	}
	sess := mcpSession(t, in, strings.TrimSpace(cronKey))
	res, err := sess.CallTool(t.Context(), &mcp.CallToolParams{Name: "execute_intents", Arguments: body})
	if err != nil || res.IsError {
		t.Fatalf("execute_intents: %v %+v", err, res)
	}
	b, _ := json.Marshal(res.StructuredContent)
	if !strings.Contains(string(b), `"status":"placed"`) {
		t.Errorf("MCP tick: %s", b)
	}
	res, err = sess.CallTool(t.Context(), &mcp.CallToolParams{Name: "execute_intents", Arguments: map[string]any{"payload": map[string]any{"strategy": 7}}})
	if err != nil || !res.IsError {
		t.Errorf("bad MCP tick: %v %+v", err, res)
	}
	// One record per tick (the executor's), plus the refused calls recorded
	// by the server; the chain verifies.
	_, out, _ := cli(t, "audit", "tail", "--data", in.data, "--json", "-n", "100")
	if n := strings.Count(out, `"action":"executor.tick"`); n != 4 {
		t.Errorf("%d executor.tick records; want 4 (two HTTP ticks, one refused HTTP body, one MCP tick): %s", n, out)
	}
	if code, out, errOut := cli(t, "audit", "verify", "--data", in.data); code != 0 {
		t.Errorf("verify: %s %s", out, errOut)
	}
}

// TestTickNeedsOperate: the operate scope of a tick is checked at the edge
// that admits the caller, once: the route refuses a key without it (403
// missing_scope, recorded as a deny) and the MCP endpoint neither lists
// execute_intents to it nor runs it; no tick runs.
func TestTickNeedsOperate(t *testing.T) {
	in := start(t, "--skills", exSkills, "--scenario", exScenario)
	payload, _ := os.ReadFile(exPayload)
	body := map[string]any{"payload": json.RawMessage(payload)}
	_, routeKey, _ := cli(t, "keys", "create", "--data", in.data, "--tenant", "slot-1", "--scopes", "route,configure", "--context", "cron", "--harness", "autotrader")
	key := strings.TrimSpace(routeKey)
	if status, resp := in.do(t, "POST", "/v1/executor/ticks", key, body); status != 403 || resp["code"] != "missing_scope" || !strings.Contains(resp["detail"].(string), "operate") {
		t.Fatalf("tick without operate: %d %v", status, resp)
	}
	sess := mcpSession(t, in, key)
	if names := toolNames(t, sess); slices.Contains(names, "execute_intents") {
		t.Errorf("a key without operate sees execute_intents: %v", names)
	}
	if res, err := sess.CallTool(t.Context(), &mcp.CallToolParams{Name: "execute_intents", Arguments: body}); err == nil && !res.IsError {
		t.Fatalf("a key without operate ran a tick over MCP: %+v", res)
	}
	_, out, _ := cli(t, "audit", "tail", "--data", in.data, "--json", "-n", "100")
	ticks := 0
	for line := range strings.Lines(out) {
		if strings.Contains(line, `"action":"executor.tick"`) {
			ticks++
			if !strings.Contains(line, `"outcome":"deny"`) || !strings.Contains(line, `"reason":"missing_scope"`) {
				t.Errorf("a refused tick recorded as %s", line)
			}
		}
	}
	if ticks != 1 {
		t.Errorf("%d executor.tick records; want 1 (the refused HTTP tick): %s", ticks, out)
	}
}
