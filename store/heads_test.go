package store_test

import (
	"context"
	"database/sql"
	"fmt"
	"sync"
	"testing"

	"github.com/caduceus-dev/caduceus/audit"
	"github.com/caduceus-dev/caduceus/contract"
	"github.com/caduceus-dev/caduceus/store"
	"github.com/caduceus-dev/caduceus/store/storetest"
)

// TestChainHeadsAreLockedFirstInOrder (Postgres): a transaction that names
// the audit chain it appends to (InTxFor) locks that chain's head before
// any other row, and a group commit locks the heads its transactions name
// first, in the tenants' order, whatever order the transactions come in.
// So no two processes' transactions wait on each other in a circle over a
// head. The test holds slot-1's head locked and checks, with FOR UPDATE
// SKIP LOCKED, that the waiting writer holds no other row.
func TestChainHeadsAreLockedFirstInOrder(t *testing.T) {
	storetest.OnPostgres(t, func(t *testing.T, dsn string) {
		lo := storetest.OpenLockOrder(t, dsn, "caduceus-heads-order")
		ctx := t.Context()
		db := lo.DB
		for _, tenant := range []contract.TenantSlot{"slot-1", "slot-2"} {
			if _, err := db.Audit().Append(ctx, entry(tenant, "shim.proxy", "receipt/r0", nil)); err != nil {
				t.Fatal(err)
			}
		}
		appendTo := func(tenant contract.TenantSlot) func(*store.Tx) error {
			return func(tx *store.Tx) error {
				_, err := store.AppendAudit(context.Background(), tx, entry(tenant, "shim.proxy", "receipt/r1", nil))
				return err
			}
		}

		// heldByWriter runs write while the test holds slot-1's head, and
		// reports whether write held slot-2's head row once it waited.
		heldByWriter := func(t *testing.T, write func() error) bool {
			t.Helper()
			var free int
			lo.WhileWaiting(t, `SELECT 1 FROM audit_heads WHERE tenant = 'slot-1' FOR UPDATE`, write, func(tx *sql.Tx) {
				if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM (SELECT 1 FROM audit_heads WHERE tenant = 'slot-2' FOR UPDATE SKIP LOCKED) f`).Scan(&free); err != nil {
					t.Fatal(err)
				}
			})
			return free == 0
		}

		t.Run("alone", func(t *testing.T) {
			// Another row first (slot-2's head stands for any row a gate
			// locks), then the append to the chain it named.
			held := heldByWriter(t, func() error {
				return db.InTxFor(ctx, "slot-1", func(tx *store.Tx) error {
					if _, err := tx.Exec(ctx, `SELECT 1 FROM audit_heads WHERE tenant = 'slot-2' FOR UPDATE`); err != nil {
						return err
					}
					return appendTo("slot-1")(tx)
				})
			})
			if held {
				t.Fatal("the transaction locked another row before the head of the chain it named")
			}
		})
		for _, saved := range []bool{false, true} {
			name := map[bool]string{false: "first pass", true: "savepoint pass"}[saved]
			t.Run(name, func(t *testing.T) {
				var answers []error
				held := heldByWriter(t, func() error {
					ended, a := db.PassFor(saved, store.NamedTx{Tenant: "slot-2", Fn: appendTo("slot-2")}, store.NamedTx{Tenant: "slot-1", Fn: appendTo("slot-1")})
					if !ended {
						t.Error("the pass did not end the batch")
					}
					answers = a
					return nil
				})
				if held {
					t.Fatal("the group commit locked slot-2's head before slot-1's")
				}
				for i, err := range answers {
					if err != nil {
						t.Fatalf("transaction %d: %v", i, err)
					}
				}
			})
		}
	})
}

// TestTwoProcessesAppendToThreeChains (Postgres): two processes (two
// stores on one database) append to three tenants' chains from 32
// goroutines at once, so their group commits hold several heads each:
// every append is acknowledged at its first pass and every chain
// verifies whole. Without the heads' lock order the batches deadlock over
// the heads (each circle stalls both for deadlock_timeout), run again, and
// some appends are refused.
func TestTwoProcessesAppendToThreeChains(t *testing.T) {
	storetest.OnPostgres(t, func(t *testing.T, dsn string) {
		ctx := t.Context()
		fresh := storetest.FreshSchema(t, dsn)
		var dbs []*store.DB
		for range 2 {
			db, err := store.Open(ctx, fresh, "")
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { db.Close() })
			dbs = append(dbs, db)
		}
		tenants := []contract.TenantSlot{"slot-1", "slot-2", "slot-3"}
		const writers, each = 32, 20
		var wg sync.WaitGroup
		for w := range writers {
			wg.Go(func() {
				for i := range each {
					tenant := tenants[(w+i)%len(tenants)]
					if _, err := dbs[w%2].Audit().Append(ctx, entry(tenant, "shim.proxy", fmt.Sprintf("receipt/w%d-%d", w, i), nil)); err != nil {
						t.Errorf("writer %d, append %d to %s: %v", w, i, tenant, err)
						return
					}
				}
			})
		}
		wg.Wait()
		// A batch runs again only when one of its transactions failed: here,
		// only a deadlock would.
		for i, db := range dbs {
			if n := db.WholePassFailures(); n != 0 {
				t.Errorf("process %d: %d group commits failed and ran again", i, n)
			}
		}
		rep, err := audit.Verify(ctx, dbs[0].Audit(), nil)
		if err != nil || rep.Break != nil || rep.Tenants != 3 || rep.Records != writers*each {
			t.Fatalf("verify = %+v %v; want 3 whole chains of %d records in all", rep, err, writers*each)
		}
	})
}
