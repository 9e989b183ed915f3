package contract

import "testing"

// BenchmarkSchemaValidate: validating a document against an embedded schema
// (ok: accepted; refused: one field wrong, the refusal located and worded).
//
//	go test -run '^$' -bench SchemaValidate -benchmem ./contract
func BenchmarkSchemaValidate(b *testing.B) {
	request := `{"decision_id":"d-1","concern_id":"acct-1:BTC-USD","account_id":"acct-1","market_symbol":"BTC-USD",
		"action":"switch","target_strategy_id":"s-2","expected_active_strategy_id":"s-1","risk_mode":"normal",
		"reason":"trend","confidence":0.7,"dry_run":false,"override":false,"requested_at":"2026-11-30T12:00:00Z"}`
	outcome := `{"at":"2026-11-29T19:57:41Z","identity":{"tenant_slot":"slot-1","subject":"usr_0123456789abcdef","surface":"api","trust":"router"},"action":"keys.create","resource":"k","outcome":"allow"}`
	for _, c := range []struct {
		name, ref, doc string
		ok             bool
	}{
		{"request/ok", "trader.decision_request.schema.json", request, true},
		{"audit_outcome/ok", "common.schema.json#/$defs/audit_outcome", outcome, true},
		{"audit_outcome/refused", "common.schema.json#/$defs/audit_outcome", outcome[:len(outcome)-8] + `"maybe"}`, false},
	} {
		s := MustSchema(c.ref)
		doc := []byte(c.doc)
		if err := s.ValidateJSON(doc); (err == nil) != c.ok {
			b.Fatalf("%s: %v", c.name, err)
		}
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				s.ValidateJSON(doc)
			}
		})
	}
}
