package edge_test

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"sync"
	"testing"
	"time"

	_ "modernc.org/sqlite"

	"github.com/caduceus-dev/caduceus/audit"
	"github.com/caduceus-dev/caduceus/auth"
	"github.com/caduceus-dev/caduceus/contract"
	"github.com/caduceus-dev/caduceus/shim"
	"github.com/caduceus-dev/caduceus/shim/memory"
	"github.com/caduceus-dev/caduceus/shim/shimstore"
	"github.com/caduceus-dev/caduceus/shim/shimtest"
	"github.com/caduceus-dev/caduceus/store"
	"github.com/caduceus-dev/caduceus/store/port"
)

//go:embed migrations/*.sql
var migrations embed.FS

// applyMigrations runs the edge's migrations in order on db, as wrangler
// applies them to D1.
func applyMigrations(t testing.TB, db *sql.DB) {
	t.Helper()
	names, err := fs.Glob(migrations, "migrations/*.sql")
	if err != nil || len(names) == 0 {
		t.Fatalf("edge migrations: %v %v", names, err)
	}
	for _, n := range names { // fs.Glob sorts
		b, _ := migrations.ReadFile(n)
		if _, err := db.Exec(string(b)); err != nil {
			t.Fatalf("%s: %v", n, err)
		}
	}
}

// sqliteDB answers the edge's DB port with a SQLite file, the dialect D1
// runs; the Worker's own D1 answers it in deploy/cloudflare's test.
type sqliteDB struct{ db *sql.DB }

func (s sqliteDB) Query(ctx context.Context, q string, args ...any) ([]port.Row, error) {
	return store.PortRows(s.db.QueryContext(ctx, q, args...))
}

func (s sqliteDB) Exec(ctx context.Context, q string, args ...any) (int64, error) {
	res, err := s.db.ExecContext(ctx, q, args...)
	if err != nil {
		return 0, unique(err)
	}
	return res.RowsAffected()
}

// unique marks SQLite's unique violations as D1's are marked.
func unique(err error) error {
	if err != nil && port.SQLiteUnique(err.Error()) {
		return port.UniqueError(err)
	}
	return err
}

func (s sqliteDB) Batch(ctx context.Context, stmts []port.Statement) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	for _, st := range stmts {
		if _, err := tx.ExecContext(ctx, st.SQL, st.Args...); err != nil {
			tx.Rollback()
			return unique(err)
		}
	}
	return tx.Commit()
}

// open returns an empty edge database in a SQLite file of its own.
func open(t testing.TB) port.DB {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+filepath.Join(t.TempDir(), "edge.db")+"?_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	applyMigrations(t, db)
	return sqliteDB{db}
}

func TestShimStoreContract(t *testing.T) {
	shimtest.TestStore(t, func(t *testing.T) shim.Store { return shimstore.New(open(t), nil) })
}

func TestMemoryStoreContract(t *testing.T) {
	shimtest.TestMemoryStore(t, func(t *testing.T) memory.Store { return shimstore.NewMemory(open(t)) })
}

func TestSeedScenarios(t *testing.T) {
	shimtest.TestScenarios(t, func(t *testing.T) shimtest.Stores {
		db := open(t)
		return shimtest.Stores{Rules: shimstore.New(db, nil), Memory: shimstore.NewMemory(db), Audit: port.NewAudit(db)}
	})
}

// concurrently runs fn(0) .. fn(n-1) at once, as isolates would, and fails
// on the first error any returned.
func concurrently(t *testing.T, n int, fn func(i int) error) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Go(func() {
			if err := fn(i); err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

func entry(tenant contract.TenantSlot, action string) audit.Entry {
	return audit.Entry{Outcome: contract.AuditOutcome{At: contract.Timestamp(time.Now()), Action: action, Resource: "r",
		Identity: contract.Identity{TenantSlot: tenant, Subject: "usr_" + fmt.Sprintf("%064x", 1), Surface: "api", Trust: "router"}, Outcome: contract.OutcomeAllow}}
}

// Appends racing on one chain (as isolates do) each land once, in one
// unforked chain that audit.Verify accepts; a record edited in place is
// caught.
func TestAuditChainUnderConcurrentAppends(t *testing.T) {
	checkAuditChainUnderConcurrentAppends(t, open)
}

func checkAuditChainUnderConcurrentAppends(t *testing.T, open opener) {
	db := open(t)
	trail := port.NewAudit(db)
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
func TestKeysAdoptVerifyRevoke(t *testing.T) { checkKeysAdoptVerifyRevoke(t, open) }

func checkKeysAdoptVerifyRevoke(t *testing.T, open opener) {
	db := open(t)
	ctx := context.Background()
	svc := auth.NewService(port.NewKeys(db, nil, nil), nil, 0)
	token := "cad_0123456789abcdef_" + "abcdefghijklmnopqrstuvwxyz234567abcdefghijklmnopqrst"
	spec := auth.Spec{Tenant: "slot-1", Scopes: contract.Scopes}
	if made, err := svc.Adopt(ctx, token, spec); err != nil || !made {
		t.Fatalf("adopt: %v %v", made, err)
	}
	if made, err := auth.NewService(port.NewKeys(db, nil, nil), nil, 0).Adopt(ctx, token, spec); err != nil || made {
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
	got, err := port.NewKeys(db, nil, nil).Key(ctx, k2.ID)
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
func TestRequestKeysLease(t *testing.T) { checkRequestKeysLease(t, open) }

func checkRequestKeysLease(t *testing.T, open opener) {
	db := open(t)
	ctx := context.Background()
	now := time.Unix(1_800_000_000, 0)
	k := port.NewRequestKeys(db, func() time.Time { return now })
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

func codeOf(err error) string {
	var e *contract.Error
	if errors.As(err, &e) {
		return e.Code
	}
	return ""
}

// A turn's audit record, receipt and memory writes are one batch: turns
// racing on one chain all land once on an unforked chain, each receipt
// naming its record; a receipt id used twice changes nothing; memory that
// cannot be written leaves the record and receipt stored and says so.
func TestTurnsAreOneBatch(t *testing.T) { checkTurnsAreOneBatch(t, open) }

func checkTurnsAreOneBatch(t *testing.T, open opener) {
	db := open(t)
	ctx := context.Background()
	turns, trail, rules := shimstore.NewTurns(db), port.NewAudit(db), shimstore.New(db, nil)
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
	ents, err := shimstore.NewMemory(db).ListEntities(ctx, "slot-1", "usr_a", "p", 10)
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
