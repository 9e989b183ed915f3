package shimtest

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/caduceus-dev/caduceus/contract"
	"github.com/caduceus-dev/caduceus/shim"
	"github.com/caduceus-dev/caduceus/shim/memory"
)

// TestMemoryStore runs the memory.Store conformance suite against
// stores made by open (each call must return an empty store).
func TestMemoryStore(t *testing.T, open func(t *testing.T) memory.Store) {
	t.Run("Entities", func(t *testing.T) { testEntities(t, open(t)) })
	t.Run("EntityIsolation", func(t *testing.T) { testEntityIsolation(t, open(t)) })
	t.Run("Outcomes", func(t *testing.T) { testOutcomes(t, open(t)) })
	t.Run("OutcomesConcurrentResolve", func(t *testing.T) { testConcurrentResolve(t, open(t)) })
	t.Run("SyncMarks", func(t *testing.T) { testSyncMarks(t, open(t)) })
}

func testSyncMarks(t *testing.T, s memory.Store) {
	ctx := t.Context()
	if _, ok, err := s.GetSyncMark(ctx, tenantA, "provision", "P1"); ok || err != nil {
		t.Fatalf("empty store has a mark: %v %v", ok, err)
	}
	m := shim.SyncMark{Kind: "provision", ID: "P1", SourceVersion: 7, LocalVersion: 1}
	must(0, s.PutSyncMark(ctx, tenantA, m))
	must(0, s.PutSyncMark(ctx, tenantA, shim.SyncMark{Kind: "context", ID: "P1", SourceVersion: 1, LocalVersion: 1}))
	if got, ok, err := s.GetSyncMark(ctx, tenantA, "provision", "P1"); !ok || err != nil || got != m {
		t.Fatalf("mark %+v %v %v, want %+v", got, ok, err, m)
	}
	m2 := shim.SyncMark{Kind: "provision", ID: "P1", SourceVersion: 9, LocalVersion: 2}
	must(0, s.PutSyncMark(ctx, tenantA, m2))
	if got, _, _ := s.GetSyncMark(ctx, tenantA, "provision", "P1"); got != m2 {
		t.Fatalf("replaced mark %+v, want %+v", got, m2)
	}
	if _, ok, _ := s.GetSyncMark(ctx, tenantB, "provision", "P1"); ok {
		t.Fatal("tenant B sees tenant A's mark")
	}
}

var t0 = time.Date(2026, 11, 29, 12, 0, 0, 123456000, time.UTC)

func testEntities(t *testing.T, s memory.Store) {
	ctx := t.Context()
	if es := must(s.ListEntities(ctx, tenantA, "usr_a", "", 10)); len(es) != 0 {
		t.Fatalf("empty store lists %v", es)
	}
	a := shim.EntityRef{Kind: memory.KindFilePath, Value: "cmd/main.go"}
	b := shim.EntityRef{Kind: memory.KindErrorSignature, Value: "KeyError: <str>"}
	c := shim.EntityRef{Kind: memory.KindCodeSymbol, Value: "Server.Start"}
	if err := s.TouchEntities(ctx, tenantA, "usr_a", "default", []shim.EntityRef{a, b}, t0); err != nil {
		t.Fatal(err)
	}
	if err := s.TouchEntities(ctx, tenantA, "usr_a", "default", []shim.EntityRef{a}, t0.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	if err := s.TouchEntities(ctx, tenantA, "usr_a", "web", []shim.EntityRef{c}, t0.Add(30*time.Second)); err != nil {
		t.Fatal(err)
	}
	es := must(s.ListEntities(ctx, tenantA, "usr_a", "default", 10))
	if len(es) != 2 {
		t.Fatalf("default project lists %d entities, want 2: %+v", len(es), es)
	}
	want0 := memory.Entity{Subject: "usr_a", Project: "default", Kind: a.Kind, Value: a.Value,
		FirstSeen: contract.Timestamp(t0), LastSeen: contract.Timestamp(t0.Add(time.Minute)), Count: 2}
	if es[0] != want0 {
		t.Fatalf("first entity %+v, want %+v", es[0], want0)
	}
	want1 := memory.Entity{Subject: "usr_a", Project: "default", Kind: b.Kind, Value: b.Value,
		FirstSeen: contract.Timestamp(t0), LastSeen: contract.Timestamp(t0), Count: 1}
	if es[1] != want1 {
		t.Fatalf("second entity %+v, want %+v", es[1], want1)
	}
	all := must(s.ListEntities(ctx, tenantA, "usr_a", "", 10))
	if len(all) != 3 || all[1].Value != c.Value || all[1].Project != "web" {
		t.Fatalf("all projects: %+v", all)
	}
	if got := must(s.ListEntities(ctx, tenantA, "usr_a", "", 1)); len(got) != 1 || got[0] != want0 {
		t.Fatalf("limit 1: %+v", got)
	}
}

func testEntityIsolation(t *testing.T, s memory.Store) {
	ctx := t.Context()
	e := []shim.EntityRef{{Kind: memory.KindTesseraURI, Value: "tessera://x/y"}}
	must(0, s.TouchEntities(ctx, tenantA, "usr_a", "p", e, t0))
	must(0, s.TouchEntities(ctx, tenantB, "usr_a", "p", e, t0))
	must(0, s.TouchEntities(ctx, tenantB, "usr_a", "p", e, t0))
	must(0, s.TouchEntities(ctx, tenantA, "usr_b", "p", e, t0))
	if es := must(s.ListEntities(ctx, tenantA, "usr_a", "p", 10)); len(es) != 1 || es[0].Count != 1 {
		t.Fatalf("tenant A sees %+v, want one entity counted once", es)
	}
	if es := must(s.ListEntities(ctx, tenantB, "usr_a", "p", 10)); len(es) != 1 || es[0].Count != 2 {
		t.Fatalf("tenant B sees %+v, want one entity counted twice", es)
	}
	if es := must(s.ListEntities(ctx, tenantB, "usr_b", "", 10)); len(es) != 0 {
		t.Fatalf("usr_b of tenant B sees %+v", es)
	}
}

func outcome(receipt, conv, prov string) shim.RuleOutcome {
	return shim.RuleOutcome{Receipt: receipt, Conversation: conv, Subject: "usr_a", Project: "default", Provision: prov,
		Version: 3, Outcome: "ignored", FiredAt: contract.Timestamp(t0)}
}

func testOutcomes(t *testing.T, s memory.Store) {
	ctx := t.Context()
	must(0, s.AddOutcomes(ctx, tenantA, []shim.RuleOutcome{outcome("rcp_01", "c1", "P1"), outcome("rcp_01", "c1", "P2")}))
	must(0, s.AddOutcomes(ctx, tenantA, []shim.RuleOutcome{outcome("rcp_01", "c1", "P1")})) // duplicate: ignored
	must(0, s.AddOutcomes(ctx, tenantB, []shim.RuleOutcome{outcome("rcp_01", "c1", "P1")}))
	os := must(s.ListOutcomes(ctx, tenantA, "usr_a", 10))
	if len(os) != 2 || os[0].Provision != "P1" || os[0].Outcome != memory.OutcomePending || os[0].Version != 3 {
		t.Fatalf("outcomes %+v", os)
	}
	// The turn's own receipt is not resolved by itself.
	if n := must(s.ResolveOutcomes(ctx, tenantA, "c1", "rcp_01", memory.OutcomeOK, "", "rcp_01", t0)); n != 0 {
		t.Fatalf("resolved %d of the turn's own outcomes", n)
	}
	n := must(s.ResolveOutcomes(ctx, tenantA, "c1", "rcp_02", memory.OutcomeRetryError, "KeyError: <str>", "rcp_02", t0.Add(time.Second)))
	if n != 2 {
		t.Fatalf("resolved %d, want 2", n)
	}
	// Resolved rows stay resolved.
	if n := must(s.ResolveOutcomes(ctx, tenantA, "c1", "rcp_03", memory.OutcomeOK, "", "rcp_03", t0)); n != 0 {
		t.Fatalf("re-resolved %d", n)
	}
	os = must(s.ListOutcomes(ctx, tenantA, "", 10))
	for _, o := range os {
		if o.Outcome != memory.OutcomeRetryError || o.ErrorSignature != "KeyError: <str>" || o.NextReceipt != "rcp_02" || o.ResolvedAt != contract.Timestamp(t0.Add(time.Second)) {
			t.Fatalf("resolved outcome %+v", o)
		}
	}
	// Tenant B's row is untouched; another conversation is untouched.
	if ob := must(s.ListOutcomes(ctx, tenantB, "usr_a", 10)); len(ob) != 1 || ob[0].Outcome != memory.OutcomePending {
		t.Fatalf("tenant B outcomes %+v", ob)
	}
	must(0, s.AddOutcomes(ctx, tenantA, []shim.RuleOutcome{outcome("rcp_05", "c2", "P1")}))
	if n := must(s.ResolveOutcomes(ctx, tenantA, "c1", "rcp_06", memory.OutcomeOK, "", "rcp_06", t0)); n != 0 {
		t.Fatalf("resolved %d rows of another conversation", n)
	}
	os = must(s.ListOutcomes(ctx, tenantA, "usr_a", 10))
	if len(os) != 3 || os[0].Receipt != "rcp_05" {
		t.Fatalf("newest first: %+v", os)
	}
	if os := must(s.ListOutcomes(ctx, tenantA, "usr_zz", 10)); len(os) != 0 {
		t.Fatalf("other subject sees %+v", os)
	}
	if os := must(s.ListOutcomes(ctx, tenantA, "usr_a", 1)); len(os) != 1 {
		t.Fatalf("limit 1 gives %d", len(os))
	}
}

func testConcurrentResolve(t *testing.T, s memory.Store) {
	ctx := t.Context()
	var os []shim.RuleOutcome
	for i := range 20 {
		os = append(os, outcome("rcp_01", "c1", fmt.Sprintf("P%02d", i)))
	}
	must(0, s.AddOutcomes(ctx, tenantA, os))
	var wg sync.WaitGroup
	counts := make([]int, 4)
	for i := range counts {
		wg.Go(func() {
			n, err := s.ResolveOutcomes(ctx, tenantA, "c1", "rcp_09", memory.OutcomeOK, "", fmt.Sprint("rcp_1", i), t0)
			if err != nil {
				t.Error(err)
			}
			counts[i] = n
		})
	}
	wg.Wait()
	total := 0
	for _, n := range counts {
		total += n
	}
	if total != 20 {
		t.Fatalf("concurrent resolves changed %d rows in all (%v), want 20", total, counts)
	}
}
