package server_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/caduceus-dev/caduceus/audit"
	"github.com/caduceus-dev/caduceus/auth"
	"github.com/caduceus-dev/caduceus/contract"
	"github.com/caduceus-dev/caduceus/server"
	"github.com/caduceus-dev/caduceus/shim"
	"github.com/caduceus-dev/caduceus/shim/shimgate"
	"github.com/caduceus-dev/caduceus/shim/shimsql"
	"github.com/caduceus-dev/caduceus/store"
	"github.com/caduceus-dev/caduceus/store/storetest"
)

// idemEnv is a server over a real store with the core's key routes, the
// shim's provision routes and two routes of the test: a flaky one (its
// first call fails with a 500) and a slow one (it waits for the test).
type idemEnv struct {
	db        *store.DB
	srv       *server.Server
	admin     string // slot-1, admin
	configure string // slot-1, route and configure, harness claude-code
	flaky     atomic.Int32
	slow      atomic.Int32
	llm       atomic.Int32
	entered   chan struct{}
	unblock   chan struct{}
}

func newIdemEnv(t *testing.T, db *store.DB, wait time.Duration, opts ...func(*server.Config)) *idemEnv {
	t.Helper()
	keys := auth.NewService(db.Keys(), nil, 0)
	e := &idemEnv{db: db, entered: make(chan struct{}, 16), unblock: make(chan struct{})}
	for _, k := range []struct {
		token   *string
		scopes  []contract.Scope
		harness string
	}{{&e.admin, []contract.Scope{contract.ScopeAdmin}, ""}, {&e.configure, []contract.Scope{contract.ScopeRoute, contract.ScopeConfigure}, "claude-code"}} {
		token, _, err := keys.Create(t.Context(), auth.Spec{Tenant: "slot-1", Scopes: k.scopes, Harness: k.harness})
		if err != nil {
			t.Fatal(err)
		}
		*k.token = token
	}
	svc := shim.New(shim.Config{Store: shimsql.New(db), Audit: db.Audit()})
	routes := append(shimgate.New(shimgate.Config{Service: svc}).Routes(),
		server.Route{Pattern: "POST /v1/test/flaky", Action: "test.flaky", Handler: func(w http.ResponseWriter, r *http.Request, c *server.Call) error {
			n := e.flaky.Add(1)
			if n == 1 {
				return contract.Internal(errTest)
			}
			return server.WriteJSON(w, http.StatusCreated, map[string]int32{"run": n})
		}},
		server.Route{Pattern: "POST /v1/test/slow", Action: "test.slow", Handler: func(w http.ResponseWriter, r *http.Request, c *server.Call) error {
			// The first call holds until the test unblocks it; a second
			// run (which idempotency forbids) would not wait.
			if e.slow.Add(1) == 1 {
				e.entered <- struct{}{}
				<-e.unblock
			}
			return server.WriteJSON(w, http.StatusCreated, map[string]string{"done": "yes"})
		}})
	// An LLM-shaped route (the chat completions route's Envelope): its
	// Idempotency-Key is the provider's; the handler sees it and runs
	// every time.
	var chat server.Envelope
	for _, rt := range routes {
		if rt.Pattern == "POST /v1/chat/completions" {
			chat = rt.Envelope
		}
	}
	if chat == nil {
		t.Fatal("the shim gate has no chat completions route")
	}
	routes = append(routes, server.Route{Pattern: "POST /v1/test/llm", Action: "test.llm", Envelope: chat,
		Handler: func(w http.ResponseWriter, r *http.Request, c *server.Call) error {
			return server.WriteJSON(w, http.StatusOK, map[string]any{"run": e.llm.Add(1), "key": r.Header.Get("Idempotency-Key")})
		}})
	cfg := server.Config{Auth: keys, Audit: db.Audit(), Records: db.Audit(), Store: db, Routes: routes, IdempotencyWait: wait}
	for _, o := range opts {
		o(&cfg)
	}
	e.srv = server.New(cfg)
	return e
}

var errTest = &contract.Error{Kind: contract.KindInternal, Code: "test", Message: "the test's failure"}

type idemAnswer struct {
	code     int
	replayed bool
	body     map[string]any
}

func (e *idemEnv) do(t *testing.T, method, path, key, body string, hdr ...string) idemAnswer {
	t.Helper()
	req := httptest.NewRequest(method, path, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+key)
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Add(hdr[i], hdr[i+1])
	}
	rec := httptest.NewRecorder()
	e.srv.ServeHTTP(rec, req)
	a := idemAnswer{code: rec.Code, replayed: rec.Header().Get("Idempotent-Replayed") == "true"}
	if rec.Body.Len() > 0 {
		if err := json.Unmarshal(rec.Body.Bytes(), &a.body); err != nil {
			t.Errorf("%s %s: %d, not JSON: %s", method, path, rec.Code, rec.Body)
		}
	}
	return a
}

// keyCount is the number of slot-1's keys.
func (e *idemEnv) keyCount(t *testing.T) int {
	t.Helper()
	a := e.do(t, "GET", "/v1/admin/keys", e.admin, "")
	list, _ := a.body["keys"].([]any)
	if a.code != 200 {
		t.Fatalf("list keys: %d %v", a.code, a.body)
	}
	return len(list)
}

// TestIdempotencyKeyReplaysAWrite: a key created with an Idempotency-Key
// and sent again with the same key and body is answered from the store,
// marked Idempotent-Replayed, without a second key and without the secret
// (only its hash is stored); the replay is audited as one.
func TestIdempotencyKeyReplaysAWrite(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		e := newIdemEnv(t, db, 0)
		before := e.keyCount(t)
		body := `{"scopes":["route"],"harness":"codex"}`
		first := e.do(t, "POST", "/v1/admin/keys", e.admin, body, "Idempotency-Key", "create-key-0001")
		if first.code != 201 || first.replayed || first.body["key"] == nil {
			t.Fatalf("first: %+v", first)
		}
		again := e.do(t, "POST", "/v1/admin/keys", e.admin, body, "Idempotency-Key", "create-key-0001")
		if again.code != 201 || !again.replayed || again.body["id"] != first.body["id"] || again.body["harness"] != "codex" {
			t.Fatalf("replay: %+v (first %+v)", again, first)
		}
		if _, ok := again.body["key"]; ok {
			t.Errorf("the replay shows the secret: %v", again.body)
		}
		if n := e.keyCount(t); n != before+1 {
			t.Errorf("%d keys after a create and its replay, want %d", n, before+1)
		}
		recs, err := db.Audit().Tail(t.Context(), audit.Filter{Tenant: "slot-1", Limit: 50})
		if err != nil {
			t.Fatal(err)
		}
		replays := 0
		for _, r := range recs {
			if r.Outcome.Action == "keys.create" && r.Outcome.Reason == "idempotent_replay" {
				replays++
				if r.Outcome.Resource != "key/"+first.body["id"].(string) {
					t.Errorf("replay record resource %q", r.Outcome.Resource)
				}
			}
		}
		if replays != 1 {
			t.Errorf("%d replay records, want 1", replays)
		}
		// A write without a key runs every time.
		e.do(t, "POST", "/v1/admin/keys", e.admin, body)
		if n := e.keyCount(t); n != before+2 {
			t.Errorf("%d keys after a keyless create, want %d", n, before+2)
		}
	})
}

// TestIdempotencyKeyConflict: the same key with another body, path or
// If-Match is 409 idempotency_key_conflict and changes nothing; a bad key
// is 400 bad_idempotency_key and changes nothing.
func TestIdempotencyKeyConflict(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		e := newIdemEnv(t, db, 0)
		if a := e.do(t, "POST", "/v1/admin/keys", e.admin, `{"scopes":["route"]}`, "Idempotency-Key", "key-conflict-1"); a.code != 201 {
			t.Fatalf("first: %+v", a)
		}
		before := e.keyCount(t)
		for _, tc := range []struct {
			name, method, path, body string
			hdr                      []string
		}{
			{"another body", "POST", "/v1/admin/keys", `{"scopes":["admin"]}`, nil},
			{"same body in another key order and spacing", "POST", "/v1/admin/keys", `{ "scopes" : ["route"], "harness": "" }`, nil},
			{"another path", "DELETE", "/v1/admin/keys/nosuchkey", ``, nil},
		} {
			a := e.do(t, tc.method, tc.path, e.admin, tc.body, append([]string{"Idempotency-Key", "key-conflict-1"}, tc.hdr...)...)
			if a.code != 409 || a.body["code"] != "idempotency_key_conflict" {
				t.Errorf("%s: %+v", tc.name, a)
			}
		}
		// The canonical body: key order and spacing do not matter.
		if a := e.do(t, "POST", "/v1/admin/keys", e.admin, "{ \"scopes\" :\n[\"route\"] }", "Idempotency-Key", "key-conflict-1"); a.code != 201 || !a.replayed {
			t.Errorf("same canonical body: %+v", a)
		}
		for _, tc := range []struct {
			name string
			hdr  []string
		}{
			{"too short", []string{"Idempotency-Key", "short"}},
			{"bad character", []string{"Idempotency-Key", "has space in it"}},
			{"given twice", []string{"Idempotency-Key", "key-twice-0001", "Idempotency-Key", "key-twice-0002"}},
		} {
			a := e.do(t, "POST", "/v1/admin/keys", e.admin, `{"scopes":["route"]}`, tc.hdr...)
			if a.code != 400 || a.body["code"] != "bad_idempotency_key" || !strings.Contains(a.body["detail"].(string), "Idempotency-Key") {
				t.Errorf("%s: %+v", tc.name, a)
			}
		}
		if n := e.keyCount(t); n != before {
			t.Errorf("%d keys after refusals, want %d", n, before)
		}
	})
}

// TestIdempotencyConcurrentDuplicatesApplyOnce: 16 requests at once with
// one Idempotency-Key create one key (and one provision): one idemAnswer is
// the first run's, the 15 others replay it.
func TestIdempotencyConcurrentDuplicatesApplyOnce(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		e := newIdemEnv(t, db, 0)
		before := e.keyCount(t)
		prov := `{"id":"PROV-IDEM","triggers":{"keyword":{"any":["warranty"]}},"action":"respond_directly","response":{"text":"two years"}}`
		for _, tc := range []struct{ path, key, body, idem string }{
			{"/v1/admin/keys", e.admin, `{"scopes":["route"]}`, "dup-key-0001"},
			{"/v1/provisions", e.configure, prov, "dup-provision-0001"},
		} {
			answers := make([]idemAnswer, 16)
			var wg sync.WaitGroup
			for i := range answers {
				wg.Go(func() {
					answers[i] = e.do(t, "POST", tc.path, tc.key, tc.body, "Idempotency-Key", tc.idem, "X-Caduceus-Harness", "claude-code")
				})
			}
			wg.Wait()
			first := 0
			for _, a := range answers {
				if a.code != 201 || a.body["id"] != answers[0].body["id"] {
					t.Errorf("%s: %+v (first idemAnswer %+v)", tc.path, a, answers[0])
				}
				if !a.replayed {
					first++
				}
			}
			if first != 1 {
				t.Errorf("%s: %d answers not replayed, want 1", tc.path, first)
			}
		}
		if n := e.keyCount(t); n != before+1 {
			t.Errorf("%d keys after 16 duplicates, want %d", n, before+1)
		}
		a := e.do(t, "GET", "/v1/provisions", e.configure, "")
		list, ok := a.body["provisions"].([]any)
		if !ok {
			t.Fatalf("list provisions: %+v", a)
		}
		got := 0
		for _, p := range list {
			if p.(map[string]any)["id"] == "PROV-IDEM" {
				got++
			}
		}
		if got != 1 {
			t.Errorf("%d provisions PROV-IDEM, want 1: %v", got, a.body)
		}
	})
}

// TestIdempotencyFailureReleasesKey: a 5xx frees the key, so the retry
// runs; its idemAnswer is then stored and replayed.
func TestIdempotencyFailureReleasesKey(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		e := newIdemEnv(t, db, 0)
		if a := e.do(t, "POST", "/v1/test/flaky", e.admin, `{}`, "Idempotency-Key", "flaky-0001"); a.code != 500 {
			t.Fatalf("first: %+v", a)
		}
		if a := e.do(t, "POST", "/v1/test/flaky", e.admin, `{}`, "Idempotency-Key", "flaky-0001"); a.code != 201 || a.replayed || a.body["run"] != 2.0 {
			t.Fatalf("retry after a 500: %+v", a)
		}
		if a := e.do(t, "POST", "/v1/test/flaky", e.admin, `{}`, "Idempotency-Key", "flaky-0001"); a.code != 201 || !a.replayed || a.body["run"] != 2.0 {
			t.Fatalf("replay: %+v", a)
		}
		if n := e.flaky.Load(); n != 2 {
			t.Errorf("the handler ran %d times, want 2", n)
		}
	})
}

// TestIdempotencyInProgress: a duplicate sent while the request holding
// its key runs is answered 409 idempotency_key_in_progress, once it has
// outwaited it (IdempotencyWait) or at once with IdempotencyNoWait (the
// edge's: with an hour to wait it must not wait, or the test would wait
// that hour, since it releases the first only after); once the first
// answered, the same key replays it.
func TestIdempotencyInProgress(t *testing.T) {
	for _, c := range []struct {
		name   string
		wait   time.Duration
		noWait bool
	}{{"outwaited", time.Millisecond, false}, {"no wait", time.Hour, true}} {
		t.Run(c.name, func(t *testing.T) {
			storetest.Each(t, func(t *testing.T, db *store.DB) {
				e := newIdemEnv(t, db, c.wait, func(cfg *server.Config) { cfg.IdempotencyNoWait = c.noWait })
				done := make(chan idemAnswer, 1)
				go func() { done <- e.do(t, "POST", "/v1/test/slow", e.admin, `{}`, "Idempotency-Key", "slow-0001") }()
				<-e.entered // the first holds the key
				if a := e.do(t, "POST", "/v1/test/slow", e.admin, `{}`, "Idempotency-Key", "slow-0001"); a.code != 409 || a.body["code"] != "idempotency_key_in_progress" {
					t.Errorf("duplicate while the first runs: %+v", a)
				}
				close(e.unblock)
				if a := <-done; a.code != 201 || a.replayed {
					t.Fatalf("first: %+v", a)
				}
				if a := e.do(t, "POST", "/v1/test/slow", e.admin, `{}`, "Idempotency-Key", "slow-0001"); a.code != 201 || !a.replayed || a.body["done"] != "yes" {
					t.Errorf("after the first answered: %+v", a)
				}
				if n := e.slow.Load(); n != 1 {
					t.Errorf("the slow handler ran %d times, want 1", n)
				}
			})
		})
	}
}

// TestIdempotencyKeyLeftToLLMRoutes: on an LLM route (Envelope set) the
// wrapper neither stores nor replays: the header reaches the handler (the
// shim forwards it to the provider) and every call runs.
func TestIdempotencyKeyLeftToLLMRoutes(t *testing.T) {
	e := newIdemEnv(t, storetest.OpenSQLite(t), 0)
	for want := 1.0; want <= 2; want++ {
		a := e.do(t, "POST", "/v1/test/llm", e.admin, `{"model":"m"}`, "Idempotency-Key", "provider-key-0001")
		if a.code != 200 || a.replayed || a.body["run"] != want || a.body["key"] != "provider-key-0001" {
			t.Errorf("call %v: %+v", want, a)
		}
	}
}
