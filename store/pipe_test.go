package store_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/caduceus-dev/caduceus/audit"
	"github.com/caduceus-dev/caduceus/internal/pgtest"
	"github.com/caduceus-dev/caduceus/store"
	"github.com/caduceus-dev/caduceus/store/storetest"
)

// pipedThroughProxy opens a store with the pipelined group commit
// (caduceus_pipeline=on) on a fresh schema of dsn through a pgtest.Proxy
// adding delay each way; direct reaches the schema not through the proxy.
func pipedThroughProxy(t *testing.T, dsn string, delay time.Duration) (db *store.DB, px *pgtest.Proxy, direct *sql.DB) {
	t.Helper()
	schema := storetest.FreshSchema(t, dsn)
	px = pgtest.NewProxy(t, schema, delay)
	db, err := store.Open(t.Context(), px.DSN(schema)+"&"+store.PipelineParam+"=on", "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	direct, err = sql.Open("pgx", schema)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { direct.Close() })
	return db, px, direct
}

// pipeBackends are the process ids of the server's backends serving a
// pipe connection (application_name "caduceus pipe" or "NAME (pipe)").
func pipeBackends(t *testing.T, direct *sql.DB) []int {
	t.Helper()
	rows, err := direct.QueryContext(t.Context(), `SELECT pid FROM pg_stat_activity WHERE application_name LIKE '%pipe%'`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var pids []int
	for rows.Next() {
		var pid int
		if err := rows.Scan(&pid); err != nil {
			t.Fatal(err)
		}
		pids = append(pids, pid)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if len(pids) == 0 {
		t.Fatal("no pipe connection in pg_stat_activity")
	}
	return pids
}

// waitBackendsGone waits until none of pids is a backend of the server,
// looking again every 5 ms (until the test's deadline).
func waitBackendsGone(t *testing.T, direct *sql.DB, pids []int) {
	t.Helper()
	for {
		var n int
		if err := direct.QueryRowContext(t.Context(), `SELECT count(*) FROM pg_stat_activity WHERE pid = ANY($1)`, pids).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			return
		}
		select {
		case <-t.Context().Done():
			t.Fatalf("backends %v still run", pids)
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// countRecords is how many audit records of resource the database holds.
func countRecords(t *testing.T, direct *sql.DB, resource string) int {
	t.Helper()
	var n int
	if err := direct.QueryRowContext(t.Context(), `SELECT count(*) FROM audit_records WHERE resource = $1`, resource).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// verifyChain checks slot-1's chain is whole and holds want records.
func verifyChain(t *testing.T, db *store.DB, want int64) {
	t.Helper()
	rep, err := audit.Verify(t.Context(), db.Audit(), nil)
	if err != nil || rep.Break != nil || rep.Records != want {
		t.Fatalf("verify = %+v %v; want one whole chain of %d records", rep, err, want)
	}
}

// TestPipeOverlapsThroughProxy (Postgres): 16 goroutines append to one
// tenant's chain through a proxy adding 2 ms each way, with the pipelined
// group commit. Batches are written while others are in flight on the
// pipe's one connection (the proxy sees round trips whose burst holds
// more than one COMMIT), every statement is prepared once, every append
// is acknowledged once and lands once, no batch runs again, and the chain
// verifies.
func TestPipeOverlapsThroughProxy(t *testing.T) {
	storetest.OnPostgres(t, func(t *testing.T, dsn string) {
		ctx := t.Context()
		db, px, direct := pipedThroughProxy(t, dsn, 2*time.Millisecond)
		if _, err := db.Audit().Append(ctx, entry("slot-1", "shim.proxy", "receipt/first", nil)); err != nil {
			t.Fatal(err) // the locked pass: the head is then known
		}
		px.Trace(true)
		const clients, each = 16, 20
		var wg sync.WaitGroup
		errs := make(chan error, clients*each)
		for c := range clients {
			wg.Go(func() {
				for i := range each {
					if _, err := db.Audit().Append(ctx, entry("slot-1", "shim.proxy", fmt.Sprintf("receipt/%d-%d", c, i), nil)); err != nil {
						errs <- err
					}
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
		st := db.PipeStats()
		t.Logf("pipe: %+v", st)
		if st.Overlapped == 0 || st.Committed == 0 || st.Redone != 0 {
			t.Errorf("pipe %+v: want batches written while others were in flight, and none run again", st)
		}
		if st.Prepared > 5 {
			t.Errorf("%d statements prepared; want each once (BEGIN, the check, the record, the head, COMMIT)", st.Prepared)
		}
		most := 0
		for _, tr := range px.Trips() {
			if !strings.Contains(tr.App, "pipe") {
				continue
			}
			n := 0
			for _, s := range tr.Statements {
				if s == "COMMIT" {
					n++
				}
			}
			most = max(most, n)
		}
		if most < 2 {
			t.Errorf("no round trip of the pipe's carried more than one COMMIT: no batch was written while another was in flight")
		}
		for c := range clients {
			for i := range each {
				if n := countRecords(t, direct, fmt.Sprintf("receipt/%d-%d", c, i)); n != 1 {
					t.Fatalf("receipt/%d-%d is in the database %d times; want once", c, i, n)
				}
			}
		}
		verifyChain(t, db, 1+clients*each)
	})
}

// holdHead locks slot-1's chain head from outside the store until the
// function it returns is called: a batch's check waits on it, so the
// batches the store writes meanwhile are all in flight at once.
func holdHead(t *testing.T, direct *sql.DB) (release func()) {
	t.Helper()
	tx, err := direct.BeginTx(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.ExecContext(t.Context(), `SELECT 1 FROM audit_heads WHERE tenant = 'slot-1' FOR UPDATE`); err != nil {
		t.Fatal(err)
	}
	return func() { tx.Rollback() }
}

// inFlight starts fns, each a transaction of slot-1's, one at a time, each
// once the one before it was written to the pipe (wrote), and returns
// their answers' channels: with the head held (holdHead), every one is in
// flight at once.
func inFlight(t *testing.T, db *store.DB, wrote <-chan struct{}, fns ...func(*store.Tx) error) []chan error {
	t.Helper()
	var answers []chan error
	for _, fn := range fns {
		ch := make(chan error, 1)
		answers = append(answers, ch)
		go func() { ch <- db.InTxFor(context.Background(), "slot-1", fn) }()
		<-wrote
	}
	return answers
}

// appendFn appends a record of resource to slot-1's chain.
func appendFn(resource string) func(*store.Tx) error {
	return func(tx *store.Tx) error {
		_, err := store.AppendAudit(context.Background(), tx, entry("slot-1", "shim.proxy", resource, nil))
		return err
	}
}

// TestPipeRefusedBatch (Postgres): with two batches in flight on the
// pipe, the first fails — a statement of its first segment refused (a
// unique violation), or its COMMIT (a deferred constraint's check) — and
// the second, written against the heads the first would have left, fails
// its head's check and runs again after the pipe drained: the first's
// caller is answered its failure, its record is not in the database, the
// second commits exactly once and the chain verifies.
func TestPipeRefusedBatch(t *testing.T) {
	storetest.OnPostgres(t, func(t *testing.T, dsn string) {
		ctx := t.Context()
		db, _, direct := pipedThroughProxy(t, dsn, 0)
		wrote := db.PipeWrites()
		if _, err := direct.ExecContext(ctx, `CREATE TABLE once (id TEXT UNIQUE);
			CREATE TABLE later (id TEXT, CONSTRAINT later_once UNIQUE (id) DEFERRABLE INITIALLY DEFERRED);
			INSERT INTO once VALUES ('taken'); INSERT INTO later VALUES ('taken')`); err != nil {
			t.Fatal(err)
		}
		if _, err := db.Audit().Append(ctx, entry("slot-1", "shim.proxy", "receipt/first", nil)); err != nil {
			t.Fatal(err)
		}
		records := int64(1)
		// A refused statement sends its batch to run again (where it is
		// refused once more, alone); a refused COMMIT is its answer.
		for _, c := range []struct {
			name, table string
			redone      int64
		}{{"statement refused", "once", 2}, {"commit refused", "later", 1}} {
			for db.KnowsHead("slot-1") == false {
				// The locked pass (after the batch before failed) lands
				// one and knows the head again.
				if _, err := db.Audit().Append(ctx, entry("slot-1", "shim.proxy", "receipt/relearn "+c.name, nil)); err != nil {
					t.Fatal(err)
				}
				records++
			}
			before := db.PipeStats()
			refused, behind := "receipt/refused "+c.name, "receipt/behind "+c.name
			release := holdHead(t, direct)
			answers := inFlight(t, db, wrote,
				func(tx *store.Tx) error {
					if err := appendFn(refused)(tx); err != nil {
						return err
					}
					return tx.ExecLater(context.Background(), `INSERT INTO `+c.table+` (id) VALUES ('taken')`)
				},
				appendFn(behind))
			release()
			err1, err2 := <-answers[0], <-answers[1]
			if !store.IsUniqueViolation(err1) {
				t.Errorf("%s: the refused transaction answered %v; want its unique violation", c.name, err1)
			}
			if err2 != nil {
				t.Errorf("%s: the transaction behind it answered %v; want it committed", c.name, err2)
			}
			if n := countRecords(t, direct, refused); n != 0 {
				t.Errorf("%s: the refused transaction's record is in the database %d times", c.name, n)
			}
			if n := countRecords(t, direct, behind); n != 1 {
				t.Errorf("%s: the record behind it is in the database %d times; want once", c.name, n)
			}
			records++
			after := db.PipeStats()
			if after.Written-before.Written != 2 || after.Redone-before.Redone != c.redone {
				t.Errorf("%s: pipe %+v then %+v: want 2 batches written, %d run again", c.name, before, after, c.redone)
			}
		}
		verifyChain(t, db, records)
	})
}

// TestPipeCutWithTwoInFlight (Postgres): the pipe's connection is cut (by
// the proxy) the moment the server answers the first of two batches in
// flight's COMMIT. Both callers are answered store.ErrCommitUnknown (the
// first committed; the second may have), neither batch runs again, each
// record is in the database at most once (the first exactly once), and
// the next append, on a new pipe connection that prepares its statements
// again, lands on a chain that verifies.
func TestPipeCutWithTwoInFlight(t *testing.T) {
	storetest.OnPostgres(t, func(t *testing.T, dsn string) {
		ctx := t.Context()
		db, px, direct := pipedThroughProxy(t, dsn, 0)
		wrote := db.PipeWrites()
		for i := range 2 {
			if _, err := db.Audit().Append(ctx, entry("slot-1", "shim.proxy", fmt.Sprintf("receipt/warm %d", i), nil)); err != nil {
				t.Fatal(err)
			}
		}
		<-wrote // the second, on the pipe (the first took the locked pass)
		prepared := db.PipeStats().Prepared
		pipes := pipeBackends(t, direct)
		release := holdHead(t, direct)
		cut := px.CutAfterCommit()
		answers := inFlight(t, db, wrote, appendFn("receipt/one"), appendFn("receipt/two"))
		release()
		<-cut
		for i, ch := range answers {
			if err := <-ch; !errors.Is(err, store.ErrCommitUnknown) || !store.IsUnavailable(err) {
				t.Errorf("batch %d in flight at the cut answered %v; want store.ErrCommitUnknown", i+1, err)
			}
		}
		// The server still runs what it received, the second COMMIT among
		// it, until its backend finds the connection gone: only then is
		// what was committed known.
		waitBackendsGone(t, direct, pipes)
		if n := countRecords(t, direct, "receipt/one"); n != 1 {
			t.Errorf("the first batch's record is in the database %d times; want once (the server committed it)", n)
		}
		two := countRecords(t, direct, "receipt/two")
		if two > 1 {
			t.Errorf("the second batch's record is in the database %d times", two)
		}
		if st := db.PipeStats(); st.Redone != 0 {
			t.Errorf("pipe %+v: a batch whose outcome is unknown ran again", st)
		}
		if db.KnowsHead("slot-1") {
			t.Errorf("the head is still known after commits whose outcome is unknown")
		}
		for i := range 2 { // the locked pass, then the pipe on a new connection
			if _, err := db.Audit().Append(ctx, entry("slot-1", "shim.proxy", fmt.Sprintf("receipt/after %d", i), nil)); err != nil {
				t.Fatal(err)
			}
		}
		if st := db.PipeStats(); st.Prepared <= prepared {
			t.Errorf("pipe %+v: the new connection prepared no statement", st)
		}
		verifyChain(t, db, int64(2+1+two+2))
	})
}

// TestPipeReadingTransaction (Postgres): a transaction that reads inside
// the group commit cannot be written ahead: its batch waits for the pipe
// to drain and runs as it would without it, and its read sees what the
// batches before it committed.
func TestPipeReadingTransaction(t *testing.T) {
	storetest.OnPostgres(t, func(t *testing.T, dsn string) {
		ctx := t.Context()
		db, _, _ := pipedThroughProxy(t, dsn, 0)
		for i := range 3 {
			if _, err := db.Audit().Append(ctx, entry("slot-1", "shim.proxy", fmt.Sprintf("receipt/%d", i), nil)); err != nil {
				t.Fatal(err)
			}
		}
		written := db.PipeStats().Written
		var seen int
		err := db.InTxFor(ctx, "slot-1", func(tx *store.Tx) error {
			if err := tx.QueryRow(ctx, `SELECT count(*) FROM audit_records WHERE tenant = 'slot-1'`).Scan(&seen); err != nil {
				return err
			}
			return appendFn("receipt/read")(tx)
		})
		if err != nil || seen != 3 {
			t.Fatalf("the reading transaction answered %v, having read %d records; want nil, 3", err, seen)
		}
		if st := db.PipeStats(); st.Written != written {
			t.Errorf("pipe %+v: the reading transaction's batch was written to the pipe", st)
		}
		if _, err := db.Audit().Append(ctx, entry("slot-1", "shim.proxy", "receipt/after", nil)); err != nil {
			t.Fatal(err)
		}
		verifyChain(t, db, 5)
	})
}

// TestPipeAheadOnceFull (Postgres): a batch is written ahead — while
// another is in flight — only once it holds the pipe's minimum of turns
// (4 here, with no wait that would send it sooner). With slot-1's head
// held from outside (holdHead), one batch stays in flight: 3 appends
// behind it are held in one batch and written only once it has answered;
// 4 are written ahead while it is still in flight. Every append lands
// once and the chain verifies.
func TestPipeAheadOnceFull(t *testing.T) {
	storetest.OnPostgres(t, func(t *testing.T, dsn string) {
		ctx := t.Context()
		db, _, direct := pipedThroughProxy(t, dsn, 0)
		wrote := db.PipeWrites()
		held := db.PipeAhead(4, time.Hour)
		if _, err := db.Audit().Append(ctx, entry("slot-1", "shim.proxy", "receipt/first", nil)); err != nil {
			t.Fatal(err) // the locked pass: the head is then known
		}
		records := int64(1)
		for _, c := range []struct {
			name   string
			behind int
			ahead  bool
		}{{"3 behind", 3, false}, {"4 behind", 4, true}} {
			before := db.PipeStats()
			release := holdHead(t, direct)
			answers := inFlight(t, db, wrote, appendFn("receipt/in flight "+c.name))
			for i := range c.behind {
				ch := make(chan error, 1)
				answers = append(answers, ch)
				go func() {
					ch <- db.InTxFor(context.Background(), "slot-1", appendFn(fmt.Sprintf("receipt/%s %d", c.name, i)))
				}()
			}
			if c.ahead {
				<-wrote // written while the first is in flight (its head is held)
				if st := db.PipeStats(); st.Overlapped-before.Overlapped != 1 || st.AheadFull-before.AheadFull != 1 {
					t.Errorf("%s: pipe %+v then %+v: want one batch written ahead, full", c.name, before, st)
				}
			} else {
				for n := range held {
					if n == c.behind {
						break // all of them held in one batch
					}
				}
				if st := db.PipeStats(); st.Written-before.Written != 1 {
					t.Errorf("%s: pipe %+v then %+v: a batch short of the minimum was written ahead", c.name, before, st)
				}
			}
			release()
			for i, ch := range answers {
				if err := <-ch; err != nil {
					t.Fatalf("%s: append %d: %v", c.name, i, err)
				}
			}
			if !c.ahead {
				<-wrote
			}
			records += int64(1 + c.behind)
			st := db.PipeStats()
			wantAhead := int64(0)
			if c.ahead {
				wantAhead = 1
			}
			if st.Written-before.Written != 2 || st.Turns-before.Turns != int64(1+c.behind) || st.Overlapped-before.Overlapped != wantAhead || st.Redone != 0 {
				t.Errorf("%s: pipe %+v then %+v: want 2 batches of %d turns in all, %d written ahead, none run again", c.name, before, st, 1+c.behind, wantAhead)
			}
			for i := range c.behind {
				if n := countRecords(t, direct, fmt.Sprintf("receipt/%s %d", c.name, i)); n != 1 {
					t.Errorf("%s: append %d is in the database %d times; want once", c.name, i, n)
				}
			}
		}
		verifyChain(t, db, records)
	})
}
