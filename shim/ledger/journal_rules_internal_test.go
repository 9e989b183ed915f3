package ledger

import (
	"testing"
	"time"

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
