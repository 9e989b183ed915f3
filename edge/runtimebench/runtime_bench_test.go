package runtimebench_test

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/caduceus-dev/caduceus/contract"
	"github.com/caduceus-dev/caduceus/shim"
	"github.com/caduceus-dev/caduceus/shim/shimtest"
	"github.com/caduceus-dev/caduceus/shim/wire"
)

var caller = contract.Caller{Identity: contract.Identity{TenantSlot: "slot-1", Subject: "usr_aaaaaaaaaaaaaaaa", Surface: contract.SurfaceAPI, Trust: contract.TrustRouter},
	KeyID: "ka", Scopes: []contract.Scope{contract.ScopeRoute, contract.ScopeConfigure}, Harness: "claude-code"}

// BenchmarkShimTurn is the shim's turn on the requests BenchmarkEdgeWorker
// sends (cmd/caduceus): a direct answer, and a context shim forwarded to
// the upstream, with the rules, the receipt and its sealed audit entry
// (canonical JSON, SHA-256 chain) in memory. cpu-ms/op is the CPU the
// process spent per turn (natively on all its threads, the garbage
// collector's included; under js/wasm, Node's); ns/op is the wall time,
// which under js/wasm includes the event loop's waits between goroutines.
func BenchmarkShimTurn(b *testing.B) {
	ctx := context.Background()
	svc := shim.New(shim.Config{Store: shimtest.DropReceipts{Memory: shimtest.NewMemory()}, Audit: &shimtest.SealLog{},
		Upstreams: map[string]shim.Upstream{"openai": {BaseURL: "http://upstream/v1", APIKey: "sk-upstream"}},
		Client:    &http.Client{Transport: shimtest.MemUpstream{Body: wire.DirectJSON(wire.ChatCompletions, wire.Direct{ID: "chatcmpl-1", Model: "gpt-4o-mini", Text: "ok", Created: 1})}}})
	for _, p := range []string{
		`{"id":"PROV-REFUNDS","triggers":{"keyword":{"any":["refund"]}},"action":"respond_directly","response":{"text":"Refunds take 14 days."}}`,
		`{"id":"PROV-DEPLOY","triggers":{"keyword":{"any":["deploy"]}},"action":"shim","context_refs":["verb:deploy"]}`,
	} {
		if _, err := svc.CreateProvision(ctx, caller, "claude-code", []byte(p)); err != nil {
			b.Fatal(err)
		}
	}
	if _, err := svc.CreateContext(ctx, caller, "claude-code", []byte(`{"ref":"verb:deploy","kind":"verb","title":"Deploying","body":"Deploy with make deploy-staging first."}`)); err != nil {
		b.Fatal(err)
	}
	h := svc.Handler(wire.ChatCompletions)
	for _, r := range []struct{ name, body string }{
		{"direct", `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"how do I get a refund?"}]}`},
		{"shimmed", `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"please deploy the payments service"}]}`},
	} {
		b.Run(r.name, func(b *testing.B) {
			b.ReportAllocs()
			start := cpuTime()
			for b.Loop() {
				req := httptest.NewRequest(http.MethodPost, "/v1/chat/completions", bytes.NewReader([]byte(r.body)))
				req.Header.Set("Content-Type", "application/json")
				req = req.WithContext(contract.WithCaller(req.Context(), caller))
				w := httptest.NewRecorder()
				h.ServeHTTP(w, req)
				if w.Code != 200 {
					b.Fatalf("status %d: %s", w.Code, w.Body.Bytes())
				}
			}
			b.ReportMetric(float64((cpuTime()-start).Microseconds())/1e3/float64(b.N), "cpu-ms/op")
		})
	}
}
