package ledger_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/caduceus-dev/caduceus/shim/ledger"
	"github.com/caduceus-dev/caduceus/shim/upstream"
	"github.com/caduceus-dev/caduceus/store"
	"github.com/caduceus-dev/caduceus/store/storetest"
)

// TestRatesNeverAdmitPastALimit: two processes (two stores on one
// database) admitting 40 requests at once against a key's rpm of 10 admit
// exactly 10; a refused request counts nowhere (not in the tenant's window
// either); tokens used close the window once they reach the tpm.
func TestRatesNeverAdmitPastALimit(t *testing.T) {
	// The windows' minute (1000) is long past by the wall clock, so a timed
	// flush (every RateFlush) would give back and forget them while the 40
	// admissions run: a refusal that reads a row between a flush's give-back
	// and its write under-admits, and a slice taken into a slot the flush
	// just forgot stays in the row. With RateFlush at 1 ms, 7 of 20 runs on
	// Postgres failed (5-9 of 10 admitted, or 13-19 requests left in the
	// tenant's window); on CI's Postgres the admissions can outlast the
	// default 100 ms. Only the flushes below run here.
	old := ledger.RateFlush
	ledger.RateFlush = time.Hour
	t.Cleanup(func() { ledger.RateFlush = old })
	openTwice(t, func(t *testing.T, db, other *store.DB) {
		ctx := context.Background()
		ws := []upstream.RateWindow{{Scope: "key:slot-1:k1", Minute: 1000, RPM: 10}, {Scope: "tenant:slot-1", Minute: 1000, RPM: 100}}
		var admitted atomic.Int64
		var wg sync.WaitGroup
		for i := range 40 {
			l := ledger.Of(db)
			if i%2 == 1 {
				l = ledger.Of(other)
			}
			wg.Go(func() {
				_, refused, err := l.Admit(ctx, ws)
				switch {
				case err == nil:
					admitted.Add(1)
				case errors.Is(err, upstream.ErrRateLimited) && refused != nil && refused.Scope == "key:slot-1:k1":
				default:
					t.Errorf("admit: %v %+v", err, refused)
				}
			})
		}
		wg.Wait()
		if admitted.Load() != 10 {
			t.Fatalf("%d admitted against an rpm of 10", admitted.Load())
		}
		// The tenant's window counted the 10 admitted, not the 30 refused
		// (once both processes gave back their unused slices).
		for _, d := range []*store.DB{db, other} {
			if err := ledger.Of(d).FlushRates(); err != nil {
				t.Fatal(err)
			}
		}
		got, _, err := ledger.Of(db).Admit(ctx, []upstream.RateWindow{{Scope: "tenant:slot-1", Minute: 1000, RPM: 100}})
		if err != nil || got[0].Requests != 11 {
			t.Fatalf("tenant window after the refusals: %+v %v", got, err)
		}
		// Tokens: admitted while below the tpm, refused once it is reached.
		tw := []upstream.RateWindow{{Scope: "key:slot-1:k2", Minute: 1000, TPM: 1000}}
		for i, want := range []bool{true, true, false} {
			got, _, err := ledger.Of(db).Admit(ctx, tw)
			if (err == nil) != want {
				t.Fatalf("tokens, request %d: admitted %v, want %v", i, err == nil, want)
			}
			if err == nil {
				if err := ledger.Of(db).Used(ctx, got, 600); err != nil {
					t.Fatal(err)
				}
			}
		}
		// Another minute is another window.
		if _, _, err := ledger.Of(db).Admit(ctx, []upstream.RateWindow{{Scope: "key:slot-1:k1", Minute: 1001, RPM: 10}}); err != nil {
			t.Fatalf("the next minute: %v", err)
		}
	})
}

// TestRatesSlicesGoBack: a slice of a window one process took and did not
// use is refused to the others until that process gives it back (a
// flush); then the processes together admit exactly the rpm. Tokens one
// process used are seen by the other once written.
func TestRatesSlicesGoBack(t *testing.T) {
	old := ledger.RateFlush
	ledger.RateFlush = time.Hour // flushed by hand below
	t.Cleanup(func() { ledger.RateFlush = old })
	openTwice(t, func(t *testing.T, db, other *store.DB) {
		ctx := context.Background()
		a, b := ledger.Of(db), ledger.Of(other)
		ws := []upstream.RateWindow{{Scope: "key:slot-1:k1", Minute: 2000, RPM: 100}}
		admit := func(l *ledger.Ledger, n int) int {
			got := 0
			for range n {
				_, refused, err := l.Admit(ctx, ws)
				if err == nil {
					got++
					continue
				}
				if !errors.Is(err, upstream.ErrRateLimited) || refused == nil || refused.Requests < 100 {
					t.Fatalf("refusal: %v %+v", err, refused)
				}
			}
			return got
		}
		// a takes a slice (an eighth of 100) and admits one of it.
		if n := admit(a, 1); n != 1 {
			t.Fatalf("a admitted %d of 1", n)
		}
		// b can admit only what a did not take.
		if n := admit(b, 100); n != 88 {
			t.Fatalf("b admitted %d with a holding a slice of 12; want 88", n)
		}
		for _, l := range []*ledger.Ledger{a, b} {
			if err := l.FlushRates(); err != nil {
				t.Fatal(err)
			}
		}
		if n := admit(b, 20); n != 11 {
			t.Fatalf("b admitted %d once a gave back 11; want 11", n)
		}
		if n := admit(a, 5); n != 0 {
			t.Fatalf("a admitted %d past the rpm", n)
		}

		// Tokens: what b used closes the window for a once written.
		tw := []upstream.RateWindow{{Scope: "tenant:slot-1", Minute: 2000, TPM: 1000}}
		got, _, err := b.Admit(ctx, tw)
		if err != nil {
			t.Fatal(err)
		}
		if err := b.Used(ctx, got, 1200); err != nil {
			t.Fatal(err)
		}
		if _, _, err := b.Admit(ctx, tw); !errors.Is(err, upstream.ErrRateLimited) {
			t.Fatalf("b past its tpm: %v", err)
		}
		if err := b.FlushRates(); err != nil {
			t.Fatal(err)
		}
		_, refused, err := a.Admit(ctx, tw)
		if !errors.Is(err, upstream.ErrRateLimited) || refused.Tokens != 1200 {
			t.Fatalf("a after b's tokens were written: %v %+v", err, refused)
		}
	})
}

// TestRatesIdleSliceGoesBackByItself: a process that stops admitting
// gives back its unused slice within a few flushes without being asked,
// so the other process reaches the whole rpm.
func TestRatesIdleSliceGoesBackByItself(t *testing.T) {
	old := ledger.RateFlush
	ledger.RateFlush = 20 * time.Millisecond
	t.Cleanup(func() { ledger.RateFlush = old })
	openTwice(t, func(t *testing.T, db, other *store.DB) {
		ctx := context.Background()
		a, b := ledger.Of(db), ledger.Of(other)
		ws := []upstream.RateWindow{{Scope: "key:slot-1:k9", Minute: time.Now().Unix() / 60, RPM: 100}}
		if _, _, err := a.Admit(ctx, ws); err != nil {
			t.Fatal(err)
		}
		// b admits until refused, then tries again after the next flush of
		// either process (a's gives its slice back, b's forgets that the
		// window was full), for a few flushes.
		admitted := 1
		flushes := 0
		for admitted < 100 {
			aFlushed, bFlushed := a.RatesFlushed(), b.RatesFlushed()
			if _, _, err := b.Admit(ctx, ws); err == nil {
				admitted++
				continue
			} else if !errors.Is(err, upstream.ErrRateLimited) {
				t.Fatal(err)
			}
			if flushes == 20 {
				t.Fatalf("%d of an rpm of 100 admitted after 20 flushes of the two processes, a idle holding a slice", admitted)
			}
			select {
			case <-aFlushed:
				flushes++
			case <-bFlushed:
				flushes++
			case <-time.After(30 * time.Second):
				t.Fatalf("%d of an rpm of 100 admitted, and no flush in 30 s", admitted)
			}
		}
		t.Logf("the rpm reached after %d flushes", flushes)
		if _, _, err := b.Admit(ctx, ws); !errors.Is(err, upstream.ErrRateLimited) {
			t.Fatalf("past the rpm: %v", err)
		}
	})
}

// TestRateWritesLockWindowsInOneOrder (Postgres): every write of several
// rate windows locks their rows in one order (scope, then minute), so a
// flush, a slice taken for a request and the other processes' writes
// never deadlock (on Postgres a deadlock stalls both for a second before
// one is aborted). The test holds the first window's row locked: a write
// in that order waits for it holding no other window's row, whatever the
// order the request names its windows in or the process keeps them.
func TestRateWritesLockWindowsInOneOrder(t *testing.T) {
	// Only the writes below write the windows. The Admit that makes the rows
	// starts the flush timer, and the windows' minute (1000) is long past, so
	// a timed flush gives back every slice and forgets the windows: if it
	// ran before "flush" (RateFlush after that Admit, 100 ms by default, is
	// soon reached on a busy machine), "flush" found nothing to write and
	// ended at once without waiting for the test's lock (3 of 50 runs failed
	// so beside other builds; 20 of 20 with RateFlush at 1 ms).
	old := ledger.RateFlush
	ledger.RateFlush = time.Hour
	t.Cleanup(func() { ledger.RateFlush = old })
	storetest.OnPostgres(t, func(t *testing.T, dsn string) {
		lo := storetest.OpenLockOrder(t, dsn, "caduceus-rates-order")
		ctx := t.Context()

		// Twelve windows, named to the request last first.
		var ws []upstream.RateWindow
		var scopes []string
		for i := 11; i >= 0; i-- {
			s := fmt.Sprintf("key:slot-1:k%02d", i)
			ws = append(ws, upstream.RateWindow{Scope: s, Minute: 1000, RPM: 1000})
			scopes = append(scopes, s)
		}
		first := "key:slot-1:k00"
		l := ledger.Of(lo.DB)
		if _, _, err := l.Admit(ctx, ws); err != nil { // the rows exist, the process holds slices
			t.Fatal(err)
		}

		// heldByWriter runs write while the test holds the first window's row,
		// and reports the other windows whose rows write held once it waited.
		heldByWriter := func(t *testing.T, write func() error) []string {
			t.Helper()
			free := map[string]bool{}
			lo.WhileWaiting(t, `SELECT 1 FROM shim_rates WHERE scope = '`+first+`' AND minute = 1000 FOR UPDATE`, write, func(tx *sql.Tx) {
				rows, err := tx.QueryContext(ctx, `SELECT scope FROM shim_rates WHERE minute = 1000 AND scope <> $1 FOR UPDATE SKIP LOCKED`, first)
				if err != nil {
					t.Fatal(err)
				}
				defer rows.Close()
				for rows.Next() {
					var s string
					if err := rows.Scan(&s); err != nil {
						t.Fatal(err)
					}
					free[s] = true
				}
				if err := rows.Err(); err != nil {
					t.Fatal(err)
				}
			})
			var held []string
			for _, s := range scopes {
				if s != first && !free[s] {
					held = append(held, s)
				}
			}
			return held
		}

		t.Run("flush", func(t *testing.T) {
			if held := heldByWriter(t, l.FlushRates); len(held) > 0 {
				t.Fatalf("the flush locked %v before the first window", held)
			}
		})
		t.Run("slices", func(t *testing.T) {
			// The flush gave every slice back and forgot the windows (their
			// minute is past): the next request takes a slice of each.
			held := heldByWriter(t, func() error { _, _, err := l.Admit(ctx, ws); return err })
			if len(held) > 0 {
				t.Fatalf("taking slices locked %v before the first window", held)
			}
		})
	})
}
