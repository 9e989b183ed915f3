package trader

import (
	"testing"

	"github.com/caduceus-dev/caduceus/contract"
	"github.com/caduceus-dev/caduceus/contract/contracttest"
)

// TestParseRequestHasEverySchemaRule proves ParseRequest, the Go mirror of
// the request schema, against an instance breaking each rule the schema
// holds, generated from the schema itself (action-conditional rules
// included): a rule added to the schema without ParseRequest fails here
// (ParseRequest's schema backstop would refuse such an instance, but only
// with the generic schema_invalid code), and so does a keyword the
// generator does not know.
func TestParseRequestHasEverySchemaRule(t *testing.T) {
	base := []byte(`{"decision_id":"d-1","concern_id":"acct-1:BTC-USD","account_id":"acct-1","market_symbol":"BTC-USD",
		"action":"switch","target_strategy_id":"s-2","expected_active_strategy_id":"s-1","risk_mode":"normal",
		"reason":"trend","confidence":0.7,"dry_run":false,"override":false,"requested_at":"2026-11-30T12:00:00Z"}`)
	cases, err := contracttest.Violations(contract.SchemaFS(), RequestSchemaFile, base)
	if err != nil {
		t.Fatal(err)
	}
	if _, issues := ParseRequest(base); len(issues) > 0 {
		t.Fatalf("base refused: %+v", issues)
	}
	if len(cases) < 40 {
		t.Fatalf("only %d violations generated", len(cases))
	}
	for _, c := range cases {
		_, issues := ParseRequest(c.Instance)
		schemaErr := requestSchema().ValidateJSON(c.Instance)
		if (len(issues) == 0) != (schemaErr == nil) {
			t.Errorf("%s: %s\n ParseRequest says %+v, schema says %v", c.Rule, c.Instance, issues, schemaErr)
		}
		// ParseRequest ends with the schema as a backstop; a violation only
		// the backstop catches is a rule the mirror lacks.
		if len(issues) == 1 && issues[0].Code == CodeSchemaInvalid {
			t.Errorf("%s: %s\n only the schema backstop refused it (%s): ParseRequest lacks the rule", c.Rule, c.Instance, issues[0].Message)
		}
	}
}
