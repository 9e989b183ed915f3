package executorgate_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/caduceus-dev/caduceus/audit"
	"github.com/caduceus-dev/caduceus/broker/paper"
	"github.com/caduceus-dev/caduceus/contract"
	"github.com/caduceus-dev/caduceus/executor"
	"github.com/caduceus-dev/caduceus/executor/executorgate"
	"github.com/caduceus-dev/caduceus/executor/executortest"
	"github.com/caduceus-dev/caduceus/server"
)

// tickRoute is the gate's tick handler over the executor package's base
// paper scenario and skills, with a cron caller.
func tickRoute(t *testing.T) (server.HandlerFunc, *paper.Sim) {
	t.Helper()
	g, sim := tickGate(t)
	rs := g.Routes()
	if len(rs) != 1 || rs[0].Pattern != "POST /v1/executor/ticks" || rs[0].Scope != contract.ScopeOperate || !rs[0].OwnIdempotency {
		t.Fatalf("routes %+v", rs)
	}
	return rs[0].Handler, sim
}

// tickGate is the gate over the executor package's base paper scenario and
// skills.
func tickGate(t *testing.T) (*executorgate.Gate, *paper.Sim) {
	t.Helper()
	td := filepath.Join("..", "testdata")
	raw, err := os.ReadFile(filepath.Join(td, "brokers", "base.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	sc, err := paper.ParseScenario(raw)
	if err != nil {
		t.Fatal(err)
	}
	now, _, _ := sc.NowTime()
	sc.Now = ""
	sim, err := paper.New(sc, func() time.Time { return now })
	if err != nil {
		t.Fatal(err)
	}
	ex := &executor.Executor{Broker: sim, Store: executortest.NewMemory(), Audit: audit.NewMemory(), Skills: filepath.Join(td, "skills"),
		Now: func() time.Time { return now }}
	return executorgate.New(ex), sim
}

var cron = contract.Caller{
	Identity:   contract.Identity{TenantSlot: "slot-1", Subject: "usr_00000000000000000000000000000007", Surface: contract.SurfaceAPI, Trust: contract.TrustRouter},
	Scopes:     []contract.Scope{contract.ScopeOperate},
	RunContext: contract.RunCron,
	Harness:    "autotrader",
}

const buyNVDA = `{"strategy":"momentum","intents":[{"symbol":"NVDA","side":"buy","quantity_type":"shares","qty":1,"order_type":"market","intent_price":100.05,"max_slippage_pct":1}]}`

func post(t *testing.T, h server.HandlerFunc, body, key string) (*httptest.ResponseRecorder, *server.Call, error) {
	t.Helper()
	r := httptest.NewRequest(http.MethodPost, "/v1/executor/ticks", strings.NewReader(body))
	if key != "" {
		r.Header.Set("Idempotency-Key", key)
	}
	w := httptest.NewRecorder()
	c := &server.Call{Caller: cron}
	err := h(w, r, c)
	return w, c, err
}

// TestTickRouteKeyFromHeaderOrBody: the Idempotency-Key header keys the
// tick as the body's idempotency_key does; a repeat answers the stored
// envelope marked Idempotent-Replayed; a header and a body that name
// different keys are refused before any tick.
func TestTickRouteKeyFromHeaderOrBody(t *testing.T) {
	h, sim := tickRoute(t)
	body := `{"payload":` + buyNVDA + `}`
	w, c, err := post(t, h, body, "key-00000001")
	var env executor.Envelope
	if err != nil || w.Code != http.StatusOK || json.Unmarshal(w.Body.Bytes(), &env) != nil || env.IdempotencyKey != "key-00000001" || env.Replay {
		t.Fatalf("first: %d %s, %v", w.Code, w.Body, err)
	}
	if !c.Audited || c.Resource != "tick/"+env.TickID || c.Outcome != "" || w.Header().Get("Idempotent-Replayed") != "" {
		t.Errorf("first call %+v, replayed header %q", c, w.Header().Get("Idempotent-Replayed"))
	}
	// The same key in the body (and the header agreeing) replays.
	for _, key := range []string{"", "key-00000001"} {
		w, c, err = post(t, h, `{"payload":`+buyNVDA+`,"idempotency_key":"key-00000001"}`, key)
		if err != nil || w.Code != http.StatusOK || w.Header().Get("Idempotent-Replayed") != "true" || !c.Audited {
			t.Fatalf("repeat (header %q): %d %s %v", key, w.Code, w.Header(), err)
		}
	}
	if n := len(sim.AllOrders()); n != 1 {
		t.Fatalf("%d orders, want 1", n)
	}
	w, c, err = post(t, h, `{"payload":`+buyNVDA+`,"idempotency_key":"key-00000002"}`, "key-00000001")
	if e := contract.AsError(err); e == nil || e.Code != "bad_idempotency_key" || e.Field != "Idempotency-Key" || w.Body.Len() != 0 || c.Audited {
		t.Fatalf("header and body disagree: %v, %q", err, w.Body)
	}
}

// TestTickRouteAbortIsDenyWithTheEnvelope: an aborted tick answers 200
// with its envelope and is recorded deny with the abort as reason; input
// that is not a tick is refused invalid.
func TestTickRouteAbortIsDenyWithTheEnvelope(t *testing.T) {
	h, _ := tickRoute(t)
	w, c, err := post(t, h, `{"payload":{"strategy":"nosuch","intents":[]}}`, "")
	if err != nil || w.Code != http.StatusOK || c.Outcome != contract.OutcomeDeny || c.Reason != executor.AbortManifestMissing ||
		!strings.Contains(w.Body.String(), `"aborted":"manifest_missing"`) || !strings.HasPrefix(c.Resource, "tick/") {
		t.Fatalf("abort: %d %s %+v %v", w.Code, w.Body, c, err)
	}
	for _, bad := range []string{`{"payload":{},"extra":1}`, `not json`, `{"payload":{"strategy":"x","intents":[]},"idempotency_key":"bad key"}`} {
		w, c, err := post(t, h, bad, "")
		if contract.KindOf(err) != contract.KindInvalid || w.Body.Len() != 0 || c.Resource != "" {
			t.Errorf("%s: %v, %+v", bad, err, c)
		}
	}
}

// TestNotConfiguredAnswersWhatToConfigure: the gate of a server without an
// executor answers its configuration error on the route and the tool.
func TestNotConfiguredAnswersWhatToConfigure(t *testing.T) {
	want := contract.Invalidf("executor_not_configured", "set the executor up")
	g := executorgate.NotConfigured(want)
	if g.Name() != "executor" || g.Jobs() != nil {
		t.Fatalf("name %q, jobs %v", g.Name(), g.Jobs())
	}
	if err := g.Routes()[0].Handler(httptest.NewRecorder(), httptest.NewRequest(http.MethodPost, "/v1/executor/ticks", nil), &server.Call{}); err != want {
		t.Errorf("route: %v", err)
	}
	if out, err := g.Tools()[0].Call(t.Context(), cron, nil); err != want || out != nil {
		t.Errorf("tool: %v, %v", out, err)
	}
	if tools := executorgate.New(nil).Tools(); len(tools) != 1 || tools[0].Name != "execute_intents" || tools[0].Scope != contract.ScopeOperate || !tools[0].Audited {
		t.Errorf("tools %+v", tools)
	}
}

// TestTickAnswersCarryTheContractVersion: the envelope POST
// /v1/executor/ticks and the MCP tool execute_intents answer carries
// contract_version (contract.Version), a replay's and an abort's too, and
// is a valid envelope.
func TestTickAnswersCarryTheContractVersion(t *testing.T) {
	schema, err := contract.LoadSchema("executor.schema.json#/$defs/envelope")
	if err != nil {
		t.Fatal(err)
	}
	check := func(what string, body []byte) {
		t.Helper()
		var wire map[string]any
		if err := json.Unmarshal(body, &wire); err != nil || wire["contract_version"] != contract.Version {
			t.Errorf("%s: contract_version %v (%v), want %q\n%s", what, wire["contract_version"], err, contract.Version, body)
		}
		if err := schema.ValidateJSON(body); err != nil {
			t.Errorf("%s: %v\n%s", what, err, body)
		}
	}
	g, _ := tickGate(t)
	h := g.Routes()[0].Handler
	for _, c := range []struct{ what, body, key string }{
		{"HTTP tick", `{"payload":` + buyNVDA + `}`, "cv-key-00001"},
		{"HTTP replay", `{"payload":` + buyNVDA + `}`, "cv-key-00001"},
		{"HTTP abort", `{"payload":{"strategy":"nosuch","intents":[]}}`, ""},
	} {
		w, _, err := post(t, h, c.body, c.key)
		if err != nil || w.Code != http.StatusOK {
			t.Fatalf("%s: %d %s, %v", c.what, w.Code, w.Body, err)
		}
		check(c.what, w.Body.Bytes())
	}
	tool := g.Tools()[0]
	for _, what := range []string{"MCP tick", "MCP replay"} {
		out, err := tool.Call(t.Context(), cron, json.RawMessage(`{"payload":`+buyNVDA+`,"idempotency_key":"cv-key-00002"}`))
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		b, err := json.Marshal(out)
		if err != nil {
			t.Fatal(err)
		}
		check(what, b)
	}
}
