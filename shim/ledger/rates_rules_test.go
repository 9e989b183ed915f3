package ledger_test

import (
	"errors"
	"testing"
	"time"

	"github.com/caduceus-dev/caduceus/shim/ledger"
	"github.com/caduceus-dev/caduceus/shim/upstream"
	"github.com/caduceus-dev/caduceus/store"
	"github.com/caduceus-dev/caduceus/store/storetest"
)

// TestRateLimitEdges states Admit's limits at their edges: the RPM-th
// request of a minute is admitted and the next refused; once the minute's
// tokens reach TPM exactly, the next request is refused; a refusal reports
// the window as it stood, without the refused request.
func TestRateLimitEdges(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := t.Context()
		sp := ledger.Of(db)
		rpm := []upstream.RateWindow{{Scope: "key:k1", Minute: 29000000, RPM: 3}}
		for i := 1; i <= 3; i++ {
			if out, _, err := sp.Admit(ctx, rpm); err != nil || out[0].Requests != int64(i) {
				t.Fatalf("request %d of an RPM of 3: %+v, %v", i, out, err)
			}
		}
		_, refused, err := sp.Admit(ctx, rpm)
		if !errors.Is(err, upstream.ErrRateLimited) || refused == nil || refused.Requests != 3 {
			t.Fatalf("request 4 of an RPM of 3: %+v, %v; want refused, the window at 3 requests", refused, err)
		}

		tpm := []upstream.RateWindow{{Scope: "key:k2", Minute: 29000000, TPM: 100}}
		if _, _, err := sp.Admit(ctx, tpm); err != nil {
			t.Fatal(err)
		}
		must(t, sp.Used(ctx, tpm, 99))
		if _, _, err := sp.Admit(ctx, tpm); err != nil {
			t.Fatalf("99 tokens of a TPM of 100: %v", err)
		}
		must(t, sp.Used(ctx, tpm, 1))
		if _, refused, err := sp.Admit(ctx, tpm); !errors.Is(err, upstream.ErrRateLimited) || refused == nil || refused.Tokens != 100 {
			t.Fatalf("exactly 100 tokens of a TPM of 100: %+v, %v; want refused", refused, err)
		}
	})
}

// TestTimedFlushGivesBackAPastMinutesSlice: the timer's flush keeps a
// slice in use, but not that of a window whose minute is over, which it
// forgets: that slice goes back to the row, so the minute counts the
// requests admitted and nothing more (it was kept and forgotten, and the
// row counted the whole slice for the rest of the minute).
func TestTimedFlushGivesBackAPastMinutesSlice(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := t.Context()
		sp := ledger.Of(db)
		past := []upstream.RateWindow{{Scope: "key:k1", Minute: db.Now().Unix()/60 - 5, RPM: 100}}
		if out, _, err := sp.Admit(ctx, past); err != nil || out[0].Requests != 1 {
			t.Fatalf("the first request: %+v, %v", out, err)
		}
		must(t, sp.FlushRatesTimed())
		if out, _, err := sp.Admit(ctx, past); err != nil || out[0].Requests != 2 {
			t.Fatalf("after the timer's flush, the window counts %+v, %v; want the 2 requests admitted", out, err)
		}
		// A window of this minute keeps its slice in use across the
		// timer's flush: the next request is admitted from it.
		now := []upstream.RateWindow{{Scope: "key:k1", Minute: db.Now().Unix() / 60, RPM: 100}}
		if _, _, err := sp.Admit(ctx, now); err != nil {
			t.Fatal(err)
		}
		must(t, sp.FlushRatesTimed())
		if out, _, err := sp.Admit(ctx, now); err != nil || out[0].Requests != 2 {
			t.Fatalf("this minute's window after the timer's flush: %+v, %v; want 2", out, err)
		}
	})
}

// TestStaleSweepDeletesOnlyWindowsBeforeTheCutoff states the stale
// sweep's rule for rate windows: a window of a minute before the cutoff's
// is deleted (its count starts again), the cutoff's minute's is kept (once
// the process gave back its slices, as it does every RateFlush).
func TestStaleSweepDeletesOnlyWindowsBeforeTheCutoff(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := t.Context()
		sp := ledger.Of(db)
		cutoff := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
		m := cutoff.Unix() / 60
		old := []upstream.RateWindow{{Scope: "key:k1", Minute: m - 1, RPM: 100}}
		kept := []upstream.RateWindow{{Scope: "key:k1", Minute: m, RPM: 100}}
		for _, ws := range [][]upstream.RateWindow{old, kept} {
			if _, _, err := sp.Admit(ctx, ws); err != nil {
				t.Fatal(err)
			}
		}
		must(t, sp.FlushRates()) // this process's slices go back to the rows first
		if _, err := sp.ReleaseStale(ctx, cutoff); err != nil {
			t.Fatal(err)
		}
		for _, c := range []struct {
			ws   []upstream.RateWindow
			want int64
		}{{old, 1}, {kept, 2}} {
			if out, _, err := sp.Admit(ctx, c.ws); err != nil || out[0].Requests != c.want {
				t.Errorf("minute %d after the sweep at minute %d: %+v, %v; want %d requests", c.ws[0].Minute, m, out, err, c.want)
			}
		}
	})
}

// TestRateRefusalReportsWhatWasAdmitted states what a refusal by tokens
// reports: the window's requests admitted (this process's untaken part of
// its slice is not a request), and its tokens.
func TestRateRefusalReportsWhatWasAdmitted(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := t.Context()
		sp := ledger.Of(db)
		ws := []upstream.RateWindow{{Scope: "key:k1", Minute: 29000000, RPM: 1000, TPM: 100}}
		for i := 1; i <= 2; i++ {
			if out, _, err := sp.Admit(ctx, ws); err != nil || out[0].Requests != int64(i) {
				t.Fatalf("request %d: %+v, %v", i, out, err)
			}
		}
		must(t, sp.Used(ctx, ws, 100))
		_, refused, err := sp.Admit(ctx, ws)
		if !errors.Is(err, upstream.ErrRateLimited) || refused == nil || refused.Requests != 2 || refused.Tokens != 100 {
			t.Fatalf("at the TPM: %+v, %v; want refused, the window at 2 requests and 100 tokens", refused, err)
		}
	})
}

// TestRateTokensCountOnce states that the tokens a process used count once
// in their window: carried by the write that takes the next slice, they
// are not written again by the next flush.
func TestRateTokensCountOnce(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := t.Context()
		sp := ledger.Of(db)
		ws := []upstream.RateWindow{{Scope: "key:k1", Minute: 29000000, RPM: 1}}
		if _, _, err := sp.Admit(ctx, ws); err != nil {
			t.Fatal(err)
		}
		must(t, sp.Used(ctx, ws, 50))
		// The slice is used up: the next request writes the 50 tokens
		// with the write that finds the window full.
		_, refused, err := sp.Admit(ctx, ws)
		if !errors.Is(err, upstream.ErrRateLimited) || refused == nil || refused.Tokens != 50 {
			t.Fatalf("the second request of an RPM of 1: %+v, %v; want refused, the window at 50 tokens", refused, err)
		}
		must(t, sp.FlushRates())
		var tokens int64
		if err := db.QueryRow(ctx, `SELECT tokens FROM shim_rates WHERE scope = ? AND minute = ?`, "key:k1", 29000000).Scan(&tokens); err != nil {
			t.Fatal(err)
		}
		if tokens != 50 {
			t.Fatalf("the window's row holds %d tokens after the flush, want the 50 used", tokens)
		}
	})
}

// TestRateSliceWithinAnEighthOfTheTPM states the slice rule's edge: a
// window with exactly an eighth of its TPM left still leases an eighth of
// what is left of its RPM; with less than an eighth left it leases one
// request at a time (each write then reads the tokens the other processes
// added).
func TestRateSliceWithinAnEighthOfTheTPM(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := t.Context()
		sp := ledger.Of(db)
		for _, c := range []struct {
			scope    string
			used     int64
			requests int64 // the row's requests after the second request's write
		}{{"key:k1", 700, 1 + 99}, {"key:k2", 701, 1 + 1}} {
			ws := []upstream.RateWindow{{Scope: c.scope, Minute: 29000000, RPM: 800, TPM: 800}}
			if _, _, err := sp.Admit(ctx, ws); err != nil {
				t.Fatal(err)
			}
			must(t, sp.Used(ctx, ws, c.used))
			must(t, sp.FlushRates()) // the tokens written, the unused slice back: the row at 1 request
			if _, _, err := sp.Admit(ctx, ws); err != nil {
				t.Fatalf("%d of 800 tokens used: %v", c.used, err)
			}
			var requests int64
			if err := db.QueryRow(ctx, `SELECT requests FROM shim_rates WHERE scope = ? AND minute = ?`, c.scope, 29000000).Scan(&requests); err != nil {
				t.Fatal(err)
			}
			if requests != c.requests {
				t.Errorf("%d of 800 tokens used (%d left, an eighth is 100): the row counts %d requests, want %d", c.used, 800-c.used, requests, c.requests)
			}
		}
	})
}

// TestRateFlushWritesTokensOnce states the flush's rule for tokens: a
// flush writes the tokens used since the last one even when there is no
// slice left to give back, and a flush after it writes them no more.
func TestRateFlushWritesTokensOnce(t *testing.T) {
	old := ledger.RateFlush
	ledger.RateFlush = time.Hour // flushed by hand below
	t.Cleanup(func() { ledger.RateFlush = old })
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := t.Context()
		db.Now = func() time.Time { return time.Unix(29000000*60+30, 0) } // the window's minute
		sp := ledger.Of(db)
		ws := []upstream.RateWindow{{Scope: "key:k1", Minute: 29000000, RPM: 1}}
		if _, _, err := sp.Admit(ctx, ws); err != nil { // the slice of 1 used up
			t.Fatal(err)
		}
		must(t, sp.Used(ctx, ws, 50))
		for i := 1; i <= 2; i++ {
			must(t, sp.FlushRates())
			var requests, tokens int64
			if err := db.QueryRow(ctx, `SELECT requests, tokens FROM shim_rates WHERE scope = ? AND minute = ?`, "key:k1", 29000000).Scan(&requests, &tokens); err != nil {
				t.Fatal(err)
			}
			if requests != 1 || tokens != 50 {
				t.Fatalf("after flush %d: the row at %d requests, %d tokens; want 1 and the 50 used", i, requests, tokens)
			}
		}
	})
}
