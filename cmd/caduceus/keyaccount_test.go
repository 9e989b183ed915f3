package main

import (
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestKeyBoundAccountOverHTTPAndMCP: `keys create --account` binds a key to
// a broker account, `keys list` and GET /v1/admin/keys show it, and the
// key's ticks over HTTP (POST /v1/executor/ticks) and MCP (execute_intents)
// trade that account; a tick naming another account is refused 403
// account_not_bound (MCP: a tool error) and places nothing. A malformed
// account is refused by `keys create`, which then creates nothing.
func TestKeyBoundAccountOverHTTPAndMCP(t *testing.T) {
	const def, second = "619508153", "777000222"
	in := start(t, "--skills", exSkills, "--scenario", exScenario)
	payload, _ := os.ReadFile(exPayload)
	code, boundOut, errOut := cli(t, "keys", "create", "--data", in.data, "--tenant", "slot-1", "--scopes", "operate", "--context", "cron", "--harness", "autotrader", "--account", second)
	if code != 0 {
		t.Fatalf("keys create --account: %d %s", code, errOut)
	}
	bound := strings.TrimSpace(boundOut)
	if code, out, errOut := cli(t, "keys", "create", "--data", in.data, "--tenant", "slot-1", "--scopes", "operate", "--account", "two words"); code != 2 || out != "" || !strings.Contains(errOut, "account") {
		t.Errorf("keys create with a malformed account: %d %q %q; want exit 2 naming the account", code, out, errOut)
	}
	_, out, _ := cli(t, "keys", "list", "--data", in.data)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 3 || !strings.Contains(lines[0], "ACCOUNT") {
		t.Fatalf("keys list (the admin key and the bound one):\n%s", out)
	}
	boundID := bound[4:20]
	for _, l := range lines[1:] {
		f := strings.Fields(l)
		if want := map[bool]string{true: second, false: "-"}[f[0] == boundID]; len(f) < 6 || f[5] != want {
			t.Errorf("keys list row %q: ACCOUNT %v, want %s", l, f, want)
		}
	}
	if status, body := in.do(t, "GET", "/v1/admin/keys", in.adminKey, nil); status != 200 || !strings.Contains(mustJSON(body), `"account":"`+second+`"`) {
		t.Errorf("GET /v1/admin/keys: %d %v", status, body)
	}

	// HTTP: the bound account, whatever the default.
	status, env := in.do(t, "POST", "/v1/executor/ticks", bound, map[string]any{"payload": json.RawMessage(payload)})
	if status != 200 || env["account_number"] != second || !strings.Contains(mustJSON(env["actions"]), `"status":"placed"`) {
		t.Fatalf("bound key's tick: %d %v", status, env)
	}
	status, env = in.do(t, "POST", "/v1/executor/ticks", bound, map[string]any{"payload": json.RawMessage(payload), "account": second})
	if status != 200 || env["account_number"] != second {
		t.Fatalf("bound key's tick naming its account: %d %v", status, env)
	}
	status, resp := in.do(t, "POST", "/v1/executor/ticks", bound, map[string]any{"payload": json.RawMessage(payload), "account": def})
	if status != 403 || resp["code"] != "account_not_bound" || !strings.Contains(mustJSON(resp), def) {
		t.Fatalf("bound key's tick naming another account: %d %v; want 403 account_not_bound", status, resp)
	}

	// MCP, the official client: the same.
	sess := mcpSession(t, in, bound)
	res, err := sess.CallTool(t.Context(), &mcp.CallToolParams{Name: "execute_intents", Arguments: map[string]any{"payload": json.RawMessage(payload)}})
	if err != nil || res.IsError {
		t.Fatalf("execute_intents: %v %+v", err, res)
	}
	if m, _ := res.StructuredContent.(map[string]any); m["account_number"] != second || !strings.Contains(mustJSON(m["actions"]), `"status":"placed"`) {
		t.Fatalf("execute_intents traded %v; want %s", m["account_number"], second)
	}
	res, err = sess.CallTool(t.Context(), &mcp.CallToolParams{Name: "execute_intents", Arguments: map[string]any{"payload": json.RawMessage(payload), "account": def}})
	if err != nil || !res.IsError || !strings.Contains(mustJSON(res.Content), "account_not_bound") {
		t.Fatalf("execute_intents naming another account: %v %+v; want a tool error account_not_bound", err, res)
	}
	who, err := sess.CallTool(t.Context(), &mcp.CallToolParams{Name: "whoami", Arguments: map[string]any{}})
	if err != nil || who.IsError || !strings.Contains(mustJSON(who.StructuredContent), `"account":"`+second+`"`) {
		t.Errorf("whoami: %v %+v", err, who)
	}

	// Three placed ticks, all in the bound account; the default account
	// was never traded.
	_, cronKey, _ := cli(t, "keys", "create", "--data", in.data, "--tenant", "slot-1", "--scopes", "operate", "--context", "cron", "--harness", "autotrader")
	if status, env := in.do(t, "POST", "/v1/executor/ticks", strings.TrimSpace(cronKey), map[string]any{"payload": json.RawMessage(payload)}); status != 200 || env["account_number"] != def {
		t.Errorf("an unbound key's tick: %d %v; want the default account %s", status, env["account_number"], def)
	}
}
