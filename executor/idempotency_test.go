package executor_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
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

// TestKeyedRefIDsAreRecordedWithTheKey: a keyed tick's ref_ids are random
// UUIDv4s, one per intent, recorded with its key (Store.TickRefs): the
// placements use them, the same key with a second run's proposal reads
// them back, and another key or tenant gets its own.
func TestKeyedRefIDsAreRecordedWithTheKey(t *testing.T) {
	two := `{"strategy":"momentum","intents":[` +
		`{"symbol":"NVDA","side":"buy","quantity_type":"shares","qty":1,"order_type":"market","intent_price":100.05,"max_slippage_pct":1},` +
		`{"symbol":"SPY","side":"buy","quantity_type":"shares","qty":1,"order_type":"market","intent_price":481.60,"max_slippage_pct":1}]}`
	k := newKeyed(t)
	env, err := k.ex.Tick(t.Context(), keyedTick("slot-1", "key-00000009", two, ""))
	if err != nil || len(env.Actions) != 2 {
		t.Fatalf("tick: %+v, %v", env, err)
	}
	var placed []string
	for _, a := range env.Actions {
		if a.Status != executor.StatusPlaced || !uuidV4.MatchString(a.RefID) {
			t.Fatalf("action %+v: want placed under a UUIDv4 ref_id", a)
		}
		placed = append(placed, a.RefID)
	}
	if placed[0] == placed[1] {
		t.Fatalf("both intents placed under ref_id %s", placed[0])
	}
	stored, err := k.store.TickRefs(t.Context(), "slot-1", "key-00000009", []string{"x", "y"})
	if err != nil || !slices.Equal(stored, placed) {
		t.Fatalf("ref_ids recorded with the key: %q, %v; want the placed %q", stored, err, placed)
	}
	for _, o := range k.sim.AllOrders() {
		if !slices.Contains(placed, o.RefID) {
			t.Errorf("order %s under ref_id %s the envelope does not name", o.ID, o.RefID)
		}
	}
	other, err := k.ex.Tick(t.Context(), keyedTick("slot-2", "key-00000009", two, ""))
	if err != nil || other.Actions[0].RefID == placed[0] || other.Actions[0].Status != executor.StatusPlaced {
		t.Fatalf("other tenant, same key: %+v, %v; want its own ref_ids", other, err)
	}
}

// TestExistingOrderForRefIDIsNotPlaced: when the broker answers a
// placement with the order it already held for the ref_id (here NewRef
// repeats one), the action is already_placed, reason ref_id_exists, with
// that order's id and a note, never placed; nothing new is placed.
func TestExistingOrderForRefIDIsNotPlaced(t *testing.T) {
	k := newKeyed(t)
	k.ex.NewRef = func() string { return "5f0c3a5e-1b2d-4c3e-8f40-000000000001" }
	first, err := k.ex.Tick(t.Context(), keyedTick("slot-1", "", buyNVDA, ""))
	if err != nil || first.Actions[0].Status != executor.StatusPlaced {
		t.Fatalf("first: %+v, %v", first, err)
	}
	second, err := k.ex.Tick(t.Context(), keyedTick("slot-1", "", buyNVDA, ""))
	a := second.Actions[0]
	if err != nil || a.Status != executor.StatusAlreadyPlaced || a.Reason != executor.ReasonRefIDExists || a.OrderID == nil ||
		*a.OrderID != *first.Actions[0].OrderID || a.RefID != first.Actions[0].RefID {
		t.Fatalf("second: %+v, %v; want already_placed ref_id_exists with the first order", a, err)
	}
	if len(a.Notes) == 0 || !strings.Contains(a.Notes[len(a.Notes)-1], "not placed by this tick") {
		t.Errorf("notes %q do not say the order is not this tick's", a.Notes)
	}
	if n := len(k.sim.AllOrders()); n != 1 {
		t.Errorf("%d orders, want 1", n)
	}
	b, _ := json.Marshal(second)
	if err := compileSchema(t, "envelope").Validate(instance(t, b)); err != nil {
		t.Errorf("the already_placed envelope does not validate: %v", err)
	}
	a.Reason = "other"
	b, _ = json.Marshal(a)
	if err := compileSchema(t, "action").Validate(instance(t, b)); err == nil {
		t.Errorf("the schema accepts already_placed with reason %q", a.Reason)
	}
}
