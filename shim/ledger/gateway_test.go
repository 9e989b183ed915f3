package ledger_test

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/caduceus-dev/caduceus/contract"
	"github.com/caduceus-dev/caduceus/shim"
	"github.com/caduceus-dev/caduceus/shim/gateway"
	"github.com/caduceus-dev/caduceus/shim/ledger"
	"github.com/caduceus-dev/caduceus/shim/shimsql"
	"github.com/caduceus-dev/caduceus/shim/upstream"
	"github.com/caduceus-dev/caduceus/shim/wire"
	"github.com/caduceus-dev/caduceus/store"
	"github.com/caduceus-dev/caduceus/store/storetest"
)

// TestTurnSettlesDeferredReservations: with a gateway that defers closing,
// the turn's transaction settles the answered attempt and releases the
// failed one, on each backend: nothing stays open, the totals hold only
// the cost of the usage.
func TestTurnSettlesDeferredReservations(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		down := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { http.Error(w, "down", 503) }))
		defer down.Close()
		up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			io.Copy(io.Discard, r.Body)
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, `{"id":"c1","object":"chat.completion","created":1,"model":"gpt-4.1","choices":[{"index":0,"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}],"usage":{"prompt_tokens":100,"completion_tokens":20,"total_tokens":120}}`)
		}))
		defer up.Close()
		price := upstream.Price{Input: 2_000_000, Output: 8_000_000, MaxOutputTokens: 1000}
		conf := upstream.Config{
			Routes: map[string]upstream.Route{
				"a": {Kind: upstream.KindOpenAI, BaseURL: down.URL, Models: []string{"gpt-4.1"}},
				"b": {Kind: upstream.KindOpenAI, Provider: "backup", BaseURL: up.URL, Models: []string{"gpt-4.1"}}},
			Plans:  map[string]upstream.Plan{"main": {Failover: upstream.FailoverDefinite, Models: map[string][]upstream.Step{"gpt-4.1": {{Route: "a"}, {Route: "b"}}}}},
			Prices: map[string]upstream.Price{"openai/gpt-4.1": price, "backup/gpt-4.1": price},
		}
		gw := gateway.New(gateway.Config{Upstream: conf, Ledger: ledger.Of(db), Holds: ledger.Of(db), DeferClose: true})
		svc := shim.New(shim.Config{Store: shimsql.New(db), Audit: db.Audit(), Turns: shimsql.New(db), Gateway: gw})
		caller := contract.Caller{Identity: contract.Identity{TenantSlot: "slot-1", Subject: "usr_0123456789abcdef", Surface: contract.SurfaceAPI, Trust: contract.TrustRouter},
			KeyID: "0123456789abcdef", Scopes: []contract.Scope{contract.ScopeRoute}, Grants: []string{"backup/gpt-4.1", "openai/gpt-4.1"}}
		body := []byte(`{"model":"gpt-4.1","max_tokens":100,"messages":[{"role":"user","content":"hello"}]}`)
		req := httptest.NewRequest("POST", "/v1/chat/completions", bytes.NewReader(body)).WithContext(contract.WithCaller(t.Context(), caller))
		rec := httptest.NewRecorder()
		svc.Handler(wire.ChatCompletions).ServeHTTP(rec, req)
		if rec.Code != 200 {
			t.Fatalf("%d %s", rec.Code, rec.Body)
		}
		rows, err := ledger.Of(db).Spend(t.Context(), "slot-1", "", time.Time{})
		if err != nil {
			t.Fatal(err)
		}
		const cost = 100*2 + 20*8 // 360 µ$
		got := map[string]ledger.SpendRow{}
		for _, r := range rows {
			got[r.Model] = r
		}
		if a, b := got["openai/gpt-4.1"], got["backup/gpt-4.1"]; len(rows) != 2 || a.Open != 0 || a.Settled != 0 || b.Open != 0 || b.Settled != cost {
			t.Fatalf("spend %+v", rows)
		}
		day := db.Now().UTC().Format("2006-01-02")
		if total, err := ledger.Of(db).Total(t.Context(), "key:0123456789abcdef", day); err != nil || total != cost {
			t.Fatalf("key total %d, %v; want %d", total, err, cost)
		}
		rcs, err := svc.ListReceipts(t.Context(), caller, 1, "")
		if err != nil || len(rcs) != 1 || rcs[0].Spend == nil || rcs[0].Spend.Settled != cost || len(rcs[0].Spend.Attempts) != 2 {
			t.Fatalf("receipt %+v, %v", rcs, err)
		}
	})
}
