package ledger_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/caduceus-dev/caduceus/shim/ledger"
	"github.com/caduceus-dev/caduceus/shim/upstream"
	"github.com/caduceus-dev/caduceus/store"
)

// TestRatesNeverAdmitPastALimit: two processes (two stores on one
// database) admitting 40 requests at once against a key's rpm of 10 admit
// exactly 10; a refused request counts nowhere (not in the tenant's window
// either); tokens used close the window once they reach the tpm.
func TestRatesNeverAdmitPastALimit(t *testing.T) {
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
		// The tenant's window counted the 10 admitted, not the 30 refused.
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
