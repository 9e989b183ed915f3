package shim_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/caduceus-dev/caduceus/audit"
	"github.com/caduceus-dev/caduceus/contract"
	"github.com/caduceus-dev/caduceus/shim"
	"github.com/caduceus-dev/caduceus/shim/shimtest"
	"github.com/caduceus-dev/caduceus/shim/wire"
)

// Test keys and the callers the test middleware puts in the context.
var callers = map[string]contract.Caller{
	"key-a": {Identity: contract.Identity{TenantSlot: "slot-1", Subject: "usr_aaaaaaaaaaaaaaaa", Surface: contract.SurfaceAPI, Trust: contract.TrustRouter},
		KeyID: "ka", Scopes: []contract.Scope{contract.ScopeRoute, contract.ScopeConfigure}, Harness: "claude-code"},
	"key-b": {Identity: contract.Identity{TenantSlot: "slot-2", Subject: "usr_bbbbbbbbbbbbbbbb", Surface: contract.SurfaceAPI, Trust: contract.TrustRouter},
		KeyID: "kb", Scopes: []contract.Scope{contract.ScopeRoute, contract.ScopeConfigure}, Harness: "claude-code"},
	"key-admin": {Identity: contract.Identity{TenantSlot: "slot-1", Subject: "usr_cccccccccccccccc", Surface: contract.SurfaceAPI, Trust: contract.TrustRouter},
		KeyID: "kadm", Scopes: []contract.Scope{contract.ScopeRoute, contract.ScopeConfigure, contract.ScopeAdmin}, Harness: "ops"},
	"key-route": {Identity: contract.Identity{TenantSlot: "slot-1", Subject: "usr_dddddddddddddddd", Surface: contract.SurfaceAPI, Trust: contract.TrustRouter},
		KeyID: "kr", Scopes: []contract.Scope{contract.ScopeRoute}, Harness: "claude-code"},
}

// withCaller is the tiny stand-in for the server's auth middleware.
func withCaller(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		key := r.Header.Get("x-api-key")
		if key == "" {
			key = strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
		}
		c, ok := callers[key]
		if !ok {
			http.Error(w, "unknown key", http.StatusUnauthorized)
			return
		}
		next.ServeHTTP(w, r.WithContext(contract.WithCaller(r.Context(), c)))
	})
}

// seen is one request the fake upstream received.
type seen struct {
	Path, Query string
	Header      http.Header
	Body        []byte
}

// upstream is a fake LLM provider (OpenAI and Anthropic paths) that records
// what reaches it and answers with respond.
type upstream struct {
	*httptest.Server
	mu      sync.Mutex
	reqs    []seen
	respond func(w http.ResponseWriter, r *http.Request, body []byte)
}

func newUpstream(t *testing.T) *upstream {
	u := &upstream{}
	u.respond = defaultRespond
	u.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		u.mu.Lock()
		u.reqs = append(u.reqs, seen{r.URL.Path, r.URL.RawQuery, r.Header.Clone(), b})
		respond := u.respond
		u.mu.Unlock()
		respond(w, r, b)
	}))
	t.Cleanup(u.Close)
	return u
}

func (u *upstream) calls() int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return len(u.reqs)
}

func (u *upstream) last(t *testing.T) seen {
	t.Helper()
	u.mu.Lock()
	defer u.mu.Unlock()
	if len(u.reqs) == 0 {
		t.Fatal("upstream received nothing")
	}
	return u.reqs[len(u.reqs)-1]
}

const upstreamText = "hello from upstream"

// asked is what a request to the fake upstream asks: its wire (by path),
// its model, and whether it streams.
func asked(r *http.Request, body []byte) (p wire.Protocol, model string, stream bool) {
	var in struct {
		Model  string `json:"model"`
		Stream bool   `json:"stream"`
	}
	_ = json.Unmarshal(body, &in)
	p = wire.ChatCompletions
	switch {
	case strings.HasSuffix(r.URL.Path, "/responses"):
		p = wire.Responses
	case strings.HasSuffix(r.URL.Path, "/messages"):
		p = wire.Messages
	}
	return p, in.Model, in.Stream
}

// defaultRespond answers like the real provider would, streaming when asked.
func defaultRespond(w http.ResponseWriter, r *http.Request, body []byte) {
	p, model, stream := asked(r, body)
	d := wire.Direct{ID: "up1", Model: model, Text: upstreamText, Created: 1}
	w.Header().Set("X-Upstream", "yes")
	if !stream {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(wire.DirectJSON(p, d))
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	for _, ev := range wire.DirectEvents(p, d) {
		_, _ = w.Write(ev)
		w.(http.Flusher).Flush()
	}
}

// env is a shim Service behind the test middleware, with a fake upstream.
type env struct {
	svc   *shim.Service
	store *shimtest.Memory
	audit *audit.Memory
	up    *upstream
	srv   *httptest.Server
}

func newEnv(t *testing.T, tweak func(*shim.Config)) *env {
	e := &env{store: shimtest.NewMemory(), audit: audit.NewMemory(), up: newUpstream(t)}
	cfg := shim.Config{
		Store: e.store, Audit: e.audit,
		Upstreams: map[string]shim.Upstream{
			"openai":    {BaseURL: e.up.URL, APIKey: "upstream-openai-key"},
			"anthropic": {BaseURL: e.up.URL + "/v1", APIKey: "upstream-anthropic-key"},
		},
	}
	if tweak != nil {
		tweak(&cfg)
	}
	e.svc = shim.New(cfg)
	mux := http.NewServeMux()
	mux.Handle("POST /v1/chat/completions", e.svc.Handler(wire.ChatCompletions))
	mux.Handle("POST /v1/responses", e.svc.Handler(wire.Responses))
	mux.Handle("POST /v1/messages", e.svc.Handler(wire.Messages))
	e.srv = httptest.NewServer(withCaller(mux))
	t.Cleanup(e.srv.Close)
	return e
}

// provision creates a provision for key's tenant (attesting key's harness).
func (e *env) provision(t *testing.T, key, body string) shim.Provision {
	t.Helper()
	c := callers[key]
	p, err := e.svc.CreateProvision(t.Context(), c, c.Harness, []byte(body))
	if err != nil {
		t.Fatalf("create provision: %v", err)
	}
	return p
}

func (e *env) context(t *testing.T, key, body string) shim.ContextEntry {
	t.Helper()
	c := callers[key]
	ce, err := e.svc.CreateContext(t.Context(), c, c.Harness, []byte(body))
	if err != nil {
		t.Fatalf("create context: %v", err)
	}
	return ce
}

// post sends a raw request to the shim with key.
func (e *env) post(t *testing.T, key, path, body string, hdr map[string]string) (*http.Response, []byte) {
	t.Helper()
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, e.srv.URL+path, bytes.NewReader([]byte(body)))
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, b
}

var receiptSchema = contract.MustSchema("shim.receipt.schema.json")

// receipts lists key's receipts through the Service; each must validate
// against shim.receipt.schema.json.
func (e *env) receipts(t *testing.T, key string) []shim.Receipt {
	t.Helper()
	rs, err := e.svc.ListReceipts(t.Context(), callers[key], 100, "")
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rs {
		if err := receiptSchema.Validate(r); err != nil {
			t.Fatalf("receipt %s does not match its schema: %v", r.ID, err)
		}
	}
	return rs
}

// recorder is an http.Client transport that keeps the bodies an SDK sends.
type recorder struct {
	mu     sync.Mutex
	bodies [][]byte
}

func (rec *recorder) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Body != nil {
		b, _ := io.ReadAll(r.Body)
		r.Body.Close()
		rec.mu.Lock()
		rec.bodies = append(rec.bodies, b)
		rec.mu.Unlock()
		r.Body = io.NopCloser(bytes.NewReader(b))
	}
	return http.DefaultTransport.RoundTrip(r)
}

func (rec *recorder) last() []byte {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	return rec.bodies[len(rec.bodies)-1]
}
