package store_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	"github.com/caduceus-dev/caduceus/contract"
	"github.com/caduceus-dev/caduceus/shim"
	"github.com/caduceus-dev/caduceus/shim/gateway"
	"github.com/caduceus-dev/caduceus/shim/upstream"
	"github.com/caduceus-dev/caduceus/shim/wire"
	"github.com/caduceus-dev/caduceus/store"
	"github.com/caduceus-dev/caduceus/store/storetest"
)

// BenchmarkSpendLedger measures the ledger's parts on SQLite, one at a
// time: a reservation (carved from a lease, one write per 16; and in the
// store per attempt), its settlement, and the hold check an attempt makes.
func BenchmarkSpendLedger(b *testing.B) {
	db := storetest.OpenSQLite(b)
	sp := db.ShimSpend()
	ctx := b.Context()
	r := upstream.Reservation{Tenant: "slot-1", KeyID: "k1", Identity: "openai/gpt-4.1", Amount: 1000, KeyLimit: upstream.Limit{Day: upstream.MaxMicrodollars}}
	n := 0
	b.Run("reserve", func(b *testing.B) {
		for b.Loop() {
			n++
			r.ID = fmt.Sprintf("r%d", n)
			if _, err := sp.Reserve(ctx, r); err != nil {
				b.Fatal(err)
			}
		}
	})
	per := sp.PerAttempt()
	b.Run("reserve-per-attempt", func(b *testing.B) {
		for b.Loop() {
			n++
			r.ID = fmt.Sprintf("r%d", n)
			if _, err := per.Reserve(ctx, r); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("settle", func(b *testing.B) {
		ids := make([]upstream.Ticket, 0, b.N)
		for range b.N {
			n++
			r.ID = fmt.Sprintf("r%d", n)
			t, err := sp.Reserve(ctx, r)
			if err != nil {
				b.Fatal(err)
			}
			ids = append(ids, t)
		}
		b.ResetTimer()
		for i := range b.N {
			if err := sp.Settle(ctx, ids[i], 500); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("held-until", func(b *testing.B) {
		for b.Loop() {
			if _, err := sp.HeldUntil(ctx, "openai/gpt-4.1"); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// keepNothing is a ledger and holds that keep nothing: the baseline of
// BenchmarkShimForwardLedger.
type keepNothing struct{}

func (keepNothing) Reserve(_ context.Context, r upstream.Reservation) (upstream.Ticket, error) {
	return upstream.Ticket{Reservation: r}, nil
}
func (keepNothing) Settle(context.Context, upstream.Ticket, upstream.Microdollars) error { return nil }
func (keepNothing) Release(context.Context, upstream.Ticket) error                       { return nil }
func (keepNothing) Hold(context.Context, string, time.Time) error                        { return nil }
func (keepNothing) HeldUntil(context.Context, string) (time.Time, error)                 { return time.Time{}, nil }

// BenchmarkShimForwardLedger sends one chat request through the whole shim
// on SQLite (receipt and audit record committed per request, settlement in
// that transaction) to a local fake provider, through the gateway with a
// ledger and holds that keep nothing ("keep-nothing") and with the store's:
// without a budget, with budgets served from leases, with budgets reserved
// per attempt in the store; "holds-only" keeps nothing but checks the
// store's holds. p50-µs is the median request latency; the difference to
// keep-nothing is what the ledger (and the hold check) add.
func BenchmarkShimForwardLedger(b *testing.B) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"id":"c1","object":"chat.completion","created":1,"model":"gpt-4.1","choices":[{"index":0,"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}],"usage":{"prompt_tokens":100,"completion_tokens":20,"total_tokens":120}}`)
	}))
	defer up.Close()
	db := storetest.OpenSQLite(b)
	price := upstream.Price{Input: 2_000_000, CachedInput: 500_000, Output: 8_000_000, MaxOutputTokens: 1000}
	conf := upstream.Config{
		Routes: map[string]upstream.Route{"openai": {Kind: upstream.KindOpenAI, BaseURL: up.URL, Models: []string{"gpt-4.1"}}},
		Plans:  map[string]upstream.Plan{"main": {Failover: upstream.FailoverNone, Models: map[string][]upstream.Step{"gpt-4.1": {{Route: "openai"}}}}},
		Prices: map[string]upstream.Price{"openai/gpt-4.1": price},
	}
	budgeted := conf
	budgeted.Budgets = upstream.Budgets{Key: upstream.Limit{Day: upstream.MaxMicrodollars}, Tenant: upstream.Limit{Month: upstream.MaxMicrodollars}}
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 16}}
	caller := contract.Caller{Identity: contract.Identity{TenantSlot: "slot-1", Subject: "usr_0123456789abcdef", Surface: contract.SurfaceAPI, Trust: contract.TrustRouter},
		KeyID: "0123456789abcdef", Scopes: []contract.Scope{contract.ScopeRoute}, Grants: []string{"openai/gpt-4.1"}}
	sp := db.ShimSpend()
	body := []byte(`{"model":"gpt-4.1","max_tokens":100,"messages":[{"role":"user","content":"hello there, how are you today?"}]}`)
	for _, tc := range []struct {
		name   string
		conf   upstream.Config
		ledger upstream.Ledger
		holds  upstream.Holds
	}{
		{"keep-nothing", budgeted, keepNothing{}, keepNothing{}},
		{"holds-only", budgeted, keepNothing{}, sp},
		{"no-budget", conf, sp, sp},
		{"budget-leased", budgeted, sp, sp},
		{"budget-per-attempt", budgeted, sp.PerAttempt(), sp},
	} {
		// The store's ledger settles in the receipt's transaction; one that
		// keeps nothing has nothing to settle there.
		_, keeps := tc.ledger.(*store.ShimSpend)
		gw := gateway.New(gateway.Config{Upstream: tc.conf, Ledger: tc.ledger, Holds: tc.holds, Client: client, DeferClose: keeps})
		h := shim.New(shim.Config{Store: db.Shim(), Audit: db.Audit(), Turns: db.Shim(), Client: client, Gateway: gw}).Handler(wire.ChatCompletions)
		b.Run(tc.name, func(b *testing.B) {
			lat := make([]time.Duration, 0, b.N)
			for b.Loop() {
				req := httptest.NewRequest("POST", "/v1/chat/completions", bytes.NewReader(body)).WithContext(contract.WithCaller(b.Context(), caller))
				rec := httptest.NewRecorder()
				start := time.Now()
				h.ServeHTTP(rec, req)
				lat = append(lat, time.Since(start))
				if rec.Code != 200 {
					b.Fatalf("%d %s", rec.Code, rec.Body)
				}
			}
			slices.Sort(lat)
			b.ReportMetric(float64(lat[len(lat)/2].Nanoseconds())/1000, "p50-µs")
		})
	}
}
