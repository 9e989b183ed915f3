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
