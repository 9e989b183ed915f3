package edge_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/caduceus-dev/caduceus/audit"
	"github.com/caduceus-dev/caduceus/auth"
	"github.com/caduceus-dev/caduceus/contract"
	"github.com/caduceus-dev/caduceus/deploy/cloudflare/d1test"
	"github.com/caduceus-dev/caduceus/edge"
	"github.com/caduceus-dev/caduceus/shim"
	"github.com/caduceus-dev/caduceus/shim/memory"
	"github.com/caduceus-dev/caduceus/shim/shimtest"
)

// The store suites and the edge's own store checks on D1 itself: workerd's
// local D1 under Miniflare, through deploy/cloudflare/d1bridge.mjs
// (d1test.Open starts it once per test process and gives each test an
// empty, migrated database of its own). Node and deploy/cloudflare's
// node_modules must be there (.ci/run installs them): without them these
// tests fail, saying so.

// opener opens an empty edge database for a test: open (SQLite) or
// d1test.Open (D1).
type opener func(testing.TB) edge.DB

func TestD1ShimStoreContract(t *testing.T) {
	shimtest.TestStore(t, func(t *testing.T) shim.Store { return edge.NewShim(d1test.Open(t), nil) })
}

func TestD1MemoryStoreContract(t *testing.T) {
	shimtest.TestMemoryStore(t, func(t *testing.T) memory.Store { return edge.NewMemory(d1test.Open(t)) })
}

func TestD1SeedScenarios(t *testing.T) {
	shimtest.TestScenarios(t, func(t *testing.T) shimtest.Stores {
		db := d1test.Open(t)
		return shimtest.Stores{Rules: edge.NewShim(db, nil), Memory: edge.NewMemory(db), Audit: edge.NewAudit(db)}
	})
}

func TestD1AuditChainUnderConcurrentAppends(t *testing.T) {
	checkAuditChainUnderConcurrentAppends(t, d1test.Open)
}

func TestD1KeysAdoptVerifyRevoke(t *testing.T) { checkKeysAdoptVerifyRevoke(t, d1test.Open) }

func TestD1RequestKeysLease(t *testing.T) { checkRequestKeysLease(t, d1test.Open) }

func TestD1TurnsAreOneBatch(t *testing.T) { checkTurnsAreOneBatch(t, d1test.Open) }

// The checks below are the bodies of edge_test.go's tests of the same
// names (TestAuditChainUnderConcurrentAppends, ...), the database's opener
// made a parameter, so they run on D1 as they run there on SQLite.

// Appends racing on one chain (as isolates do) each land once, in one
// unforked chain that audit.Verify accepts; a record edited in place is
// caught.
func checkAuditChainUnderConcurrentAppends(t *testing.T, openDB opener) {
	db := openDB(t)
	trail := edge.NewAudit(db)
	ctx := context.Background()
	concurrently(t, 40, func(i int) error {
		tenant := contract.TenantSlot("slot-1")
		if i%4 == 0 {
			tenant = "slot-2"
		}
		_, err := trail.Append(ctx, entry(tenant, "shim.proxy"))
		return err
	})
	rep, err := audit.Verify(ctx, trail, nil)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Records != 40 || rep.Break != nil {
		t.Fatalf("verify: %+v, want 40 records and no break", rep)
	}
	if _, err := db.Exec(ctx, `UPDATE audit_records SET body = replace(body, '"shim.proxy"', '"shim.other"') WHERE tenant = 'slot-2' AND seq = 3`); err != nil {
		t.Fatal(err)
	}
	rep, err = audit.Verify(ctx, trail, nil)
	if err != nil {
		t.Fatal(err)
	}
	if b := rep.Break; b == nil || b.Tenant != "slot-2" || b.Seq != 3 {
		t.Fatalf("verify after an edit: %+v, want the break at slot-2 seq 3", b)
	}
	recs, err := trail.Tail(ctx, audit.Filter{Tenant: "slot-1", Limit: 5})
	if err != nil || len(recs) != 5 {
		t.Fatalf("tail: %d records, %v; want 5", len(recs), err)
	}
	for i, r := range recs {
		if r.Tenant != "slot-1" || i > 0 && r.ID >= recs[i-1].ID {
			t.Fatalf("tail record %d: %s of %s, want slot-1's, newest (highest id) first", i, r.ID, r.Tenant)
		}
	}
}

// The admin token given to the Worker is adopted once, verifies as an
// admin of its tenant, and a second isolate adopting it changes nothing;
// a revoked key is refused; tenant grants join a key's own.
func checkKeysAdoptVerifyRevoke(t *testing.T, openDB opener) {
	db := openDB(t)
	ctx := context.Background()
	svc := auth.NewService(edge.NewKeys(db, nil), nil, 0)
	token := "cad_0123456789abcdef_" + "abcdefghijklmnopqrstuvwxyz234567abcdefghijklmnopqrst"
	spec := auth.Spec{Tenant: "slot-1", Scopes: contract.Scopes}
	if made, err := svc.Adopt(ctx, token, spec); err != nil || !made {
		t.Fatalf("adopt: %v %v", made, err)
	}
	if made, err := auth.NewService(edge.NewKeys(db, nil), nil, 0).Adopt(ctx, token, spec); err != nil || made {
		t.Fatalf("second adopt: made=%v err=%v, want nothing made", made, err)
	}
	if _, err := svc.Adopt(ctx, "cad_short", spec); contract.KindOf(err) != contract.KindUnauthenticated {
		t.Fatalf("adopt of a malformed token: %v", err)
	}
	c, err := svc.Verify(ctx, token)
	if err != nil || c.Identity.TenantSlot != "slot-1" || !c.Has(contract.ScopeAdmin) {
		t.Fatalf("verify: %+v %v", c, err)
	}
	tok2, k2, err := svc.Create(ctx, auth.Spec{Tenant: "slot-2", Scopes: []contract.Scope{contract.ScopeRoute}, Grants: []string{"openai/gpt-4.1"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := svc.SetTenantGrants(ctx, "slot-2", []string{"anthropic/claude-sonnet-4"}); err != nil {
		t.Fatal(err)
	}
	got, err := edge.NewKeys(db, nil).Key(ctx, k2.ID)
	if err != nil || fmt.Sprint(got.Grants) != "[anthropic/claude-sonnet-4 openai/gpt-4.1]" {
		t.Fatalf("grants: %v %v", got.Grants, err)
	}
	if err := svc.Revoke(ctx, k2.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Verify(ctx, tok2); codeOf(err) != "key_revoked" {
		t.Fatalf("verify of a revoked key: %v", err)
	}
	if err := svc.Revoke(ctx, k2.ID); contract.KindOf(err) != contract.KindConflict {
		t.Fatalf("second revoke: %v", err)
	}
	keys, err := svc.List(ctx)
	if err != nil || len(keys) != 2 || keys[0].ID != "0123456789abcdef" {
		t.Fatalf("list: %v %v", keys, err)
	}
}

// Idempotency keys follow the server's lease rules.
func checkRequestKeysLease(t *testing.T, openDB opener) {
	db := openDB(t)
	ctx := context.Background()
	now := time.Unix(1_800_000_000, 0)
	k := edge.NewRequestKeys(db, func() time.Time { return now })
	claim := func(hash string) contract.KeyClaim {
		t.Helper()
		c, err := k.ClaimLeasedKey(ctx, "slot-1", "http", "key-00001", hash, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	if c := claim("h1"); !c.Claimed {
		t.Fatal("first claim not claimed")
	}
	if c := claim("h1"); !c.InProgress() {
		t.Fatalf("repeat inside the lease: %+v, want in progress", c)
	}
	if _, err := k.ClaimLeasedKey(ctx, "slot-1", "http", "key-00001", "h2", time.Minute); codeOf(err) != "idempotency_key_conflict" {
		t.Fatalf("other body: %v", err)
	}
	if c, err := k.ClaimLeasedKey(ctx, "slot-2", "http", "key-00001", "h2", time.Minute); err != nil || !c.Claimed {
		t.Fatalf("same key in another tenant: %+v %v", c, err)
	}
	now = now.Add(2 * time.Minute)
	if c := claim("h1"); !c.Claimed {
		t.Fatal("a claim past its lease is not taken over")
	}
	if err := k.CompleteLeasedKey(ctx, "slot-1", "http", "key-00001", []byte(`{"ok":1}`)); err != nil {
		t.Fatal(err)
	}
	if err := k.ReleaseLeasedKey(ctx, "slot-1", "http", "key-00001"); err != nil {
		t.Fatal(err)
	}
	if c := claim("h1"); string(c.Result) != `{"ok":1}` {
		t.Fatalf("completed key: %+v, want its result", c)
	}
}

// A turn's audit record, receipt and memory writes are one batch: turns
// racing on one chain all land once on an unforked chain, each receipt
// naming its record; a receipt id used twice changes nothing; memory that
// cannot be written leaves the record and receipt stored and says so.
func checkTurnsAreOneBatch(t *testing.T, openDB opener) {
	db := openDB(t)
	ctx := context.Background()
	turns, trail, rules := edge.NewTurns(db), edge.NewAudit(db), edge.NewShim(db, nil)
	receipt := func() *shim.Receipt {
		return &shim.Receipt{ID: contract.NewID(contract.PrefixReceipt), At: contract.Timestamp(time.Now()), Decision: shim.DecisionForward}
	}
	concurrently(t, 30, func(int) error {
		write := shim.MemoryWrite{Tenant: "slot-1", Subject: "usr_a", Project: "p", At: time.Now(),
			Entities: []shim.EntityRef{{Kind: "file_path", Value: "src/a.go"}}}
		return turns.RecordTurn(ctx, entry("slot-1", "shim.proxy"), receipt(), []shim.MemoryWrite{write})
	})
	rep, err := audit.Verify(ctx, trail, nil)
	if err != nil || rep.Records != 30 || rep.Break != nil {
		t.Fatalf("verify: %+v %v, want 30 records, no break", rep, err)
	}
	rcs, err := rules.ListReceipts(ctx, "slot-1", 100, "")
	if err != nil || len(rcs) != 30 {
		t.Fatalf("receipts: %d %v", len(rcs), err)
	}
	recs, _ := trail.Tail(ctx, audit.Filter{Tenant: "slot-1", Limit: 100})
	ids := map[string]bool{}
	for _, r := range recs {
		ids[r.ID] = true
	}
	for _, rc := range rcs {
		if !ids[rc.AuditID] {
			t.Fatalf("receipt %s names audit record %q, which is not on the chain", rc.ID, rc.AuditID)
		}
	}
	ents, err := edge.NewMemory(db).ListEntities(ctx, "slot-1", "usr_a", "p", 10)
	if err != nil || len(ents) != 1 || ents[0].Count != 30 {
		t.Fatalf("entities: %+v %v, want one seen 30 times", ents, err)
	}

	again := receipt()
	again.ID = rcs[0].ID
	if err := turns.RecordTurn(ctx, entry("slot-1", "shim.proxy"), again, nil); contract.KindOf(err) != contract.KindConflict {
		t.Fatalf("a receipt id used twice: %v, want a conflict", err)
	}
	if _, err := db.Exec(ctx, `DROP TABLE shim_entities`); err != nil {
		t.Fatal(err)
	}
	write := shim.MemoryWrite{Tenant: "slot-1", Subject: "usr_a", Project: "p", At: time.Now(), Entities: []shim.EntityRef{{Kind: "file_path", Value: "src/b.go"}}}
	if err := turns.RecordTurn(ctx, entry("slot-1", "shim.proxy"), receipt(), []shim.MemoryWrite{write}); !errors.Is(err, shim.ErrMemoryNotRecorded) {
		t.Fatalf("memory that cannot be written: %v, want ErrMemoryNotRecorded", err)
	}
	if rep, err := audit.Verify(ctx, trail, nil); err != nil || rep.Records != 31 || rep.Break != nil {
		t.Fatalf("after the conflict and the memory failure: %+v %v, want 31 records", rep, err)
	}
	if rcs, _ := rules.ListReceipts(ctx, "slot-1", 100, ""); len(rcs) != 31 {
		t.Fatalf("receipts: %d, want 31", len(rcs))
	}
}
