package ledger_test

import (
	"os"
	"testing"
	"time"

	"github.com/caduceus-dev/caduceus/shim/ledger"
	"github.com/caduceus-dev/caduceus/store"
	"github.com/caduceus-dev/caduceus/store/storetest"
)

// TestRouteHealth: a route is unhealthy once its run of failures reaches
// the threshold, until the time the failure that reached it gave; an
// answer ends the run, so the count starts again; routes are apart.
func TestRouteHealth(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := t.Context()
		h := ledger.Of(db)
		until := time.Date(2026, 12, 1, 12, 0, 30, 0, time.UTC)
		state := func(route string) time.Time {
			t.Helper()
			u, err := h.UnhealthyUntil(ctx, route)
			if err != nil {
				t.Fatal(err)
			}
			return u
		}
		fail := func(route string, n int) {
			t.Helper()
			for range n {
				if err := h.RouteFailed(ctx, route, 3, until); err != nil {
					t.Fatal(err)
				}
			}
		}
		if err := h.RouteAnswered(ctx, "azure-eu"); err != nil || !state("azure-eu").IsZero() {
			t.Fatalf("a route never seen: %v, %v", err, state("azure-eu"))
		}
		fail("azure-eu", 2)
		if u := state("azure-eu"); !u.IsZero() {
			t.Fatalf("unhealthy after 2 failures of 3: %v", u)
		}
		fail("azure-eu", 1)
		if u := state("azure-eu"); !u.Equal(until) {
			t.Fatalf("after 3 failures unhealthy until %v, want %v", u, until)
		}
		if u := state("azure-us"); !u.IsZero() {
			t.Fatalf("another route unhealthy: %v", u)
		}
		if err := h.RouteAnswered(ctx, "azure-eu"); err != nil || !state("azure-eu").IsZero() {
			t.Fatalf("after an answer: %v, %v", err, state("azure-eu"))
		}
		fail("azure-eu", 2)
		if u := state("azure-eu"); !u.IsZero() {
			t.Fatalf("the run did not start again after the answer: unhealthy until %v", u)
		}
		// A threshold of 1: the first failure.
		if err := h.RouteFailed(ctx, "azure-us", 1, until); err != nil || !state("azure-us").Equal(until) {
			t.Fatalf("threshold 1: %v, %v", err, state("azure-us"))
		}
	})
}

// TestRouteHealthSeenByAnotherProcess: on Postgres, a route another
// process (another store of the schema) finds unhealthy, and then
// answering, is seen here through the holds' notification, long before the
// listening copy's refresh (HoldRefreshListening) would have read it.
func TestRouteHealthSeenByAnotherProcess(t *testing.T) {
	dsn := os.Getenv(storetest.EnvPostgres)
	if dsn == "" {
		t.Skip("needs " + storetest.EnvPostgres)
	}
	schema := storetest.FreshSchema(t, dsn)
	open := func() *store.DB {
		db, err := store.Open(t.Context(), schema, "")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		return db
	}
	a, b := ledger.Of(open()), ledger.Of(open())
	awaitHoldsListening(t, b, func() { // the first read starts the listener
		if _, err := b.UnhealthyUntil(t.Context(), "azure-eu"); err != nil {
			t.Fatal(err)
		}
	})
	until := time.Now().Add(time.Hour).Truncate(time.Microsecond)
	for _, step := range []struct {
		name string
		do   func() error
		want time.Time
	}{
		{"unhealthy", func() error { return a.RouteFailed(t.Context(), "azure-eu", 1, until) }, until},
		{"answered", func() error { return a.RouteAnswered(t.Context(), "azure-eu") }, time.Time{}},
	} {
		// The copy is read now, and while listening it is not read again
		// for HoldRefreshListening.
		if _, err := b.UnhealthyUntil(t.Context(), "azure-eu"); err != nil {
			t.Fatal(err)
		}
		read := time.Now()
		if _, err := a.UnhealthyUntil(t.Context(), "azure-eu"); err != nil { // a's copy knows the run
			t.Fatal(err)
		}
		if err := step.do(); err != nil {
			t.Fatal(err)
		}
		done := time.Now()
		// Read again only when b's listener hears a notification: the
		// copy, read at read, is not read again for HoldRefreshListening
		// otherwise.
		for {
			heard := b.HoldsHeard()
			got, err := b.UnhealthyUntil(t.Context(), "azure-eu")
			if err != nil {
				t.Fatal(err)
			}
			if got.Equal(step.want) {
				break
			}
			select {
			case <-heard:
			case <-time.After(ledger.HoldRefreshListening / 2):
				t.Fatalf("%s: unseen %v after the other process wrote it (%v after the copy was read): no notification reached this one",
					step.name, time.Since(done), time.Since(read))
			}
		}
		t.Logf("%s: seen %v after the other process wrote it", step.name, time.Since(done))
	}
}
