package store_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/caduceus-dev/caduceus/audit"
	"github.com/caduceus-dev/caduceus/internal/pgtest"
	"github.com/caduceus-dev/caduceus/store"
	"github.com/caduceus-dev/caduceus/store/storetest"
)

// TestKnownHeadCommitsInOneRoundTrip (Postgres): through a proxy that
// counts round trips, an append to a chain whose head the process does not
// know (as after a restart) commits in two — BEGIN with the head's lock,
// then the writes with the COMMIT — and every later one, whose head the
// process knows from its last commit, in one: BEGIN, the head's check, the
// record, the head and COMMIT together. No pass fails and the chain
// verifies.
func TestKnownHeadCommitsInOneRoundTrip(t *testing.T) {
	storetest.OnPostgres(t, func(t *testing.T, dsn string) {
		ctx := t.Context()
		db, px, _ := storeThroughProxy(t, dsn)
		n := 0
		appendOne := func() []pgtest.Trip {
			t.Helper()
			px.Trips()
			n++
			if _, err := db.Audit().Append(ctx, entry("slot-1", "shim.proxy", fmt.Sprintf("receipt/r%d", n), nil)); err != nil {
				t.Fatal(err)
			}
			return px.Trips()
		}
		px.Trace(true)
		// Warm the connection's prepared statements (pgx prepares each
		// statement once per connection, a round trip of its own): the
		// locked pass's and the optimistic one's.
		for range 3 {
			appendOne()
		}

		db.ForgetHeads()
		if trips := appendOne(); len(trips) != 2 {
			t.Errorf("append with the head not known: %d round trips, want 2:\n%s", len(trips), tripLines(trips))
		}
		for i := range 5 {
			trips := appendOne()
			if len(trips) != 1 {
				t.Errorf("append %d with the head known: %d round trips, want 1:\n%s", i, len(trips), tripLines(trips))
				continue
			}
			got := strings.Join(trips[0].Statements, " | ")
			for _, want := range []string{"BEGIN", "FOR UPDATE", "INSERT INTO audit_records", "UPDATE audit_heads", "COMMIT"} {
				if !strings.Contains(got, want) {
					t.Errorf("append %d: its round trip %s has no %q", i, got, want)
				}
			}
			if !strings.HasPrefix(got, "BEGIN | SELECT 1 / count(*) FROM (SELECT 1 FROM audit_heads") {
				t.Errorf("append %d: the head's check is not the first statement after BEGIN: %s", i, got)
			}
		}
		if f, m := db.WholePassFailures(), db.HeadsMoved(); f != 0 || m != 0 {
			t.Errorf("%d first passes failed, %d found the head moved; want none", f, m)
		}
		rep, err := audit.Verify(ctx, db.Audit(), nil)
		if err != nil || rep.Break != nil || rep.Records != int64(n) {
			t.Fatalf("verify = %+v %v; want one whole chain of %d records", rep, err, n)
		}
	})
}

// TestTwoProcessesShareAChainHead (Postgres): two processes (two stores on
// one database) append to one tenant's chain in turn, each twice in a
// row, so each finds, at its first append of every round but the first,
// the head moved by the other since its own last commit. That pass's check
// fails, nothing of it commits, and the append runs again locked: each
// append is acknowledged once, lands once, and the chain verifies. A
// transaction that reads before it appends (its read carries the check)
// takes the same way. Then both append from 8 goroutines each at once.
func TestTwoProcessesShareAChainHead(t *testing.T) {
	storetest.OnPostgres(t, func(t *testing.T, dsn string) {
		ctx := t.Context()
		fresh := storetest.FreshSchema(t, dsn)
		var dbs [2]*store.DB
		for i := range dbs {
			db, err := store.Open(ctx, fresh, "")
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { db.Close() })
			dbs[i] = db
		}
		var seqs []int64
		total := 0
		appendWith := func(db *store.DB, read bool) {
			t.Helper()
			total++
			resource := fmt.Sprintf("receipt/r%d", total)
			var seq int64 // the seq of fn's last run: the one committed
			err := db.InTxFor(ctx, "slot-1", func(tx *store.Tx) error {
				if read {
					var n int
					if err := tx.QueryRow(ctx, `SELECT count(*) FROM audit_records WHERE resource = ?`, resource).Scan(&n); err != nil {
						return err
					}
					if n != 0 {
						return fmt.Errorf("%s is already stored", resource)
					}
				}
				rec, err := store.AppendAudit(context.Background(), tx, entry("slot-1", "shim.proxy", resource, nil))
				seq = rec.Seq
				return err
			})
			if err != nil {
				t.Fatalf("append %d: %v", total, err)
			}
			seqs = append(seqs, seq)
		}
		const rounds = 6
		for round := range rounds {
			for _, db := range dbs {
				appendWith(db, round%2 == 1)
				appendWith(db, false)
			}
		}
		for i, db := range dbs {
			// Its first round's first append found no known head; every
			// later round's found the one the other process moved.
			if f, m := db.WholePassFailures(), db.HeadsMoved(); f != 0 || m != rounds-1 {
				t.Errorf("process %d: %d first passes failed and %d found the head moved; want 0 and %d", i, f, m, rounds-1)
			}
		}
		for i, s := range seqs {
			if s != int64(i+1) {
				t.Fatalf("the appends' seqs %v: want 1 to %d in turn", seqs, total)
			}
		}

		var wg sync.WaitGroup
		const writers, each = 16, 10
		for w := range writers {
			wg.Go(func() {
				for i := range each {
					if _, err := dbs[w%2].Audit().Append(ctx, entry("slot-1", "shim.proxy", fmt.Sprintf("receipt/w%d-%d", w, i), nil)); err != nil {
						t.Errorf("writer %d, append %d: %v", w, i, err)
						return
					}
				}
			})
		}
		wg.Wait()
		total += writers * each
		var rows, distinct int
		if err := dbs[0].QueryRow(ctx, `SELECT count(*), count(DISTINCT resource) FROM audit_records WHERE tenant = 'slot-1'`).Scan(&rows, &distinct); err != nil {
			t.Fatal(err)
		}
		if rows != total || distinct != total {
			t.Errorf("%d records, %d resources; want each of the %d appends once", rows, distinct, total)
		}
		rep, err := audit.Verify(ctx, dbs[1].Audit(), nil)
		if err != nil || rep.Break != nil || rep.Tenants != 1 || rep.Records != int64(total) {
			t.Fatalf("verify = %+v %v; want one whole chain of %d records", rep, err, total)
		}
		t.Logf("concurrent phase: heads found moved %d and %d times, first passes failed %d and %d times",
			dbs[0].HeadsMoved()-(rounds-1), dbs[1].HeadsMoved()-(rounds-1), dbs[0].WholePassFailures(), dbs[1].WholePassFailures())
	})
}

// tripLines lists round trips one a line.
func tripLines(ts []pgtest.Trip) string {
	var b strings.Builder
	for _, tr := range ts {
		fmt.Fprintf(&b, "  %s\n", tr)
	}
	return b.String()
}

// TestFailedCommitForgetsTheHead (Postgres): a group commit whose COMMIT
// fails (here a deferred unique key, checked at the COMMIT) is answered
// that error, commits nothing, and forgets the heads it would have
// written: the next append takes the locked pass and lands on the chain
// where it really ends.
func TestFailedCommitForgetsTheHead(t *testing.T) {
	storetest.OnPostgres(t, func(t *testing.T, dsn string) {
		ctx := t.Context()
		db := storetest.OpenPostgres(t, dsn)
		if _, err := db.Exec(ctx, `CREATE TABLE dc (n INTEGER, CONSTRAINT dc_n UNIQUE (n) DEFERRABLE INITIALLY DEFERRED)`); err != nil {
			t.Fatal(err)
		}
		if _, err := db.Audit().Append(ctx, entry("slot-1", "shim.proxy", "receipt/r1", nil)); err != nil {
			t.Fatal(err)
		}
		if !db.KnowsHead("slot-1") {
			t.Fatal("a commit did not leave its head known")
		}
		ended, answers := db.PassFor(false, store.NamedTx{Tenant: "slot-1", Fn: func(tx *store.Tx) error {
			if _, err := store.AppendAudit(context.Background(), tx, entry("slot-1", "shim.proxy", "receipt/lost", nil)); err != nil {
				return err
			}
			for range 2 {
				if err := tx.ExecLater(ctx, `INSERT INTO dc (n) VALUES (1)`); err != nil {
					return err
				}
			}
			return nil
		}})
		if !ended || answers[0] == nil || !strings.Contains(answers[0].Error(), "commit") {
			t.Fatalf("ended %v, answers %v; want the commit's failure answered", ended, answers)
		}
		if db.KnowsHead("slot-1") {
			t.Fatal("a failed commit left the head it would have written known")
		}
		if db.HeadsMoved() != 0 {
			t.Fatalf("%d passes found the head moved; want none", db.HeadsMoved())
		}
		rec, err := db.Audit().Append(ctx, entry("slot-1", "shim.proxy", "receipt/r2", nil))
		if err != nil || rec.Seq != 2 {
			t.Fatalf("the append after it: seq %d, %v; want 2", rec.Seq, err)
		}
		rep, err := audit.Verify(ctx, db.Audit(), nil)
		if err != nil || rep.Break != nil || rep.Records != 2 {
			t.Fatalf("verify = %+v %v; want one whole chain of 2 records", rep, err)
		}
	})
}

// storeThroughProxy opens a store on a fresh schema of dsn through a
// pgtest.Proxy that adds no delay (so it counts and can cut), closed with
// the test; schema is the schema's own DSN, to reach it directly.
func storeThroughProxy(t *testing.T, dsn string) (db *store.DB, px *pgtest.Proxy, schema string) {
	t.Helper()
	schema = storetest.FreshSchema(t, dsn)
	px = pgtest.NewProxy(t, schema, 0)
	db, err := store.Open(t.Context(), px.DSN(schema), "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db, px, schema
}
