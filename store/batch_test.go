package store_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/caduceus-dev/caduceus/audit"
	"github.com/caduceus-dev/caduceus/contract"
	"github.com/caduceus-dev/caduceus/store"
	"github.com/caduceus-dev/caduceus/store/storetest"
)

// TestGroupCommitIsolatesFailures: many concurrent transactions, every
// third failing and one panicking; each failure undoes only its own writes,
// every success is committed, and nobody waits forever.
func TestGroupCommitIsolatesFailures(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := t.Context()
		if _, err := db.Exec(ctx, `CREATE TABLE gc (tenant TEXT NOT NULL, n INTEGER NOT NULL, PRIMARY KEY (tenant, n))`); err != nil {
			t.Fatal(err)
		}
		errBoom := errors.New("boom")
		const n = 90
		results := make([]error, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() {
				results[i] = db.InTx(ctx, func(tx *store.Tx) error {
					if _, err := tx.Exec(ctx, `INSERT INTO gc (tenant, n) VALUES ('slot-1', ?)`, i); err != nil {
						return err
					}
					if i == 7 {
						panic("a bug in one transaction")
					}
					if i%3 == 0 {
						return errBoom
					}
					return nil
				})
			})
		}
		wg.Wait()
		for i, err := range results {
			switch {
			case i == 7:
				if err == nil {
					t.Errorf("panicking transaction %d reported success", i)
				}
			case i%3 == 0:
				if !errors.Is(err, errBoom) {
					t.Errorf("tx %d: %v; want boom", i, err)
				}
			default:
				if err != nil {
					t.Errorf("tx %d: %v", i, err)
				}
			}
		}
		rows, err := db.Query(ctx, `SELECT n FROM gc ORDER BY n`)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		got := map[int]bool{}
		for rows.Next() {
			var k int
			rows.Scan(&k)
			got[k] = true
		}
		for i := range n {
			want := i%3 != 0 && i != 7
			if got[i] != want {
				t.Errorf("row %d present=%v want %v", i, got[i], want)
			}
		}
	})
}

// TestCancelledCallerStillLearnsTheOutcome: a transaction whose caller has
// gone is either refused before it runs (and wrote nothing) or committed and
// reported as such, never half-done.
func TestCancelledCallerStillLearnsTheOutcome(t *testing.T) {
	db := storetest.OpenSQLite(t)
	bg := context.Background()
	if _, err := db.Exec(bg, `CREATE TABLE cc (n INTEGER PRIMARY KEY)`); err != nil {
		t.Fatal(err)
	}
	for i := range 50 {
		ctx, cancel := context.WithCancel(bg)
		if i%2 == 0 {
			cancel()
		}
		err := db.InTx(ctx, func(tx *store.Tx) error {
			cancel() // the caller hangs up mid-transaction
			_, err := tx.Exec(ctx, `INSERT INTO cc (n) VALUES (?)`, i)
			return err
		})
		cancel()
		var n int
		db.QueryRow(bg, `SELECT COUNT(*) FROM cc WHERE n = ?`, i).Scan(&n)
		switch {
		case err == nil && n != 1:
			t.Errorf("tx %d reported committed but its row is missing", i)
		case err != nil && n != 0:
			t.Errorf("tx %d reported %v but its row is there", i, err)
		case err != nil && !errors.Is(err, context.Canceled):
			t.Errorf("tx %d: %v", i, err)
		}
	}
}

// BenchmarkAuditAppendParallel appends from many goroutines (a busy server):
// group commit shares one SQLite commit among the appends that arrive together.
func BenchmarkAuditAppendParallel(b *testing.B) {
	db := storetest.OpenSQLite(b)
	log := db.Audit()
	b.SetParallelism(16)
	var i int64
	var mu sync.Mutex
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			mu.Lock()
			i++
			k := i
			mu.Unlock()
			if _, err := log.Append(context.Background(), entry("slot-1", "keys.list", fmt.Sprint("k", k), nil)); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "records/s")
	rep, err := audit.Verify(context.Background(), log, nil)
	if err != nil || rep.Break != nil {
		b.Fatalf("chain broken after parallel appends: %+v %v", rep, err)
	}
}

// TestGroupCommitAuditHeadsRollBack: concurrent transactions append to two
// tenants' chains, every third failing after its appends. The heads a
// group commit keeps for its batch drop a failed transaction's appends
// with it: both chains verify, end at their heads, and hold exactly the
// committed records.
func TestGroupCommitAuditHeadsRollBack(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := t.Context()
		errBoom := errors.New("boom")
		const n = 90
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() {
				err := db.InTx(ctx, func(tx *store.Tx) error {
					for _, tenant := range []string{"slot-1", "slot-2"}[:1+i%2] {
						if _, err := store.AppendAudit(ctx, tx, entry(contract.TenantSlot(tenant), "widgets.write", fmt.Sprint("w", i), nil)); err != nil {
							return err
						}
					}
					if i%3 == 0 {
						return errBoom
					}
					return nil
				})
				if (i%3 == 0) != errors.Is(err, errBoom) || (err != nil && !errors.Is(err, errBoom)) {
					t.Errorf("tx %d: %v", i, err)
				}
			})
		}
		wg.Wait()
		// Committed: i%3 != 0. slot-1 gets one record from each; slot-2
		// one from each odd i.
		want := map[contract.TenantSlot]int64{}
		for i := range n {
			if i%3 != 0 {
				want["slot-1"]++
				if i%2 == 1 {
					want["slot-2"]++
				}
			}
		}
		rep, err := audit.Verify(ctx, db.Audit(), nil)
		if err != nil || rep.Break != nil || rep.Records != want["slot-1"]+want["slot-2"] {
			t.Fatalf("verify = %+v %v; want %d records", rep, err, want["slot-1"]+want["slot-2"])
		}
		for tenant, w := range want {
			seq, _, err := db.Audit().Head(ctx, tenant)
			if err != nil || seq != w {
				t.Errorf("%s head seq = %d %v; want %d", tenant, seq, err, w)
			}
		}
		// The chains go on from their heads.
		if _, err := db.Audit().Append(ctx, entry("slot-2", "widgets.write", "after", nil)); err != nil {
			t.Fatal(err)
		}
		if rep, err := audit.Verify(ctx, db.Audit(), nil); err != nil || rep.Break != nil {
			t.Fatalf("verify after = %+v %v", rep, err)
		}
	})
}

// TestExecLaterInAGroupCommit: transactions at once, each writing with
// ExecLater (kept for one batch on Postgres) and then reading its own row
// back; every tenth inserts a key another already holds. Each reads what it
// wrote, the duplicates alone fail (their unique violation surfaces though
// the statement was kept), every other row is committed once.
func TestExecLaterInAGroupCommit(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := t.Context()
		if _, err := db.Exec(ctx, `CREATE TABLE gl (n INTEGER PRIMARY KEY, v TEXT NOT NULL)`); err != nil {
			t.Fatal(err)
		}
		if _, err := db.Exec(ctx, `INSERT INTO gl (n, v) VALUES (-1, 'taken')`); err != nil {
			t.Fatal(err)
		}
		// Without a duplicate, no pass fails: every read found the kept
		// statements written before it.
		var ok sync.WaitGroup
		for i := range 40 {
			ok.Go(func() {
				err := db.InTx(ctx, func(tx *store.Tx) error {
					if err := tx.ExecLater(ctx, `INSERT INTO gl (n, v) VALUES (?, 'x')`, 1000+i); err != nil {
						return err
					}
					var v string
					return tx.QueryRow(ctx, `SELECT v FROM gl WHERE n = ?`, 1000+i).Scan(&v)
				})
				if err != nil {
					t.Errorf("tx %d: %v", i, err)
				}
			})
		}
		ok.Wait()
		if n := db.WholePassFailures(); n != 0 {
			t.Errorf("%d first passes failed without a failing statement: a read did not see the kept writes", n)
		}
		if _, err := db.Exec(ctx, `DELETE FROM gl WHERE n >= 1000`); err != nil {
			t.Fatal(err)
		}
		const n = 60
		results := make([]error, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() {
				results[i] = db.InTx(ctx, func(tx *store.Tx) error {
					key := i
					if i%10 == 0 {
						key = -1
					}
					if err := tx.ExecLater(ctx, `INSERT INTO gl (n, v) VALUES (?, ?)`, key, fmt.Sprint("v", i)); err != nil {
						return err
					}
					var v string
					if err := tx.QueryRow(ctx, `SELECT v FROM gl WHERE n = ?`, key).Scan(&v); err != nil {
						return err
					}
					if v != fmt.Sprint("v", i) {
						return fmt.Errorf("read %q back, wrote v%d", v, i)
					}
					return store.ExecLater(ctx, tx, `UPDATE gl SET v = v || '!' WHERE n = ?`, key)
				})
			})
		}
		wg.Wait()
		for i, err := range results {
			if (i%10 == 0) != (err != nil) {
				t.Errorf("tx %d: %v", i, err)
			}
		}
		rows, err := store.AppendRows([]string(nil), store.QueryRows(ctx, db, "v", store.ScanValue[string], `SELECT v FROM gl WHERE n >= 0 ORDER BY n`))
		if err != nil {
			t.Fatal(err)
		}
		if len(rows) != n-n/10 {
			t.Fatalf("%d rows committed, want %d", len(rows), n-n/10)
		}
		for _, v := range rows {
			if !strings.HasSuffix(v, "!") || strings.Count(v, "!") != 1 {
				t.Errorf("row %q: its kept update ran %d times", v, strings.Count(v, "!"))
			}
		}
	})
}
