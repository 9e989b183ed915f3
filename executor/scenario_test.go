package executor_test

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/caduceus-dev/caduceus/audit"
	"github.com/caduceus-dev/caduceus/broker/paper"
	"github.com/caduceus-dev/caduceus/contract"
	"github.com/caduceus-dev/caduceus/executor"
	"github.com/caduceus-dev/caduceus/executor/executortest"
)

var update = flag.Bool("update", false, "rewrite the golden envelopes under testdata/golden")

// fixture is one scenario file under testdata/scenarios: a paper broker
// scenario (a file, optionally with top-level keys replaced) and a sequence
// of ticks against the same broker, store and audit log.
type fixture struct {
	Description   string         `yaml:"description"`
	ScenarioFile  string         `yaml:"scenario_file"`
	ScenarioPatch map[string]any `yaml:"scenario_patch"`
	Skills        string         `yaml:"skills"` // default testdata/skills
	Ticks         []fixtureTick  `yaml:"ticks"`
}

type fixtureTick struct {
	Context        string     `yaml:"context"`
	Profile        string     `yaml:"profile"`
	ProfileAccount string     `yaml:"profile_account"`
	Message        string     `yaml:"message"`
	Now            string     `yaml:"now"`
	Tenant         string     `yaml:"tenant"`
	Payload        any        `yaml:"payload"`
	PayloadRaw     string     `yaml:"payload_raw"` // bytes sent as is
	Expect         expectTick `yaml:"expect"`
}

type expectTick struct {
	Error   string         `yaml:"error"`   // the invalid error's code
	Aborted string         `yaml:"aborted"` // "" means not aborted
	Breaker bool           `yaml:"breaker"`
	Account string         `yaml:"account"`
	Actions []expectAction `yaml:"actions"`
	Calls   map[string]int `yaml:"calls"`  // broker calls made by this tick, by tool
	Orders  *int           `yaml:"orders"` // orders the paper broker holds after the tick
	Notes   []string       `yaml:"notes"`  // substrings of the envelope notes
}

type expectAction struct {
	Symbol    string   `yaml:"symbol"`
	Status    string   `yaml:"status"`
	Reason    string   `yaml:"reason"`
	ReasonHas string   `yaml:"reason_has"`
	FirstSeen *int     `yaml:"first_seen_at_index"`
	Qty       *float64 `yaml:"qty"`
	Notional  *float64 `yaml:"notional_usd"`
	Alerts    []string `yaml:"alerts"`
	NotesHas  string   `yaml:"notes_has"`
	OrderID   string   `yaml:"order_id"`
}

func loadFixture(t testing.TB, path string) *fixture {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var f fixture
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(&f); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return &f
}

func (f *fixture) scenario(t testing.TB) *paper.Scenario {
	t.Helper()
	file := f.ScenarioFile
	if file == "" {
		file = "brokers/base.yaml"
	}
	b, err := os.ReadFile(filepath.Join("testdata", file))
	if err != nil {
		t.Fatal(err)
	}
	if len(f.ScenarioPatch) > 0 {
		var m map[string]any
		if err := yaml.Unmarshal(b, &m); err != nil {
			t.Fatal(err)
		}
		for k, v := range f.ScenarioPatch {
			m[k] = v
		}
		if b, err = yaml.Marshal(m); err != nil {
			t.Fatal(err)
		}
	}
	s, err := paper.ParseScenario(b)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// harness is one executor over a paper broker, a memory store and a memory
// audit log, with deterministic ids.
type harness struct {
	ex    *executor.Executor
	sim   *paper.Sim
	store *executortest.Memory
	log   *audit.Memory
	clock time.Time
}

func newHarness(t testing.TB, s *paper.Scenario, skills string) *harness {
	t.Helper()
	h := &harness{store: executortest.NewMemory(), log: audit.NewMemory()}
	if now, ok, _ := s.NowTime(); ok {
		h.clock = now
	} else {
		h.clock = time.Date(2026, 6, 26, 14, 0, 0, 0, time.UTC)
	}
	s.Now = "" // the harness drives the clock tick by tick
	sim, err := paper.New(s, func() time.Time { return h.clock })
	if err != nil {
		t.Fatal(err)
	}
	h.sim = sim
	refs, ticks := 0, 0
	h.ex = &executor.Executor{
		Broker: sim, Store: h.store, Audit: h.log, Skills: skills,
		Now:       func() time.Time { return time.Date(2026, 6, 26, 14, 0, 0, 0, time.UTC) },
		NewRef:    func() string { refs++; return fmt.Sprintf("00000000-0000-4000-8000-%012d", refs) },
		NewTickID: func() string { ticks++; return fmt.Sprintf("tick_%04d", ticks) },
	}
	return h
}

func identity(tenant string) contract.Identity {
	if tenant == "" {
		tenant = "slot-1"
	}
	return contract.Identity{TenantSlot: contract.TenantSlot(tenant), Subject: "usr_00000000000000000000000000000001", Surface: contract.SurfaceWorker, Trust: contract.TrustRouter}
}

func TestScenarios(t *testing.T) {
	files, err := filepath.Glob("testdata/scenarios/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no scenarios: %v", err)
	}
	for _, file := range files {
		name := strings.TrimSuffix(filepath.Base(file), ".yaml")
		t.Run(name, func(t *testing.T) {
			f := loadFixture(t, file)
			skills := filepath.Join("testdata", "skills")
			if f.Skills != "" {
				skills = filepath.Join("testdata", f.Skills)
			}
			h := newHarness(t, f.scenario(t), skills)
			var envs []any
			for i, tk := range f.Ticks {
				envs = append(envs, h.runTick(t, i, tk))
			}
			golden(t, filepath.Join("testdata", "golden", name+".json"), envs)
		})
	}
}

// runTick runs one tick and checks it; it returns what the golden file
// keeps: the envelope, or the invalid error.
func (h *harness) runTick(t *testing.T, i int, tk fixtureTick) any {
	t.Helper()
	var payload []byte
	if tk.PayloadRaw != "" {
		payload = []byte(tk.PayloadRaw)
	} else {
		var err error
		if payload, err = json.Marshal(tk.Payload); err != nil {
			t.Fatalf("tick %d: payload: %v", i, err)
		}
	}
	req := executor.TickRequest{
		Payload: payload, Identity: identity(tk.Tenant), Profile: tk.Profile,
		ProfileAccount: tk.ProfileAccount, Message: tk.Message,
	}
	if tk.Context != "" {
		c, err := executor.ParseRunContext(tk.Context)
		if err != nil {
			t.Fatal(err)
		}
		req.Context = c
	}
	if tk.Now != "" {
		now, err := time.Parse(time.RFC3339, tk.Now)
		if err != nil {
			t.Fatalf("tick %d: now: %v", i, err)
		}
		h.clock = now
	}
	req.Now = h.clock
	before := len(h.log.Records(identity(tk.Tenant).TenantSlot))
	ordersBefore := len(h.sim.AllOrders())

	env, err := h.ex.Tick(t.Context(), req)
	ex := tk.Expect
	recs := h.log.Records(identity(tk.Tenant).TenantSlot)
	if ex.Error != "" {
		ce := contract.AsError(err)
		if ce == nil || ce.Kind != contract.KindInvalid || ce.Code != ex.Error {
			t.Fatalf("tick %d: err = %v; want invalid %s", i, err, ex.Error)
		}
		if len(recs) != before {
			t.Fatalf("tick %d: invalid input wrote %d audit records", i, len(recs)-before)
		}
		if n := len(h.sim.AllOrders()); n != ordersBefore {
			t.Fatalf("tick %d: invalid input changed the broker", i)
		}
		if env.TickID != "" {
			t.Fatalf("tick %d: invalid input returned an envelope", i)
		}
		return map[string]string{"error": ce.Code, "field": ce.Field, "message": ce.Message}
	}
	if err != nil {
		t.Fatalf("tick %d: %v", i, err)
	}
	if len(recs) != before+1 {
		t.Fatalf("tick %d: %d audit records written, want 1", i, len(recs)-before)
	}
	rec := checkAudit(t, i, recs[len(recs)-1], env)

	got := "null"
	if env.Aborted != nil {
		got = *env.Aborted
	}
	want := ex.Aborted
	if want == "" {
		want = "null"
	}
	if got != want {
		t.Errorf("tick %d: aborted = %s; want %s (notes %q)", i, got, want, env.Notes)
	}
	if env.CircuitBreakerTripped != ex.Breaker {
		t.Errorf("tick %d: circuit_breaker_tripped = %v; want %v", i, env.CircuitBreakerTripped, ex.Breaker)
	}
	if ex.Account != "" && env.AccountNumber != ex.Account {
		t.Errorf("tick %d: account = %q; want %q", i, env.AccountNumber, ex.Account)
	}
	for _, n := range ex.Notes {
		if !slices.ContainsFunc(env.Notes, func(s string) bool { return strings.Contains(s, n) }) {
			t.Errorf("tick %d: no note contains %q: %q", i, n, env.Notes)
		}
	}
	if env.Aborted != nil && len(env.Actions) != 0 {
		t.Errorf("tick %d: aborted tick returned %d actions", i, len(env.Actions))
	}
	if len(env.Actions) != len(ex.Actions) {
		t.Fatalf("tick %d: %d actions, want %d:\n%s", i, len(env.Actions), len(ex.Actions), pretty(env.Actions))
	}
	for j, w := range ex.Actions {
		checkAction(t, fmt.Sprintf("tick %d action %d", i, j), env.Actions[j], w)
	}
	calls := map[string]int{}
	for _, c := range rec.BrokerCalls {
		calls[c.Name]++
	}
	for name, n := range ex.Calls {
		if calls[name] != n {
			t.Errorf("tick %d: %d %s calls, want %d (calls %v)", i, calls[name], name, n, calls)
		}
	}
	if ex.Orders != nil {
		if n := len(h.sim.AllOrders()); n != *ex.Orders {
			t.Errorf("tick %d: broker holds %d orders, want %d", i, n, *ex.Orders)
		}
	}
	checkInvariants(t, i, req, env, rec)
	return env
}

func checkAction(t *testing.T, where string, a executor.Action, w expectAction) {
	t.Helper()
	if w.Symbol != "" && a.Symbol != w.Symbol {
		t.Errorf("%s: symbol %q, want %q", where, a.Symbol, w.Symbol)
	}
	if a.Status != w.Status {
		t.Errorf("%s: status %q (reason %q), want %q", where, a.Status, a.Reason, w.Status)
	}
	if w.Reason != "" && a.Reason != w.Reason {
		t.Errorf("%s: reason %q, want %q", where, a.Reason, w.Reason)
	}
	if w.Reason == "" && w.ReasonHas == "" && a.Status == executor.StatusSkipped {
		t.Errorf("%s: fixture must name the skip reason (got %q)", where, a.Reason)
	}
	if w.ReasonHas != "" && !strings.Contains(a.Reason, w.ReasonHas) {
		t.Errorf("%s: reason %q does not contain %q", where, a.Reason, w.ReasonHas)
	}
	if w.FirstSeen != nil && (a.FirstSeenAtIndex == nil || *a.FirstSeenAtIndex != *w.FirstSeen) {
		t.Errorf("%s: first_seen_at_index %v, want %d", where, a.FirstSeenAtIndex, *w.FirstSeen)
	}
	if w.Qty != nil && a.Qty != *w.Qty {
		t.Errorf("%s: qty %v, want %v", where, a.Qty, *w.Qty)
	}
	if w.Notional != nil && a.NotionalUSD != *w.Notional {
		t.Errorf("%s: notional_usd %v, want %v", where, a.NotionalUSD, *w.Notional)
	}
	if w.Alerts != nil {
		var types []string
		for _, al := range a.Alerts {
			types = append(types, al.Type)
		}
		if !slices.Equal(types, w.Alerts) {
			t.Errorf("%s: alerts %v, want %v", where, types, w.Alerts)
		}
	}
	if w.NotesHas != "" && !slices.ContainsFunc(a.Notes, func(s string) bool { return strings.Contains(s, w.NotesHas) }) {
		t.Errorf("%s: notes %q do not contain %q", where, a.Notes, w.NotesHas)
	}
	placedLike := a.Status == executor.StatusPlaced || a.Side == executor.SideCancel
	if placedLike != (a.OrderID != nil) {
		t.Errorf("%s: status %s with order_id %v", where, a.Status, a.OrderID)
	}
	if w.OrderID != "" && (a.OrderID == nil || *a.OrderID != w.OrderID) {
		t.Errorf("%s: order_id %v, want %s", where, a.OrderID, w.OrderID)
	}
}

// checkAudit decodes the tick's audit record and checks it tells the same
// story as the envelope.
func checkAudit(t *testing.T, i int, r audit.Record, env executor.Envelope) executor.TickRecord {
	t.Helper()
	if r.Outcome.Action != executor.AuditAction {
		t.Errorf("tick %d: audit action %q", i, r.Outcome.Action)
	}
	wantOutcome := contract.OutcomeAllow
	if env.Aborted != nil {
		wantOutcome = contract.OutcomeDeny
	}
	if r.Outcome.Outcome != wantOutcome {
		t.Errorf("tick %d: audit outcome %q, want %q", i, r.Outcome.Outcome, wantOutcome)
	}
	var rec executor.TickRecord
	if err := json.Unmarshal(r.Payload, &rec); err != nil {
		t.Fatalf("tick %d: audit payload: %v", i, err)
	}
	got, _ := json.Marshal(rec.Envelope)
	want, _ := json.Marshal(env)
	if !bytes.Equal(got, want) {
		t.Errorf("tick %d: audited envelope differs:\n%s\n%s", i, got, want)
	}
	if env.Mode != "" && !contract.ValidSHA256(rec.ManifestSHA256) {
		t.Errorf("tick %d: manifest read but manifest_sha256 = %q", i, rec.ManifestSHA256)
	}
	if rec.Context != env.Context || len(rec.Payload) == 0 {
		t.Errorf("tick %d: audit context %q payload %d bytes", i, rec.Context, len(rec.Payload))
	}
	return rec
}

// checkInvariants holds for every tick of every scenario.
func checkInvariants(t *testing.T, i int, req executor.TickRequest, env executor.Envelope, rec executor.TickRecord) {
	t.Helper()
	reviewed := map[string]bool{}
	refs := map[string]string{} // symbol -> ref_id of its placement
	for _, c := range rec.BrokerCalls {
		args, _ := json.Marshal(c.Args)
		var o struct {
			Symbol, Side string
			RefID        string `json:"ref_id"`
		}
		_ = json.Unmarshal(args, &o)
		switch c.Name {
		case "review_equity_order":
			reviewed[o.Symbol+"/"+o.Side] = true
		case "place_equity_order":
			if !reviewed[o.Symbol+"/"+o.Side] {
				t.Errorf("tick %d: %s %s placed without a review", i, o.Side, o.Symbol)
			}
			if prev, ok := refs[o.Symbol]; ok && prev != o.RefID {
				t.Errorf("tick %d: retry of %s used ref_id %s, first attempt %s", i, o.Symbol, o.RefID, prev)
			}
			if o.RefID == "" {
				t.Errorf("tick %d: placement of %s without ref_id", i, o.Symbol)
			}
			refs[o.Symbol] = o.RefID
			fallthrough
		case "cancel_equity_order":
			if env.Context == executor.ContextClaudeCode {
				t.Errorf("tick %d: claude-code context called %s", i, c.Name)
			}
			if env.Mode != executor.ModeLive {
				t.Errorf("tick %d: %s mode manifest called %s", i, env.Mode, c.Name)
			}
		}
	}
	for _, a := range env.Actions {
		if a.Status == executor.StatusPlaced && env.CircuitBreakerTripped && a.Side == executor.SideBuy {
			t.Errorf("tick %d: buy placed with the breaker tripped", i)
		}
	}
}

func pretty(v any) string {
	b, _ := json.MarshalIndent(v, "", "  ")
	return string(b)
}

func golden(t *testing.T, path string, v any) {
	t.Helper()
	got, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	got = append(got, '\n')
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("envelopes differ from %s (go test -update rewrites it after review):\n%s", path, got)
	}
}
