package executor_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/caduceus-dev/caduceus/contract"
	"github.com/caduceus-dev/caduceus/executor"
)

// The wire schema contract/schema/executor.schema.json must accept every
// golden envelope and every fixture payload the parser accepts, and refuse
// what the parser refuses.
func compileSchema(t *testing.T, def string) *contract.Schema {
	t.Helper()
	s, err := contract.LoadSchema("executor.schema.json#/$defs/" + def)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func instance(t *testing.T, b []byte) any {
	t.Helper()
	v, err := contract.UnmarshalInstance(b)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func TestSchemaAcceptsGoldenEnvelopes(t *testing.T) {
	env := compileSchema(t, "envelope")
	files, _ := filepath.Glob("testdata/golden/*.json")
	n := 0
	for _, f := range files {
		b, _ := os.ReadFile(f)
		var ticks []json.RawMessage
		if err := json.Unmarshal(b, &ticks); err != nil {
			t.Fatal(err)
		}
		for i, tk := range ticks {
			var probe map[string]any
			_ = json.Unmarshal(tk, &probe)
			if _, isErr := probe["error"]; isErr {
				continue
			}
			n++
			if err := env.Validate(instance(t, tk)); err != nil {
				t.Errorf("%s tick %d: %v", f, i, err)
			}
		}
	}
	if n < 50 {
		t.Fatalf("only %d envelopes checked", n)
	}
}

func TestSchemaAgreesWithParser(t *testing.T) {
	pay := compileSchema(t, "payload")
	files, _ := filepath.Glob("testdata/scenarios/*.yaml")
	n := 0
	for _, file := range files {
		f := loadFixture(t, file)
		for i, tk := range f.Ticks {
			if tk.Tenant != "" {
				continue
			}
			raw := []byte(tk.PayloadRaw)
			if tk.PayloadRaw == "" {
				raw, _ = json.Marshal(tk.Payload)
			}
			_, perr := executor.ParsePayload(raw)
			var v any
			if err := json.Unmarshal(raw, &v); err != nil {
				if perr == nil {
					t.Errorf("%s tick %d: parser accepted non-JSON", file, i)
				}
				continue
			}
			n++
			serr := pay.Validate(instance(t, raw))
			if (perr == nil) != (serr == nil) {
				t.Errorf("%s tick %d: parser says %v, schema says %v", file, i, perr, serr)
			}
		}
	}
	if n < 60 {
		t.Fatalf("only %d payloads checked", n)
	}
	in := compileSchema(t, "tick_input")
	if err := in.Validate(instance(t, executor.TickInputSchema)); err == nil {
		t.Error("tick_input accepted a schema document")
	}
}

// TestSchemaEnvelopeContractVersion: the envelope schema requires
// contract_version (HUX 1.x.y) of every envelope but a replay, which answers
// the stored envelope as stored (one stored before envelopes carried it has
// none); a version that is not 1.x.y is refused.
func TestSchemaEnvelopeContractVersion(t *testing.T) {
	env := compileSchema(t, "envelope")
	b, err := os.ReadFile("testdata/golden/place_failures.json")
	if err != nil {
		t.Fatal(err)
	}
	var ticks []map[string]any
	if err := json.Unmarshal(b, &ticks); err != nil || len(ticks) == 0 {
		t.Fatalf("place_failures.json: %v", err)
	}
	base := ticks[0]
	if base["contract_version"] != contract.Version {
		t.Fatalf("golden envelope: contract_version %v, want %q", base["contract_version"], contract.Version)
	}
	for _, c := range []struct {
		name string
		set  map[string]any // nil value: delete
		ok   bool
	}{
		{"as written", nil, true},
		{"later minor version", map[string]any{"contract_version": "1.4.2"}, true},
		{"missing", map[string]any{"contract_version": nil}, false},
		{"major 2", map[string]any{"contract_version": "2.0.0"}, false},
		{"not x.y.z", map[string]any{"contract_version": "1.0"}, false},
		{"a number", map[string]any{"contract_version": 1}, false},
		{"empty", map[string]any{"contract_version": ""}, false},
		{"replay of an envelope stored without it", map[string]any{"contract_version": nil, "replay": true}, true},
		{"replay false without it", map[string]any{"contract_version": nil, "replay": false}, false},
		{"replay with a bad one", map[string]any{"contract_version": "2.0.0", "replay": true}, false},
	} {
		m := map[string]any{}
		for k, v := range base {
			m[k] = v
		}
		for k, v := range c.set {
			if v == nil {
				delete(m, k)
			} else {
				m[k] = v
			}
		}
		raw, _ := json.Marshal(m)
		if err := env.Validate(instance(t, raw)); (err == nil) != c.ok {
			t.Errorf("%s: schema says %v, want ok %v", c.name, err, c.ok)
		}
	}
}
