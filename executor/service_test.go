package executor_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/caduceus-dev/caduceus/audit"
	"github.com/caduceus-dev/caduceus/broker/paper"
	"github.com/caduceus-dev/caduceus/contract"
	"github.com/caduceus-dev/caduceus/executor"
	"github.com/caduceus-dev/caduceus/executor/executortest"
)

func TestTickAs(t *testing.T) {
	f := &fixture{}
	sc := f.scenario(t)
	now, _, _ := sc.NowTime()
	sc.Now = ""
	sim, err := paper.New(sc, func() time.Time { return now })
	if err != nil {
		t.Fatal(err)
	}
	ex := &executor.Executor{Broker: sim, Store: executortest.NewMemory(), Audit: audit.NewMemory(), Skills: "testdata/skills", Now: func() time.Time { return now }}
	in := executor.TickInput{Payload: []byte(`{"strategy":"momentum","intents":[{"symbol":"SPY","side":"buy","quantity_type":"shares","qty":1,"order_type":"market","intent_price":481.60,"max_slippage_pct":1}]}`)}
	caller := contract.Caller{Identity: identity("slot-4"), Scopes: []contract.Scope{contract.ScopeOperate}}

	if _, err := ex.TickAs(t.Context(), caller, executor.TickInput{}); contract.KindOf(err) != contract.KindInvalid {
		t.Fatalf("without payload: %v", err)
	}
	// A key without a run context is claude-code: reviewed, never placed.
	env, err := ex.TickAs(t.Context(), caller, in)
	if err != nil || env.Context != executor.ContextClaudeCode || env.Actions[0].Status != executor.StatusReviewed {
		t.Fatalf("no run context: %+v, %v", env, err)
	}
	// A cron key places.
	caller.RunContext = contract.RunCron
	caller.Harness = "autotrader"
	env, err = ex.TickAs(t.Context(), caller, in)
	if err != nil || env.Context != executor.ContextCron || env.Profile != "autotrader" || env.Actions[0].Status != executor.StatusPlaced {
		t.Fatalf("cron key: %+v, %v", env, err)
	}
	// A chat key places only on the directive.
	caller.RunContext = contract.RunChat
	in.Message = "EXECUTE: buy SPY 1"
	env, err = ex.TickAs(t.Context(), caller, in)
	if err != nil || env.Context != executor.ContextChat || env.Actions[0].Status != executor.StatusPlaced {
		t.Fatalf("chat key with directive: %+v, %v", env, err)
	}
	// The MCP tool's shape: arguments in, envelope out.
	out, err := ex.ExecuteIntents(t.Context(), caller, []byte(`{"payload":{"strategy":"momentum","intents":[]},"message":"hi"}`))
	if e, ok := out.(executor.Envelope); err != nil || !ok || !e.Audited || e.Context != executor.ContextChat {
		t.Fatalf("ExecuteIntents: %#v, %v", out, err)
	}
	for _, bad := range []string{`{"payload":{},"extra":1}`, `[]`, `{"payload":{"strategy":"x","intents":[]}} {}`, `{"message":"no payload"}`} {
		if out, err := ex.ExecuteIntents(t.Context(), caller, []byte(bad)); contract.KindOf(err) != contract.KindInvalid || out != nil {
			t.Errorf("ExecuteIntents(%s) = %v, %v; want invalid", bad, out, err)
		}
	}
	if s, err := contract.UnmarshalInstance(executor.TickInputSchema); err != nil || s == nil {
		t.Fatalf("TickInputSchema is not JSON: %v", err)
	}
}

// TestManifestReReadEveryTick: the manifest is the authoritative source and
// is read on every tick; an edit (here: adding do_not_promote) takes effect
// on the next tick even though parsed manifests are cached by content.
func TestManifestReReadEveryTick(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, executor.ManifestDir, "m", "SKILL.md")
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	body := "---\nname: m\nstrategist: {mode: live, allowlist: [SPY], max_position_pct: 50, max_concurrent_positions: 5, profile_compatibility: [claude-code]}\n---\n"
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	f := &fixture{}
	sc := f.scenario(t)
	sim, err := paper.New(sc, nil)
	if err != nil {
		t.Fatal(err)
	}
	ex := &executor.Executor{Broker: sim, Store: executortest.NewMemory(), Audit: audit.NewMemory(), Skills: dir}
	req := executor.TickRequest{Payload: []byte(`{"strategy":"m","intents":[]}`), Identity: identity(""), Context: executor.ContextCron}
	for i, want := range []string{"null", executor.AbortPromotionBlocked, "null"} {
		switch i {
		case 1:
			must(t, os.WriteFile(path, []byte(strings.Replace(body, "name: m\n", "name: m\ndo_not_promote: true\n", 1)), 0o644))
		case 2:
			must(t, os.WriteFile(path, []byte(body), 0o644))
		}
		env, err := ex.Tick(t.Context(), req)
		got := "null"
		if env.Aborted != nil {
			got = *env.Aborted
		}
		if err != nil || got != want {
			t.Fatalf("tick %d: aborted %s, %v; want %s", i, got, err, want)
		}
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// TestConcurrentTicks runs ticks for several tenants on one Executor at
// once (run with -race): every tick gets its own audit record and the
// shared paper broker fills each buy exactly once.
func TestConcurrentTicks(t *testing.T) {
	f := &fixture{}
	sc := f.scenario(t)
	sim, err := paper.New(sc, nil)
	if err != nil {
		t.Fatal(err)
	}
	log := audit.NewMemory()
	ex := &executor.Executor{Broker: sim, Store: executortest.NewMemory(), Audit: log, Skills: "testdata/skills"}
	payload := []byte(`{"strategy":"momentum","intents":[{"symbol":"NVDA","side":"buy","quantity_type":"shares","qty":1,"order_type":"market","intent_price":100.05,"max_slippage_pct":1}]}`)
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			env, err := ex.Tick(t.Context(), executor.TickRequest{Payload: payload, Identity: identity(fmt.Sprintf("slot-%d", i+1)), Context: executor.ContextCron})
			if err != nil || env.Actions[0].Status != executor.StatusPlaced {
				t.Errorf("tick %d: %v %+v", i, err, env)
			}
		})
	}
	wg.Wait()
	if n := len(sim.AllOrders()); n != 8 {
		t.Fatalf("%d orders, want 8", n)
	}
	for i := range 8 {
		if n := len(log.Records(contract.TenantSlot(fmt.Sprintf("slot-%d", i+1)))); n != 1 {
			t.Fatalf("tenant %d: %d records", i+1, n)
		}
	}
}

type failingStore struct {
	executor.Store
	failOn string
}

func (s failingStore) CaptureDayStart(ctx context.Context, t contract.TenantSlot, a, d string, v float64) (float64, error) {
	if s.failOn == "day" {
		return 0, errors.New("disk full")
	}
	return s.Store.CaptureDayStart(ctx, t, a, d, v)
}

func (s failingStore) AddAnomaly(ctx context.Context, t contract.TenantSlot, a, d string) (int, error) {
	if s.failOn == "anomaly" {
		return 0, errors.New("disk full")
	}
	return s.Store.AddAnomaly(ctx, t, a, d)
}

type failingLog struct{}

func (failingLog) Append(context.Context, audit.Entry) (audit.Record, error) {
	return audit.Record{}, errors.New("audit disk full")
}

// TestFailures: the executor's own store or audit failing is an internal
// error, never a silent success; whatever already happened at the broker
// is still returned (and recorded when the audit log works).
func TestFailures(t *testing.T) {
	newEx := func(store executor.Store, log audit.Log, patch string) (*executor.Executor, *paper.Sim) {
		f := &fixture{}
		if patch != "" {
			f.ScenarioPatch = map[string]any{"review_alerts": map[string]any{"TSLA": []any{map[string]any{"type": "PRICE_COLLAR"}}}}
		}
		sim, err := paper.New(f.scenario(t), nil)
		if err != nil {
			t.Fatal(err)
		}
		return &executor.Executor{Broker: sim, Store: store, Audit: log, Skills: "testdata/skills"}, sim
	}
	payload := []byte(`{"strategy":"momentum","intents":[
		{"symbol":"SPY","side":"buy","quantity_type":"shares","qty":1,"order_type":"market","intent_price":481.60,"max_slippage_pct":1},
		{"symbol":"TSLA","side":"buy","quantity_type":"shares","qty":1,"order_type":"market","intent_price":250.10,"max_slippage_pct":1}]}`)
	req := executor.TickRequest{Payload: payload, Identity: identity(""), Context: executor.ContextCron}

	log := audit.NewMemory()
	ex, _ := newEx(failingStore{executortest.NewMemory(), "day"}, log, "")
	env, err := ex.Tick(t.Context(), req)
	if err == nil || contract.KindOf(err) != contract.KindInternal || !env.Audited || len(log.Records("slot-1")) != 1 {
		t.Fatalf("day-start failure: %v, audited %v", err, env.Audited)
	}

	log = audit.NewMemory()
	ex, sim := newEx(failingStore{executortest.NewMemory(), "anomaly"}, log, "alerts")
	env, err = ex.Tick(t.Context(), req)
	if err == nil || contract.KindOf(err) != contract.KindInternal || !env.Audited || len(env.Actions) != 2 || env.Actions[0].Status != executor.StatusPlaced || len(sim.AllOrders()) != 1 {
		t.Fatalf("anomaly counter failure: %v %+v", err, env)
	}

	ex, _ = newEx(executortest.NewMemory(), failingLog{}, "")
	env, err = ex.Tick(t.Context(), req)
	if err == nil || contract.KindOf(err) != contract.KindInternal || env.Audited || env.TickID == "" || env.Actions[0].Status != executor.StatusPlaced {
		t.Fatalf("audit failure must be an error that still returns what happened: %v %+v", err, env)
	}

	ex, _ = newEx(executortest.NewMemory(), audit.NewMemory(), "")
	ex.Skills = filepath.Join(t.TempDir(), "absent")
	// The operator's to fix: a not_found error naming the root, never internal.
	if _, err := ex.Tick(t.Context(), req); contract.KindOf(err) != contract.KindNotFound || contract.AsError(err).Code != "skills_root_missing" || !strings.Contains(err.Error(), "absent") {
		t.Fatalf("missing skills root: %v", err)
	}
	if _, err := (&executor.Executor{}).Tick(t.Context(), req); err == nil || contract.KindOf(err) != contract.KindInternal {
		t.Fatalf("unconfigured executor: %v", err)
	}
}

// TestTickAsHintDisagrees: over HTTP and MCP the calling key's run context is
// authoritative; a payload context_hint that disagrees with it yields the
// stricter of the two, with a note naming both (seed 001: when detection is
// ambiguous, the strictest mode that applies). A looser hint changes nothing
// but the note.
func TestTickAsHintDisagrees(t *testing.T) {
	f := &fixture{}
	sc := f.scenario(t)
	now, _, _ := sc.NowTime()
	sc.Now = ""
	sim, err := paper.New(sc, func() time.Time { return now })
	if err != nil {
		t.Fatal(err)
	}
	ex := &executor.Executor{Broker: sim, Store: executortest.NewMemory(), Audit: audit.NewMemory(), Skills: "testdata/skills", Now: func() time.Time { return now }}
	payload := func(hint string) executor.TickInput {
		return executor.TickInput{Payload: []byte(`{"strategy":"momentum","context_hint":"` + hint + `","intents":[{"symbol":"SPY","side":"buy","quantity_type":"shares","qty":1,"order_type":"market","intent_price":481.60,"max_slippage_pct":1}]}`),
			Message: "EXECUTE: buy SPY 1"}
	}
	hasNote := func(env executor.Envelope, parts ...string) bool {
		for _, n := range env.Notes {
			ok := true
			for _, p := range parts {
				ok = ok && strings.Contains(n, p)
			}
			if ok {
				return true
			}
		}
		return false
	}
	caller := contract.Caller{Identity: identity("slot-4"), Scopes: []contract.Scope{contract.ScopeOperate}, Harness: "autotrader"}

	for _, tc := range []struct {
		key    contract.RunContext
		hint   string
		want   executor.RunContext
		status string
		note   bool
	}{
		{contract.RunCron, "claude-code", executor.ContextClaudeCode, executor.StatusReviewed, true},
		{contract.RunCron, "analyst", executor.ContextClaudeCode, executor.StatusReviewed, true},
		{contract.RunCron, "chat", executor.ContextChat, executor.StatusPlaced, true}, // the directive matches
		{contract.RunChat, "cron", executor.ContextChat, executor.StatusPlaced, true},
		{"", "cron", executor.ContextClaudeCode, executor.StatusReviewed, true},
		{contract.RunCron, "cron", executor.ContextCron, executor.StatusPlaced, false},
	} {
		caller.RunContext = tc.key
		env, err := ex.TickAs(t.Context(), caller, payload(tc.hint))
		if err != nil || env.Context != tc.want || env.Actions[0].Status != tc.status {
			t.Errorf("key %q, hint %q: context %s, %s, %v; want %s, %s", tc.key, tc.hint, env.Context, env.Actions[0].Status, err, tc.want, tc.status)
		}
		if got := hasNote(env, "context_hint", tc.hint, "stricter "+string(tc.want)); got != tc.note {
			t.Errorf("key %q, hint %q: a note naming both = %v, want %v: %q", tc.key, tc.hint, got, tc.note, env.Notes)
		}
	}
	// A hint that is no run context is noted and changes nothing.
	caller.RunContext = contract.RunCron
	env, err := ex.TickAs(t.Context(), caller, payload("overnight"))
	if err != nil || env.Context != executor.ContextCron || !hasNote(env, `context_hint "overnight" is not cron, chat or claude-code`) {
		t.Errorf("unknown hint: %s, %v, %q", env.Context, err, env.Notes)
	}
}
