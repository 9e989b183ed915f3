package trader_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/caduceus-dev/caduceus/trader"
)

func addFixtureSeeds(f *testing.F, dirs ...string) {
	for _, d := range dirs {
		files, _ := filepath.Glob(filepath.Join("testdata", d, "*"))
		for _, file := range files {
			if b, err := os.ReadFile(file); err == nil {
				f.Add(b)
			}
		}
	}
}

// FuzzParseRequest: the parser never panics, is at least as strict as the
// schema (the schema backstop never fires), and what it accepts round-trips.
func FuzzParseRequest(f *testing.F) {
	addFixtureSeeds(f, "requests/valid", "requests/invalid")
	f.Add([]byte(`{"decision_id":"a","concern_id":"a:b","account_id":"a","market_symbol":"b","action":"pause","reason":"r","confidence":1e-5}`))
	f.Add([]byte(`{"confidence":-0,"decision_id":"a","decision_id":"b"}`))
	f.Add([]byte(`{"decision_id":"a","concern_id":"a:b","account_id":"a","market_symbol":"b","action":"switch","target_strategy_id":"","reason":"r","confidence":0.1}`))
	f.Add([]byte("\xff{}"))
	f.Fuzz(func(t *testing.T, raw []byte) {
		req, issues := trader.ParseRequest(raw)
		for _, is := range issues {
			if is.Code == trader.CodeSchemaInvalid {
				t.Fatalf("the parser accepted what the schema refuses: %s: %s", is.Field, is.Message)
			}
			if is.Code == "" || is.Message == "" {
				t.Fatalf("issue without code or message: %+v", is)
			}
		}
		if len(issues) > 0 {
			return
		}
		if err := requestSchema.ValidateJSON(raw); err != nil {
			t.Fatalf("accepted but the schema refuses: %v", err)
		}
		again, err := json.Marshal(req)
		if err != nil {
			t.Fatal(err)
		}
		req2, issues := trader.ParseRequest(again)
		if len(issues) > 0 || req2 != req {
			t.Fatalf("re-encoded request does not round-trip: %+v %+v", issues, req2)
		}
	})
}

// FuzzApply: whatever the body, Apply answers a schema-valid response with a
// nil error and records exactly one attempt.
func FuzzApply(f *testing.F) {
	addFixtureSeeds(f, "requests/valid", "requests/invalid")
	f.Add(body(nil))
	f.Add(body(map[string]any{"override": true, "expected_active_strategy_id": sC}))
	e := newEnv(f, trader.Options{})
	f.Fuzz(func(t *testing.T, raw []byte) {
		before := len(e.mem.Records(t1))
		resp, err := e.svc.Apply(context.Background(), hermes, raw)
		if err != nil {
			t.Fatal(err)
		}
		checkResponseSchema(t, resp)
		if n := len(e.mem.Records(t1)) - before; n != 1 {
			t.Fatalf("%d audit records for one attempt", n)
		}
		cur, err := e.svc.ListStrategies(context.Background(), t1, trader.StrategyFilter{ConcernID: concern})
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, s := range cur {
			if s.Status.Current() {
				n++
			}
		}
		if n > 1 {
			t.Fatalf("%d current strategies", n)
		}
	})
}

// FuzzImport: the import file parser never panics, and anything it accepts
// imports or is refused with an error, never a panic, and re-importing it
// changes nothing.
func FuzzImport(f *testing.F) {
	addFixtureSeeds(f, "import")
	f.Add([]byte("concerns: []\nstrategies: []\n"))
	f.Add([]byte("concerns:\n  - {concern_id: \"a:b\", execution_state: degraded}\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, format := range []trader.Format{trader.FormatYAML, trader.FormatJSON} {
			if _, err := trader.ParseFile(data, format); err != nil {
				continue
			}
			e := newEnv(t, trader.Options{})
			if _, err := e.svc.Import(context.Background(), operator, data, format); err != nil {
				continue
			}
			res, err := e.svc.Import(context.Background(), operator, data, format)
			if err != nil || res.Changed() {
				t.Fatalf("re-import: %+v %v", res, err)
			}
		}
	})
}
