package trader_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/caduceus-dev/caduceus/contract"
	"github.com/caduceus-dev/caduceus/trader"
)

func fixtures(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("testdata", dir, "*.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no fixtures in %s: %v", dir, err)
	}
	out := map[string][]byte{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		out[strings.TrimSuffix(filepath.Base(f), ".json")] = b
	}
	return out
}

var requestSchema = contract.MustSchema(trader.RequestSchemaFile)

// TestRequestFixtures: the schema and the parser agree on every fixture, and
// an invalid fixture is refused with the code its name starts with.
func TestRequestFixtures(t *testing.T) {
	for name, b := range fixtures(t, "requests/valid") {
		if err := requestSchema.ValidateJSON(b); err != nil {
			t.Errorf("valid/%s: schema refuses it: %v", name, err)
		}
		if _, issues := trader.ParseRequest(b); len(issues) > 0 {
			t.Errorf("valid/%s: parser refuses it: %+v", name, issues)
		}
	}
	for name, b := range fixtures(t, "requests/invalid") {
		code, _, _ := strings.Cut(name, ".")
		if err := requestSchema.ValidateJSON(b); err == nil {
			t.Errorf("invalid/%s: the schema accepts it", name)
		}
		_, issues := trader.ParseRequest(b)
		if len(issues) == 0 || issues[0].Code != code {
			t.Errorf("invalid/%s: parser issues %+v, want first code %s", name, issues, code)
		}
	}
}

// TestSeedExampleParses: the seed's example request decodes field by field.
func TestSeedExampleParses(t *testing.T) {
	b := fixtures(t, "requests/valid")["seed_example"]
	req, issues := trader.ParseRequest(b)
	if len(issues) > 0 {
		t.Fatal(issues)
	}
	want := trader.Request{
		DecisionID: "dec_2026_04_16_001", ConcernID: "qndd8o9ppop6:xrpusd", AccountID: "qndd8o9ppop6", MarketSymbol: "xrpusd",
		Action: trader.ActionSwitch, TargetStrategyID: "0c555fee-e4c8-4543-ae70-c132517017e1", ExpectedActiveStrategyID: "9cf29124-65a7-4950-ac18-65f938e0239b",
		RiskMode: "normal", Reason: "trend strategy still fits the directional narrative", Confidence: 0.83, RequestedAt: "2026-04-16T20:15:00Z",
	}
	if req != want {
		t.Errorf("parsed %+v\nwant %+v", req, want)
	}
}

func TestResponseFixtures(t *testing.T) {
	for name, b := range fixtures(t, "responses/valid") {
		if err := trader.ValidateResponse(b); err != nil {
			t.Errorf("valid/%s: %v", name, err)
		}
		// The Go type carries the seed's response without loss.
		var r trader.Response
		dec := json.NewDecoder(strings.NewReader(string(b)))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&r); err != nil {
			t.Fatalf("valid/%s: %v", name, err)
		}
		again, _ := json.Marshal(r)
		c1, _ := contract.CanonicalJSON(b)
		c2, _ := contract.CanonicalJSON(again)
		if string(c1) != string(c2) {
			t.Errorf("valid/%s does not round-trip:\n%s\n%s", name, c1, c2)
		}
	}
	for name, b := range fixtures(t, "responses/invalid") {
		if err := trader.ValidateResponse(b); err == nil {
			t.Errorf("invalid/%s: the schema accepts it", name)
		}
	}
}

// TestSchemasAreSelfContained: the request schema is handed to MCP clients as
// a tool input schema, so it must not $ref other files, and its properties
// are exactly the Request's JSON fields. (The response schema is not handed
// out; its contract_version is the common schema's.)
func TestSchemasAreSelfContained(t *testing.T) {
	if raw := string(trader.RequestSchema()); strings.Contains(raw, `"$ref": "common`) || strings.Contains(raw, `.schema.json#`) {
		t.Error("the request schema refers to another file")
	}
	var s struct {
		Type       string                     `json:"type"`
		Properties map[string]json.RawMessage `json:"properties"`
		Required   []string                   `json:"required"`
	}
	if err := json.Unmarshal(trader.RequestSchema(), &s); err != nil {
		t.Fatal(err)
	}
	if s.Type != "object" {
		t.Errorf("type %q", s.Type)
	}
	var props []string
	for k := range s.Properties {
		props = append(props, k)
	}
	slices.Sort(props)
	full, _ := json.Marshal(trader.Request{TargetStrategyID: "x", ExpectedActiveStrategyID: "x", RiskMode: "x", RequestedAt: "x"})
	var m map[string]any
	_ = json.Unmarshal(full, &m)
	var fields []string
	for k := range m {
		fields = append(fields, k)
	}
	slices.Sort(fields)
	if !slices.Equal(props, fields) {
		t.Errorf("schema properties %v, Request fields %v", props, fields)
	}
	slices.Sort(s.Required)
	want := []string{"account_id", "action", "concern_id", "confidence", "decision_id", "market_symbol", "reason"}
	if !slices.Equal(s.Required, want) {
		t.Errorf("required %v, want %v", s.Required, want)
	}
}
