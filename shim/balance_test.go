package shim_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/caduceus-dev/caduceus/contract"
	"github.com/caduceus-dev/caduceus/shim"
	"github.com/caduceus-dev/caduceus/shim/gateway"
	"github.com/caduceus-dev/caduceus/shim/ledger"
	gwconf "github.com/caduceus-dev/caduceus/shim/upstream"
	"github.com/caduceus-dev/caduceus/shim/wire"
	"github.com/caduceus-dev/caduceus/store"
	"github.com/caduceus-dev/caduceus/store/storetest"
)

// Keys of the load-balancing tests: key-lb is granted every deployment,
// key-lb-us neither azure-eu/gpt-4.1 nor vertex-eu/claude-sonnet-4-5.
func init() {
	id := contract.Identity{TenantSlot: "slot-1", Subject: "usr_7777777777777777", Surface: contract.SurfaceAPI, Trust: contract.TrustRouter}
	callers["key-lb"] = contract.Caller{Identity: id, KeyID: "klb", Scopes: []contract.Scope{contract.ScopeRoute},
		Grants: []string{"azure-eu/gpt-4.1", "azure-us/gpt-4.1", "openai/gpt-4.1", "vertex-eu/claude-sonnet-4-5", "anthropic/claude-sonnet-4-5"}}
	callers["key-lb-us"] = contract.Caller{Identity: id, KeyID: "klbus", Scopes: []contract.Scope{contract.ScopeRoute},
		Grants: []string{"azure-us/gpt-4.1", "openai/gpt-4.1", "anthropic/claude-sonnet-4-5"}}
}

// lbPrice is every deployment's price; an answer (100 input tokens, 10
// output) costs lbCost.
var lbPrice = gwconf.Price{Input: 2_000_000, Output: 8_000_000, MaxOutputTokens: 4096}

const lbCost = 100*2 + 10*8

// deployment is one provider's deployment of a model: it answers chat
// completions and messages with "from <route>" and a usage of 100 input and
// 10 output tokens, or with fail's status when set (a 429 with
// Retry-After: 120).
type deployment struct {
	route string
	srv   *httptest.Server
	calls atomic.Int32
	fail  atomic.Int32
	slow  atomic.Int64 // nanoseconds before the headers
}

func newDeployment(t *testing.T, route string) *deployment {
	d := &deployment{route: route}
	d.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		d.calls.Add(1)
		// Late in real time: the gateway times the headers with time.Since (shim/gateway), no clock to inject.
		time.Sleep(time.Duration(d.slow.Load()))
		w.Header().Set("Content-Type", "application/json")
		if code := int(d.fail.Load()); code != 0 {
			if code == 429 {
				w.Header().Set("Retry-After", "120")
			}
			w.WriteHeader(code)
			io.WriteString(w, `{"error":{"message":"`+route+` says no","type":"server_error"}}`)
			return
		}
		if strings.HasSuffix(r.URL.Path, "/messages") {
			fmt.Fprintf(w, `{"id":"msg_1","type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[{"type":"text","text":"from %s"}],"stop_reason":"end_turn","stop_sequence":null,"usage":{"input_tokens":100,"output_tokens":10}}`, route)
			return
		}
		fmt.Fprintf(w, `{"id":"c1","object":"chat.completion","created":1,"model":"gpt-4.1","choices":[{"index":0,"message":{"role":"assistant","content":"from %s"},"finish_reason":"stop"}],"usage":{"prompt_tokens":100,"completion_tokens":10,"total_tokens":110}}`, route)
	}))
	t.Cleanup(d.srv.Close)
	return d
}

// lbRoutes are the deployments of the tests: three of gpt-4.1 and two of
// claude-sonnet-4-5, each route its own provider (model identity).
var lbRoutes = []struct {
	name string
	kind gwconf.Kind
}{{"azure-eu", gwconf.KindOpenAI}, {"azure-us", gwconf.KindOpenAI}, {"openai", gwconf.KindOpenAI},
	{"vertex-eu", gwconf.KindAnthropic}, {"anthropic", gwconf.KindAnthropic}}

// switchboard is the gateway's transport: a connection to an address it
// marks down is refused, as by a host with nothing listening.
type switchboard struct {
	mu   sync.Mutex
	down map[string]bool
}

func (s *switchboard) set(d *deployment, down bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.down[strings.TrimPrefix(d.srv.URL, "http://")] = down
}

func (s *switchboard) client() *http.Client {
	var dialer net.Dialer
	return &http.Client{Transport: &http.Transport{DisableKeepAlives: true, DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		s.mu.Lock()
		down := s.down[addr]
		s.mu.Unlock()
		if down {
			return nil, &net.OpError{Op: "dial", Net: network, Err: syscall.ECONNREFUSED}
		}
		return dialer.DialContext(ctx, network, addr)
	}}}
}

// lbWorld is what the processes of a test share: the deployments, the
// switchboard, a clock.
type lbWorld struct {
	deps  map[string]*deployment
	board *switchboard
	clock *clock
}

func newLBWorld(t *testing.T) *lbWorld {
	w := &lbWorld{deps: map[string]*deployment{}, board: &switchboard{down: map[string]bool{}},
		clock: &clock{t: time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)}}
	for _, r := range lbRoutes {
		w.deps[r.name] = newDeployment(t, r.name)
	}
	return w
}

// lbEnv is one process: a shim whose gateway runs plan over the world's
// deployments with the store db, on the world's clock.
type lbEnv struct {
	*env
	db    *store.DB
	mu    sync.Mutex
	tries map[string]int // attempts made, by route
}

// newLBEnv is the process; opts change its configuration and its
// gateway's before the gateway is made.
func newLBEnv(t *testing.T, w *lbWorld, db *store.DB, plan gwconf.Plan, seed uint64, opts ...func(*gwconf.Config, *gateway.Config)) *lbEnv {
	e := &lbEnv{db: db, tries: map[string]int{}}
	conf := gwconf.Config{Routes: map[string]gwconf.Route{}, Plans: map[string]gwconf.Plan{"main": plan}, Prices: map[string]gwconf.Price{}}
	for _, r := range lbRoutes {
		conf.Routes[r.name] = gwconf.Route{Kind: r.kind, Provider: r.name, BaseURL: w.deps[r.name].srv.URL,
			Models: map[gwconf.Kind][]string{gwconf.KindOpenAI: {"gpt-4.1"}, gwconf.KindAnthropic: {"claude-sonnet-4-5"}}[r.kind]}
		conf.Prices[r.name+"/gpt-4.1"] = lbPrice
		conf.Prices[r.name+"/claude-sonnet-4-5"] = lbPrice
	}
	gc := gateway.Config{Ledger: ledger.Of(db), Holds: ledger.Of(db), Client: w.board.client(), Logger: slog.New(slog.DiscardHandler),
		Now: w.clock.Now, Rand: rand.NewPCG(seed, 1), OnAttempt: func(route, _ string, _ time.Duration) {
			e.mu.Lock()
			e.tries[route]++
			e.mu.Unlock()
		}}
	for _, o := range opts {
		o(&conf, &gc)
	}
	if err := conf.Validate(); err != nil {
		t.Fatal(err)
	}
	gc.Upstream = conf
	e.env = newEnv(t, func(c *shim.Config) { c.Gateway = gateway.New(gc) })
	return e
}

func (e *lbEnv) triesOf(route string) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.tries[route]
}

// ask sends one request for model with key through the SDK of p, and
// returns the route that answered ("" and the error when none did) and the
// request's receipt.
func (e *lbEnv) ask(t *testing.T, key string, p wire.Protocol, model string) (route, receipt string, err error) {
	t.Helper()
	res, err := call(t, e.env, key, p, false, model, "hello", nil)
	if err != nil {
		return "", "", err
	}
	return strings.TrimPrefix(res.text, "from "), res.header.Get(shim.HeaderReceipt), nil
}

// mustAsk is ask that fails the test on an error.
func (e *lbEnv) mustAsk(t *testing.T, key string, p wire.Protocol, model string) (route, receipt string) {
	t.Helper()
	route, receipt, err := e.ask(t, key, p, model)
	if err != nil {
		t.Fatalf("%s %s: %v", p, model, err)
	}
	return route, receipt
}

// attemptsOf are the attempts of each of the tenant's receipts (its 100
// latest) by receipt id, as "route identity outcome".
func (e *lbEnv) attemptsOf(t *testing.T) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	for _, rc := range e.receipts(t, "key-lb") {
		if rc.Spend == nil {
			t.Fatalf("receipt %s has no spend", rc.ID)
		}
		for _, a := range rc.Spend.Attempts {
			out[rc.ID] = append(out[rc.ID], a.Route+" "+a.Model+" "+a.Outcome)
		}
	}
	return out
}

// spendOf is the key's spend by model identity: attempts and settled
// microdollars.
func spendOf(t *testing.T, db *store.DB, keyID string) map[string][2]int64 {
	t.Helper()
	rows, err := ledger.Of(db).Spend(t.Context(), "slot-1", keyID, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][2]int64{}
	for _, r := range rows {
		if r.Open != 0 {
			t.Errorf("spend row still open: %+v", r)
		}
		out[r.Model] = [2]int64{r.Attempts, r.Settled}
	}
	return out
}

func balance(members ...gwconf.Member) gwconf.Step { return gwconf.Step{Balance: members} }

// TestBalanceByWeight: a plan step balanced over two deployments of one
// model, weights 3 and 1, through the official OpenAI SDK (400 requests)
// and Anthropic SDK (40, weights 1 and 1): the answers follow the weights
// (bounds of about six standard deviations), each receipt names the model
// identity that answered, and the spend is per identity, settled from each
// answer's usage. On SQLite and Postgres.
func TestBalanceByWeight(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		w := newLBWorld(t)
		e := newLBEnv(t, w, db, gwconf.Plan{Failover: gwconf.FailoverDefinite, Models: map[string][]gwconf.Step{
			"gpt-4.1":           {balance(gwconf.Member{Route: "azure-eu", Weight: 3}, gwconf.Member{Route: "azure-us", Weight: 1})},
			"claude-sonnet-4-5": {balance(gwconf.Member{Route: "vertex-eu"}, gwconf.Member{Route: "anthropic"})},
		}}, 1)
		answered := map[string]int{}
		byReceipt := map[string]string{}
		for range 400 {
			route, rc := e.mustAsk(t, "key-lb", wire.ChatCompletions, "gpt-4.1")
			answered[route]++
			byReceipt[rc] = route
		}
		if eu, us := answered["azure-eu"], answered["azure-us"]; eu+us != 400 || eu < 250 || eu > 350 {
			t.Fatalf("answered by %v; want about 300 by azure-eu and 100 by azure-us", answered)
		}
		t.Logf("400 chat completions, weights 3:1: %v", answered)
		for range 40 {
			route, rc := e.mustAsk(t, "key-lb", wire.Messages, "claude-sonnet-4-5")
			answered[route]++
			byReceipt[rc] = route
		}
		if v, a := answered["vertex-eu"], answered["anthropic"]; v+a != 40 || v < 8 || a < 8 {
			t.Fatalf("messages answered by %v; want about 20 each by vertex-eu and anthropic", answered)
		}
		for _, r := range lbRoutes {
			if got := int(w.deps[r.name].calls.Load()); got != answered[r.name] {
				t.Errorf("%s was called %d times and answered %d", r.name, got, answered[r.name])
			}
		}
		// The receipts (the latest 100) name the identity that answered.
		atts := e.attemptsOf(t)
		if len(atts) != 100 {
			t.Fatalf("%d receipts listed, want 100", len(atts))
		}
		for id, a := range atts {
			route, ok := byReceipt[id]
			model := map[bool]string{true: "claude-sonnet-4-5", false: "gpt-4.1"}[route == "vertex-eu" || route == "anthropic"]
			if !ok || len(a) != 1 || a[0] != route+" "+route+"/"+model+" answered" {
				t.Fatalf("receipt %s: attempts %q, answered by %q", id, a, route)
			}
		}
		// Spend per identity: one attempt per answer, each settled at its usage.
		spend := spendOf(t, db, "klb")
		for _, r := range lbRoutes {
			model := map[gwconf.Kind]string{gwconf.KindOpenAI: "gpt-4.1", gwconf.KindAnthropic: "claude-sonnet-4-5"}[r.kind]
			n := int64(answered[r.name])
			if got := spend[r.name+"/"+model]; got != [2]int64{n, n * lbCost} {
				t.Errorf("spend of %s/%s = %v, want %d attempts settled at %d", r.name, model, got, n, n*lbCost)
			}
		}
	})
}

// TestBalanceGrantsAndHolds: a member the key is not granted is never
// used, however heavy, through either SDK — nor named on its receipts; a
// key granted no member of a balanced step is refused before any call; a
// member held after a 429 with Retry-After is skipped for the other, and
// with both held the plan's next step answers. On SQLite and Postgres.
func TestBalanceGrantsAndHolds(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		w := newLBWorld(t)
		db.Now = w.clock.Now // the holds' time
		e := newLBEnv(t, w, db, gwconf.Plan{Failover: gwconf.FailoverDefinite, Models: map[string][]gwconf.Step{
			"gpt-4.1":           {balance(gwconf.Member{Route: "azure-eu", Weight: 1000}, gwconf.Member{Route: "azure-us"}), {Route: "openai"}},
			"claude-sonnet-4-5": {balance(gwconf.Member{Route: "vertex-eu", Weight: 1000}, gwconf.Member{Route: "anthropic"})},
		}}, 2)

		// Not granted: never used.
		for range 30 {
			if route, _ := e.mustAsk(t, "key-lb-us", wire.ChatCompletions, "gpt-4.1"); route != "azure-us" {
				t.Fatalf("key-lb-us answered by %s, want azure-us", route)
			}
			if route, _ := e.mustAsk(t, "key-lb-us", wire.Messages, "claude-sonnet-4-5"); route != "anthropic" {
				t.Fatalf("key-lb-us answered by %s, want anthropic", route)
			}
		}
		if eu, v := w.deps["azure-eu"].calls.Load(), w.deps["vertex-eu"].calls.Load(); eu != 0 || v != 0 {
			t.Fatalf("ungranted members called: azure-eu %d, vertex-eu %d", eu, v)
		}
		for id, a := range e.attemptsOf(t) {
			if len(a) != 1 || strings.Contains(a[0], "-eu") {
				t.Fatalf("receipt %s: attempts %q", id, a)
			}
		}
		_, _, err := e.ask(t, "key-granted", wire.ChatCompletions, "gpt-4.1")
		if status, retry, _ := sdkError(err); status != 403 || retry != "false" || errorCode(err) != "model_not_granted" {
			t.Fatalf("a key granted no member: %d %q %v", status, retry, err)
		}

		// Held: azure-eu answers 429 once, then is skipped.
		w.deps["azure-eu"].fail.Store(429)
		route, rc := e.mustAsk(t, "key-lb", wire.ChatCompletions, "gpt-4.1")
		if a := e.attemptsOf(t)[rc]; route != "azure-us" || len(a) != 2 || a[0] != "azure-eu azure-eu/gpt-4.1 rate_limited" || a[1] != "azure-us azure-us/gpt-4.1 answered" {
			t.Fatalf("after a 429: answered by %s, attempts %q", route, a)
		}
		for range 20 {
			route, rc := e.mustAsk(t, "key-lb", wire.ChatCompletions, "gpt-4.1")
			if a := e.attemptsOf(t)[rc]; route != "azure-us" || len(a) != 1 {
				t.Fatalf("while azure-eu is held: answered by %s, attempts %q", route, a)
			}
		}
		if n := w.deps["azure-eu"].calls.Load(); n != 1 {
			t.Fatalf("held azure-eu called %d times, want once", n)
		}
		// Both held: the next step.
		w.deps["azure-us"].fail.Store(429)
		route, rc = e.mustAsk(t, "key-lb", wire.ChatCompletions, "gpt-4.1")
		want := []string{"azure-us azure-us/gpt-4.1 rate_limited", "azure-eu azure-eu/gpt-4.1 held", "openai openai/gpt-4.1 answered"}
		if a := e.attemptsOf(t)[rc]; route != "openai" || strings.Join(a, ",") != strings.Join(want, ",") {
			t.Fatalf("both held: answered by %s, attempts %q", route, a)
		}
		usCalls := w.deps["azure-us"].calls.Load()
		if route, _ := e.mustAsk(t, "key-lb", wire.ChatCompletions, "gpt-4.1"); route != "openai" || w.deps["azure-us"].calls.Load() != usCalls {
			t.Fatalf("both held: answered by %s, azure-us called %d times more", route, w.deps["azure-us"].calls.Load()-usCalls)
		}
		spend := spendOf(t, db, "klb")
		if spend["azure-eu/gpt-4.1"] != [2]int64{1, 0} || spend["openai/gpt-4.1"] != [2]int64{2, 2 * lbCost} {
			t.Fatalf("spend %v", spend)
		}
	})
}

// TestBalanceSkipsUnhealthyRoute: a member whose connections are refused
// is unhealthy after three failures in a row and skipped (the other
// member answers every request meanwhile); with every member unhealthy the
// group still serves, and the one that answers is healthy again; after the
// cool-down one request tries the unhealthy member first — still refused,
// it is unhealthy for another cool-down; up again, it answers and takes its
// share once more. On SQLite and Postgres.
func TestBalanceSkipsUnhealthyRoute(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		w := newLBWorld(t)
		db.Now = w.clock.Now
		e := newLBEnv(t, w, db, gwconf.Plan{Failover: gwconf.FailoverDefinite, Models: map[string][]gwconf.Step{
			"gpt-4.1": {balance(gwconf.Member{Route: "azure-eu", Weight: 3}, gwconf.Member{Route: "azure-us", Weight: 1})},
		}}, 3)
		health := ledger.Of(db)
		unhealthy := func(route string) bool {
			t.Helper()
			until, err := health.UnhealthyUntil(t.Context(), route)
			if err != nil {
				t.Fatal(err)
			}
			return until.After(w.clock.Now())
		}
		eu, us := w.deps["azure-eu"], w.deps["azure-us"]

		w.board.set(eu, true)
		for i := 0; e.triesOf("azure-eu") < 3; i++ {
			if i == 50 {
				t.Fatalf("azure-eu tried %d times in 50 requests", e.triesOf("azure-eu"))
			}
			if unhealthy("azure-eu") {
				t.Fatalf("azure-eu unhealthy after %d failures", e.triesOf("azure-eu"))
			}
			if route, _ := e.mustAsk(t, "key-lb", wire.ChatCompletions, "gpt-4.1"); route != "azure-us" {
				t.Fatalf("answered by %s", route)
			}
		}
		if !unhealthy("azure-eu") {
			t.Fatal("azure-eu refused three times in a row and still healthy")
		}
		for range 40 {
			route, rc := e.mustAsk(t, "key-lb", wire.ChatCompletions, "gpt-4.1")
			if a := e.attemptsOf(t)[rc]; route != "azure-us" || len(a) != 1 {
				t.Fatalf("azure-eu unhealthy: answered by %s, attempts %q", route, a)
			}
		}
		if n := e.triesOf("azure-eu"); n != 3 {
			t.Fatalf("unhealthy azure-eu tried %d times, want 3", n)
		}

		// Every member down: refused (502), until azure-us is unhealthy too.
		w.board.set(us, true)
		usBefore := e.triesOf("azure-us")
		for i := 0; !unhealthy("azure-us"); i++ {
			if i == 10 {
				t.Fatal("azure-us refused ten times in a row and still healthy")
			}
			_, _, err := e.ask(t, "key-lb", wire.ChatCompletions, "gpt-4.1")
			if errorCode(err) != gateway.CodeUpstreamFailed {
				t.Fatalf("every member down: %v", err)
			}
		}
		if n := e.triesOf("azure-us") - usBefore; n != 3 {
			t.Fatalf("azure-us unhealthy after %d refusals, want 3", n)
		}
		// Both unhealthy, azure-us up: the group still answers, and azure-us
		// is healthy again.
		w.board.set(us, false)
		if route, _ := e.mustAsk(t, "key-lb", wire.ChatCompletions, "gpt-4.1"); route != "azure-us" || unhealthy("azure-us") {
			t.Fatalf("every member unhealthy: answered by %s; azure-us unhealthy %v", route, unhealthy("azure-us"))
		}

		// After the cool-down: one request tries azure-eu first; refused, it
		// is skipped for another cool-down.
		w.clock.add(31 * time.Second)
		before := e.triesOf("azure-eu")
		route, rc := e.mustAsk(t, "key-lb", wire.ChatCompletions, "gpt-4.1")
		if a := e.attemptsOf(t)[rc]; route != "azure-us" || len(a) != 2 || a[0] != "azure-eu azure-eu/gpt-4.1 definite" || !unhealthy("azure-eu") {
			t.Fatalf("after the cool-down: answered by %s, attempts %q", route, a)
		}
		for range 20 {
			e.mustAsk(t, "key-lb", wire.ChatCompletions, "gpt-4.1")
		}
		if n := e.triesOf("azure-eu"); n != before+1 {
			t.Fatalf("azure-eu tried %d times after the cool-down, want once", n-before)
		}

		// Up again: after the next cool-down it answers, and is healthy.
		w.board.set(eu, false)
		w.clock.add(31 * time.Second)
		if route, _ := e.mustAsk(t, "key-lb", wire.ChatCompletions, "gpt-4.1"); route != "azure-eu" || unhealthy("azure-eu") {
			t.Fatalf("azure-eu up again: answered by %s", route)
		}
		answered := map[string]int{}
		for range 40 {
			route, _ := e.mustAsk(t, "key-lb", wire.ChatCompletions, "gpt-4.1")
			answered[route]++
		}
		if answered["azure-eu"] < 15 || answered["azure-us"] == 0 {
			t.Fatalf("healthy again: answered by %v", answered)
		}
	})
}

// TestBalanceSkipsSlowRoute: with route_health.latency, answers whose
// headers come later than it are a route's failures: the clients get
// them, and after route_health.failures of them in a row the route is
// skipped (and reported unhealthy: caduceus_shim_route_healthy 0) for its
// cool-down; after it, a quick answer makes it healthy again.
func TestBalanceSkipsSlowRoute(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		w := newLBWorld(t)
		db.Now = w.clock.Now
		var mu sync.Mutex
		reported := map[string][]bool{}
		e := newLBEnv(t, w, db, gwconf.Plan{Failover: gwconf.FailoverDefinite, Models: map[string][]gwconf.Step{
			"gpt-4.1": {balance(gwconf.Member{Route: "azure-eu", Weight: 1}, gwconf.Member{Route: "azure-us", Weight: 1})},
		}}, 7, func(c *gwconf.Config, g *gateway.Config) {
			c.RouteHealth = gwconf.HealthConfig{Failures: 2, Latency: "150ms"}
			g.OnRouteHealth = func(route string, healthy bool) {
				mu.Lock()
				defer mu.Unlock()
				reported[route] = append(reported[route], healthy)
			}
		})
		lastReport := func(route string) []bool {
			mu.Lock()
			defer mu.Unlock()
			return reported[route]
		}
		eu := w.deps["azure-eu"]
		eu.slow.Store(int64(400 * time.Millisecond))
		for i := 0; e.triesOf("azure-eu") < 2; i++ {
			if i == 40 {
				t.Fatalf("azure-eu tried %d times in 40 requests", e.triesOf("azure-eu"))
			}
			e.mustAsk(t, "key-lb", wire.ChatCompletions, "gpt-4.1") // slow or not, answered
		}
		until, err := ledger.Of(db).UnhealthyUntil(t.Context(), "azure-eu")
		if err != nil || !until.After(w.clock.Now()) {
			t.Fatalf("two answers 400 ms late against a latency of 150 ms: unhealthy until %v (%v)", until, err)
		}
		if r := lastReport("azure-eu"); len(r) == 0 || r[len(r)-1] {
			t.Fatalf("azure-eu's health as reported: %v", r)
		}
		for range 20 {
			if route, _ := e.mustAsk(t, "key-lb", wire.ChatCompletions, "gpt-4.1"); route != "azure-us" {
				t.Fatalf("answered by the slow route %s in its cool-down", route)
			}
		}
		// Quick again: after the cool-down its trial answers in time.
		eu.slow.Store(0)
		w.clock.add(31 * time.Second)
		if route, _ := e.mustAsk(t, "key-lb", wire.ChatCompletions, "gpt-4.1"); route != "azure-eu" {
			t.Fatalf("after the cool-down: answered by %s", route)
		}
		if until, _ := ledger.Of(db).UnhealthyUntil(t.Context(), "azure-eu"); !until.IsZero() {
			t.Fatalf("a quick answer left azure-eu unhealthy until %v", until)
		}
		if r := lastReport("azure-eu"); !r[len(r)-1] {
			t.Fatalf("azure-eu's health as reported after a quick answer: %v", r)
		}
	})
}

// TestBalanceHealthSharedAcrossProcesses: two processes (two stores of one
// SQLite file, or of one Postgres schema, each with its own gateway): the
// one that finds a member unhealthy makes the other skip it, and the one
// that finds it answering again after the cool-down makes the other use it
// again.
func TestBalanceHealthSharedAcrossProcesses(t *testing.T) {
	run := func(t *testing.T, dsn string) {
		open := func() *store.DB {
			db, err := store.Open(t.Context(), dsn, "")
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { db.Close() })
			return db
		}
		dbA, dbB := open(), open()
		// The stores' clock: it moves only when a test lets a process's
		// copy of the routes' health grow old.
		stores := &clock{t: time.Now()}
		dbA.Now, dbB.Now = stores.Now, stores.Now
		w := newLBWorld(t)
		plan := gwconf.Plan{Failover: gwconf.FailoverDefinite, Models: map[string][]gwconf.Step{
			"gpt-4.1": {balance(gwconf.Member{Route: "azure-eu", Weight: 3}, gwconf.Member{Route: "azure-us", Weight: 1})},
		}}
		a, b := newLBEnv(t, w, dbA, plan, 4), newLBEnv(t, w, dbB, plan, 5)
		// Both have read the health: nothing is unhealthy.
		for _, e := range []*lbEnv{a, b} {
			for range 8 {
				e.mustAsk(t, "key-lb", wire.ChatCompletions, "gpt-4.1")
			}
		}
		// unhealthy reports whether db's process takes azure-eu for
		// unhealthy; seen checks that it does (or, want false, that it
		// knows of no failure of azure-eu) once its copy of the health is
		// old enough to be read again (or a notification dropped it).
		unhealthy := func(db *store.DB) (bool, bool) {
			t.Helper()
			until, err := ledger.Of(db).UnhealthyUntil(t.Context(), "azure-eu")
			if err != nil {
				t.Fatal(err)
			}
			return until.After(w.clock.Now()), until.IsZero()
		}
		seen := func(db *store.DB, want bool) {
			t.Helper()
			stores.add(ledger.HoldRefreshListening)
			if bad, clear := unhealthy(db); !(want && bad) && !(!want && clear) {
				t.Fatalf("azure-eu: unhealthy %v not seen by the other process once its copy was due to be read again", want)
			}
		}

		// A finds azure-eu refusing; B skips it.
		w.board.set(w.deps["azure-eu"], true)
		for i := 0; ; i++ {
			if bad, _ := unhealthy(dbA); bad {
				break
			}
			if i == 60 {
				t.Fatal("A did not find azure-eu unhealthy")
			}
			a.mustAsk(t, "key-lb", wire.ChatCompletions, "gpt-4.1")
		}
		seen(dbB, true)
		tried := b.triesOf("azure-eu")
		for range 30 {
			if route, _ := b.mustAsk(t, "key-lb", wire.ChatCompletions, "gpt-4.1"); route != "azure-us" {
				t.Fatalf("B answered by %s", route)
			}
		}
		if n := b.triesOf("azure-eu"); n != tried {
			t.Fatalf("B tried azure-eu %d times after A found it unhealthy", n-tried)
		}

		// After the cool-down B finds it answering; A uses it again.
		w.board.set(w.deps["azure-eu"], false)
		w.clock.add(31 * time.Second)
		if route, _ := b.mustAsk(t, "key-lb", wire.ChatCompletions, "gpt-4.1"); route != "azure-eu" {
			t.Fatalf("B after the cool-down: answered by %s", route)
		}
		seen(dbA, false)
		answered := map[string]int{}
		for range 40 {
			route, _ := a.mustAsk(t, "key-lb", wire.ChatCompletions, "gpt-4.1")
			answered[route]++
		}
		if answered["azure-eu"] < 15 {
			t.Fatalf("A after B found azure-eu healthy: answered by %v", answered)
		}
	}
	t.Run("sqlite", func(t *testing.T) { run(t, "sqlite:"+filepath.Join(t.TempDir(), "two.db")) })
	if dsn := os.Getenv(storetest.EnvPostgres); dsn != "" {
		t.Run("postgres", func(t *testing.T) { run(t, storetest.FreshSchema(t, dsn)) })
	}
}
