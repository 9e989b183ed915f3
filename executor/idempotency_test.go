package executor_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/caduceus-dev/caduceus/audit"
	"github.com/caduceus-dev/caduceus/broker"
	"github.com/caduceus-dev/caduceus/broker/paper"
	"github.com/caduceus-dev/caduceus/contract"
	"github.com/caduceus-dev/caduceus/executor"
	"github.com/caduceus-dev/caduceus/executor/executortest"
)

// keyed is an executor over the base paper scenario with a memory store
// and audit log, the scenario's clock, and ref_ids derived as in
// production (no NewRef).
type keyed struct {
	ex    *executor.Executor
	sim   *paper.Sim
	store *executortest.Memory
	log   *audit.Memory
	now   time.Time
}

func newKeyed(t *testing.T) *keyed {
	t.Helper()
	sc := (&fixture{}).scenario(t)
	now, _, _ := sc.NowTime()
	sc.Now = ""
	sim, err := paper.New(sc, func() time.Time { return now })
	if err != nil {
		t.Fatal(err)
	}
	k := &keyed{sim: sim, store: executortest.NewMemory(), log: audit.NewMemory(), now: now}
	ticks := 0
	k.ex = &executor.Executor{Broker: sim, Store: k.store, Audit: k.log, Skills: "testdata/skills",
		Now: func() time.Time { return now }, NewTickID: func() string { ticks++; return fmt.Sprintf("tick_%04d", ticks) }}
	return k
}

const buyNVDA = `{"strategy":"momentum","intents":[{"symbol":"NVDA","side":"buy","quantity_type":"shares","qty":1,"order_type":"market","intent_price":100.05,"max_slippage_pct":1}]}`

func keyedTick(tenant, key, payload, message string) executor.TickRequest {
	return executor.TickRequest{Payload: json.RawMessage(payload), Identity: identity(tenant), Context: executor.ContextCron,
		Message: message, IdempotencyKey: key}
}

// TestKeyedTickRunsOnceThenReplays: a tick with an idempotency key runs
// once per tenant and key; the same key with the same payload and message
// returns the stored envelope marked replay, places nothing and records the
// replay (outcome of the replayed tick, no broker call).
func TestKeyedTickRunsOnceThenReplays(t *testing.T) {
	k := newKeyed(t)
	req := keyedTick("slot-1", "key-00000001", buyNVDA, "go")
	first, err := k.ex.Tick(t.Context(), req)
	if err != nil || first.Replay || !first.Audited || first.IdempotencyKey != "key-00000001" || first.Actions[0].Status != executor.StatusPlaced {
		t.Fatalf("first tick: %+v, %v", first, err)
	}
	for _, n := range first.Notes {
		if n == executor.NotIdempotentNote {
			t.Errorf("a keyed tick says it is not idempotent")
		}
	}
	// The same input written otherwise (key order, spaces) is the same input.
	req.Payload = json.RawMessage(strings.ReplaceAll(buyNVDA, ",", ", "))
	again, err := k.ex.Tick(t.Context(), req)
	if err != nil || !again.Replay || !again.Audited || again.TickID != first.TickID || *again.Actions[0].OrderID != *first.Actions[0].OrderID {
		t.Fatalf("retry: %+v, %v; want the first envelope replayed", again, err)
	}
	if n := len(k.sim.AllOrders()); n != 1 {
		t.Fatalf("%d orders after a replay, want 1", n)
	}
	recs := k.log.Records("slot-1")
	if len(recs) != 2 {
		t.Fatalf("%d audit records, want the tick's and the replay's", len(recs))
	}
	var rr executor.ReplayRecord
	if err := json.Unmarshal(recs[1].Payload, &rr); err != nil || rr != (executor.ReplayRecord{TickID: first.TickID, Strategy: "momentum", IdempotencyKey: "key-00000001", Replay: true}) {
		t.Errorf("replay record %s: %+v, %v", recs[1].Payload, rr, err)
	}
	if o := recs[1].Outcome; o.Outcome != contract.OutcomeAllow || o.Reason != "" || o.Action != executor.AuditAction || o.Resource != "strategist:momentum" ||
		o.At != contract.Timestamp(k.now) {
		t.Errorf("replay outcome %+v", o)
	}
	// Another tenant's key of the same name is its own.
	other, err := k.ex.Tick(t.Context(), keyedTick("slot-2", "key-00000001", buyNVDA, "go"))
	if err != nil || other.Replay || other.Actions[0].Status != executor.StatusPlaced {
		t.Fatalf("other tenant: %+v, %v", other, err)
	}
}

// TestKeyedTickRefusesAnotherInput: the same key with another payload or
// another message is a conflict, and calls no broker.
func TestKeyedTickRefusesAnotherInput(t *testing.T) {
	k := newKeyed(t)
	if _, err := k.ex.Tick(t.Context(), keyedTick("slot-1", "key-00000002", buyNVDA, "go")); err != nil {
		t.Fatal(err)
	}
	for name, req := range map[string]executor.TickRequest{
		"payload": keyedTick("slot-1", "key-00000002", strings.Replace(buyNVDA, `"qty":1`, `"qty":2`, 1), "go"),
		"message": keyedTick("slot-1", "key-00000002", buyNVDA, "go now"),
	} {
		env, err := k.ex.Tick(t.Context(), req)
		if e := contract.AsError(err); e == nil || e.Kind != contract.KindConflict || e.Code != "idempotency_key_conflict" || env.TickID != "" {
			t.Errorf("another %s: %+v, %v; want idempotency_key_conflict", name, env, err)
		}
	}
	if n := len(k.sim.AllOrders()); n != 1 {
		t.Fatalf("%d orders, want 1", n)
	}
}

// TestKeyedReplayOfAnAbortRecordsDeny: the replay of an aborted tick is
// recorded with the abort as its reason, as the tick was.
func TestKeyedReplayOfAnAbortRecordsDeny(t *testing.T) {
	k := newKeyed(t)
	req := keyedTick("slot-1", "key-00000003", `{"strategy":"nosuch","intents":[]}`, "")
	first, err := k.ex.Tick(t.Context(), req)
	if err != nil || first.Aborted == nil || *first.Aborted != executor.AbortManifestMissing {
		t.Fatalf("first: %+v, %v", first, err)
	}
	again, err := k.ex.Tick(t.Context(), req)
	if err != nil || !again.Replay || again.Aborted == nil || *again.Aborted != executor.AbortManifestMissing {
		t.Fatalf("replay: %+v, %v", again, err)
	}
	recs := k.log.Records("slot-1")
	if o := recs[len(recs)-1].Outcome; o.Outcome != contract.OutcomeDeny || o.Reason != executor.AbortManifestMissing {
		t.Errorf("replay of an abort recorded %+v", o)
	}
}

// TestKeyedReplayClipsItsResource: the replay record's resource
// ("strategist:<name>") is cut to the 200 characters audit allows.
func TestKeyedReplayClipsItsResource(t *testing.T) {
	k := newKeyed(t)
	name := strings.Repeat("s", 200) // "strategist:" + 200 is 211 characters
	req := keyedTick("slot-1", "key-00000004", `{"strategy":"`+name+`","intents":[]}`, "")
	for range 2 {
		if _, err := k.ex.Tick(t.Context(), req); err != nil {
			t.Fatal(err)
		}
	}
	recs := k.log.Records("slot-1")
	if len(recs) != 2 {
		t.Fatalf("%d records", len(recs))
	}
	if r := recs[1].Outcome.Resource; r != ("strategist:" + name)[:200] {
		t.Errorf("replay resource %q (%d characters), want the first 200", r, len(r))
	}
}

// noBrokerFor fails to find a broker for its tenant: the tick does nothing.
func noBrokerFor(tenant contract.TenantSlot, b broker.Broker) func(context.Context, contract.TenantSlot) (broker.Broker, error) {
	return func(_ context.Context, t contract.TenantSlot) (broker.Broker, error) {
		if t == tenant {
			return nil, errors.New("no paper account for " + string(t))
		}
		return b, nil
	}
}

// TestKeyedTickThatDidNothingFreesItsKey: a keyed tick that did nothing
// (here: no broker for its tenant) frees its key, so a retry runs.
func TestKeyedTickThatDidNothingFreesItsKey(t *testing.T) {
	k := newKeyed(t)
	k.ex.Broker = nil
	k.ex.Brokers = noBrokerFor("slot-1", k.sim)
	req := keyedTick("slot-1", "key-00000005", buyNVDA, "")
	env, err := k.ex.Tick(t.Context(), req)
	if err == nil || env.TickID != "" || env.Audited {
		t.Fatalf("no broker: %+v, %v; want an error and no tick", env, err)
	}
	if !strings.Contains(err.Error(), "no paper account for slot-1") {
		t.Errorf("error %v does not say why", err)
	}
	k.ex.Brokers = noBrokerFor("slot-9", k.sim)
	env, err = k.ex.Tick(t.Context(), req)
	if err != nil || env.Replay || env.Actions[0].Status != executor.StatusPlaced {
		t.Fatalf("retry after a tick that did nothing: %+v, %v; want it to run", env, err)
	}
}

// TestKeyedTickHeldElsewhereIsInProgress: a key another process claimed
// and has not completed is waited for; when the caller stops waiting the
// answer is idempotency_key_in_progress, and nothing is placed.
func TestKeyedTickHeldElsewhereIsInProgress(t *testing.T) {
	k := newKeyed(t)
	req := keyedTick("slot-1", "key-00000006", buyNVDA, "")
	hash, err := executor.TickInputHash(req.Payload, req.Message)
	if err != nil {
		t.Fatal(err)
	}
	if c, err := k.store.ClaimTick(t.Context(), "slot-1", req.IdempotencyKey, hash, executor.TickKeyLease); err != nil || !c.Claimed {
		t.Fatalf("claim: %+v, %v", c, err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Millisecond)
	defer cancel()
	env, err := k.ex.Tick(ctx, req)
	if e := contract.AsError(err); e == nil || e.Code != "idempotency_key_in_progress" || e.Kind != contract.KindConflict || env.TickID != "" {
		t.Fatalf("held key: %+v, %v; want idempotency_key_in_progress", env, err)
	}
	if n := len(k.sim.AllOrders()); n != 0 {
		t.Fatalf("%d orders placed under a key another process holds", n)
	}
	// Once the holder completes it, the same request replays its envelope.
	stored, _ := json.Marshal(executor.Envelope{TickID: "tick_elsewhere", Actions: []executor.Action{}})
	if err := k.store.CompleteTick(t.Context(), "slot-1", req.IdempotencyKey, stored); err != nil {
		t.Fatal(err)
	}
	env, err = k.ex.Tick(t.Context(), req)
	if err != nil || !env.Replay || env.TickID != "tick_elsewhere" {
		t.Fatalf("after completion: %+v, %v", env, err)
	}
}

// TestKeyedStoredEnvelopeUnreadableIsInternal: a stored envelope that does
// not decode is an internal error, never a second run.
func TestKeyedStoredEnvelopeUnreadableIsInternal(t *testing.T) {
	k := newKeyed(t)
	req := keyedTick("slot-1", "key-00000007", buyNVDA, "")
	hash, _ := executor.TickInputHash(req.Payload, req.Message)
	if _, err := k.store.ClaimTick(t.Context(), "slot-1", req.IdempotencyKey, hash, executor.TickKeyLease); err != nil {
		t.Fatal(err)
	}
	if err := k.store.CompleteTick(t.Context(), "slot-1", req.IdempotencyKey, []byte("{not json")); err != nil {
		t.Fatal(err)
	}
	env, err := k.ex.Tick(t.Context(), req)
	if err == nil || contract.KindOf(err) != contract.KindInternal || env.TickID != "" || len(k.sim.AllOrders()) != 0 {
		t.Fatalf("unreadable stored envelope: %+v, %v; want internal and no order", env, err)
	}
}

// TestKeyedDuplicatesInOneProcessPlaceOnce: duplicates of a keyed tick
// arriving at once wait for the first; one places, the rest replay it.
func TestKeyedDuplicatesInOneProcessPlaceOnce(t *testing.T) {
	k := newKeyed(t)
	req := keyedTick("slot-1", "key-00000008", buyNVDA, "")
	envs := make([]executor.Envelope, 6)
	errs := make([]error, 6)
	var wg sync.WaitGroup
	for i := range envs {
		wg.Go(func() { envs[i], errs[i] = k.ex.Tick(t.Context(), req) })
	}
	wg.Wait()
	ran := 0
	for i, env := range envs {
		if errs[i] != nil || env.TickID != envs[0].TickID {
			t.Fatalf("duplicate %d: %+v, %v", i, env, errs[i])
		}
		if !env.Replay {
			ran++
		}
	}
	if ran != 1 || len(k.sim.AllOrders()) != 1 {
		t.Fatalf("%d ran, %d orders; want one of each", ran, len(k.sim.AllOrders()))
	}
}

var uuidV8 = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-8[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)

// TestDerivedRefIDs: without NewRef a placement's ref_id is a version 8
// UUID derived from the tenant and key and the intent's index when the tick
// has a key (a takeover places under the same ref_id), else from tenant,
// strategy, intent and New York day (an identical intent re-sent the same
// day gets the same ref_id, so the broker's duplicate search finds it).
func TestDerivedRefIDs(t *testing.T) {
	refs := func(k *keyed, req executor.TickRequest) []string {
		t.Helper()
		env, err := k.ex.Tick(t.Context(), req)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, a := range env.Actions {
			if !uuidV8.MatchString(a.RefID) {
				t.Fatalf("ref_id %q is not a version 8 UUID", a.RefID)
			}
			out = append(out, a.RefID)
		}
		return out
	}
	two := `{"strategy":"momentum","intents":[` +
		`{"symbol":"NVDA","side":"buy","quantity_type":"shares","qty":1,"order_type":"market","intent_price":100.05,"max_slippage_pct":1},` +
		`{"symbol":"SPY","side":"buy","quantity_type":"shares","qty":1,"order_type":"market","intent_price":481.60,"max_slippage_pct":1}]}`
	a := refs(newKeyed(t), keyedTick("slot-1", "key-00000009", two, ""))
	b := refs(newKeyed(t), keyedTick("slot-1", "key-00000009", two, "another message"))
	c := refs(newKeyed(t), keyedTick("slot-2", "key-00000009", two, ""))
	d := refs(newKeyed(t), keyedTick("slot-1", "key-00000010", two, ""))
	if a[0] == a[1] || a[0] != b[0] || a[1] != b[1] || a[0] == c[0] || a[0] == d[0] {
		t.Errorf("keyed ref_ids: %q, same key %q, other tenant %q, other key %q", a, b, c, d)
	}
	u := refs(newKeyed(t), keyedTick("slot-1", "", two, ""))
	v := refs(newKeyed(t), keyedTick("slot-1", "", two, "another message"))
	w := refs(newKeyed(t), keyedTick("slot-2", "", two, ""))
	if u[0] == u[1] || u[0] != v[0] || u[1] != v[1] || u[0] == w[0] || u[0] == a[0] {
		t.Errorf("unkeyed ref_ids: %q, again %q, other tenant %q", u, v, w)
	}
	next := newKeyed(t)
	next.ex.Now = func() time.Time { return next.now.Add(24 * time.Hour) }
	if x := refs(next, executor.TickRequest{Payload: json.RawMessage(two), Identity: identity("slot-1"), Context: executor.ContextCron, Now: next.now.Add(24 * time.Hour)}); x[0] == u[0] {
		t.Errorf("the next New York day derives the same ref_id %q", x[0])
	}
}
