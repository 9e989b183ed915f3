package trader_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/caduceus-dev/caduceus/contract"
	"github.com/caduceus-dev/caduceus/trader"
)

// TestReadsOfNothingAreEmptyListsNotNull: a list read that matches nothing
// answers an empty list, which encodes as [] (never null), in a tenant that
// has nothing at all too.
func TestReadsOfNothingAreEmptyListsNotNull(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, trader.Options{})
	strategies, err := e.svc.ListStrategies(ctx, "slot-9", trader.StrategyFilter{})
	if err != nil {
		t.Fatal(err)
	}
	attempts, err := e.svc.History(ctx, t1, "", 0)
	if err != nil {
		t.Fatal(err)
	}
	for name, v := range map[string]any{"strategies": strategies, "history": attempts} {
		if b, _ := json.Marshal(v); string(b) != "[]" {
			t.Errorf("%s of nothing encodes as %s, want []", name, b)
		}
	}
}

// TestGetConcernOfAnUnknownConcernIsNotFound: reading a concern the tenant
// does not have is not_found (concern_not_found naming it), not a zero
// concern.
func TestGetConcernOfAnUnknownConcernIsNotFound(t *testing.T) {
	e := newEnv(t, trader.Options{})
	c, err := e.svc.GetConcern(context.Background(), t1, "acct9:nosuch")
	if ce := contract.AsError(err); ce == nil || ce.Kind != contract.KindNotFound || ce.Code != "concern_not_found" || c.ConcernID != "" {
		t.Errorf("unknown concern: %+v, %v; want not_found concern_not_found", c, err)
	}
}

// TestReadsRefuseAMalformedTenantQuotingItClipped: a read for a tenant that
// is not a tenant slot is refused bad_tenant, quoting the tenant up to 40
// bytes cut back to a character boundary — to nothing when no byte starts
// a character.
func TestReadsRefuseAMalformedTenantQuotingItClipped(t *testing.T) {
	e := newEnv(t, trader.Options{})
	for _, c := range []struct {
		tenant contract.TenantSlot
		quoted string
	}{
		{"Not A Slot", `"Not A Slot"`},
		{contract.TenantSlot(strings.Repeat("é", 30)), `"` + strings.Repeat("é", 20) + `…"`},
		{contract.TenantSlot(strings.Repeat("\x80", 50)), `"…"`},
	} {
		_, err := e.svc.GetStrategy(context.Background(), c.tenant, sA)
		ce := contract.AsError(err)
		if ce == nil || ce.Kind != contract.KindInvalid || ce.Code != "bad_tenant" || !strings.Contains(ce.Message, c.quoted) {
			t.Errorf("tenant %q: %v; want invalid bad_tenant quoting %s", c.tenant, err, c.quoted)
		}
	}
}
