package ledger_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/caduceus-dev/caduceus/shim/ledger"
	"github.com/caduceus-dev/caduceus/store"
)

// twoProcesses opens two stores on one SQLite file, as two processes of one
// deployment would (each has its own copies and its own clock).
func twoProcesses(t *testing.T) (a, b *store.DB) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "test.db")
	open := func() *store.DB {
		db, err := store.Open(context.Background(), "sqlite:"+path, "")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		return db
	}
	return open(), open()
}

// TestRouteHealthCopyRefreshesAtHoldRefresh states the rule of the
// routes' health copy (health.go): a route another process found unhealthy
// is seen here once this process's copy is HoldRefresh old — exactly then,
// not a microsecond later — and not before (a request costs no read of the
// store while the copy is fresh); a clock that went back reads again.
func TestRouteHealthCopyRefreshesAtHoldRefresh(t *testing.T) {
	ctx := t.Context()
	da, db := twoProcesses(t)
	start := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	nowA, nowB := start, start
	da.Now = func() time.Time { return nowA }
	db.Now = func() time.Time { return nowB }
	a, b := ledger.Of(da), ledger.Of(db)
	until := start.Add(time.Hour)

	// b reads its copy now: the route is healthy.
	if u, err := b.UnhealthyUntil(ctx, "azure-eu"); err != nil || !u.IsZero() {
		t.Fatalf("before any failure: %v, %v", u, err)
	}
	if err := a.RouteFailed(ctx, "azure-eu", 1, until); err != nil {
		t.Fatal(err)
	}
	if u, err := a.UnhealthyUntil(ctx, "azure-eu"); err != nil || !u.Equal(until) {
		t.Fatalf("the failing process's own copy: %v, %v; want %v", u, err, until)
	}
	nowB = start.Add(ledger.HoldRefresh - time.Microsecond)
	if u, err := b.UnhealthyUntil(ctx, "azure-eu"); err != nil || !u.IsZero() {
		t.Fatalf("a copy younger than HoldRefresh was read again: %v, %v", u, err)
	}
	nowB = start.Add(ledger.HoldRefresh)
	if u, err := b.UnhealthyUntil(ctx, "azure-eu"); err != nil || !u.Equal(until) {
		t.Fatalf("a copy exactly HoldRefresh old was kept: %v, %v; want %v", u, err, until)
	}

	// The answer, from a, ends the run; b's copy (read at start+HoldRefresh)
	// still says unhealthy until a clock that went back forces a read.
	if err := a.RouteAnswered(ctx, "azure-eu"); err != nil {
		t.Fatal(err)
	}
	if u, err := b.UnhealthyUntil(ctx, "azure-eu"); err != nil || !u.Equal(until) {
		t.Fatalf("the copy was read again at once: %v, %v", u, err)
	}
	nowB = start
	if u, err := b.UnhealthyUntil(ctx, "azure-eu"); err != nil || !u.IsZero() {
		t.Fatalf("after the clock went back the copy was kept: %v, %v", u, err)
	}
}

// TestHoldsCopyRefreshesAtHoldRefresh states the same rule for the holds
// (holds.go): another process's hold is seen once the copy is HoldRefresh
// old, not before; a clock that went back reads again; a hold is only
// ever moved later, and a hold that ended (until == now) holds nothing.
func TestHoldsCopyRefreshesAtHoldRefresh(t *testing.T) {
	ctx := t.Context()
	da, db := twoProcesses(t)
	start := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	nowA, nowB := start, start
	da.Now = func() time.Time { return nowA }
	db.Now = func() time.Time { return nowB }
	a, b := ledger.Of(da), ledger.Of(db)
	until := start.Add(time.Minute)

	if u, err := b.HeldUntil(ctx, "openai/gpt-4.1"); err != nil || !u.IsZero() {
		t.Fatalf("before any hold: %v, %v", u, err)
	}
	if err := a.Hold(ctx, "openai/gpt-4.1", until); err != nil {
		t.Fatal(err)
	}
	if u, err := a.HeldUntil(ctx, "openai/gpt-4.1"); err != nil || !u.Equal(until) {
		t.Fatalf("the holding process's own copy: %v, %v; want %v", u, err, until)
	}
	nowB = start.Add(ledger.HoldRefresh - time.Microsecond)
	if u, err := b.HeldUntil(ctx, "openai/gpt-4.1"); err != nil || !u.IsZero() {
		t.Fatalf("a copy younger than HoldRefresh was read again: %v, %v", u, err)
	}
	nowB = start.Add(ledger.HoldRefresh)
	if u, err := b.HeldUntil(ctx, "openai/gpt-4.1"); err != nil || !u.Equal(until) {
		t.Fatalf("a copy exactly HoldRefresh old was kept: %v, %v; want %v", u, err, until)
	}

	// A hold is only moved later: an earlier end changes nothing, in the
	// store or in the copy.
	if err := a.Hold(ctx, "openai/gpt-4.1", until.Add(-time.Second)); err != nil {
		t.Fatal(err)
	}
	if u, err := a.HeldUntil(ctx, "openai/gpt-4.1"); err != nil || !u.Equal(until) {
		t.Fatalf("an earlier hold moved the end back: %v, %v; want %v", u, err, until)
	}
	later := until.Add(time.Minute)
	if err := a.Hold(ctx, "openai/gpt-4.1", later); err != nil {
		t.Fatal(err)
	}
	if u, err := a.HeldUntil(ctx, "openai/gpt-4.1"); err != nil || !u.Equal(later) {
		t.Fatalf("a later hold: %v, %v; want %v", u, err, later)
	}
	// b's copy (read at start+HoldRefresh) still has the first end until a
	// clock that went back forces a read.
	if u, err := b.HeldUntil(ctx, "openai/gpt-4.1"); err != nil || !u.Equal(until) {
		t.Fatalf("the copy was read again at once: %v, %v", u, err)
	}
	nowB = start
	if u, err := b.HeldUntil(ctx, "openai/gpt-4.1"); err != nil || !u.Equal(later) {
		t.Fatalf("after the clock went back: %v, %v; want %v", u, err, later)
	}
	// A hold ends at its until: held a microsecond before, free at it.
	nowA = later.Add(-time.Microsecond)
	if u, err := a.HeldUntil(ctx, "openai/gpt-4.1"); err != nil || !u.Equal(later) {
		t.Fatalf("a microsecond before its end: %v, %v", u, err)
	}
	nowA = later
	if u, err := a.HeldUntil(ctx, "openai/gpt-4.1"); err != nil || !u.IsZero() {
		t.Fatalf("at its end the hold still holds: %v, %v", u, err)
	}
}
