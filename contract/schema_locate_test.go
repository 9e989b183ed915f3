package contract

import (
	"sync"
	"testing"
)

// TestRefusalWording: a refusal names the deepest offending value (as a
// JSON pointer in Field, dotted in the message) and the rule it breaks, in
// the words refusals have used since before contract moved to the MCP
// SDK's JSON Schema library, through $refs within and across schema files, array items
// and if/then.
func TestRefusalWording(t *testing.T) {
	for _, c := range []struct {
		ref, doc, field, msg string
	}{
		{"common.schema.json#/$defs/tags", `["Upper"]`, "/0", "field 0: 'Upper' does not match pattern '^[a-z0-9][a-z0-9-]{0,39}$'"},
		{"common.schema.json#/$defs/tags", `["a","a"]`, "/", "field (root): items at 0 and 1 are equal"},
		{"common.schema.json#/$defs/tags", `"a"`, "/", "field (root): got string, want array"},
		{"common.schema.json#/$defs/redaction", `{"level":"none","b":1,"a":2}`, "/", "field (root): additional properties 'a', 'b' not allowed"},
		{"common.schema.json#/$defs/actor", `{"type":"user"}`, "/", "field (root): missing property 'id'"},
		{"common.schema.json#/$defs/actor", `{}`, "/", "field (root): missing properties 'type', 'id'"},
		{"common.schema.json#/$defs/revision", `0`, "/", "field (root): minimum: got 0, want 1"},
		{"common.schema.json#/$defs/revision", `1.5`, "/", "field (root): got number, want integer"},
		{"common.schema.json#/$defs/provider", `"gpt-4o"`, "/", "field (root): value must be one of 'codex', 'claude', 'local'"},
		{"common.schema.json#/$defs/provenance", `{"surface":"api","actor":{"type":"user","id":""},"recorded_at":"2026-11-29T19:57:41Z"}`,
			"/actor/id", "field actor.id: minLength: got 0, want 1"},
	} {
		e := AsError(MustSchema(c.ref).ValidateJSON([]byte(c.doc)))
		if e == nil || e.Code != "schema_invalid" || e.Field != c.field || e.Message != c.msg {
			t.Errorf("%s %s: %+v\n want field %s, message %q", c.ref, c.doc, e, c.field, c.msg)
		}
	}
}

// TestRefusalsConcurrently: refusals located from many goroutines at once
// (the locator resolves and caches subschemas as it goes) agree; run with
// -race.
func TestRefusalsConcurrently(t *testing.T) {
	doc := []byte(`{"at":"2026-11-29T19:57:41Z","identity":{"tenant_slot":"slot-1","subject":"usr_x","surface":"api","trust":"router"},"action":"keys.create","resource":"k","outcome":"allow"}`)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 20 {
				if e := AsError(Def("audit_outcome").ValidateJSON(doc)); e == nil || e.Field != "/identity/subject" {
					t.Errorf("refusal %+v, want one of /identity/subject", e)
					return
				}
			}
		})
	}
	wg.Wait()
}
