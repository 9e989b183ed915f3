package ledger_test

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
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

// BenchmarkShimForward sends one chat request through the whole shim on
// SQLite (its receipt and audit record committed per request) to a local
// fake provider: "upstreams" through the ungoverned pass-through, "gateway"
// through a plan with its grant check, hold check, reservation and
// settlement (recorded in the receipt's transaction, written by the spend
// journal), "gateway-budget" the same with
// key and tenant budgets, "gateway-budget-settle-apart" with the
// settlement in a transaction of its own.
// p50-µs is the median request latency; the difference between the cases
// is what the gateway adds to a forwarded request.
func BenchmarkShimForward(b *testing.B) {
	f := newForwardBench(b)
	db, client := f.db, f.client
	base := func() shim.Config {
		return shim.Config{Store: shimsql.New(db), Audit: db.Audit(), Turns: shimsql.New(db), Client: client}
	}
	legacy := base()
	legacy.Upstreams = map[string]shim.Upstream{"openai": {BaseURL: f.upstreamURL}}
	gw := base()
	gw.Gateway = gateway.New(gateway.Config{Upstream: f.conf, Ledger: ledger.Of(db), Holds: ledger.Of(db), Client: client, DeferClose: true})
	gwb := base()
	gwb.Gateway = gateway.New(gateway.Config{Upstream: f.budgeted, Ledger: ledger.Of(db), Holds: ledger.Of(db), Client: client, DeferClose: true})
	gwc := base()
	gwc.Gateway = gateway.New(gateway.Config{Upstream: f.budgeted, Ledger: ledger.Of(db), Holds: ledger.Of(db), Client: client})
	for _, tc := range []struct {
		name string
		cfg  shim.Config
	}{{"upstreams", legacy}, {"gateway", gw}, {"gateway-budget", gwb}, {"gateway-budget-settle-apart", gwc}} {
		f.run(b, tc.name, shim.New(tc.cfg).Handler(wire.ChatCompletions))
	}
}

// forwardBench is what the whole-shim forwarding benchmarks share: a fake
// provider answering one chat completion with usage, a migrated SQLite
// store, the gateway's configuration with and without budgets, and a
// granted caller.
type forwardBench struct {
	db             *store.DB
	upstreamURL    string
	conf, budgeted upstream.Config
	client         *http.Client
	caller         contract.Caller
}

func newForwardBench(b *testing.B) forwardBench {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"id":"c1","object":"chat.completion","created":1,"model":"gpt-4.1","choices":[{"index":0,"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}],"usage":{"prompt_tokens":100,"completion_tokens":20,"total_tokens":120}}`)
	}))
	b.Cleanup(up.Close)
	price := upstream.Price{Input: 2_000_000, CachedInput: 500_000, Output: 8_000_000, MaxOutputTokens: 1000}
	conf := upstream.Config{
		Routes: map[string]upstream.Route{"openai": {Kind: upstream.KindOpenAI, BaseURL: up.URL, Models: []string{"gpt-4.1"}}},
		Plans:  map[string]upstream.Plan{"main": {Failover: upstream.FailoverNone, Models: map[string][]upstream.Step{"gpt-4.1": {{Route: "openai"}}}}},
		Prices: map[string]upstream.Price{"openai/gpt-4.1": price},
	}
	budgeted := conf
	budgeted.Budgets = upstream.Budgets{Key: upstream.Limit{Day: upstream.MaxMicrodollars}, Tenant: upstream.Limit{Month: upstream.MaxMicrodollars}}
	return forwardBench{
		db:          storetest.OpenSQLite(b),
		upstreamURL: up.URL,
		conf:        conf,
		budgeted:    budgeted,
		client:      &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 16}},
		caller: contract.Caller{Identity: contract.Identity{TenantSlot: "slot-1", Subject: "usr_0123456789abcdef", Surface: contract.SurfaceAPI, Trust: contract.TrustRouter},
			KeyID: "0123456789abcdef", Scopes: []contract.Scope{contract.ScopeRoute}, Grants: []string{"openai/gpt-4.1"}},
	}
}

// runPaired benchmarks the handler h makes against the one base makes,
// each on a store of its own that open migrates anew for every round:
// every iteration sends the request through both, in turns (base first on
// even iterations, h first on odd ones), so a slow spell of this shared
// machine falls on both alike. It reports each one's median latency
// (p50-µs, base-p50-µs) and their difference (added-p50-µs): what h adds
// to base; added-p95-µs is the difference of their 95th percentiles.
//
// Work a store does in the background (the spend journal's writes, lease
// top-ups) is not on the request's path, but it runs on the same cores and,
// paired, slows base's requests as much as h's. So runPaired then sends
// b.N requests more through each, in blocks of pairBlock, each block ending
// once its store's background work is done, and reports the process's CPU
// time per request that h adds to base (added-cpu-µs), all of it counted.
func (f forwardBench) runPaired(b *testing.B, name string, open func(testing.TB) *store.DB, base, h func(*store.DB) http.Handler) {
	b.Run(name, func(b *testing.B) {
		dbs := [2]*store.DB{open(b), open(b)}
		hs := [2]http.Handler{base(dbs[0]), h(dbs[1])}
		var lat [2][]time.Duration
		i := 0
		for b.Loop() {
			for k := range 2 {
				which := (i + k) % 2
				lat[which] = append(lat[which], f.send(b, hs[which]))
			}
			i++
		}
		at := func(l []time.Duration, q float64) float64 {
			return float64(l[int(q*float64(len(l)-1))].Nanoseconds()) / 1000
		}
		slices.Sort(lat[0])
		slices.Sort(lat[1])
		b.ReportMetric(at(lat[1], 0.5), "p50-µs")
		b.ReportMetric(at(lat[0], 0.5), "base-p50-µs")
		b.ReportMetric(at(lat[1], 0.5)-at(lat[0], 0.5), "added-p50-µs")
		b.ReportMetric(at(lat[1], 0.95)-at(lat[0], 0.95), "added-p95-µs")

		var cpu [2]time.Duration
		for sent := 0; sent < b.N; sent += pairBlock {
			for k := range 2 {
				c0 := storetest.CPUTime()
				for range min(pairBlock, b.N-sent) {
					f.send(b, hs[k])
				}
				backgroundDone(b, dbs[k])
				cpu[k] += storetest.CPUTime() - c0
			}
		}
		b.ReportMetric(float64((cpu[1]-cpu[0]).Nanoseconds())/float64(b.N)/1000, "added-cpu-µs")
	})
}

// pairBlock is how many requests runPaired's CPU count sends through one
// store before it turns to the other.
const pairBlock = 200

// backgroundDone returns once db's spend journal holds nothing unwritten
// and no lease top-up is in flight.
func backgroundDone(b *testing.B, db *store.DB) {
	sp := ledger.Of(db)
	if _, err := sp.Total(b.Context(), "none", "none"); err != nil { // writes the journal first
		b.Fatal(err)
	}
	sp.WaitRefills()
}

// run benchmarks one chat request through h as f's caller and reports the
// median latency (p50-µs).
func (f forwardBench) run(b *testing.B, name string, h http.Handler) {
	b.Run(name, func(b *testing.B) { f.measure(b, h) })
}

// measure sends the request b.N times through h and reports the median
// latency (p50-µs).
func (f forwardBench) measure(b *testing.B, h http.Handler) {
	lat := make([]time.Duration, 0, b.N)
	for b.Loop() {
		lat = append(lat, f.send(b, h))
	}
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Nanoseconds())/1000, "p50-µs")
}

// forwardBody is the chat request the forwarding benchmarks send.
var forwardBody = []byte(`{"model":"gpt-4.1","max_tokens":100,"messages":[{"role":"user","content":"hello there, how are you today?"}]}`)

// send sends the request once through h as f's caller and returns how long
// h took to answer it.
func (f forwardBench) send(b *testing.B, h http.Handler) time.Duration {
	req := httptest.NewRequest("POST", "/v1/chat/completions", bytes.NewReader(forwardBody)).WithContext(contract.WithCaller(b.Context(), f.caller))
	rec := httptest.NewRecorder()
	start := time.Now()
	h.ServeHTTP(rec, req)
	took := time.Since(start)
	if rec.Code != 200 {
		b.Fatalf("%d %s", rec.Code, rec.Body)
	}
	return took
}
