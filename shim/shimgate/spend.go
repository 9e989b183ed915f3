package shimgate

import (
	"context"
	"net/http"
	"time"

	"github.com/caduceus-dev/caduceus/contract"
	"github.com/caduceus-dev/caduceus/server"
	"github.com/caduceus-dev/caduceus/shim/gateway"
)

// SpendReader reports the shim gateway's spend (the shim ledger's).
type SpendReader interface {
	Spend(ctx context.Context, tenant contract.TenantSlot, keyID string, since time.Time) ([]gateway.SpendRow, error)
}

// shimSpend answers GET /v1/spend: the caller's tenant's spend per key and
// model identity, in microdollars. An admin key sees every key of its tenant
// (or one, with ?key=); any other key sees only its own. ?since= (RFC 3339)
// bounds the attempts counted (default: the start of the current UTC month).
func (g *Gate) spend(w http.ResponseWriter, r *http.Request, c *server.Call) error {
	q := r.URL.Query()
	now := time.Now().UTC()
	since := time.Date(now.Year(), now.Month(), 1, 0, 0, 0, 0, time.UTC)
	if v := q.Get("since"); v != "" {
		t, err := time.Parse(time.RFC3339, v)
		if err != nil {
			return contract.FieldError("since", "bad_since", "since %q: want an RFC 3339 time, e.g. 2026-11-01T00:00:00Z", server.Clip(v, 64))
		}
		since = t
	}
	key := q.Get("key")
	if !c.Caller.Has(contract.ScopeAdmin) {
		if key != "" && key != c.Caller.KeyID {
			return contract.Denyf("other_key", "only an admin key sees the spend of another key")
		}
		key = c.Caller.KeyID
	}
	c.Resource = "spend"
	rows, err := g.cfg.Spend.Spend(r.Context(), c.Caller.Identity.TenantSlot, key, since)
	return server.AnswerOK(w, map[string]any{"since": contract.Timestamp(since), "spend": rows}, err)
}
