package server_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/caduceus-dev/caduceus/audit"
	"github.com/caduceus-dev/caduceus/auth"
	"github.com/caduceus-dev/caduceus/contract"
	"github.com/caduceus-dev/caduceus/server"
	"github.com/caduceus-dev/caduceus/shim"
	"github.com/caduceus-dev/caduceus/shim/gateway"
	"github.com/caduceus-dev/caduceus/shim/ledger"
	"github.com/caduceus-dev/caduceus/shim/shimgate"
	"github.com/caduceus-dev/caduceus/shim/shimsql"
	"github.com/caduceus-dev/caduceus/shim/upstream"
	"github.com/caduceus-dev/caduceus/shim/wire"
	"github.com/caduceus-dev/caduceus/store"
	"github.com/caduceus-dev/caduceus/store/storetest"
)

// grantsEnv is a server with the shim forwarding through a gateway to a
// fake provider serving openai/gpt-4o and openai/gpt-5, and keys of
// slot-1: an admin key, and a route key without grants of its own.
type grantsEnv struct {
	db    *store.DB
	srv   *server.Server
	admin string // slot-1, admin
	route string // slot-1, route, no grants of its own
}

func newGrantsEnv(t *testing.T, db *store.DB) *grantsEnv {
	t.Helper()
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var in struct {
			Model string `json:"model"`
		}
		_ = json.NewDecoder(r.Body).Decode(&in)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(wire.DirectJSON(wire.ChatCompletions, wire.Direct{ID: "up1", Model: in.Model, Text: "from upstream", Created: 1}))
	}))
	t.Cleanup(up.Close)
	price := upstream.Price{Input: 2_000_000, Output: 8_000_000, MaxOutputTokens: 4096}
	conf := upstream.Config{
		Routes: map[string]upstream.Route{"openai": {Kind: upstream.KindOpenAI, BaseURL: up.URL, Models: []string{"gpt-4o", "gpt-5"}}},
		Plans: map[string]upstream.Plan{"main": {Failover: upstream.FailoverNone, Models: map[string][]upstream.Step{
			"gpt-4o": {{Route: "openai"}}, "gpt-5": {{Route: "openai"}}}}},
		Prices: map[string]upstream.Price{"openai/gpt-4o": price, "openai/gpt-5": price},
	}
	if err := conf.Validate(); err != nil {
		t.Fatal(err)
	}
	gw := gateway.New(gateway.Config{Upstream: conf, Ledger: ledger.Of(db), Holds: ledger.Of(db)})
	// Cached keys: a grant change must reach the next request at once.
	keys := auth.NewService(db.Keys(), nil, auth.DefaultCacheTTL)
	e := &grantsEnv{db: db}
	for _, k := range []struct {
		token *string
		scope contract.Scope
	}{{&e.admin, contract.ScopeAdmin}, {&e.route, contract.ScopeRoute}} {
		token, _, err := keys.Create(t.Context(), auth.Spec{Tenant: "slot-1", Scopes: []contract.Scope{k.scope}})
		if err != nil {
			t.Fatal(err)
		}
		*k.token = token
	}
	svc := shim.New(shim.Config{Store: shimsql.New(db), Audit: db.Audit(), Gateway: gw})
	e.srv = server.New(server.Config{Auth: keys, Audit: db.Audit(), Records: db.Audit(), Store: db,
		Routes: shimgate.New(shimgate.Config{Service: svc, Gateway: gw}).Routes()})
	return e
}

// do sends a request with key and returns the status, the Content-Type and
// the decoded answer.
func (e *grantsEnv) do(t *testing.T, method, path, key, body string) (int, string, map[string]any) {
	t.Helper()
	req := httptest.NewRequest(method, path, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+key)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	rec := httptest.NewRecorder()
	e.srv.ServeHTTP(rec, req)
	var m map[string]any
	if err := json.Unmarshal(rec.Body.Bytes(), &m); err != nil {
		t.Fatalf("%s %s: %d, not JSON: %s", method, path, rec.Code, rec.Body)
	}
	return rec.Code, rec.Header().Get("Content-Type"), m
}

// grants reads slot-1's grants through the route.
func (e *grantsEnv) grants(t *testing.T) string {
	t.Helper()
	code, _, m := e.do(t, "GET", "/v1/admin/tenants/slot-1/grants", e.admin, "")
	if code != 200 || m["tenant"] != "slot-1" {
		t.Fatalf("GET grants: %d %v", code, m)
	}
	b, _ := json.Marshal(m["grants"])
	return string(b)
}

// TestTenantGrantsRoutes: an admin sets, reads back and clears its tenant's
// grants; a key without the admin scope, another tenant's admin and bad
// input are refused as problems, change nothing, and are audited.
func TestTenantGrantsRoutes(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		e := newGrantsEnv(t, db)
		if got := e.grants(t); got != `[]` {
			t.Fatalf("grants before any = %s", got)
		}
		// Set: normalized like the CLI's (sorted, without duplicates).
		code, _, m := e.do(t, "PUT", "/v1/admin/tenants/slot-1/grants", e.admin, `{"grants":["openai/gpt-5","anthropic/claude-sonnet-4-5","openai/gpt-5"]}`)
		const set = `["anthropic/claude-sonnet-4-5","openai/gpt-5"]`
		if b, _ := json.Marshal(m["grants"]); code != 200 || m["tenant"] != "slot-1" || string(b) != set {
			t.Fatalf("PUT grants: %d %v", code, m)
		}
		if got := e.grants(t); got != set {
			t.Fatalf("grants read back = %s", got)
		}
		if got, err := db.Keys().TenantGrants(t.Context(), "slot-1"); err != nil || len(got) != 2 {
			t.Fatalf("the store holds %v, %v", got, err)
		}

		refusals := []struct {
			name, method, path, key, body string
			status                        int
			code, field, says             string
		}{
			{"not a slot", "PUT", "/v1/admin/tenants/tenant-1/grants", e.admin, `{"grants":[]}`, 400, "bad_tenant", "tenant", "slot-N"},
			{"the reserved tenant", "PUT", "/v1/admin/tenants/slot-0/grants", e.admin, `{"grants":[]}`, 400, "reserved_tenant", "tenant", "slot-0"},
			{"read another tenant", "GET", "/v1/admin/tenants/slot-2/grants", e.admin, "", 403, "cross_tenant", "", "slot-2"},
			{"set another tenant", "PUT", "/v1/admin/tenants/slot-2/grants", e.admin, `{"grants":[]}`, 403, "cross_tenant", "", "slot-2"},
			{"read without admin", "GET", "/v1/admin/tenants/slot-1/grants", e.route, "", 403, "missing_scope", "", "admin"},
			{"set without admin", "PUT", "/v1/admin/tenants/slot-1/grants", e.route, `{"grants":[]}`, 403, "missing_scope", "", "admin"},
			{"no provider", "PUT", "/v1/admin/tenants/slot-1/grants", e.admin, `{"grants":["openai/gpt-4o","gpt-4o"]}`, 400, "bad_grant", "grants", `"gpt-4o" is not provider/model`},
			{"a wildcard inside a model", "PUT", "/v1/admin/tenants/slot-1/grants", e.admin, `{"grants":["openai/gpt-*-mini"]}`, 400, "bad_grant", "grants", "one '*', at the end"},
			{"a contributor model", "PUT", "/v1/admin/tenants/slot-1/grants", e.admin, `{"grants":["openai/acme-contributor-7b"]}`, 400, "bad_grant", "grants", "contributor"},
			{"an empty grant", "PUT", "/v1/admin/tenants/slot-1/grants", e.admin, `{"grants":[""]}`, 400, "bad_grant", "grants", "provider/model"},
			{"a space", "PUT", "/v1/admin/tenants/slot-1/grants", e.admin, `{"grants":["openai/gpt-4o "]}`, 400, "bad_grant", "grants", "no spaces"},
			{"not JSON", "PUT", "/v1/admin/tenants/slot-1/grants", e.admin, `openai/gpt-4o`, 400, "bad_json", "", ""},
			{"a string, not a list", "PUT", "/v1/admin/tenants/slot-1/grants", e.admin, `{"grants":"openai/gpt-4o"}`, 400, "bad_json", "", "grant request"},
			{"the key route's field name", "PUT", "/v1/admin/tenants/slot-1/grants", e.admin, `{"models":["openai/gpt-4o"]}`, 400, "bad_json", "", "models"},
			{"no grants", "PUT", "/v1/admin/tenants/slot-1/grants", e.admin, `{}`, 400, "missing_grants", "grants", "[] clears"},
			{"null grants", "PUT", "/v1/admin/tenants/slot-1/grants", e.admin, `{"grants":null}`, 400, "missing_grants", "grants", "[] clears"},
		}
		for _, r := range refusals {
			code, ct, m := e.do(t, r.method, r.path, r.key, r.body)
			detail, _ := m["detail"].(string)
			field, _ := m["field"].(string)
			if code != r.status || ct != "application/problem+json" || m["code"] != r.code || field != r.field || !strings.Contains(detail, r.says) {
				t.Errorf("%s: %d %s %v", r.name, code, ct, m)
			}
			if got := e.grants(t); got != set {
				t.Fatalf("%s changed the grants to %s", r.name, got)
			}
		}

		// Clear.
		if code, _, m := e.do(t, "PUT", "/v1/admin/tenants/slot-1/grants", e.admin, `{"grants":[]}`); code != 200 || m["grants"] == nil || len(m["grants"].([]any)) != 0 {
			t.Fatalf("PUT [] : %d %v", code, m)
		}
		if got := e.grants(t); got != `[]` {
			t.Fatalf("grants after clearing = %s", got)
		}

		// One record per request, named for the tenant's grants.
		recs, err := db.Audit().Tail(t.Context(), audit.Filter{Tenant: "slot-1", Action: "keys.set_grants", Limit: 100})
		if err != nil {
			t.Fatal(err)
		}
		var outcomes []string
		for _, r := range recs {
			outcomes = append(outcomes, string(r.Outcome.Outcome)+" "+r.Outcome.Resource+" "+r.Outcome.Reason)
		}
		for _, want := range []string{
			"allow tenant/slot-1/grants ",
			"deny tenant/slot-2/grants cross_tenant",
			"deny /v1/admin/tenants/slot-1/grants missing_scope", // refused before the handler: the path
			"deny tenant/slot-1/grants bad_grant",
			"deny tenant/tenant-1/grants bad_tenant",
		} {
			if !slices.Contains(outcomes, want) {
				t.Errorf("no audit record %q in %q", want, outcomes)
			}
		}
		if n := len(recs); n != 2+14 { // two writes, 14 refused PUTs
			t.Errorf("%d keys.set_grants records; want 16: %q", n, outcomes)
		}
		var payload struct{ Grants []string }
		if err := json.Unmarshal(recs[len(recs)-1].Payload, &payload); err != nil || strings.Join(payload.Grants, ",") != "anthropic/claude-sonnet-4-5,openai/gpt-5" {
			t.Errorf("the first write's record holds %s (%v)", recs[len(recs)-1].Payload, err)
		}
	})
}

// TestTenantGrantReachesTheGateway: a key without grants of its own may use
// a model granted to its tenant through the route, at once (its cached key
// is dropped), and is refused the models not granted and, after the grants
// are cleared, the one it had.
func TestTenantGrantReachesTheGateway(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		e := newGrantsEnv(t, db)
		chat := func(model string) (int, map[string]any) {
			code, _, m := e.do(t, "POST", "/v1/chat/completions", e.route, `{"model":"`+model+`","messages":[{"role":"user","content":"hi"}]}`)
			return code, m
		}
		errCode := func(m map[string]any) any {
			o, _ := m["error"].(map[string]any)
			return o["code"]
		}
		if code, m := chat("gpt-4o"); code != 403 || errCode(m) != gateway.CodeNotGranted {
			t.Fatalf("gpt-4o before any grant: %d %v", code, m)
		}
		if code, _, m := e.do(t, "PUT", "/v1/admin/tenants/slot-1/grants", e.admin, `{"grants":["openai/gpt-4o"]}`); code != 200 {
			t.Fatalf("PUT grants: %d %v", code, m)
		}
		if code, m := chat("gpt-4o"); code != 200 || m["object"] != "chat.completion" {
			t.Fatalf("gpt-4o granted tenant-wide: %d %v", code, m)
		}
		if code, m := chat("gpt-5"); code != 403 || errCode(m) != gateway.CodeNotGranted {
			t.Fatalf("gpt-5, not granted: %d %v", code, m)
		}
		if code, _, m := e.do(t, "PUT", "/v1/admin/tenants/slot-1/grants", e.admin, `{"grants":[]}`); code != 200 {
			t.Fatalf("PUT []: %d %v", code, m)
		}
		if code, m := chat("gpt-4o"); code != 403 || errCode(m) != gateway.CodeNotGranted {
			t.Fatalf("gpt-4o after the tenant's grants were cleared: %d %v", code, m)
		}
	})
}
