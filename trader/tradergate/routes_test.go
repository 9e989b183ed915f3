package tradergate_test

import (
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/caduceus-dev/caduceus/contract"
	"github.com/caduceus-dev/caduceus/server"
	"github.com/caduceus-dev/caduceus/trader"
	"github.com/caduceus-dev/caduceus/trader/tradergate"
	"github.com/caduceus-dev/caduceus/trader/tradertest"
)

var (
	hermes   = tradertest.Caller(tradertest.T1, "hermes", contract.ScopeOperate, contract.ScopeRoute)
	operator = tradertest.Caller(tradertest.T1, "operator", contract.ScopeConfigure, contract.ScopeRoute)
)

// gateOver is the trader gate over the conformance suite's seeded memory
// store, its handlers by pattern.
func gateOver(t *testing.T) (map[string]server.HandlerFunc, *tradergate.Gate) {
	t.Helper()
	mem := tradertest.NewMemory()
	tradertest.Seed(t, mem, tradertest.T1)
	now := time.Date(2026, 4, 16, 20, 15, 0, 0, time.UTC)
	svc, err := trader.New(mem, trader.Options{Now: func() time.Time { now = now.Add(time.Second); return now }, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	g := tradergate.New(svc)
	hs := map[string]server.HandlerFunc{}
	for _, r := range g.Routes() {
		hs[r.Pattern] = r.Handler
	}
	return hs, g
}

type call struct {
	w   *httptest.ResponseRecorder
	c   *server.Call
	err error
}

func do(h server.HandlerFunc, caller contract.Caller, method, target, body string, set func(*http.Request)) call {
	r := httptest.NewRequest(method, target, strings.NewReader(body))
	if set != nil {
		set(r)
	}
	w := httptest.NewRecorder()
	c := &server.Call{Caller: caller}
	err := h(w, r, c)
	return call{w, c, err}
}

func decision(set map[string]any) string {
	m := map[string]any{
		"decision_id": "dec_2026_04_16_001", "concern_id": tradertest.Concern, "account_id": tradertest.Account, "market_symbol": tradertest.Market,
		"action": "switch", "target_strategy_id": tradertest.StrategyB, "expected_active_strategy_id": tradertest.StrategyA, "risk_mode": "normal",
		"reason": "trend strategy still fits", "confidence": 0.83, "dry_run": false, "override": false, "requested_at": "2026-04-16T20:15:00Z",
	}
	for k, v := range set {
		m[k] = v
	}
	b, _ := json.Marshal(m)
	return string(b)
}

// TestApplyRouteStatusAndOutcome: every decision answers 200 with its
// response and is audited by the trader; a refusal is recorded deny; what
// is not a request at all (bad JSON, too large) answers 400.
func TestApplyRouteStatusAndOutcome(t *testing.T) {
	hs, _ := gateOver(t)
	h := hs["POST /v1/trader/decisions"]
	for _, c := range []struct {
		name, body string
		code       int
		deny       bool
	}{
		{"applied", decision(nil), http.StatusOK, false},
		{"noop replay", decision(nil), http.StatusOK, false},
		{"rejected", decision(map[string]any{"decision_id": "dec_2026_04_16_002", "target_strategy_id": tradertest.StrategyX}), http.StatusOK, true},
		{"bad JSON", `{"decision_id":`, http.StatusBadRequest, true},
		{"too large", `{"reason":"` + strings.Repeat("x", trader.MaxRequestBytes) + `"}`, http.StatusBadRequest, true},
	} {
		got := do(h, hermes, http.MethodPost, "/v1/trader/decisions", c.body, nil)
		var resp trader.Response
		if got.err != nil || got.w.Code != c.code || json.Unmarshal(got.w.Body.Bytes(), &resp) != nil {
			t.Fatalf("%s: %d %.200s, %v", c.name, got.w.Code, got.w.Body, got.err)
		}
		if !got.c.Audited || got.c.Resource != "decision/"+resp.DecisionID || (got.c.Outcome == contract.OutcomeDeny) != c.deny {
			t.Errorf("%s: call %+v (status %s)", c.name, got.c, resp.Status)
		}
		// Every answer, a refusal's and a replay's too, carries
		// contract_version and is a valid response.
		var wire map[string]any
		_ = json.Unmarshal(got.w.Body.Bytes(), &wire)
		if wire["contract_version"] != contract.Version {
			t.Errorf("%s: contract_version %v, want %q", c.name, wire["contract_version"], contract.Version)
		}
		if err := trader.ValidateResponse(got.w.Body.Bytes()); err != nil {
			t.Errorf("%s: %v\n%s", c.name, err, got.w.Body)
		}
	}
	if got := do(h, operator, http.MethodPost, "/v1/trader/decisions", decision(nil), nil); contract.KindOf(got.err) != contract.KindDeny || got.c.Audited {
		t.Errorf("without the operate scope: %v, %+v", got.err, got.c)
	}
}

// TestReadRoutes: a decision reads back (unknown: not found), the history
// is a list even when empty and takes a limit of 1 to 1000, a strategy
// carries its revision as ETag, and each names what it read.
func TestReadRoutes(t *testing.T) {
	hs, _ := gateOver(t)
	id := func(v string) func(*http.Request) { return func(r *http.Request) { r.SetPathValue("id", v) } }
	if got := do(hs["GET /v1/trader/history"], hermes, http.MethodGet, "/v1/trader/history?concern="+tradertest.Concern, "", nil); got.err != nil ||
		strings.TrimSpace(got.w.Body.String()) != `{"attempts":[]}` || got.c.Resource != "history/"+tradertest.Concern {
		t.Fatalf("empty history: %s, %v, %+v", got.w.Body, got.err, got.c)
	}
	for _, limit := range []string{"0", "1001", "x"} {
		if got := do(hs["GET /v1/trader/history"], hermes, http.MethodGet, "/v1/trader/history?limit="+limit, "", nil); contract.KindOf(got.err) != contract.KindInvalid {
			t.Errorf("limit %s: %v", limit, got.err)
		}
	}
	long := strings.Repeat("d", 150)
	if got := do(hs["GET /v1/trader/decisions/{id}"], hermes, http.MethodGet, "/v1/trader/decisions/x", "", id(long)); contract.KindOf(got.err) != contract.KindNotFound ||
		got.c.Resource != "decision/"+long[:100] {
		t.Errorf("unknown decision: %v, resource %q", got.err, got.c.Resource)
	}
	if got := do(hs["POST /v1/trader/decisions"], hermes, http.MethodPost, "/v1/trader/decisions", decision(nil), nil); got.err != nil {
		t.Fatal(got.err)
	}
	got := do(hs["GET /v1/trader/decisions/{id}"], hermes, http.MethodGet, "/v1/trader/decisions/x", "", id("dec_2026_04_16_001"))
	var v trader.DecisionView
	if got.err != nil || json.Unmarshal(got.w.Body.Bytes(), &v) != nil || v.Decision == nil || len(v.Attempts) != 1 {
		t.Fatalf("decision: %s, %v", got.w.Body, got.err)
	}
	got = do(hs["GET /v1/trader/history"], hermes, http.MethodGet, "/v1/trader/history?limit=1", "", nil)
	if got.err != nil || !strings.Contains(got.w.Body.String(), "dec_2026_04_16_001") || got.c.Resource != "history/" {
		t.Errorf("history: %s, %v", got.w.Body, got.err)
	}
	got = do(hs["GET /v1/trader/strategies/{id}"], hermes, http.MethodGet, "/", "", id(tradertest.StrategyB))
	var st trader.Strategy
	if got.err != nil || json.Unmarshal(got.w.Body.Bytes(), &st) != nil || got.w.Header().Get("ETag") != strconv.FormatInt(int64(st.Revision), 10) ||
		st.Status != trader.StatusActive || got.c.Resource != "strategy/"+tradertest.StrategyB {
		t.Errorf("strategy B after the switch: %s, ETag %q, %v", got.w.Body, got.w.Header().Get("ETag"), got.err)
	}
	if got := do(hs["GET /v1/trader/strategies/{id}"], hermes, http.MethodGet, "/", "", id(tradertest.StrategyB[:8])); contract.KindOf(got.err) != contract.KindNotFound || got.w.Header().Get("ETag") != "" {
		t.Errorf("unknown strategy: %v", got.err)
	}
	got = do(hs["GET /v1/trader/strategies"], hermes, http.MethodGet, "/v1/trader/strategies?status=active", "", nil)
	var list trader.StrategyList
	if got.err != nil || json.Unmarshal(got.w.Body.Bytes(), &list) != nil || len(list.Strategies) != 1 || list.Strategies[0].ID != tradertest.StrategyB {
		t.Errorf("active strategies: %s, %v", got.w.Body, got.err)
	}
	got = do(hs["GET /v1/trader/concerns"], hermes, http.MethodGet, "/v1/trader/concerns", "", nil)
	if got.err != nil || !strings.Contains(got.w.Body.String(), `"concerns":[{`) || got.c.Resource != "concerns" {
		t.Errorf("concerns: %s, %v", got.w.Body, got.err)
	}
}

// TestPutRoutesAuditAndETag: a management write answers its new revision
// as ETag; the trader records every outcome itself but a deny (the caller
// lacks the scope) and an internal failure, which the server records.
func TestPutRoutesAuditAndETag(t *testing.T) {
	hs, _ := gateOver(t)
	put := hs["PUT /v1/trader/concerns/{id}"]
	set := func(rev string) func(*http.Request) {
		return func(r *http.Request) {
			r.SetPathValue("id", tradertest.Concern)
			if rev != "" {
				r.Header.Set("If-Match", rev)
			}
		}
	}
	body := `{"execution_state":"degraded"}`
	got := do(put, operator, http.MethodPut, "/", body, set("1"))
	if got.err != nil || got.w.Header().Get("ETag") != "2" || !got.c.Audited || got.c.Resource != "concern/"+tradertest.Concern {
		t.Fatalf("put concern: %s, ETag %q, %v, %+v", got.w.Body, got.w.Header().Get("ETag"), got.err, got.c)
	}
	if got := do(put, operator, http.MethodPut, "/", body, set("1")); contract.KindOf(got.err) != contract.KindConflict || !got.c.Audited || got.w.Header().Get("ETag") != "" {
		t.Errorf("stale If-Match: %v, %+v; want a conflict the trader recorded", got.err, got.c)
	}
	if got := do(put, hermes, http.MethodPut, "/", body, set("2")); contract.KindOf(got.err) != contract.KindDeny || got.c.Audited {
		t.Errorf("without the configure scope: %v, %+v; want a deny the server records", got.err, got.c)
	}
	if got := do(put, operator, http.MethodPut, "/", `{"concern_id":"other:pair","execution_state":"degraded"}`, set("2")); contract.KindOf(got.err) != contract.KindInvalid || got.c.Audited {
		t.Errorf("body and path disagree: %v, %+v", got.err, got.c)
	}
	sput := hs["PUT /v1/trader/strategies/{id}"]
	sb := do(hs["GET /v1/trader/strategies/{id}"], hermes, http.MethodGet, "/", "", func(r *http.Request) { r.SetPathValue("id", tradertest.StrategyC) })
	var st trader.Strategy
	if err := json.Unmarshal(sb.w.Body.Bytes(), &st); err != nil {
		t.Fatal(err)
	}
	st.Name = "breakout-2"
	b, _ := json.Marshal(st)
	sid := func(r *http.Request) {
		r.SetPathValue("id", tradertest.StrategyC)
		r.Header.Set("If-Match", strconv.FormatInt(int64(st.Revision), 10))
	}
	got = do(sput, operator, http.MethodPut, "/", string(b), sid)
	if got.err != nil || got.w.Header().Get("ETag") != strconv.FormatInt(int64(st.Revision)+1, 10) || !got.c.Audited || got.c.Resource != "strategy/"+tradertest.StrategyC {
		t.Fatalf("put strategy: %s, ETag %q, %v", got.w.Body, got.w.Header().Get("ETag"), got.err)
	}
	if got := do(sput, operator, http.MethodPut, "/", `{"id":`, sid); contract.KindOf(got.err) != contract.KindInvalid || got.c.Audited {
		t.Errorf("put strategy, bad body: %v, %+v", got.err, got.c)
	}
}

// TestToolsDecodeStrictly: the read tools refuse arguments they do not
// know and answer the caller's tenant's strategies.
func TestToolsDecodeStrictly(t *testing.T) {
	_, g := gateOver(t)
	tools := map[string]server.Tool{}
	for _, tl := range g.Tools() {
		tools[tl.Name] = tl
	}
	if tl := tools["apply_control_decision"]; tl.Scope != contract.ScopeOperate || !tl.Audited {
		t.Errorf("apply tool %+v", tl)
	}
	out, err := tools["list_strategies"].Call(t.Context(), hermes, json.RawMessage(`{"status":"active"}`))
	if l, ok := out.(trader.StrategyList); err != nil || !ok || len(l.Strategies) != 1 || l.Strategies[0].ID != tradertest.StrategyA {
		t.Errorf("list_strategies: %+v, %v", out, err)
	}
	out, err = tools["get_strategy"].Call(t.Context(), hermes, json.RawMessage(`{"strategy_id":"`+tradertest.StrategyB+`"}`))
	if s, ok := out.(trader.Strategy); err != nil || !ok || s.ID != tradertest.StrategyB {
		t.Errorf("get_strategy: %+v, %v", out, err)
	}
	for name, args := range map[string]string{"list_strategies": `{"colour":"red"}`, "get_strategy": `{"id":"x"}`} {
		if out, err := tools[name].Call(t.Context(), hermes, json.RawMessage(args)); contract.KindOf(err) != contract.KindInvalid || out != nil {
			t.Errorf("%s(%s) = %v, %v; want invalid", name, args, out, err)
		}
	}
	resp, err := tools["apply_control_decision"].Call(t.Context(), hermes, json.RawMessage(decision(nil)))
	if r, ok := resp.(trader.Response); err != nil || !ok || r.Status != trader.Applied {
		t.Errorf("apply_control_decision: %+v, %v", resp, err)
	}
}
