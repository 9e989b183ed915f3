package trader_test

import (
	"context"
	"strings"
	"testing"

	"github.com/caduceus-dev/caduceus/contract"
	"github.com/caduceus-dev/caduceus/trader"
)

// TestRefusalQuotesLongValuesClipped: a refusal quotes the offending value
// whole up to its limit (64 bytes for a strategy id) and beyond it as its
// first bytes cut back to a character boundary, then "…".
func TestRefusalQuotesLongValuesClipped(t *testing.T) {
	e := newEnv(t, trader.Options{})
	for _, c := range []struct{ id, quoted string }{
		{strings.Repeat("x", 64), strings.Repeat("x", 64)},
		{strings.Repeat("x", 65), strings.Repeat("x", 64) + "…"},
		{strings.Repeat("é", 40), strings.Repeat("é", 32) + "…"},
		{"x" + strings.Repeat("é", 40), "x" + strings.Repeat("é", 31) + "…"},
	} {
		st := newStrategy()
		st.ID = c.id
		_, err := e.svc.PutStrategy(context.Background(), operator, st, 0)
		if e := contract.AsError(err); e == nil || e.Code != trader.CodeInvalidField || !strings.Contains(e.Message, `"`+c.quoted+`"`) {
			t.Errorf("id %q: %v; want it quoted as %q", c.id, err, c.quoted)
		}
	}
}
