package shim_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/caduceus-dev/caduceus/audit"
	"github.com/caduceus-dev/caduceus/contract"
	"github.com/caduceus-dev/caduceus/shim"
	"github.com/caduceus-dev/caduceus/shim/shimtest"
	"github.com/caduceus-dev/caduceus/shim/wire"
)

var upstreamReply = wire.DirectJSON(wire.ChatCompletions, wire.Direct{ID: "b", Model: "gpt-4o", Text: "ok", Created: 1})

// request8K is an 8 KB chat completions request whose last user message
// mentions "deploy" once.
func request8K() []byte {
	var words strings.Builder
	for i := 0; words.Len() < 7600; i++ {
		fmt.Fprintf(&words, "line %d of the build log shows the service compiled and tests passed. ", i)
	}
	text := words.String() + " now please deploy it"
	body := fmt.Sprintf(`{"model":"gpt-4o","temperature":0.2,"messages":[{"role":"system","content":"You are a careful engineer."},{"role":"user","content":%q}]}`, text)
	return []byte(body)
}

var benchCaller = callers["key-a"]

func serve(b *testing.B, h http.Handler, body []byte) *httptest.ResponseRecorder {
	req := httptest.NewRequest(http.MethodPost, "/v1/chat/completions", bytes.NewReader(body))
	req = req.WithContext(contract.WithCaller(req.Context(), benchCaller))
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req)
	if w.Code != 200 {
		b.Fatalf("status %d: %s", w.Code, w.Body.Bytes())
	}
	return w
}

// passThrough is the baseline handler: a bare proxy that reads the body,
// sends it to the same in-memory upstream and copies the answer back.
func passThrough() http.Handler {
	client := &http.Client{Transport: shimtest.MemUpstream{Body: upstreamReply}}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		in, _ := io.ReadAll(r.Body)
		ureq, _ := http.NewRequestWithContext(r.Context(), http.MethodPost, "http://upstream/v1/chat/completions", bytes.NewReader(in))
		ureq.Header.Set("Content-Type", "application/json")
		resp, err := client.Do(ureq)
		if err != nil {
			http.Error(w, err.Error(), 502)
			return
		}
		defer resp.Body.Close()
		for k, v := range resp.Header {
			w.Header()[k] = v
		}
		w.WriteHeader(resp.StatusCode)
		_, _ = io.Copy(w, resp.Body)
	})
}

// BenchmarkPassThrough is the baseline: a bare proxy that reads the body,
// sends it to the same in-memory upstream and copies the answer back.
func BenchmarkPassThrough(b *testing.B) {
	body := request8K()
	h := passThrough()
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		serve(b, h, body)
	}
}

// BenchmarkTier1Inject1000 is the shim's handler on the same request with
// 1,000 tier-1 provisions (keywords, some regex, path and tool triggers),
// one of which fires and shims a context entry; receipts are sealed into
// an audit chain. Compare ns/op with BenchmarkPassThrough; overhead-us-p50
// is the shim's own processing time per request (X-Caduceus-Overhead-Us).
func BenchmarkTier1Inject1000(b *testing.B) {
	h := tier1Handler(b)
	body := request8K()
	w := serve(b, h, body) // warm the rules cache
	if w.Header().Get(shim.HeaderReceipt) == "" {
		b.Fatal("no receipt")
	}
	var overhead []int
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		w := serve(b, h, body)
		us, _ := strconv.Atoi(w.Header().Get(shim.HeaderOverhead))
		overhead = append(overhead, us)
	}
	slices.Sort(overhead)
	b.ReportMetric(float64(overhead[len(overhead)/2]), "overhead-us-p50")
	b.ReportMetric(float64(overhead[len(overhead)*99/100]), "overhead-us-p99")
}

// tier1Handler is the shim's chat completions handler over 1,000 tier-1
// provisions (keywords, some regex, path and tool triggers) of which one,
// P0500, fires on request8K and shims a context entry; receipts are sealed
// into an audit chain.
func tier1Handler(b *testing.B) http.Handler { return tier1HandlerLog(b, &shimtest.SealLog{}, nil) }

func tier1HandlerLog(b *testing.B, log audit.Log, admit func(context.Context, contract.Caller, shim.Provision) (bool, string)) http.Handler {
	store := shimtest.DropReceipts{Memory: shimtest.NewMemory()}
	var only func(shim.Provision) bool
	if admit != nil {
		only = shim.Governed
	}
	svc := shim.New(shim.Config{Store: store, Audit: log, Admit: admit, AdmitOnly: only,
		Upstreams: map[string]shim.Upstream{"openai": {BaseURL: "http://upstream", APIKey: "k"}},
		Client:    &http.Client{Transport: shimtest.MemUpstream{Body: upstreamReply}}})
	ctx := b.Context()
	if _, err := svc.CreateContext(ctx, benchCaller, "claude-code", []byte(`{"ref":"verb:deploy","kind":"verb","title":"Deploy","body":"Run make deploy-staging, then make deploy-prod."}`)); err != nil {
		b.Fatal(err)
	}
	for i := range 1000 {
		trig := fmt.Sprintf(`"keyword":{"any":["kw%dalpha","term %d beta"]}`, i, i)
		switch {
		case i == 500:
			trig = `"keyword":{"any":["deploy"]}`
		case i%100 == 7:
			trig = fmt.Sprintf(`"regex":[{"pattern":"(?i)\\bERR%04d\\b"}]`, i)
		case i%50 == 3:
			trig = fmt.Sprintf(`"path":["svc%d/**"]`, i)
		case i%50 == 4:
			trig = fmt.Sprintf(`"tool":["Tool%d"]`, i)
		}
		p := fmt.Sprintf(`{"id":"P%04d","priority":%d,"triggers":{%s},"action":"shim","context_refs":["verb:deploy"]}`, i, i%10, trig)
		if _, err := svc.CreateProvision(ctx, benchCaller, "claude-code", []byte(p)); err != nil {
			b.Fatal(err)
		}
	}
	return svc.Handler(wire.ChatCompletions)
}

// BenchmarkTier1Overhead1000 measures the DESIGN §9 budget directly: each
// iteration sends the 8 KB request once through the bare pass-through
// proxy and once through the shim (1,000 tier-1 provisions, one fires and
// injects, the receipt is sealed), timing each; overhead-p50-µs is the p50
// of the shim's wall time minus the p50 of the pass-through's, both from
// this run. ns/op covers the pair.
func BenchmarkTier1Overhead1000(b *testing.B) { overhead(b, tier1Handler(b)) }

// BenchmarkTier1Overhead1000Unsealed is BenchmarkTier1Overhead1000 with an
// audit log that drops entries: the difference between the two is what
// sealing the receipt (audit.Check and audit.Seal) costs per request.
func BenchmarkTier1Overhead1000Unsealed(b *testing.B) {
	overhead(b, tier1HandlerLog(b, dropLog{}, nil))
}

// BenchmarkTier1Overhead1000Governed is BenchmarkTier1Overhead1000 wired
// as caduceus serve wires the shim: the governance lens (Governor.Admit)
// as the admission hook, with AdmitOnly: Governed so that only the
// provisions carrying fabric_governance (none here) cost a call.
func BenchmarkTier1Overhead1000Governed(b *testing.B) {
	gov := &shim.Governor{Cohorts: map[contract.TenantSlot][]string{}}
	overhead(b, tier1HandlerLog(b, &shimtest.SealLog{}, gov.Admit))
}

type dropLog struct{}

func (dropLog) Append(context.Context, audit.Entry) (audit.Record, error) {
	return audit.Record{ID: "evt_drop"}, nil
}

func overhead(b *testing.B, shimH http.Handler) {
	passH := passThrough()
	body := request8K()
	if w := serve(b, shimH, body); w.Header().Get(shim.HeaderReceipt) == "" {
		b.Fatal("no receipt")
	}
	serve(b, passH, body)
	var shimNs, passNs []int64
	b.ReportAllocs()
	for b.Loop() {
		t0 := time.Now()
		serve(b, passH, body)
		t1 := time.Now()
		serve(b, shimH, body)
		t2 := time.Now()
		passNs = append(passNs, t1.Sub(t0).Nanoseconds())
		shimNs = append(shimNs, t2.Sub(t1).Nanoseconds())
	}
	slices.Sort(shimNs)
	slices.Sort(passNs)
	p50 := func(xs []int64) float64 { return float64(xs[len(xs)/2]) / 1e3 }
	p99 := func(xs []int64) float64 { return float64(xs[len(xs)*99/100]) / 1e3 }
	b.ReportMetric(p50(passNs), "pass-p50-µs")
	b.ReportMetric(p50(shimNs), "shim-p50-µs")
	b.ReportMetric(p50(shimNs)-p50(passNs), "overhead-p50-µs")
	b.ReportMetric(p99(shimNs)-p99(passNs), "overhead-p99-µs")
}

// BenchmarkDirectResponse answers a non-streaming request directly (no
// upstream), from parallel clients; req/s is the figure.
func BenchmarkDirectResponse(b *testing.B) {
	svc := shim.New(shim.Config{Store: shimtest.DropReceipts{Memory: shimtest.NewMemory()}, Audit: &shimtest.SealLog{}})
	if _, err := svc.CreateProvision(b.Context(), benchCaller, "claude-code",
		[]byte(`{"id":"D","triggers":{"keyword":{"any":["refund"]}},"action":"respond_directly","response":{"text":"Refunds take 14 days."}}`)); err != nil {
		b.Fatal(err)
	}
	h := svc.Handler(wire.ChatCompletions)
	body := []byte(`{"model":"gpt-4o","messages":[{"role":"user","content":"what is the refund policy?"}]}`)
	serve(b, h, body)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			serve(b, h, body)
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "req/s")
}

// BenchmarkDirectResponse1000Clients is BenchmarkDirectResponse from 1,000
// concurrent clients (goroutines), each timing its own requests: req/s and
// the p99 latency in ms are the DESIGN §9 figures. The clients are a
// closed loop (each sends its next request when the last is answered), so
// by Little's law the mean latency is about 1,000 / (req/s): on 2 cores no
// handler gets p99 under 5 ms this way; the figure shows the queueing.
func BenchmarkDirectResponse1000Clients(b *testing.B) {
	svc := shim.New(shim.Config{Store: shimtest.DropReceipts{Memory: shimtest.NewMemory()}, Audit: &shimtest.SealLog{}})
	if _, err := svc.CreateProvision(b.Context(), benchCaller, "claude-code",
		[]byte(`{"id":"D","triggers":{"keyword":{"any":["refund"]}},"action":"respond_directly","response":{"text":"Refunds take 14 days."}}`)); err != nil {
		b.Fatal(err)
	}
	h := svc.Handler(wire.ChatCompletions)
	body := []byte(`{"model":"gpt-4o","messages":[{"role":"user","content":"what is the refund policy?"}]}`)
	serve(b, h, body)
	var mu sync.Mutex
	var lat []int64
	b.SetParallelism((1000 + runtime.GOMAXPROCS(0) - 1) / runtime.GOMAXPROCS(0))
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		var mine []int64
		for pb.Next() {
			t0 := time.Now()
			serve(b, h, body)
			mine = append(mine, time.Since(t0).Nanoseconds())
		}
		mu.Lock()
		lat = append(lat, mine...)
		mu.Unlock()
	})
	slices.Sort(lat)
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "req/s")
	b.ReportMetric(float64(lat[len(lat)*99/100])/1e6, "p99-ms")
}
