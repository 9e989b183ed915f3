package ledger

import (
	"testing"
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

// TestJournalWritesByItselfAfterTheDelay states the journal's delay rule:
// a close below a batch is written when the delay has passed, with
// nothing asking for it (no read, no return of leases, no close). The
// delay is zero here; the loop only waits for the timer's goroutine, and
// fails if the close is never written.
func TestJournalWritesByItselfAfterTheDelay(t *testing.T) {
	db := storetest.OpenSQLite(t)
	j := journalOf(db)
	j.mu.Lock()
	j.batch, j.delay = 1<<30, 0
	j.mu.Unlock()
	j.add("slot-1", "rcpt_1", []ledgerEntry{settledEntry("rcpt_1-0")})
	for give := time.Now().Add(30 * time.Second); spendRows(t, db) != 1; time.Sleep(time.Millisecond) {
		if time.Now().After(give) {
			t.Fatal("a pending close was never written by the journal's timer")
		}
	}
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
