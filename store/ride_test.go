package store_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/caduceus-dev/caduceus/store"
	"github.com/caduceus-dev/caduceus/store/storetest"
)

// TestRidingTransactionJoinsTheNextCommit states InTxRiding's rule on
// SQLite: a riding transaction waits for a request's transaction and
// commits with it, in a savepoint of its own, so that its failure leaves
// the request's write alone; with no request, it runs alone once RideWait
// has passed, and not before. The test runs in a synctest bubble: its
// clock is fake, and moves only when every goroutine waits for it.
func TestRidingTransactionJoinsTheNextCommit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		db := storetest.OpenSQLite(t)
		ctx := t.Context()
		if _, err := db.Exec(ctx, `CREATE TABLE ride (n INTEGER PRIMARY KEY)`); err != nil {
			t.Fatal(err)
		}
		insert := func(n int, fail error) func(*store.Tx) error {
			return func(tx *store.Tx) error {
				if _, err := tx.Exec(ctx, `INSERT INTO ride (n) VALUES (?)`, n); err != nil {
					return err
				}
				return fail
			}
		}
		rows := func() (ns []int) {
			t.Helper()
			rs, err := db.Query(ctx, `SELECT n FROM ride ORDER BY n`)
			if err != nil {
				t.Fatal(err)
			}
			defer rs.Close()
			for rs.Next() {
				var n int
				if err := rs.Scan(&n); err != nil {
					t.Fatal(err)
				}
				ns = append(ns, n)
			}
			if err := rs.Err(); err != nil {
				t.Fatal(err)
			}
			return ns
		}
		ride := func(fn func(*store.Tx) error) <-chan error {
			done := make(chan error, 1)
			go func() { done <- db.InTxRiding(context.Background(), fn) }()
			synctest.Wait() // queued, and waiting
			select {
			case err := <-done:
				t.Fatalf("a riding transaction ended (%v) with no request to join and no time passed", err)
			default:
			}
			return done
		}
		errRider := errors.New("the rider's own refusal")

		start := time.Now()
		rode := ride(insert(1, nil))
		if got := rows(); len(got) != 0 {
			t.Fatalf("a riding transaction was committed before any other: rows %v", got)
		}
		if err := db.InTx(ctx, insert(2, nil)); err != nil {
			t.Fatal(err)
		}
		if err := <-rode; err != nil {
			t.Fatalf("the rider: %v", err)
		}
		if waited := time.Since(start); waited != 0 {
			t.Fatalf("the rider waited %v: it did not join the request's commit", waited)
		}
		if got := rows(); len(got) != 2 {
			t.Fatalf("rows %v, want [1 2]", got)
		}

		rode = ride(insert(3, errRider))
		if err := db.InTx(ctx, insert(4, nil)); err != nil {
			t.Fatalf("the request whose commit a failing rider joined: %v", err)
		}
		if err := <-rode; !errors.Is(err, errRider) {
			t.Fatalf("the failing rider: %v, want its own error", err)
		}
		if got := rows(); len(got) != 3 || got[2] != 4 {
			t.Fatalf("rows %v, want [1 2 4]: the rider's write undone, the request's kept", got)
		}

		start = time.Now()
		rode = ride(insert(5, nil))
		<-time.After(store.RideWait - time.Nanosecond)
		synctest.Wait()
		select {
		case err := <-rode:
			t.Fatalf("a lone rider ran (%v) before RideWait passed", err)
		default:
		}
		if err := <-rode; err != nil {
			t.Fatalf("the lone rider: %v", err)
		}
		if waited := time.Since(start); waited != store.RideWait {
			t.Fatalf("the lone rider ran after %v, want RideWait (%v)", waited, store.RideWait)
		}
		if got := rows(); len(got) != 4 || got[3] != 5 {
			t.Fatalf("rows %v, want [1 2 4 5]", got)
		}
	})
}
