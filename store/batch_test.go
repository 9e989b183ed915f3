package store_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
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

// TestGroupCommitAnswersWhatItCommitted: a group commit's transactions,
// some of which break it in ways its first pass cannot see until the end:
// a read error the transaction swallows (Postgres then aborts the whole
// transaction) and, on Postgres, a deferred unique constraint that fails
// only at COMMIT. Whatever pass ends the batch, a transaction answered nil
// has its row and one answered with an error has none; the guilty ones
// are never answered nil; ScanRow finds its own kept write and reports a
// missing row as sql.ErrNoRows; and the pool's connections are usable
// afterwards (none left inside a transaction).
func TestGroupCommitAnswersWhatItCommitted(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := t.Context()
		unique := "UNIQUE"
		if db.Dialect() == store.Postgres {
			unique = "UNIQUE DEFERRABLE INITIALLY DEFERRED"
		}
		if _, err := db.Exec(ctx, `CREATE TABLE gc (n INTEGER NOT NULL `+unique+`, v TEXT NOT NULL)`); err != nil {
			t.Fatal(err)
		}
		if _, err := db.Exec(ctx, `INSERT INTO gc (n, v) VALUES (-1, 'taken')`); err != nil {
			t.Fatal(err)
		}
		// run sends n transactions at once, from first on; swallowed
		// and duplicate say which break the group commit. It reports how
		// many were answered nil.
		const n = 90
		run := func(first int, swallowed, duplicate func(i int) bool) int {
			results := make([]error, n)
			var wg sync.WaitGroup
			for j := range n {
				i := first + j
				wg.Go(func() {
					results[j] = db.InTx(ctx, func(tx *store.Tx) error {
						key := i
						if duplicate(i) {
							key = -1
						}
						if err := tx.ExecLater(ctx, `INSERT INTO gc (n, v) VALUES (?, ?)`, key, fmt.Sprint("v", i)); err != nil {
							return err
						}
						var v string
						if err := tx.ScanRow(ctx, []any{&v}, `SELECT v FROM gc WHERE n = ? AND v = ?`, key, fmt.Sprint("v", i)); err != nil {
							return err
						}
						if err := tx.ScanRow(ctx, []any{&v}, `SELECT v FROM gc WHERE n = ?`, -2); !errors.Is(err, sql.ErrNoRows) {
							return fmt.Errorf("a missing row read %v, want sql.ErrNoRows", err)
						}
						if swallowed(i) {
							var x int
							_ = tx.QueryRow(ctx, `SELECT no_such_column FROM gc`).Scan(&x)
							if i%2 == 0 {
								return nil // nothing after it: COMMIT alone finds the transaction failed
							}
							return tx.ExecLater(ctx, `UPDATE gc SET v = v || '!' WHERE n = ?`, key)
						}
						return nil
					})
				})
			}
			wg.Wait()
			rows, err := store.AppendRows([]string(nil), store.QueryRows(ctx, db, "v", store.ScanValue[string], `SELECT v FROM gc WHERE n >= 0`))
			if err != nil {
				t.Fatal(err)
			}
			present := map[string]bool{}
			for _, v := range rows {
				present[strings.TrimSuffix(v, "!")] = true // a swallowed read's update
			}
			answered := 0
			for j, err := range results {
				i := first + j
				v := fmt.Sprint("v", i)
				switch {
				case err == nil && !present[v]:
					t.Errorf("tx %d was answered nil and its row is missing", i)
				case err != nil && present[v]:
					t.Errorf("tx %d was answered %v and its row is there", i, err)
				case err == nil && duplicate(i):
					t.Errorf("tx %d inserted a duplicate and was answered nil", i)
				case err == nil && swallowed(i) && db.Dialect() == store.Postgres:
					t.Errorf("tx %d ran a failed read in its transaction and was answered nil", i)
				}
				if err == nil {
					answered++
				}
			}
			return answered
		}
		never := func(int) bool { return false }
		if got := run(0, func(i int) bool { return i%15 == 7 || i%15 == 8 }, never); got == 0 {
			t.Fatal("with only swallowed read errors, no transaction committed")
		}
		// A deferred duplicate fails its batch at COMMIT, on Postgres
		// every transaction of that batch with it.
		run(1000, never, func(i int) bool { return i%15 == 0 })
		for range 8 {
			if err := db.InTx(ctx, func(tx *store.Tx) error {
				return tx.ExecLater(ctx, `UPDATE gc SET v = v WHERE n = -1`)
			}); err != nil {
				t.Fatalf("a transaction after the batches: %v", err)
			}
		}
	})
}

// TestFirstPassCommitSeesAFailedTransaction: on Postgres, a transaction
// whose read failed (and which swallowed the error) leaves the whole
// transaction aborted, and COMMIT then answers ROLLBACK without an error.
// A first pass whose last transaction did that must not answer anyone nil:
// the COMMIT that rode with the kept statements is checked for what it
// did. The pass's connection goes back to the pool outside a transaction.
func TestFirstPassCommitSeesAFailedTransaction(t *testing.T) {
	dsn := os.Getenv(storetest.EnvPostgres)
	if dsn == "" {
		t.Skip("needs " + storetest.EnvPostgres + " (SQLite has no first pass)")
	}
	db := storetest.OpenPostgres(t, dsn)
	ctx := t.Context()
	if _, err := db.Exec(ctx, `CREATE TABLE fp (n INTEGER PRIMARY KEY)`); err != nil {
		t.Fatal(err)
	}
	insert := func(n int) func(*store.Tx) error {
		return func(tx *store.Tx) error { return tx.ExecLater(ctx, `INSERT INTO fp (n) VALUES (?)`, n) }
	}
	swallow := func(tx *store.Tx) error {
		var x int
		_ = tx.QueryRow(ctx, `SELECT no_such_column FROM fp`).Scan(&x)
		return nil
	}
	ended, answers := db.FirstPass(insert(1), swallow)
	if ended {
		for i, err := range answers {
			if err == nil {
				t.Errorf("transaction %d answered nil by a pass whose transaction was aborted", i)
			}
		}
	}
	ended, answers = db.FirstPass(insert(2), insert(3))
	if !ended || answers[0] != nil || answers[1] != nil {
		t.Fatalf("a clean pass after it: ended %v, answers %v", ended, answers)
	}
	got, err := store.AppendRows([]int(nil), store.QueryRows(ctx, db, "n", store.ScanValue[int], `SELECT n FROM fp ORDER BY n`))
	if err != nil || fmt.Sprint(got) != "[2 3]" {
		t.Fatalf("rows %v, %v; want [2 3]", got, err)
	}
}

// TestTransactionAloneRunsOnceOnItsOwnRefusal: a transaction alone whose
// function refuses (returns an error of its own, no statement failed)
// runs once and is answered that error, with nothing written, on each
// backend — on Postgres, where it takes the group commit's pipelined
// pass, as much as in a transaction of its own.
func TestTransactionAloneRunsOnceOnItsOwnRefusal(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		if _, err := db.Exec(ctx, `CREATE TABLE refused (v TEXT)`); err != nil {
			t.Fatal(err)
		}
		no := errors.New("refused by its function")
		runs := 0
		err := db.InTx(ctx, func(tx *store.Tx) error {
			runs++
			if err := tx.ExecLater(ctx, `INSERT INTO refused (v) VALUES (?)`, "x"); err != nil {
				return err
			}
			return no
		})
		if !errors.Is(err, no) || runs != 1 {
			t.Fatalf("InTx: %v after %d runs, want its own error after 1", err, runs)
		}
		var n int
		if err := db.QueryRow(ctx, `SELECT COUNT(*) FROM refused`).Scan(&n); err != nil || n != 0 {
			t.Fatalf("%d rows written by a refused transaction (%v)", n, err)
		}
	})
}

// TestGroupCommitLeaderHandsOn: a transaction that finds no batch running
// runs on its caller's goroutine; those that come while it runs wait and
// run as the next batch, led by one of them; Close lets that batch finish
// and commit before it returns, and refuses what comes after it.
func TestGroupCommitLeaderHandsOn(t *testing.T) {
	path := filepath.Join(t.TempDir(), "lead.db")
	db, err := store.Open(context.Background(), "sqlite:"+path, "")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := db.Exec(ctx, `CREATE TABLE lead (n INTEGER PRIMARY KEY)`); err != nil {
		t.Fatal(err)
	}
	started, release := make(chan struct{}), make(chan struct{})
	first := make(chan error, 1)
	go func() {
		first <- db.InTx(ctx, func(tx *store.Tx) error {
			stack := make([]byte, 64<<10)
			stack = stack[:runtime.Stack(stack, false)]
			if !strings.Contains(string(stack), "TestGroupCommitLeaderHandsOn") {
				return fmt.Errorf("a transaction alone ran on another goroutine than its caller's:\n%s", stack)
			}
			close(started)
			<-release
			_, err := tx.Exec(ctx, `INSERT INTO lead (n) VALUES (0)`)
			return err
		})
	}()
	<-started
	const n = 20
	answers := make(chan error, n)
	for i := 1; i <= n; i++ {
		go func() {
			answers <- db.InTx(ctx, func(tx *store.Tx) error {
				_, err := tx.Exec(ctx, `INSERT INTO lead (n) VALUES (?)`, i)
				return err
			})
		}()
	}
	for db.QueuedTx() < n {
		runtime.Gosched()
	}
	closed := make(chan error, 1)
	go func() { closed <- db.Close() }()
	for !db.CommitClosing() {
		runtime.Gosched()
	}
	if err := db.InTx(ctx, func(tx *store.Tx) error { return nil }); err == nil || !strings.Contains(err.Error(), "closed") {
		t.Errorf("a transaction after Close: %v; want store: closed", err)
	}
	close(release)
	if err := <-first; err != nil {
		t.Fatalf("the leader: %v", err)
	}
	for range n {
		if err := <-answers; err != nil {
			t.Errorf("a queued transaction: %v", err)
		}
	}
	if err := <-closed; err != nil {
		t.Fatal(err)
	}
	db, err = store.Open(ctx, "sqlite:"+path, "")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var rows int
	if err := db.QueryRow(ctx, `SELECT COUNT(*) FROM lead`).Scan(&rows); err != nil || rows != n+1 {
		t.Fatalf("after reopening: %d rows (%v); want %d", rows, err, n+1)
	}
}
