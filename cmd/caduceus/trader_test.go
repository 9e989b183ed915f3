package main

import (
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/caduceus-dev/caduceus/contract"
	"github.com/caduceus-dev/caduceus/trader"
)

func toolNames(t *testing.T, sess *mcp.ClientSession) []string {
	t.Helper()
	res, err := sess.ListTools(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tl := range res.Tools {
		names = append(names, tl.Name)
	}
	slices.Sort(names)
	return names
}

// TestTraderEndToEnd: import through the CLI, then the three surfaces over
// one service — MCP (scopes decide the tools), HTTP and the CLI — with the
// replay, the read-back and the audit chain.
func TestTraderEndToEnd(t *testing.T) {
	in := start(t)
	code, out, errOut := cli(t, "trader", "import", "testdata/strategies.yaml", "--data", in.data)
	if code != 0 || !strings.Contains(out, `"strategies_created": 2`) {
		t.Fatalf("import: %d %s %s", code, out, errOut)
	}
	if code, out, _ := cli(t, "trader", "import", "testdata/strategies.yaml", "--data", in.data); code != 0 || !strings.Contains(out, `"unchanged": 3`) {
		t.Fatalf("re-import changed something: %s", out)
	}
	_, routeKey, _ := cli(t, "keys", "create", "--data", in.data, "--tenant", "slot-1", "--scopes", "route")
	_, opKey, _ := cli(t, "keys", "create", "--data", in.data, "--tenant", "slot-1", "--scopes", "route,operate")
	routeSess := mcpSession(t, in, strings.TrimSpace(routeKey))
	opSess := mcpSession(t, in, strings.TrimSpace(opKey))
	if got := strings.Join(toolNames(t, routeSess), ","); got != "get_strategy,list_strategies,shim_preview,whoami" {
		t.Errorf("route key sees %s", got)
	}
	if got := strings.Join(toolNames(t, opSess), ","); got != "apply_control_decision,execute_intents,get_strategy,list_strategies,shim_preview,whoami" {
		t.Errorf("operate key sees %s", got)
	}
	// The one write tool takes seed 000's request schema as its input schema.
	served, err := opSess.ListTools(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, tl := range served.Tools {
		if tl.Name == "apply_control_decision" {
			found = true
			got, _ := json.Marshal(tl.InputSchema)
			c1, err1 := contract.CanonicalJSON(got)
			c2, err2 := contract.CanonicalJSON(trader.RequestSchema())
			if err1 != nil || err2 != nil || string(c1) != string(c2) {
				t.Errorf("apply_control_decision's input schema is not the request schema: %s (%v %v)", got, err1, err2)
			}
		}
	}
	if !found {
		t.Error("apply_control_decision is not served")
	}
	// A route key cannot call the write tool it does not see.
	decision, _ := os.ReadFile("testdata/decision.json")
	var args map[string]any
	json.Unmarshal(decision, &args)
	if res, err := routeSess.CallTool(t.Context(), &mcp.CallToolParams{Name: "apply_control_decision", Arguments: args}); err == nil && !res.IsError {
		t.Fatal("route key applied a decision")
	}
	res, err := opSess.CallTool(t.Context(), &mcp.CallToolParams{Name: "apply_control_decision", Arguments: args})
	if err != nil || res.IsError {
		t.Fatalf("apply: %v %+v", err, res)
	}
	var resp struct {
		Status       string `json:"status"`
		ToStrategyID string `json:"to_strategy_id"`
		Warnings     []struct {
			Code string `json:"code"`
		} `json:"warnings"`
	}
	b, _ := json.Marshal(res.StructuredContent)
	json.Unmarshal(b, &resp)
	if resp.Status != "applied" || resp.ToStrategyID != "0c555fee-e4c8-4543-ae70-c132517017e1" {
		t.Fatalf("apply response %s", b)
	}
	got, err := opSess.CallTool(t.Context(), &mcp.CallToolParams{Name: "get_strategy", Arguments: map[string]any{"strategy_id": "0c555fee-e4c8-4543-ae70-c132517017e1"}})
	if err != nil || got.IsError {
		t.Fatal(err, got)
	}
	b, _ = json.Marshal(got.StructuredContent)
	if !strings.Contains(string(b), `"status":"active"`) {
		t.Errorf("get_strategy after switch: %s", b)
	}

	// The same decision over HTTP is a replay, answered 200: the first
	// answer plus replayed: true.
	status, body := in.do(t, "POST", "/v1/trader/decisions", strings.TrimSpace(opKey), args)
	if status != 200 || body["status"] != "applied" || body["replayed"] != true {
		t.Fatalf("HTTP replay: %d %v", status, body)
	}
	// Not a request at all: 400 with the contract's answer.
	req, _ := json.Marshal("just a string")
	status, body = in.do(t, "POST", "/v1/trader/decisions", strings.TrimSpace(opKey), json.RawMessage(req))
	if status != 400 || body["status"] != "rejected" {
		t.Errorf("non-request: %d %v", status, body)
	}
	// A route key may not write over HTTP either.
	if status, _ := in.do(t, "POST", "/v1/trader/decisions", strings.TrimSpace(routeKey), args); status != 403 {
		t.Errorf("route key POST: %d", status)
	}
	status, body = in.do(t, "GET", "/v1/trader/decisions/dec_2026_04_16_001", strings.TrimSpace(routeKey), nil)
	if status != 200 || !strings.Contains(mustJSON(body), `"replay":true`) {
		t.Errorf("decision read-back: %d %v", status, body)
	}
	// Another tenant sees nothing of it.
	_, otherKey, _ := cli(t, "keys", "create", "--data", in.data, "--tenant", "slot-2", "--scopes", "route")
	if status, _ := in.do(t, "GET", "/v1/trader/decisions/dec_2026_04_16_001", strings.TrimSpace(otherKey), nil); status != 404 {
		t.Errorf("other tenant read a decision: %d", status)
	}
	// The CLI applies through the same service: a third replay.
	code, out, _ = cli(t, "trader", "apply", "--payload", "testdata/decision.json", "--data", in.data)
	if code != 0 || !strings.Contains(out, `"replayed": true`) || !strings.Contains(out, `"status": "applied"`) {
		t.Errorf("CLI apply: %d %s", code, out)
	}
	code, out, _ = cli(t, "trader", "history", "--data", in.data, "--concern", "qndd8o9ppop6:xrpusd")
	if code != 0 || strings.Count(out, "\n") != 3 {
		t.Errorf("history: %d %s", code, out)
	}
	// Operators manage strategies with If-Match revisions.
	_, cfgKey, _ := cli(t, "keys", "create", "--data", in.data, "--tenant", "slot-1", "--scopes", "route,configure")
	ck := strings.TrimSpace(cfgKey)
	_, st := in.do(t, "GET", "/v1/trader/strategies/9cf29124-65a7-4950-ac18-65f938e0239b", ck, nil)
	rev := int(st["revision"].(float64))
	st["name"] = "trend-v2"
	delete(st, "updated_at")
	if status, body := in.do(t, "PUT", "/v1/trader/strategies/9cf29124-65a7-4950-ac18-65f938e0239b", ck, st, "If-Match", fmt.Sprint(rev-1)); status != 409 {
		t.Errorf("stale If-Match: %d %v", status, body)
	}
	if status, body := in.do(t, "PUT", "/v1/trader/strategies/9cf29124-65a7-4950-ac18-65f938e0239b", ck, st, "If-Match", fmt.Sprint(rev)); status != 200 || body["name"] != "trend-v2" {
		t.Errorf("PUT with current revision: %d %v", status, body)
	}
	if status, _ := in.do(t, "PUT", "/v1/trader/strategies/9cf29124-65a7-4950-ac18-65f938e0239b", strings.TrimSpace(opKey), st, "If-Match", fmt.Sprint(rev+1)); status != 403 {
		t.Errorf("operate key managed a strategy: %d", status)
	}
	if code, out, errOut := cli(t, "audit", "verify", "--data", in.data); code != 0 {
		t.Errorf("audit verify: %s %s", out, errOut)
	}
	// Every attempt is one record: the HTTP replay's request left exactly one.
	code, out, _ = cli(t, "audit", "tail", "--data", in.data, "--tenant", "slot-1", "--json", "-n", "1000")
	if n := strings.Count(out, `"action":"trader.apply"`); n != 5 {
		t.Errorf("%d trader.apply records; want 5 (MCP apply, HTTP replay, HTTP non-request, HTTP route-key refusal, CLI replay): %s", n, out)
	}
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}
