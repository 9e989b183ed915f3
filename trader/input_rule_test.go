package trader_test

import (
	"strings"
	"testing"

	"github.com/caduceus-dev/caduceus/contract"
	"github.com/caduceus-dev/caduceus/trader"
)

// The shared input rule holds in the trader's own parser too (the CLI and
// MCP reach it without the HTTP middleware): a decision nested 9,999,
// 10,000 or 10,001 deep, invalid UTF-8 or a NUL is one issue naming it.
func TestParseRequestInputRule(t *testing.T) {
	deep := func(n int) string {
		return `{"decision_id":"d1","reason":` + strings.Repeat("[", n-1) + strings.Repeat("]", n-1) + `}`
	}
	cases := map[string]string{
		deep(9999):                              contract.CodeTooDeep,
		deep(10000):                             contract.CodeTooDeep,
		deep(10001):                             contract.CodeTooDeep,
		"{\"decision_id\":\"d\xff\"}":           contract.CodeBadUTF8,
		`{"decision_id":"d\u0000"}`:             contract.CodeNULCharacter,
		`{"decision_id":"a","decision_id":"b"}`: trader.CodeDuplicateField,
	}
	for body, code := range cases {
		_, issues := trader.ParseRequest([]byte(body))
		if len(issues) == 0 || issues[0].Code != code {
			t.Errorf("%.50q: issues %+v, want %s first", body, issues, code)
		}
	}
}
