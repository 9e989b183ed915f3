package contract

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/caduceus-dev/caduceus/contract/contracttest"
)

// TestGoMirrorsHaveEverySchemaRule proves the Go validators that stand in
// for the schema (Provenance.Validate, AuditOutcome.Validate) against an
// instance breaking each rule the schema holds, generated from the schema
// itself: a rule added to the schema without the mirror fails here, and a
// keyword the generator does not know fails too.
func TestGoMirrorsHaveEverySchemaRule(t *testing.T) {
	prov := Provenance{Surface: SurfaceChat, Actor: Actor{Type: ActorUser, ID: "u1", Display: "U"}, RecordedAt: "2026-11-29T19:57:41.5Z",
		SessionID: "s", ConversationID: "conv_abcd", MessageID: "m", RunID: "r",
		Route: &Route{Requested: "fast", ResolvedTarget: "t", Provider: ProviderLocal, Effort: EffortHigh},
		Build: &Build{Commit: strings.Repeat("a", 40), ImageDigest: SHA256(nil)}}
	outcome := AuditOutcome{At: "2026-11-29T19:57:41Z", Identity: Identity{TenantSlot: "slot-1", Subject: "usr_0123456789abcdef", Surface: SurfaceAPI, Trust: TrustRouter},
		Action: "keys.create", Resource: "key/1", Outcome: OutcomeAllow, Reason: "ok"}
	check := func(t *testing.T, def string, base any, validate func(b []byte) (goErr, schemaErr error, ok bool)) {
		b, _ := json.Marshal(base)
		cases, err := contracttest.Violations(SchemaFS(), "common.schema.json#/$defs/"+def, b)
		if err != nil {
			t.Fatal(err)
		}
		if goErr, schemaErr, _ := validate(b); goErr != nil || schemaErr != nil {
			t.Fatalf("base: Go %v, schema %v", goErr, schemaErr)
		}
		typed := 0
		for _, c := range cases {
			goErr, schemaErr, ok := validate(c.Instance)
			if !ok { // not a Go value of the type: the type system holds that rule
				typed++
				continue
			}
			if (goErr == nil) != (schemaErr == nil) {
				t.Errorf("%s: %s\n Go says %v, schema says %v", c.Rule, c.Instance, goErr, schemaErr)
			}
		}
		if len(cases)-typed < 10 {
			t.Fatalf("only %d of %d generated violations reach the Go value", len(cases)-typed, len(cases))
		}
	}
	t.Run("provenance", func(t *testing.T) {
		check(t, "provenance", prov, func(b []byte) (error, error, bool) {
			var p Provenance
			if err := json.Unmarshal(b, &p); err != nil {
				return nil, nil, false
			}
			return p.Validate(), Def("provenance").Validate(p), true
		})
	})
	t.Run("audit_outcome", func(t *testing.T) {
		check(t, "audit_outcome", outcome, func(b []byte) (error, error, bool) {
			var o AuditOutcome
			if err := json.Unmarshal(b, &o); err != nil {
				return nil, nil, false
			}
			return o.Validate(), Def("audit_outcome").Validate(o), true
		})
	})
}
