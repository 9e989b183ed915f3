package shimsql_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/caduceus-dev/caduceus/audit"
	"github.com/caduceus-dev/caduceus/shim"
	"github.com/caduceus-dev/caduceus/shim/shimsql"
	"github.com/caduceus-dev/caduceus/store"
	"github.com/caduceus-dev/caduceus/store/storetest"
)

// TestRecordTurnMemoryFailureKeepsTheReceipt: turns recorded at once (so
// that they share group commits, on Postgres first without savepoints),
// every fifth with a memory write the database refuses (a trigger). Each of
// those returns ErrMemoryNotRecorded with its receipt and audit record
// committed; every other turn's memory is written; the chain verifies.
func TestRecordTurnMemoryFailureKeepsTheReceipt(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := t.Context()
		refuseEntity(t, db, "refused-by-trigger")
		const n = 60
		errs := make([]error, n)
		ids := make([]string, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() {
				e, rc := benchTurn(int64(i))
				ids[i] = rc.ID
				value := fmt.Sprintf("file-%d.go", i)
				if i%5 == 0 {
					value = "refused-by-trigger"
				}
				mw := shim.MemoryWrite{Tenant: "slot-1", Subject: rc.Subject, Project: "p",
					Entities: []shim.EntityRef{{Kind: "file", Value: value}}, At: time.Now()}
				errs[i] = shimsql.New(db).RecordTurn(context.WithoutCancel(ctx), e, rc, []shim.MemoryWrite{mw})
			})
		}
		wg.Wait()
		for i, err := range errs {
			if refused := i%5 == 0; refused != errors.Is(err, shim.ErrMemoryNotRecorded) || (!refused && err != nil) {
				t.Errorf("turn %d: %v", i, err)
			}
		}
		receipts, err := shimsql.New(db).ListReceipts(ctx, "slot-1", 2*n, "")
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]bool{}
		for _, r := range receipts {
			got[r.ID] = true
		}
		for i, id := range ids {
			if !got[id] {
				t.Errorf("turn %d: receipt %s missing", i, id)
			}
		}
		rep, err := audit.Verify(ctx, db.Audit(), nil)
		if err != nil || rep.Break != nil || rep.Records != n {
			t.Fatalf("chain: %+v %v; want %d records", rep, err, n)
		}
		entities, err := shimsql.NewMemory(db).ListEntities(ctx, "slot-1", receipts[0].Subject, "p", 2*n)
		if err != nil {
			t.Fatal(err)
		}
		seen := map[string]bool{}
		for _, e := range entities {
			seen[e.Value] = true
		}
		for i := range n {
			if want := i%5 != 0; seen[fmt.Sprintf("file-%d.go", i)] != want {
				t.Errorf("turn %d: entity written = %v, want %v", i, !want, want)
			}
		}
		if seen["refused-by-trigger"] {
			t.Error("the refused entity was written")
		}
	})
}

// refuseEntity makes the database refuse to record the entity value: a
// trigger that raises an error, on SQLite and on Postgres.
func refuseEntity(t *testing.T, db *store.DB, value string) {
	t.Helper()
	var stmts []string
	if db.Dialect() == store.Postgres {
		stmts = []string{
			`CREATE FUNCTION refuse_entity() RETURNS trigger LANGUAGE plpgsql AS $$
			BEGIN IF NEW.value = '` + value + `' THEN RAISE EXCEPTION 'entity refused'; END IF; RETURN NEW; END $$`,
			`CREATE TRIGGER refuse_entity BEFORE INSERT ON shim_entities FOR EACH ROW EXECUTE FUNCTION refuse_entity()`,
		}
	} else {
		stmts = []string{`CREATE TRIGGER refuse_entity BEFORE INSERT ON shim_entities
			WHEN NEW.value = '` + value + `' BEGIN SELECT RAISE(ABORT, 'entity refused'); END`}
	}
	for _, s := range stmts {
		if _, err := db.Exec(t.Context(), s); err != nil {
			t.Fatal(err)
		}
	}
}
