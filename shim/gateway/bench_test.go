package gateway_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/caduceus-dev/caduceus/shim/gateway"
	"github.com/caduceus-dev/caduceus/shim/ledger"
	"github.com/caduceus-dev/caduceus/shim/upstream"
	"github.com/caduceus-dev/caduceus/shim/wire"
	"github.com/caduceus-dev/caduceus/store"
)

// freeLedger keeps nothing: the baseline a forwarded request costs without
// reservation and settlement.
type freeLedger struct{}

func (freeLedger) Reserve(_ context.Context, r upstream.Reservation) (upstream.Ticket, error) {
	return upstream.Ticket{Reservation: r}, nil
}
func (freeLedger) Settle(context.Context, upstream.Ticket, upstream.Microdollars) error { return nil }
func (freeLedger) Release(context.Context, upstream.Ticket) error                       { return nil }
func (freeLedger) Hold(context.Context, string, time.Time) error                        { return nil }
func (freeLedger) HeldUntil(context.Context, string) (time.Time, error)                 { return time.Time{}, nil }

// BenchmarkForwardLedger forwards one chat request to a local fake upstream
// with the SQLite ledger (reserve, hold check, settle, with and without a
// budget) and with a ledger that keeps nothing; p50-µs is the median of the
// per-request latencies, so the difference between the cases is what
// reservation and settlement add. The settlement is a commit of its own
// here; "-deferred" leaves it out of the timed request, as the shim does by
// recording it in the receipt's transaction (BenchmarkShimForwardLedger in
// store measures that whole); "-no-hold-check" leaves the store's hold
// check out too, so only the reservation is measured.
func BenchmarkForwardLedger(b *testing.B) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, chatAnswer)
	}))
	defer up.Close()
	c := upstream.Config{
		Routes: map[string]upstream.Route{"a": {Kind: upstream.KindOpenAI, BaseURL: up.URL, Models: []string{"gpt-4.1"}}},
		Plans:  map[string]upstream.Plan{"main": {Failover: upstream.FailoverNone, Models: map[string][]upstream.Step{"gpt-4.1": {{Route: "a"}}}}},
		Prices: map[string]upstream.Price{"openai/gpt-4.1": price},
	}
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 16}}
	db, err := store.Open(context.Background(), "sqlite:"+filepath.Join(b.TempDir(), "bench.db"), "")
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	budgeted := c
	budgeted.Budgets = upstream.Budgets{Key: upstream.Limit{Day: upstream.MaxMicrodollars}, Tenant: upstream.Limit{Month: upstream.MaxMicrodollars}}
	cases := []struct {
		name string
		gw   *gateway.Gateway
	}{
		{"no-ledger", gateway.New(gateway.Config{Upstream: c, Ledger: freeLedger{}, Holds: freeLedger{}, Client: client})},
		{"sqlite-ledger", gateway.New(gateway.Config{Upstream: c, Ledger: ledger.Of(db), Holds: ledger.Of(db), Client: client})},
		{"sqlite-ledger-budget", gateway.New(gateway.Config{Upstream: budgeted, Ledger: ledger.Of(db), Holds: ledger.Of(db), Client: client})},
		{"sqlite-ledger-budget-deferred", gateway.New(gateway.Config{Upstream: budgeted, Ledger: ledger.Of(db), Holds: ledger.Of(db), Client: client, DeferClose: true})},
		{"sqlite-ledger-budget-deferred-no-hold-check", gateway.New(gateway.Config{Upstream: budgeted, Ledger: ledger.Of(db), Holds: freeLedger{}, Client: client, DeferClose: true})},
		{"sqlite-per-attempt-budget-deferred", gateway.New(gateway.Config{Upstream: budgeted, Ledger: ledger.Of(db).PerAttempt(), Holds: ledger.Of(db), Client: client, DeferClose: true})},
	}
	who := caller("openai/gpt-4.1")
	for _, tc := range cases {
		b.Run(tc.name, func(b *testing.B) {
			lat := make([]time.Duration, 0, b.N)
			for b.Loop() {
				n := reqN.Add(1) // reservation ids are unique across runs
				rec := httptest.NewRecorder()
				start := time.Now()
				pr, body := parsed(b, wire.ChatCompletions, chatBody)
				res := tc.gw.Forward(context.Background(), gateway.Writer{ResponseWriter: rec}, gateway.Request{Protocol: wire.ChatCompletions,
					Caller: who, Parsed: pr, Body: body, Header: http.Header{}, ID: fmt.Sprintf("rct_%s_%d", tc.name, n)})
				lat = append(lat, time.Since(start))
				if res.Refusal != nil || rec.Code != 200 {
					b.Fatalf("%+v %d", res.Refusal, rec.Code)
				}
				tc.gw.Close(context.Background(), res.Attempts) // deferred: not timed
			}
			slices.Sort(lat)
			b.ReportMetric(float64(lat[len(lat)/2].Nanoseconds())/1000, "p50-µs")
		})
	}
}
