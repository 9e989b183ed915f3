package trader_test

import (
	"context"
	"encoding/json"
	"os"
	"slices"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/caduceus-dev/caduceus/contract"
	"github.com/caduceus-dev/caduceus/trader"
)

// mcpServer registers the trader's three tools the way the server does
// (raw input schema, JSON result as text and structured content), as a
// reference for the wiring and to prove the schemas work as tool schemas.
func mcpServer(svc *trader.Service, caller contract.Caller) *mcp.Server {
	srv := mcp.NewServer(&mcp.Implementation{Name: "caduceus-test", Version: "0"}, nil)
	add := func(name string, schema json.RawMessage, call func(ctx context.Context, args json.RawMessage) (any, error)) {
		srv.AddTool(&mcp.Tool{Name: name, InputSchema: schema}, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			out, err := call(ctx, req.Params.Arguments)
			if err != nil {
				return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: contract.AsError(err).Message}}}, nil
			}
			b, _ := json.Marshal(out)
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: string(b)}}, StructuredContent: json.RawMessage(b)}, nil
		})
	}
	tenant := caller.Identity.TenantSlot
	add("apply_control_decision", trader.RequestSchema(), func(ctx context.Context, args json.RawMessage) (any, error) {
		return svc.Apply(ctx, caller, args)
	})
	add("list_strategies", json.RawMessage(`{"type":"object","additionalProperties":false,"properties":{"concern_id":{"type":"string"},"account_id":{"type":"string"},"market_symbol":{"type":"string"},"status":{"type":"string","enum":["active","paused","inactive"]}}}`),
		func(ctx context.Context, args json.RawMessage) (any, error) {
			var f trader.StrategyFilter
			if err := json.Unmarshal(args, &f); err != nil {
				return nil, contract.Invalidf("bad_arguments", "%v", err)
			}
			list, err := svc.ListStrategies(ctx, tenant, f)
			return trader.StrategyList{Strategies: list}, err
		})
	add("get_strategy", json.RawMessage(`{"type":"object","additionalProperties":false,"required":["strategy_id"],"properties":{"strategy_id":{"type":"string"}}}`),
		func(ctx context.Context, args json.RawMessage) (any, error) {
			var ref trader.StrategyRef
			if err := json.Unmarshal(args, &ref); err != nil {
				return nil, contract.Invalidf("bad_arguments", "%v", err)
			}
			return svc.GetStrategy(ctx, tenant, ref.ID)
		})
	return srv
}

// TestMCP: an official SDK client lists the tools, applies the seed's
// example decision, and reads the new strategy back with get_strategy.
func TestMCP(t *testing.T) {
	ctx := t.Context()
	e := newEnv(t, trader.Options{})
	st, ct := mcp.NewInMemoryTransports()
	if _, err := mcpServer(e.svc, hermes).Connect(ctx, st, nil); err != nil {
		t.Fatal(err)
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "hermes", Version: "0"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()

	tools, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tool := range tools.Tools {
		names = append(names, tool.Name)
		if tool.Name == "apply_control_decision" {
			got, _ := json.Marshal(tool.InputSchema)
			c1, _ := contract.CanonicalJSON(got)
			c2, _ := contract.CanonicalJSON(trader.RequestSchema())
			if string(c1) != string(c2) {
				t.Errorf("the tool's input schema is not the request schema:\n%s", got)
			}
		}
	}
	slices.Sort(names)
	if !slices.Equal(names, []string{"apply_control_decision", "get_strategy", "list_strategies"}) {
		t.Errorf("tools %v", names)
	}

	seed, err := os.ReadFile("testdata/requests/valid/seed_example.json")
	if err != nil {
		t.Fatal(err)
	}
	call := func(name string, args any) json.RawMessage {
		t.Helper()
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if res.IsError {
			t.Fatalf("%s: tool error %v", name, res.Content)
		}
		return json.RawMessage(res.Content[0].(*mcp.TextContent).Text)
	}
	var resp trader.Response
	answer := call("apply_control_decision", json.RawMessage(seed))
	if err := json.Unmarshal(answer, &resp); err != nil {
		t.Fatal(err)
	}
	// The answer on the wire carries contract_version and is a valid
	// response (the schema requires it of every answer but a replay).
	var wire map[string]any
	_ = json.Unmarshal(answer, &wire)
	if wire["contract_version"] != contract.Version {
		t.Errorf("apply over MCP: contract_version %v, want %q", wire["contract_version"], contract.Version)
	}
	if err := trader.ValidateResponse(answer); err != nil {
		t.Errorf("apply over MCP: %v\n%s", err, answer)
	}
	if resp.Status != trader.Applied || resp.ToStrategyID != sB {
		t.Fatalf("apply over MCP: %+v", resp)
	}
	var s trader.Strategy
	if err := json.Unmarshal(call("get_strategy", map[string]string{"strategy_id": sB}), &s); err != nil {
		t.Fatal(err)
	}
	if s.Status != trader.StatusActive || s.Revision != 2 {
		t.Errorf("get_strategy after the switch: %+v", s)
	}
	var list struct{ Strategies []trader.Strategy }
	if err := json.Unmarshal(call("list_strategies", map[string]string{"status": "active"}), &list); err != nil {
		t.Fatal(err)
	}
	if len(list.Strategies) != 1 || list.Strategies[0].ID != sB {
		t.Errorf("list_strategies active: %+v", list.Strategies)
	}
	// keep is a normal, rejected result, not a tool error.
	var keep trader.Response
	args := map[string]any{}
	_ = json.Unmarshal(seed, &args)
	args["action"], args["decision_id"] = "keep", "dec-keep"
	if err := json.Unmarshal(call("apply_control_decision", args), &keep); err != nil {
		t.Fatal(err)
	}
	if keep.Status != trader.Rejected || keep.ErrorCodes()[0] != trader.CodeUnsupportedAction {
		t.Errorf("keep over MCP: %+v", keep)
	}
}
