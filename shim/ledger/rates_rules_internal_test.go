package ledger

import (
	"testing"
	"time"

	"github.com/caduceus-dev/caduceus/shim/upstream"
	"github.com/caduceus-dev/caduceus/store/storetest"
)

// TestTimedFlushKeepsASliceInUse states the timed flush's rule: a slice
// admitted from since the last flush is kept (the process is using it),
// one not admitted from since is given back — for a window of this minute
// and of the minute before (requests of which may still come).
func TestTimedFlushKeepsASliceInUse(t *testing.T) {
	old := RateFlush
	RateFlush = time.Hour // the timer never fires here: the flushes are called
	t.Cleanup(func() { RateFlush = old })
	db := storetest.OpenSQLite(t)
	ctx := t.Context()
	const m = 29000000
	db.Now = func() time.Time { return time.Unix(m*60+30, 0) }
	sp := Of(db)
	b := ratesOf(db)
	requests := func(minute int64) int64 {
		t.Helper()
		var n int64
		if err := db.QueryRow(ctx, `SELECT requests FROM shim_rates WHERE scope = ? AND minute = ?`, "key:k1", minute).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	for _, minute := range []int64{m, m - 1} {
		if _, _, err := sp.Admit(ctx, []upstream.RateWindow{{Scope: "key:k1", Minute: minute, RPM: 800}}); err != nil {
			t.Fatal(err)
		}
		if n := requests(minute); n != 100 {
			t.Fatalf("minute %d: the row counts %d requests, want the slice of 100", minute-m, n)
		}
	}
	must(t, b.flush(ctx, true))
	for _, minute := range []int64{m, m - 1} {
		if n := requests(minute); n != 100 {
			t.Errorf("minute %d: a timed flush gave back a slice in use: the row counts %d requests, want 100", minute-m, n)
		}
	}
	must(t, b.flush(ctx, true))
	for _, minute := range []int64{m, m - 1} {
		if n := requests(minute); n != 1 {
			t.Errorf("minute %d: a timed flush kept a slice unused since the last: the row counts %d requests, want the 1 admitted", minute-m, n)
		}
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
