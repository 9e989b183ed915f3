package gateway_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/caduceus-dev/caduceus/contract"
	"github.com/caduceus-dev/caduceus/shim/gateway"
	"github.com/caduceus-dev/caduceus/shim/ledger"
	"github.com/caduceus-dev/caduceus/shim/upstream"
	"github.com/caduceus-dev/caduceus/shim/wire"
	"github.com/caduceus-dev/caduceus/store"
)

// fake is a fake provider: it counts calls and answers with handle.
type fake struct {
	*httptest.Server
	calls  atomic.Int64
	bodies chan []byte
}

func newFake(t *testing.T, handle http.HandlerFunc) *fake {
	f := &fake{bodies: make(chan []byte, 100)}
	f.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.calls.Add(1)
		b, _ := io.ReadAll(r.Body)
		f.bodies <- b
		handle(w, r)
	}))
	t.Cleanup(f.Close)
	return f
}

// refusedURL is an address nothing listens on: connection refused.
func refusedURL(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return "http://" + addr
}

const chatAnswer = `{"id":"chatcmpl-1","object":"chat.completion","created":1,"model":"gpt-4.1","choices":[{"index":0,"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}],"usage":{"prompt_tokens":100,"completion_tokens":20,"total_tokens":120,"prompt_tokens_details":{"cached_tokens":40}}}`

func answerChat(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	io.WriteString(w, chatAnswer)
}

// price: $2 / $0.5 / $8 per million tokens. The chatAnswer usage costs
// 60×2 + 40×0.5 + 20×8 = 120 + 20 + 160 = 300 microdollars.
var price = upstream.Price{Input: 2_000_000, CachedInput: 500_000, Output: 8_000_000, MaxOutputTokens: 1000}

const chatAnswerCost = 300

type rig struct {
	gw   *gateway.Gateway
	db   *store.DB
	conf upstream.Config
}

// newRig builds a gateway over a SQLite store with one plan for gpt-4.1
// whose steps are the given routes (a, b, c ... each its own provider so
// each is its own model identity).
func newRig(t *testing.T, failover upstream.Failover, urls ...string) *rig {
	db, err := store.Open(context.Background(), "sqlite:"+filepath.Join(t.TempDir(), "gw.db"), "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return newRigOn(t, db, failover, urls...)
}

func newRigOn(t *testing.T, db *store.DB, failover upstream.Failover, urls ...string) *rig {
	return newRigTimeout(t, db, failover, "", urls...)
}

// newRigTimeout is newRigOn whose routes have the given timeout.
func newRigTimeout(t *testing.T, db *store.DB, failover upstream.Failover, timeout string, urls ...string) *rig {
	c := upstream.Config{Routes: map[string]upstream.Route{}, Prices: map[string]upstream.Price{},
		Plans: map[string]upstream.Plan{"main": {Failover: failover, Models: map[string][]upstream.Step{}}}}
	var steps []upstream.Step
	for i, u := range urls {
		name := string(rune('a' + i))
		c.Routes[name] = upstream.Route{Provider: "p" + name, Kind: upstream.KindOpenAI, BaseURL: u, Models: []string{"gpt-4.1"}, Timeout: timeout}
		c.Prices["p"+name+"/gpt-4.1"] = price
		steps = append(steps, upstream.Step{Route: name})
	}
	c.Plans["main"].Models["gpt-4.1"] = steps
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	gw := gateway.New(gateway.Config{Upstream: c, Ledger: ledger.Of(db), Holds: ledger.Of(db),
		Client: &http.Client{}, HeaderTimeout: 300 * time.Millisecond, Keys: map[string]string{"a": "sk-a"}})
	return &rig{gw: gw, db: db, conf: c}
}

func caller(grants ...string) contract.Caller {
	return contract.Caller{Identity: contract.Identity{TenantSlot: "slot-1", Subject: "usr_1"}, KeyID: "k1",
		Scopes: []contract.Scope{contract.ScopeRoute}, Grants: grants}
}

var reqN atomic.Int64

// parsed is body as the shim hands it to Forward: parsed once, with its
// positions.
func parsed(t testing.TB, p wire.Protocol, body string) (*wire.Request, wire.Body) {
	t.Helper()
	r, err := wire.Parse(p, []byte(body))
	if err != nil {
		t.Fatalf("the test's body does not parse: %v", err)
	}
	return r, r.Body()
}

func (r *rig) forward(t *testing.T, c contract.Caller, body string) (gateway.Result, *httptest.ResponseRecorder) {
	t.Helper()
	rec := httptest.NewRecorder()
	pr, b := parsed(t, wire.ChatCompletions, body)
	res := r.gw.Forward(t.Context(), gateway.Writer{ResponseWriter: rec}, gateway.Request{Protocol: wire.ChatCompletions, Caller: c,
		Parsed: pr, Body: b, Header: http.Header{"Openai-Organization": {"org-1"}}, ID: fmt.Sprintf("rct_%d", reqN.Add(1))})
	if res.Err != nil {
		t.Fatalf("gateway failure: %v", res.Err)
	}
	rec.Write(res.Final) // the caller writes the held terminal event
	if res.Refusal != nil {
		if rec.Flushed || rec.Body.Len() > 0 {
			t.Fatal("the gateway wrote to the client and refused")
		}
		rec.Code = res.Refusal.Status // the caller writes a refusal
	}
	return res, rec
}

const chatBody = `{"model":"gpt-4.1","messages":[{"role":"user","content":"hello"}],"max_tokens":50}`

func TestGrantRefusedBeforeAnyCall(t *testing.T) {
	up := newFake(t, answerChat)
	r := newRig(t, upstream.FailoverNone, up.URL)
	res, _ := r.forward(t, caller("pa/gpt-4.1-mini", "openai/gpt-4.1"), chatBody)
	if res.Refusal == nil || res.Refusal.Status != 403 || res.Refusal.Code != gateway.CodeNotGranted || res.Refusal.Retry {
		t.Fatalf("refusal = %+v", res.Refusal)
	}
	if up.calls.Load() != 0 {
		t.Fatal("the upstream was called for a model outside the grant")
	}
	res, _ = r.forward(t, caller("pa/gpt-4.1"), `{"model":"gpt-5","messages":[]}`)
	if res.Refusal == nil || res.Refusal.Status != 404 || res.Refusal.Code != gateway.CodeModelNotRouted {
		t.Fatalf("unrouted model: %+v", res.Refusal)
	}
}

func TestReserveAndSettleFromUsage(t *testing.T) {
	up := newFake(t, func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer sk-a" || r.Header.Get("Openai-Organization") != "org-1" {
			http.Error(w, "bad headers", 400)
			return
		}
		answerChat(w, r)
	})
	r := newRig(t, upstream.FailoverNone, up.URL)
	res, rec := r.forward(t, caller("pa/gpt-4.1"), chatBody)
	if res.Refusal != nil || rec.Code != 200 || rec.Body.String() != chatAnswer {
		t.Fatalf("answer %d %q, refusal %+v", rec.Code, rec.Body, res.Refusal)
	}
	// Reserved: body bytes at $2/M plus 50 output tokens at $8/M.
	wantReserved := int64(price.MaxCost(int64(len(chatBody)), 50))
	if res.Reserved != wantReserved || res.Settled != chatAnswerCost {
		t.Fatalf("reserved %d settled %d; want %d and %d", res.Reserved, res.Settled, wantReserved, chatAnswerCost)
	}
	rows, err := ledger.Of(r.db).Spend(t.Context(), "slot-1", "k1", time.Time{})
	if err != nil || len(rows) != 1 || rows[0].Settled != chatAnswerCost || rows[0].Open != 0 || rows[0].Model != "pa/gpt-4.1" {
		t.Fatalf("spend = %+v, %v", rows, err)
	}
}

func TestStreamUsageAskedUpstreamAndStrippedForTheClient(t *testing.T) {
	up := newFake(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, "data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"hi\"}}],\"usage\":null}\n\n")
		io.WriteString(w, "data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"choices\":[],\"usage\":{\"prompt_tokens\":100,\"completion_tokens\":20,\"prompt_tokens_details\":{\"cached_tokens\":40}}}\n\n")
		io.WriteString(w, "data: [DONE]\n\n")
	})
	r := newRig(t, upstream.FailoverNone, up.URL)
	body := `{"model":"gpt-4.1","stream":true,"messages":[{"role":"user","content":"hello"}]}`
	res, rec := r.forward(t, caller("pa/gpt-4.1"), body)
	sent := <-up.bodies
	var got struct {
		StreamOptions struct {
			IncludeUsage bool `json:"include_usage"`
		} `json:"stream_options"`
	}
	if err := json.Unmarshal(sent, &got); err != nil || !got.StreamOptions.IncludeUsage {
		t.Fatalf("upstream body %s does not ask for usage", sent)
	}
	if strings.Contains(rec.Body.String(), "prompt_tokens") || !strings.Contains(rec.Body.String(), "[DONE]") {
		t.Fatalf("client stream:\n%s", rec.Body)
	}
	// Nor the "usage": null the provider writes in every chunk only when asked.
	if want := "data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"hi\"}}]}\n\n"; !strings.Contains(rec.Body.String(), want) {
		t.Fatalf("client stream keeps the null usage:\n%s", rec.Body)
	}
	if res.Settled != chatAnswerCost {
		t.Fatalf("settled %d, want %d", res.Settled, chatAnswerCost)
	}
	// A client that asked for usage gets it.
	body = `{"model":"gpt-4.1","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"hello"}]}`
	if _, rec = r.forward(t, caller("pa/gpt-4.1"), body); !strings.Contains(rec.Body.String(), "prompt_tokens") || !strings.Contains(rec.Body.String(), `"usage":null`) {
		t.Fatalf("the usage chunk the client asked for is missing:\n%s", rec.Body)
	}
}

func TestDefiniteFailover(t *testing.T) {
	down := newFake(t, func(w http.ResponseWriter, r *http.Request) { http.Error(w, `{"error":{"message":"boom"}}`, 503) })
	up := newFake(t, answerChat)
	// Connection refused, then a 503, then an answer.
	r := newRig(t, upstream.FailoverDefinite, refusedURL(t), down.URL, up.URL)
	res, rec := r.forward(t, caller("pa/gpt-4.1", "pb/gpt-4.1", "pc/gpt-4.1"), chatBody)
	if rec.Code != 200 || res.Route != "c" {
		t.Fatalf("answer %d from %q: %+v", rec.Code, res.Route, res.Attempts)
	}
	if outs := outcomes(res); outs != "definite definite answered" {
		t.Fatalf("attempts: %s", outs)
	}
	if res.Attempts[0].Settled != 0 || res.Attempts[1].Settled != 0 || res.Settled != chatAnswerCost {
		t.Fatalf("failed attempts were charged: %+v", res.Attempts)
	}
	// failover: none passes the upstream's own 503 on.
	r = newRig(t, upstream.FailoverNone, down.URL, up.URL)
	res, rec = r.forward(t, caller("pa/gpt-4.1", "pb/gpt-4.1"), chatBody)
	if rec.Code != 503 || !strings.Contains(rec.Body.String(), "boom") || len(res.Attempts) != 1 {
		t.Fatalf("failover none: %d %q %+v", rec.Code, rec.Body, res.Attempts)
	}
	// Without the caller's grant for the next model there is no failover.
	r = newRig(t, upstream.FailoverDefinite, down.URL, up.URL)
	if _, rec = r.forward(t, caller("pa/gpt-4.1"), chatBody); rec.Code != 503 {
		t.Fatalf("failover to an ungranted model: %d", rec.Code)
	}
}

func outcomes(res gateway.Result) string {
	var s []string
	for _, a := range res.Attempts {
		s = append(s, a.Outcome)
	}
	return strings.Join(s, " ")
}

func TestUncertainFailoverNeedsPlanAndGrant(t *testing.T) {
	// Sent, never answered: the handler waits until the gateway gives up.
	slow := newFake(t, func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() })
	up := newFake(t, answerChat)
	both := caller("pa/gpt-4.1", "pb/gpt-4.1")

	// Nothing may follow on a definite plan: the attempt waits for its
	// route's timeout (attempt_timeout only decides a failover), and the
	// client is told not to retry what may have run.
	r := newRig(t, upstream.FailoverDefinite, slow.URL, up.URL)
	r = newRigTimeout(t, r.db, upstream.FailoverDefinite, "400ms", slow.URL, up.URL)
	res, _ := r.forward(t, both, chatBody)
	if res.Refusal == nil || res.Refusal.Status != 502 || res.Refusal.Code != gateway.CodeUpstreamIncomplete || res.Refusal.Retry ||
		up.calls.Load() != 0 || outcomes(res) != "uncertain" || res.Settled != res.Reserved {
		t.Fatalf("definite plan after a timeout: %+v %s, settled %d of %d", res.Refusal, outcomes(res), res.Settled, res.Reserved)
	}
	r = newRigTimeout(t, r.db, upstream.FailoverUncertain, "400ms", slow.URL, up.URL)
	if res, _ = r.forward(t, caller("pa/gpt-4.1"), chatBody); res.Refusal == nil || up.calls.Load() != 0 {
		t.Fatalf("uncertain plan without the caller's grant moved on: %s", outcomes(res))
	}
	res, rec := r.forward(t, both, chatBody)
	if rec.Code != 200 || outcomes(res) != "uncertain answered" {
		t.Fatalf("uncertain plan with the grant: %d %s", rec.Code, outcomes(res))
	}
	// A stream broken before its first event is uncertain too.
	broken := newFake(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(200)
		w.(http.Flusher).Flush()
		panic(http.ErrAbortHandler)
	})
	r = newRig(t, upstream.FailoverUncertain, broken.URL, up.URL)
	stream := `{"model":"gpt-4.1","stream":true,"messages":[{"role":"user","content":"hello"}]}`
	res, _ = r.forward(t, both, stream)
	if outcomes(res) != "uncertain answered" {
		t.Fatalf("broken stream: %s", outcomes(res))
	}
}

func TestRateLimitHoldsTheModelEverywhere(t *testing.T) {
	limited := newFake(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Retry-After", "120")
		http.Error(w, `{"error":{"message":"slow down","type":"rate_limit_error"}}`, 429)
	})
	up := newFake(t, answerChat)
	r := newRig(t, upstream.FailoverDefinite, limited.URL, up.URL)
	both := caller("pa/gpt-4.1", "pb/gpt-4.1")
	res, rec := r.forward(t, both, chatBody)
	if rec.Code != 200 || outcomes(res) != "rate_limited answered" {
		t.Fatalf("first request: %d %s", rec.Code, outcomes(res))
	}
	until, err := ledger.Of(r.db).HeldUntil(t.Context(), "pa/gpt-4.1")
	if err != nil || time.Until(until) < 100*time.Second {
		t.Fatalf("held until %v, %v; want about two minutes", until, err)
	}
	// The held identity is not called again, by this gateway or another
	// one on the same store.
	other := newRigOn(t, r.db, upstream.FailoverDefinite, limited.URL, up.URL)
	for _, g := range []*rig{r, other} {
		res, rec = g.forward(t, both, chatBody)
		if rec.Code != 200 || outcomes(res) != "held answered" {
			t.Fatalf("while held: %d %s", rec.Code, outcomes(res))
		}
	}
	if limited.calls.Load() != 1 {
		t.Fatalf("the held model was called %d times", limited.calls.Load())
	}
	// With nowhere to go, the client is told when to come back.
	alone := newRigOn(t, r.db, upstream.FailoverNone, limited.URL)
	res, _ = alone.forward(t, caller("pa/gpt-4.1"), chatBody)
	if res.Refusal == nil || res.Refusal.Status != 429 || res.Refusal.RetryAfter == "" || !res.Refusal.Retry {
		t.Fatalf("held, no failover: %+v", res.Refusal)
	}
}

func TestBudgetExceededRefusesBeforeTheCall(t *testing.T) {
	up := newFake(t, answerChat)
	r := newRig(t, upstream.FailoverNone, up.URL)
	r.conf.Budgets.Key = upstream.Limit{Day: 1000}
	r.gw = gateway.New(gateway.Config{Upstream: r.conf, Ledger: ledger.Of(r.db), Holds: ledger.Of(r.db), Client: &http.Client{}})
	big := `{"model":"gpt-4.1","messages":[{"role":"user","content":"` + strings.Repeat("x", 2000) + `"}]}`
	res, _ := r.forward(t, caller("pa/gpt-4.1"), big)
	if res.Refusal == nil || res.Refusal.Status != 429 || res.Refusal.Code != "budget_exceeded" || res.Refusal.Retry {
		t.Fatalf("refusal = %+v", res.Refusal)
	}
	if up.calls.Load() != 0 {
		t.Fatal("the upstream was called past the budget")
	}
	// A request that fits is served and leaves room by its settlement.
	res, rec := r.forward(t, caller("pa/gpt-4.1"), chatBody)
	if rec.Code != 200 || res.Settled != chatAnswerCost {
		t.Fatalf("%d, settled %d", rec.Code, res.Settled)
	}
}

func TestFailoverStepAsksForItsOwnModel(t *testing.T) {
	up := newFake(t, answerChat)
	c := upstream.Config{
		Routes: map[string]upstream.Route{
			"a": {Kind: upstream.KindOpenAI, BaseURL: refusedURL(t), Models: []string{"gpt-4.1"}},
			"b": {Kind: upstream.KindOpenAI, Provider: "backup", BaseURL: up.URL, Models: []string{"gpt-4.1-mini"}}},
		Plans: map[string]upstream.Plan{"main": {Failover: upstream.FailoverDefinite, Models: map[string][]upstream.Step{
			"gpt-4.1": {{Route: "a"}, {Route: "b", Model: "gpt-4.1-mini"}}}}},
		Prices: map[string]upstream.Price{"openai/gpt-4.1": price, "backup/gpt-4.1-mini": price},
	}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	db, err := store.Open(t.Context(), "sqlite:"+filepath.Join(t.TempDir(), "gw.db"), "")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	r := &rig{gw: gateway.New(gateway.Config{Upstream: c, Ledger: ledger.Of(db), Holds: ledger.Of(db)}), db: db}
	res, rec := r.forward(t, caller("openai/gpt-4.1", "backup/gpt-4.1-mini"), chatBody)
	if rec.Code != 200 {
		t.Fatalf("%d %s %+v", rec.Code, outcomes(res), res.Refusal)
	}
	if sent := <-up.bodies; !bytes.Contains(sent, []byte(`"model":"gpt-4.1-mini"`)) || !bytes.Contains(sent, []byte(`"max_tokens":50`)) {
		t.Fatalf("the failover step sent %s", sent)
	}
}

// TestNoRetryOnceAnAttemptMayHaveRun: after a first attempt that may have
// run (sent, no headers within attempt_timeout) moved on, a second that
// certainly did not run leaves the gateway's own 502 upstream_incomplete,
// not to be retried, and the first attempt settled at its reservation;
// upstream_unreachable, retry allowed, is for a request nothing was sent
// of.
func TestNoRetryOnceAnAttemptMayHaveRun(t *testing.T) {
	slow := newFake(t, func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() })
	r := newRig(t, upstream.FailoverUncertain, slow.URL, refusedURL(t))
	res, _ := r.forward(t, caller("pa/gpt-4.1", "pb/gpt-4.1"), chatBody)
	if res.Refusal == nil || res.Refusal.Status != 502 || res.Refusal.Code != gateway.CodeUpstreamIncomplete || res.Refusal.Retry ||
		outcomes(res) != "uncertain definite" || res.Attempts[0].Settled != res.Attempts[0].Reserved || res.Attempts[1].Settled != 0 {
		t.Fatalf("refusal %+v, attempts %+v", res.Refusal, res.Attempts)
	}
	r = newRig(t, upstream.FailoverUncertain, refusedURL(t))
	if res, _ = r.forward(t, caller("pa/gpt-4.1"), chatBody); res.Refusal == nil || res.Refusal.Code != gateway.CodeUpstreamFailed || !res.Refusal.Retry {
		t.Fatalf("nothing sent: %+v", res.Refusal)
	}
}
