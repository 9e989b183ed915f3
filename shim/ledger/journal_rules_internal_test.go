package ledger

import (
	"path/filepath"
	"strconv"
	"testing"
	"testing/synctest"
	"time"

	"github.com/caduceus-dev/caduceus/shim/gateway"
	"github.com/caduceus-dev/caduceus/shim/upstream"
	"github.com/caduceus-dev/caduceus/store"
	"github.com/caduceus-dev/caduceus/store/storetest"
)

// spendRows is how many spend rows the store holds, read without asking
// the journal (a read of the spend through the Ledger would write it).
func spendRows(t *testing.T, db *store.DB) int {
	t.Helper()
	var n int
	if err := db.QueryRow(t.Context(), `SELECT count(*) FROM shim_spend`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func settledEntry(id string) ledgerEntry {
	return ledgerEntry{ID: id, KeyID: "k1", Model: "openai/gpt-4.1", Day: "2026-12-01", Month: "2026-12",
		Amount: 1000, State: spendSettled, Final: 420, At: 1}
}

// TestJournalWritesAFullBatchAtOnce states the journal's batch rule: closes
// wait (here for an hour's delay) while fewer than a batch are pending;
// the close that makes exactly a full batch starts the write at once.
func TestJournalWritesAFullBatchAtOnce(t *testing.T) {
	db := storetest.OpenSQLite(t)
	j := journalOf(db)
	j.mu.Lock()
	j.batch, j.delay = 2, time.Hour
	j.mu.Unlock()
	j.add("slot-1", "rcpt_1", []ledgerEntry{settledEntry("rcpt_1-0")})
	j.bg.Wait()
	if n := spendRows(t, db); n != 0 {
		t.Fatalf("one close of a batch of two was written before the delay: %d rows", n)
	}
	j.add("slot-1", "rcpt_2", []ledgerEntry{settledEntry("rcpt_2-0")})
	j.bg.Wait()
	if n := spendRows(t, db); n != 2 {
		t.Fatalf("a full batch was not written at once: %d rows, want 2", n)
	}
}

// TestJournalBatchOfEachStore states each store's batch: on SQLite, whose
// one writer a turn's commit waits for while the journal writes, a write
// starts once 4 closes wait; on Postgres, where it runs beside the turns'
// transactions, once 32 do. (The delay is held at an hour: nothing else
// starts a write.)
func TestJournalBatchOfEachStore(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		want := 4
		if db.Dialect() == store.Postgres {
			want = 32
		}
		j := journalOf(db)
		j.mu.Lock()
		j.delay = time.Hour
		j.mu.Unlock()
		for i := range want {
			id := "rcpt_" + strconv.Itoa(i)
			j.add("slot-1", id, []ledgerEntry{settledEntry(id + "-0")})
			j.bg.Wait()
			if n, full := spendRows(t, db), i+1 == want; (n == want) != full || (n != 0 && !full) {
				t.Fatalf("%d closes pending: %d rows written; want a write at %d closes, none before", i+1, n, want)
			}
		}
	})
}

// TestJournalWritesByItselfAfterTheDelay states the journal's delay rule:
// a close below a batch is written when the delay has passed, with
// nothing asking for it (no read, no return of leases, no close), and
// not before. The test runs in a synctest bubble: its clock is fake, and
// moves only when the test lets the delay pass.
func TestJournalWritesByItselfAfterTheDelay(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		db := storetest.OpenSQLite(t)
		j := journalOf(db)
		j.add("slot-1", "rcpt_1", []ledgerEntry{settledEntry("rcpt_1-0")})
		synctest.Wait() // the bubble's clock stands still: the timer has not fired
		if n := spendRows(t, db); n != 0 {
			t.Fatalf("a close below a batch was written before the delay: %d rows", n)
		}
		passes(journalDelay)
		if n := spendRows(t, db); n != 1 {
			t.Fatalf("a pending close was not written by the journal's timer once the delay passed: %d rows", n)
		}
	})
}

// passes moves a synctest bubble's fake clock on by d, then waits until
// every goroutine of the bubble is blocked again (the timers that fired
// have done their work); no real time passes.
func passes(d time.Duration) {
	<-time.After(d)
	synctest.Wait()
}

// TestSplitClosesKeepsCostsPastTheLeaseForTheCommit states splitCloses'
// documented rule: a leased attempt settled at up to its reservation
// (exactly it, or nothing) is journaled; one settled past its
// reservation, or at a negative cost, is closed by the commit itself, as
// is a reservation stored one by one.
func TestSplitClosesKeepsCostsPastTheLeaseForTheCommit(t *testing.T) {
	leased := upstream.Ticket{Reservation: upstream.Reservation{ID: "rct_1-0", Tenant: "slot-1", KeyID: "k1", Identity: "openai/gpt-4.1", Amount: 1000},
		Day: "2026-12-01", Month: "2026-12", Leases: [4]string{"lse_1", "", "", ""}}
	stored := leased
	stored.Leases, stored.Stored = [4]string{}, true
	for _, c := range []struct {
		name     string
		t        upstream.Ticket
		settled  int64
		deferred bool
	}{
		{"leased, settled at its reservation", leased, 1000, true},
		{"leased, settled at nothing", leased, 0, true},
		{"leased, settled past its reservation", leased, 1001, false},
		{"leased, a negative cost", leased, -1, false},
		{"stored one by one", stored, 10, false},
	} {
		d, in := splitCloses([]gateway.Attempt{{Closing: gateway.CloseSettle, Settled: c.settled, Ticket: c.t}}, time.Unix(1, 0))
		if (len(d) == 1) != c.deferred || len(d)+len(in) != 1 {
			t.Errorf("%s: %d journaled, %d in the commit; want journaled %v", c.name, len(d), len(in), c.deferred)
		}
	}
}

// TestJournalTriesAFailedWriteAgain states the journal's retry rule: a
// write that fails keeps its closes pending and, with nothing asking for
// them, tries again after journalRetry (not before); once the store
// takes them, they are written. (A trigger makes the store refuse the
// spend rows for a while; the bubble's fake clock lets journalRetry pass.)
func TestJournalTriesAFailedWriteAgain(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		db := storetest.OpenSQLite(t)
		ctx := t.Context()
		j := journalOf(db)
		j.mu.Lock()
		j.batch, j.delay = 1<<30, time.Hour
		j.mu.Unlock()
		if _, err := db.Exec(ctx, `CREATE TRIGGER refuse_spend BEFORE INSERT ON shim_spend BEGIN SELECT RAISE(ABORT, 'refused'); END`); err != nil {
			t.Fatal(err)
		}
		j.add("slot-1", "rcpt_1", []ledgerEntry{settledEntry("rcpt_1-0")})
		j.writeLater() // as the delay's timer would: the store refuses
		j.mu.Lock()
		retry, pending := j.timer != nil, j.n
		j.mu.Unlock()
		if !retry || pending != 1 {
			t.Fatalf("after a failed write: retry scheduled %v, %d closes pending; want a retry and the 1 close kept", retry, pending)
		}
		if n := spendRows(t, db); n != 0 {
			t.Fatalf("a refused write wrote %d rows", n)
		}
		if _, err := db.Exec(ctx, `DROP TRIGGER refuse_spend`); err != nil {
			t.Fatal(err)
		}
		passes(journalRetry - time.Nanosecond)
		if n := spendRows(t, db); n != 0 {
			t.Fatalf("the retry wrote %d rows before journalRetry passed", n)
		}
		passes(time.Nanosecond)
		if n := spendRows(t, db); n != 1 {
			t.Fatalf("a close whose write failed was not written by the retry once journalRetry passed: %d rows", n)
		}
	})
}

// TestJournalTimerWritesEveryTime states that a write the journal's timer
// starts is given the time to reach the store: each time it fires with a
// close pending, the close is written and nothing is left pending. (It
// runs many times: a write given no time at all would be refused by the
// store's queue about every other time.)
func TestJournalTimerWritesEveryTime(t *testing.T) {
	db := storetest.OpenSQLite(t)
	j := journalOf(db)
	j.mu.Lock()
	j.batch, j.delay = 1<<30, time.Hour
	j.mu.Unlock()
	for i := range 24 {
		id := "rcpt_" + strconv.Itoa(i)
		j.add("slot-1", id, []ledgerEntry{settledEntry(id + "-0")})
		j.writeLater() // as the delay's timer does
		j.mu.Lock()
		pending := j.n
		j.mu.Unlock()
		if n := spendRows(t, db); n != i+1 || pending != 0 {
			t.Fatalf("timed write %d: %d rows, %d closes pending; want %d rows, none pending", i+1, n, pending, i+1)
		}
	}
}

// TestCloseWritesThePendingJournalEveryTime states the journal's rule at
// the store's close: what is pending is written before the store closes —
// every time, not only when the store's queue happens to take it at once
// (a write given no time at all is refused about every other time).
func TestCloseWritesThePendingJournalEveryTime(t *testing.T) {
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "test.db")
	for i := range 16 {
		db, err := store.Open(ctx, "sqlite:"+path, "")
		if err != nil {
			t.Fatal(err)
		}
		j := journalOf(db)
		j.mu.Lock()
		j.batch, j.delay = 1<<30, time.Hour
		j.mu.Unlock()
		id := "rcpt_" + strconv.Itoa(i)
		j.add("slot-1", id, []ledgerEntry{settledEntry(id + "-0")})
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
	}
	db, err := store.Open(ctx, "sqlite:"+path, "")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if n := spendRows(t, db); n != 16 {
		t.Fatalf("16 stores closed with a close pending each: %d spend rows written, want 16", n)
	}
}
