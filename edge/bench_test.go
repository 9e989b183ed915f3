package edge_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/caduceus-dev/caduceus/edge"
	"github.com/caduceus-dev/caduceus/shim"
	"github.com/caduceus-dev/caduceus/store/port"
)

// countingDB counts the round trips the edge makes to its database: a
// statement, or a batch of them.
type countingDB struct {
	port.DB
	n atomic.Int64
}

func (c *countingDB) Query(ctx context.Context, q string, args ...any) ([]port.Row, error) {
	c.n.Add(1)
	return c.DB.Query(ctx, q, args...)
}

func (c *countingDB) Exec(ctx context.Context, q string, args ...any) (int64, error) {
	c.n.Add(1)
	return c.DB.Exec(ctx, q, args...)
}

func (c *countingDB) Batch(ctx context.Context, stmts []port.Statement) error {
	c.n.Add(1) // one round trip
	return c.DB.Batch(ctx, stmts)
}

// BenchmarkEdgeTurn runs the edge natively on a SQLite file: a direct
// answer, a context shim and a plain turn forwarded to a local upstream,
// and a preview, reporting the database round trips per request
// (round-trips/op: a statement or a batch; on D1 the Worker waits for
// each).
//
//	go test -run '^$' -bench EdgeTurn ./edge
func BenchmarkEdgeTurn(b *testing.B) {
	upstreamURL := chatUpstream(b)
	db := &countingDB{DB: open(b)}
	const admin = "cad_0123456789abcdef_abcdefghijklmnopqrstuvwxyz234567abcdefghijklmnopqrst"
	admins, err := edge.ParseAdminKeys(admin)
	if err != nil {
		b.Fatal(err)
	}
	e, err := edge.New(edge.Config{DB: db, AdminKeys: admins, Upstreams: map[string]shim.Upstream{"openai": {BaseURL: upstreamURL + "/v1"}}})
	if err != nil {
		b.Fatal(err)
	}
	srv := httptest.NewServer(e)
	defer srv.Close()
	post := func(key, path, body string) string { return postAs(b, srv.URL, key, path, body) }
	key := seedTurns(b, srv.URL, admin)
	for _, r := range []struct{ name, body string }{
		{"direct", `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"how do I get a refund?"}]}`},
		{"shimmed", `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"please deploy the payments service"}]}`},
		{"forwarded", `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hello"}]}`},
		{"preview", `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"how do I get a refund?"}]}`},
	} {
		path := "/v1/chat/completions"
		if r.name == "preview" {
			path = "/api/preview"
		}
		b.Run(r.name, func(b *testing.B) {
			post(key, path, r.body)
			before := db.n.Load()
			for b.Loop() {
				post(key, path, r.body)
			}
			b.ReportMetric(float64(db.n.Load()-before)/float64(b.N), "round-trips/op")
		})
	}
}

// postAs POSTs body to base+path with key, as the harness claude-code, and
// returns the 2xx answer's body (any other status fails tb).
func postAs(tb testing.TB, base, key, path, body string) string {
	tb.Helper()
	req, _ := http.NewRequest("POST", base+path, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("X-Caduceus-Harness", "claude-code")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		tb.Fatal(err)
	}
	out, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		tb.Fatalf("%s: %d %s", path, resp.StatusCode, out)
	}
	return string(out)
}

// newKey makes a route and configure key of slot-1 with admin and returns it.
func newKey(tb testing.TB, base, admin string) string {
	created := postAs(tb, base, admin, "/v1/admin/keys", `{"tenant":"slot-1","scopes":["route","configure"],"harness":"claude-code"}`)
	return created[strings.Index(created, "cad_") : strings.Index(created, "cad_")+73]
}

// seedTurns makes a key (newKey) and gives its tenant a direct answer for
// "refund" and a context shim for "deploy"; it returns the key.
func seedTurns(tb testing.TB, base, admin string) string {
	key := newKey(tb, base, admin)
	postAs(tb, base, key, "/v1/provisions", `{"id":"PROV-REFUNDS","triggers":{"keyword":{"any":["refund"]}},"action":"respond_directly","response":{"text":"Refunds take 14 days."}}`)
	postAs(tb, base, key, "/v1/provisions", `{"id":"PROV-DEPLOY","triggers":{"keyword":{"any":["deploy"]}},"action":"shim","context_refs":["verb:deploy"]}`)
	postAs(tb, base, key, "/v1/context", `{"ref":"verb:deploy","kind":"verb","title":"Deploying","body":"Deploy with make deploy-staging first."}`)
	return key
}

// chatUpstream serves one chat completion for every call until the test
// ends, and returns its URL.
func chatUpstream(tb testing.TB) string {
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"id":"chatcmpl-1","object":"chat.completion","created":1,"model":"gpt-4o-mini","choices":[{"index":0,"message":{"role":"assistant","content":"ok"},"finish_reason":"stop"}]}`)
	}))
	tb.Cleanup(upstream.Close)
	return upstream.URL
}
