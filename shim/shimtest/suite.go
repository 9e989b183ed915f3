package shimtest

import (
	"context"
	"fmt"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/caduceus-dev/caduceus/contract"
	"github.com/caduceus-dev/caduceus/shim"
)

// TestStore runs the shim.Store conformance suite against stores made by
// open (each call must return an empty store).
func TestStore(t *testing.T, open func(t *testing.T) shim.Store) {
	t.Run("ProvisionCRUD", func(t *testing.T) { testProvisionCRUD(t, open(t)) })
	t.Run("ProvisionRoundTrip", func(t *testing.T) { testProvisionRoundTrip(t, open(t)) })
	t.Run("ProvisionConcurrentCAS", func(t *testing.T) { testConcurrentCAS(t, open(t)) })
	t.Run("ContextCRUD", func(t *testing.T) { testContextCRUD(t, open(t)) })
	t.Run("TenantIsolation", func(t *testing.T) { testTenantIsolation(t, open(t)) })
	t.Run("Ledger", func(t *testing.T) { testLedger(t, open(t)) })
	t.Run("Receipts", func(t *testing.T) { testReceipts(t, open(t)) })
	t.Run("ReceiptOfResponse", func(t *testing.T) { testReceiptOfResponse(t, open(t)) })
}

// testReceiptOfResponse: the receipt whose client got a Responses API
// answer is found by that answer's id, in its tenant only; the newest
// wins when two name one id.
func testReceiptOfResponse(t *testing.T, s shim.Store) {
	ctx := context.Background()
	for _, r := range []shim.Receipt{
		{ID: "rcpt_01AAAAAAAAAAAAAAAAAAAAAAAA", Tenant: tenantA, Decision: shim.DecisionForward, ResponseID: "resp_one", Upstream: "old"},
		{ID: "rcpt_01AAAAAAAAAAAAAAAAAAAAAAAB", Tenant: tenantA, Decision: shim.DecisionForward},
		{ID: "rcpt_01AAAAAAAAAAAAAAAAAAAAAAAC", Tenant: tenantA, Decision: shim.DecisionForward, ResponseID: "resp_one", Upstream: "new"},
	} {
		if err := s.AddReceipt(ctx, tenantA, r); err != nil {
			t.Fatal(err)
		}
	}
	r, err := s.ReceiptOfResponse(ctx, tenantA, "resp_one")
	if err != nil || r.ID != "rcpt_01AAAAAAAAAAAAAAAAAAAAAAAC" || r.Upstream != "new" {
		t.Fatalf("ReceiptOfResponse = %+v %v", r, err)
	}
	_, err = s.ReceiptOfResponse(ctx, tenantB, "resp_one")
	wantKind(t, err, contract.KindNotFound, shim.CodeNotFound)
	_, err = s.ReceiptOfResponse(ctx, tenantA, "resp_none")
	wantKind(t, err, contract.KindNotFound, shim.CodeNotFound)
}

const (
	tenantA contract.TenantSlot = "slot-1"
	tenantB contract.TenantSlot = "slot-2"
)

func wantKind(t *testing.T, err error, kind contract.Kind, code string) {
	t.Helper()
	if err == nil {
		t.Fatalf("got no error, want %s/%s", kind, code)
	}
	e := contract.AsError(err)
	if e.Kind != kind || e.Code != code {
		t.Fatalf("got %v (kind %s code %q), want %s/%s", err, e.Kind, e.Code, kind, code)
	}
}

// must returns v, or panics on err (which fails the test with a stack);
// Go cannot pass a (value, error) pair along with a *testing.T.
func must[T any](v T, err error) T {
	if err != nil {
		panic(fmt.Sprintf("shimtest: unexpected error: %v", err))
	}
	return v
}

func simple(id string) shim.Provision {
	return shim.Provision{ID: id, Status: shim.StatusActive, Action: shim.ActionShim, ContextRefs: []string{"verb:x"},
		Triggers: shim.Triggers{Mode: "any", Keyword: &shim.Keywords{Any: []string{"deploy"}}}}
}

func testProvisionCRUD(t *testing.T, s shim.Store) {
	ctx := t.Context()
	if ps := must(s.ListProvisions(ctx, tenantA)); len(ps) != 0 {
		t.Fatalf("empty store lists %d provisions", len(ps))
	}
	_, err := s.GetProvision(ctx, tenantA, "P1")
	wantKind(t, err, contract.KindNotFound, shim.CodeNotFound)

	for _, id := range []string{"P2", "P1", "P3"} {
		p := must(s.CreateProvision(ctx, tenantA, simple(id)))
		if p.Version != 1 {
			t.Fatalf("created %s at version %d, want 1", id, p.Version)
		}
	}
	_, err = s.CreateProvision(ctx, tenantA, simple("P1"))
	wantKind(t, err, contract.KindConflict, shim.CodeExists)

	ps := must(s.ListProvisions(ctx, tenantA))
	var ids []string
	for _, p := range ps {
		ids = append(ids, p.ID)
	}
	if fmt.Sprint(ids) != "[P1 P2 P3]" {
		t.Fatalf("list order %v, want [P1 P2 P3]", ids)
	}

	upd := simple("P1")
	upd.Priority = 7
	got := must(s.UpdateProvision(ctx, tenantA, upd, 1))
	if got.Version != 2 || got.Priority != 7 {
		t.Fatalf("update gave version %d priority %d, want 2, 7", got.Version, got.Priority)
	}
	stale := simple("P1")
	stale.Priority = 99
	_, err = s.UpdateProvision(ctx, tenantA, stale, 1)
	wantKind(t, err, contract.KindConflict, shim.CodeRevisionMismatch)
	if p := must(s.GetProvision(ctx, tenantA, "P1")); p.Priority != 7 || p.Version != 2 {
		t.Fatalf("a conflicting update changed the row: priority %d version %d", p.Priority, p.Version)
	}
	_, err = s.UpdateProvision(ctx, tenantA, simple("NOPE"), 1)
	wantKind(t, err, contract.KindNotFound, shim.CodeNotFound)

	wantKind(t, s.DeleteProvision(ctx, tenantA, "P1", 1), contract.KindConflict, shim.CodeRevisionMismatch)
	if err := s.DeleteProvision(ctx, tenantA, "P1", 2); err != nil {
		t.Fatal(err)
	}
	_, err = s.GetProvision(ctx, tenantA, "P1")
	wantKind(t, err, contract.KindNotFound, shim.CodeNotFound)
	wantKind(t, s.DeleteProvision(ctx, tenantA, "P1", 2), contract.KindNotFound, shim.CodeNotFound)
	// the id is free again
	if p := must(s.CreateProvision(ctx, tenantA, simple("P1"))); p.Version != 1 {
		t.Fatalf("re-created at version %d", p.Version)
	}
}

func testProvisionRoundTrip(t *testing.T, s shim.Store) {
	ctx := t.Context()
	p := shim.Provision{
		ID: "PROV-DEPLOY-GUIDE", Status: shim.StatusActive, Priority: 100,
		Match: &shim.Match{Protocols: []string{"chat_completions", "messages"}, Models: []string{"gpt-*"}, Harnesses: []string{"claude-code"}},
		Triggers: shim.Triggers{Mode: "any",
			Keyword:    &shim.Keywords{Any: []string{"deploy", "release"}, All: []string{"prod"}, None: []string{"never"}},
			Regex:      []shim.Regex{{Pattern: `(?i)\bE\d{4}\b`}},
			Path:       []string{"deploy/**"},
			Tool:       []string{"Bash"},
			Semantic:   &shim.Semantic{Examples: []string{"ship this to prod"}, Threshold: 0.8},
			Micromodel: &shim.Micromodel{Model: "local-classifier", Question: "Deploying?", MinConfidence: 0.7}},
		Action: shim.ActionShim, ContextRefs: []string{"verb:deploy", "noun:service/payments"},
		Placement: shim.PlacementBeforeLastUser, OncePerConversation: true, MaxChars: 4000,
		Response:         &shim.Response{Text: "Deploy with make deploy-staging.", StopReason: "end_turn"},
		FabricGovernance: &shim.Governance{Status: "verified", VisibilityScope: "team", Cohort: "core", Harness: []string{"claude-code"}},
		SystemBuiltin:    true, UpdatedAt: "2026-11-29T20:00:00Z",
	}
	must(s.CreateProvision(ctx, tenantA, p))
	got := must(s.GetProvision(ctx, tenantA, p.ID))
	p.Version = 1
	if !reflect.DeepEqual(got, p) {
		t.Fatalf("round trip changed the provision:\n got %+v\nwant %+v", got, p)
	}
	e := shim.ContextEntry{Ref: "noun:service/payments", Kind: "noun", Title: "Payments", Body: "héllo\nworld",
		SHA256: contract.SHA256([]byte("héllo\nworld")), MaxChars: 10, Status: "active", SystemBuiltin: true, UpdatedAt: "2026-11-29T20:00:00Z"}
	must(s.CreateContext(ctx, tenantA, e))
	ge := must(s.GetContext(ctx, tenantA, e.Ref))
	e.Version = 1
	if !reflect.DeepEqual(ge, e) {
		t.Fatalf("round trip changed the entry:\n got %+v\nwant %+v", ge, e)
	}
}

func testConcurrentCAS(t *testing.T, s shim.Store) {
	ctx := t.Context()
	must(s.CreateProvision(ctx, tenantA, simple("P")))
	const n = 8
	var wg sync.WaitGroup
	var mu sync.Mutex
	ok, conflicts := 0, 0
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p := simple("P")
			p.Priority = i + 1
			_, err := s.UpdateProvision(ctx, tenantA, p, 1)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				ok++
			case contract.KindOf(err) == contract.KindConflict:
				conflicts++
			default:
				t.Errorf("update: %v", err)
			}
		}()
	}
	wg.Wait()
	if ok != 1 || conflicts != n-1 {
		t.Fatalf("%d concurrent updates at version 1: %d applied, %d conflicts; want 1 and %d", n, ok, conflicts, n-1)
	}
	if p := must(s.GetProvision(ctx, tenantA, "P")); p.Version != 2 {
		t.Fatalf("version %d after one applied update, want 2", p.Version)
	}
}

func entry(ref, body string) shim.ContextEntry {
	return shim.ContextEntry{Ref: ref, Kind: "verb", Body: body, SHA256: contract.SHA256([]byte(body)), Status: "active"}
}

func testContextCRUD(t *testing.T, s shim.Store) {
	ctx := t.Context()
	_, err := s.GetContext(ctx, tenantA, "verb:deploy")
	wantKind(t, err, contract.KindNotFound, shim.CodeNotFound)
	must(s.CreateContext(ctx, tenantA, entry("verb:deploy", "one")))
	must(s.CreateContext(ctx, tenantA, entry("noun:api", "two")))
	_, err = s.CreateContext(ctx, tenantA, entry("verb:deploy", "again"))
	wantKind(t, err, contract.KindConflict, shim.CodeExists)
	es := must(s.ListContext(ctx, tenantA))
	if len(es) != 2 || es[0].Ref != "noun:api" || es[1].Ref != "verb:deploy" {
		t.Fatalf("list %+v, want noun:api then verb:deploy", es)
	}
	got := must(s.UpdateContext(ctx, tenantA, entry("verb:deploy", "three"), 1))
	if got.Version != 2 || got.Body != "three" {
		t.Fatalf("update gave %+v", got)
	}
	_, err = s.UpdateContext(ctx, tenantA, entry("verb:deploy", "stale"), 1)
	wantKind(t, err, contract.KindConflict, shim.CodeRevisionMismatch)
	if e := must(s.GetContext(ctx, tenantA, "verb:deploy")); e.Body != "three" {
		t.Fatalf("a conflicting update changed the row: %q", e.Body)
	}
	_, err = s.UpdateContext(ctx, tenantA, entry("verb:nope", "x"), 1)
	wantKind(t, err, contract.KindNotFound, shim.CodeNotFound)
	wantKind(t, s.DeleteContext(ctx, tenantA, "verb:deploy", 1), contract.KindConflict, shim.CodeRevisionMismatch)
	if err := s.DeleteContext(ctx, tenantA, "verb:deploy", 2); err != nil {
		t.Fatal(err)
	}
	wantKind(t, s.DeleteContext(ctx, tenantA, "verb:deploy", 2), contract.KindNotFound, shim.CodeNotFound)
}

func testTenantIsolation(t *testing.T, s shim.Store) {
	ctx := t.Context()
	a := simple("SAME")
	a.Priority = 1
	b := simple("SAME")
	b.Priority = 2
	must(s.CreateProvision(ctx, tenantA, a))
	must(s.CreateProvision(ctx, tenantB, b))
	must(s.CreateProvision(ctx, tenantA, simple("ONLY-A")))
	if p := must(s.GetProvision(ctx, tenantB, "SAME")); p.Priority != 2 {
		t.Fatalf("tenant B reads priority %d, want its own 2", p.Priority)
	}
	_, err := s.GetProvision(ctx, tenantB, "ONLY-A")
	wantKind(t, err, contract.KindNotFound, shim.CodeNotFound)
	_, err = s.UpdateProvision(ctx, tenantB, simple("ONLY-A"), 1)
	wantKind(t, err, contract.KindNotFound, shim.CodeNotFound)
	wantKind(t, s.DeleteProvision(ctx, tenantB, "ONLY-A", 1), contract.KindNotFound, shim.CodeNotFound)
	if ps := must(s.ListProvisions(ctx, tenantB)); len(ps) != 1 || ps[0].Priority != 2 {
		t.Fatalf("tenant B lists %+v", ps)
	}
	must(s.UpdateProvision(ctx, tenantB, b, 1))
	if p := must(s.GetProvision(ctx, tenantA, "SAME")); p.Version != 1 {
		t.Fatalf("tenant B's update moved tenant A's version to %d", p.Version)
	}
	must(s.CreateContext(ctx, tenantA, entry("verb:a", "secret of A")))
	_, err = s.GetContext(ctx, tenantB, "verb:a")
	wantKind(t, err, contract.KindNotFound, shim.CodeNotFound)
	if es := must(s.ListContext(ctx, tenantB)); len(es) != 0 {
		t.Fatalf("tenant B lists A's context: %+v", es)
	}
	if err := s.AddReceipt(ctx, tenantA, shim.Receipt{ID: "rcpt_01AAAAAAAAAAAAAAAAAAAAAAAA", Tenant: tenantA, Decision: shim.DecisionForward}); err != nil {
		t.Fatal(err)
	}
	if rs := must(s.ListReceipts(ctx, tenantB, 10, "")); len(rs) != 0 {
		t.Fatalf("tenant B lists A's receipts: %+v", rs)
	}
}

func testLedger(t *testing.T, s shim.Store) {
	ctx := t.Context()
	at := time.Date(2026, 11, 29, 20, 0, 0, 0, time.UTC)
	if seen := must(s.Shimmed(ctx, tenantA, "conv_1", "P")); seen {
		t.Fatal("empty ledger says shimmed")
	}
	if first := must(s.MarkShimmed(ctx, tenantA, "conv_1", "P", 1, at)); !first {
		t.Fatal("first mark reported as a repeat")
	}
	if first := must(s.MarkShimmed(ctx, tenantA, "conv_1", "P", 2, at)); first {
		t.Fatal("second mark reported as first")
	}
	if !must(s.Shimmed(ctx, tenantA, "conv_1", "P")) {
		t.Fatal("marked conversation not shimmed")
	}
	for _, c := range []struct {
		tenant contract.TenantSlot
		conv   string
		prov   string
	}{{tenantB, "conv_1", "P"}, {tenantA, "conv_2", "P"}, {tenantA, "conv_1", "Q"}} {
		if must(s.Shimmed(ctx, c.tenant, c.conv, c.prov)) {
			t.Fatalf("ledger leaks to %+v", c)
		}
	}
	const n = 8
	var wg sync.WaitGroup
	var mu sync.Mutex
	firsts := 0
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			first, err := s.MarkShimmed(ctx, tenantA, "conv_race", "P", 1, at)
			if err != nil {
				t.Error(err)
			}
			if first {
				mu.Lock()
				firsts++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if firsts != 1 {
		t.Fatalf("%d concurrent marks: %d reported first, want 1", n, firsts)
	}
}

func testReceipts(t *testing.T, s shim.Store) {
	ctx := t.Context()
	ids := []string{"rcpt_01AAAAAAAAAAAAAAAAAAAAAAA1", "rcpt_01AAAAAAAAAAAAAAAAAAAAAAA3", "rcpt_01AAAAAAAAAAAAAAAAAAAAAAA2"}
	conf := 0.9
	for i, id := range ids {
		r := shim.Receipt{ID: id, At: "2026-11-29T20:00:00Z", Tenant: tenantA, Subject: "usr_0123456789abcdef", Protocol: "messages",
			Model: "claude-x", Decision: shim.DecisionForward, Evaluated: i,
			Fired:         []shim.Fired{{ID: "P", Version: 1, Action: shim.ActionShim, Tier: 2, Reason: "semantic:0.9", Confidence: &conf}},
			Skipped:       []shim.Skipped{{ID: "Q", Version: 3, Reason: "once_per_conversation:ledger"}},
			Shimmed:       []shim.Shimmed{{Provision: "P", Ref: "verb:x", Version: 1, SHA256: contract.SHA256([]byte("x")), Chars: 1}},
			RequestSHA256: contract.SHA256([]byte("a")), OverheadMicros: 12}
		if err := s.AddReceipt(ctx, tenantA, r); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.AddReceipt(ctx, tenantA, shim.Receipt{ID: ids[0]}); err == nil {
		t.Fatal("a duplicate receipt id was stored")
	}
	rs := must(s.ListReceipts(ctx, tenantA, 10, ""))
	if len(rs) != 3 || rs[0].ID != ids[1] || rs[1].ID != ids[2] || rs[2].ID != ids[0] {
		t.Fatalf("receipts not newest first: %+v", rs)
	}
	if rs[0].Fired[0].Confidence == nil || *rs[0].Fired[0].Confidence != 0.9 || rs[0].Shimmed[0].Ref != "verb:x" || rs[0].Evaluated != 1 {
		t.Fatalf("receipt did not round-trip: %+v", rs[0])
	}
	if rs := must(s.ListReceipts(ctx, tenantA, 1, "")); len(rs) != 1 || rs[0].ID != ids[1] {
		t.Fatalf("limit 1 gave %+v", rs)
	}
	if rs := must(s.ListReceipts(ctx, tenantA, 10, ids[2])); len(rs) != 1 || rs[0].ID != ids[0] {
		t.Fatalf("before %s gave %+v", ids[2], rs)
	}
}
