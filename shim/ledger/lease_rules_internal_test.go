package ledger

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/caduceus-dev/caduceus/shim/upstream"
	"github.com/caduceus-dev/caduceus/store/storetest"
)

// TestLeaseStartsTheIdleExpiry states the idle rule's machinery: a process
// that took a lease runs the idle expiry (its timer), with nothing asking;
// each time it fires after LeaseIdle with the lease unused, the lease goes
// back and, with no lease left, the expiry stops. (It runs many times: an
// expiry given no time to write would be refused by the store's queue
// about every other time.)
func TestLeaseStartsTheIdleExpiry(t *testing.T) {
	db := storetest.OpenSQLite(t)
	ctx := t.Context()
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	db.Now = func() time.Time { return now }
	sp := Of(db)
	b := sp.book
	for i := range 16 {
		key := "k" + strconv.Itoa(i)
		r := upstream.Reservation{ID: "rct_" + key + "-0", Tenant: "slot-1", KeyID: key, Identity: "openai/gpt-4.1", Amount: 1000, KeyLimit: upstream.Limit{Day: 1_000_000}}
		tk, err := sp.Reserve(ctx, r)
		if err != nil || tk.Leases[0] == "" {
			t.Fatalf("%s: %+v, %v; want served from a lease", key, tk, err)
		}
		b.mu.Lock()
		running := b.timer != nil
		b.mu.Unlock()
		if !running {
			t.Fatalf("%s: a lease was taken and the idle expiry is not running", key)
		}
		if err := sp.Release(ctx, tk); err != nil {
			t.Fatal(err)
		}
		now = now.Add(leaseIdle)
		b.tick() // as the timer does after LeaseIdle
		b.mu.Lock()
		running, left := b.timer != nil, len(b.leases)
		b.mu.Unlock()
		if left != 0 || running {
			t.Fatalf("%s: after the last lease went back: %d leases kept, expiry running %v; want none, stopped", key, left, running)
		}
		if n, err := sp.Total(ctx, "key:"+key, "2026-11-29"); err != nil || n != 0 {
			t.Fatalf("%s: the lease idle for LeaseIdle was not given back: key day total %d (%v), want 0", key, n, err)
		}
	}
}

// TestNoTopUpWhileLeasesAreReturned states refillLow's quiet rule: while
// ReturnLeases gives everything back, an attempt that leaves a lease below
// half of its grant starts no background top-up (which would lease again
// what is being returned); once ReturnLeases is done, top-ups start again.
func TestNoTopUpWhileLeasesAreReturned(t *testing.T) {
	sp, reserve := leasedKey(t, 8) // a lease of 16 attempts, exactly half of it left
	b := sp.book
	k := leaseKey{"key:k1", "2026-11-29"}
	refilling := func() bool {
		b.mu.Lock()
		defer b.mu.Unlock()
		l := b.leases[k]
		return l != nil && l.refilling
	}
	// ReturnLeases stops at its write (b.leasing held here), after it
	// quieted the top-ups and wrote the journal. A settlement waits in
	// the journal, so that ReturnLeases first uses its context there,
	// after it quieted the top-ups: the context tells the test it got so
	// far.
	j := journalOf(sp.db)
	j.mu.Lock()
	j.batch, j.delay = 1<<30, time.Hour
	j.mu.Unlock()
	j.add("slot-1", "rcpt_quiet", []ledgerEntry{settledEntry("rcpt_quiet-0")})
	b.leasing.Lock()
	release := sync.OnceFunc(b.leasing.Unlock)
	defer release()
	returned := make(chan error, 1)
	used := make(chan struct{})
	ctx := usedContext{Context: t.Context(), used: sync.OnceFunc(func() { close(used) })}
	go func() {
		_, err := sp.ReturnLeases(ctx)
		returned <- err
	}()
	select {
	case <-used:
	case err := <-returned:
		t.Fatalf("ReturnLeases returned (%v) without the lease writer it needs to give back", err)
	}
	b.mu.Lock()
	quieted := b.quiet != 0
	b.mu.Unlock()
	if !quieted {
		t.Fatal("ReturnLeases wrote the journal before it quieted the top-ups")
	}
	unwaited(t, func() error { return reserve(8) }) // 7 of 16 left
	topping := refilling()
	release()
	if err := <-returned; err != nil {
		t.Fatal(err)
	}
	sp.WaitRefills()
	if topping {
		t.Fatal("an attempt while the leases were being returned started a top-up")
	}
	b.mu.Lock()
	q := b.quiet
	b.mu.Unlock()
	if q != 0 {
		t.Fatalf("after ReturnLeases the top-ups stay quieted (%d)", q)
	}
}

// TestTopUpStartsOnlyBelowHalf states refillLow's edge, at the moment an
// attempt carves (the top-up's write is held back here, so what started is
// seen before it ends): an attempt that leaves exactly half of the lease's
// grant starts no top-up; the next one, leaving less than half, starts
// one.
func TestTopUpStartsOnlyBelowHalf(t *testing.T) {
	sp, reserve := leasedKey(t, 7) // a lease of 16 attempts, 9 left
	b := sp.book
	k := leaseKey{"key:k1", "2026-11-29"}
	refilling := func() bool {
		b.mu.Lock()
		defer b.mu.Unlock()
		return b.leases[k].refilling
	}
	b.leasing.Lock()
	release := sync.OnceFunc(b.leasing.Unlock)
	defer release()
	unwaited(t, func() error { return reserve(7) }) // 8 of 16 left: exactly half
	atHalf := refilling()
	unwaited(t, func() error { return reserve(8) }) // 7 of 16 left
	belowHalf := refilling()
	release()
	sp.WaitRefills()
	if atHalf {
		t.Error("an attempt that left exactly half of the lease started a top-up")
	}
	if !belowHalf {
		t.Error("an attempt that left less than half of the lease started no top-up")
	}
}

// TestTopUpFindingTheLeaseRefilledWritesNothing states refill's second
// look: a top-up that, when its turn to write comes, finds its lease
// holding half of its grant or more again (an attempt that could not wait
// topped it up meanwhile) writes nothing.
func TestTopUpFindingTheLeaseRefilledWritesNothing(t *testing.T) {
	ctx := t.Context()
	sp, _ := leasedKey(t, 8) // a lease of 16 attempts, exactly half left
	b := sp.book
	k := leaseKey{"key:k1", "2026-11-29"}
	// A top-up refillLow started when the lease was below half, finding
	// it at exactly half now.
	b.mu.Lock()
	b.leases[k].refilling = true
	b.mu.Unlock()
	b.refills.Add(1)
	b.refill([]leaseKey{k})
	if n, err := sp.Total(ctx, "key:k1", "2026-11-29"); err != nil || n != 16*1000 {
		t.Fatalf("key day total %d (%v), want the one lease, 16000: a top-up of a lease at half was written", n, err)
	}
	if refilling := b.leases[k].refilling; refilling {
		t.Fatal("the top-up that wrote nothing left its lease marked as being topped up")
	}
}

// leasedKey is a ledger on a SQLite file at a fixed clock, whose key k1
// (a day budget of $1) has taken n attempts of 1,000 µ$ from its lease
// (16 attempts' worth), each top-up finished; reserve(i) takes attempt i
// (n and on) and fails unless the lease served it.
func leasedKey(t *testing.T, n int) (*Ledger, func(i int) error) {
	t.Helper()
	db := storetest.OpenSQLite(t)
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	db.Now = func() time.Time { return now }
	sp := Of(db)
	r := upstream.Reservation{Tenant: "slot-1", KeyID: "k1", Identity: "openai/gpt-4.1", Amount: 1000, KeyLimit: upstream.Limit{Day: 1_000_000}}
	reserve := func(i int) error {
		r.ID = "rct_" + string(rune('a'+i)) + "-0"
		tk, err := sp.Reserve(t.Context(), r)
		if err == nil && tk.Leases[0] == "" {
			err = fmt.Errorf("attempt %d not served from a lease: %+v", i+1, tk)
		}
		return err
	}
	for i := range n {
		must(t, reserve(i))
		sp.WaitRefills()
	}
	return sp, reserve
}

// unwaited runs an attempt while the test holds the lease writer
// (b.leasing): it must be served from its lease, with no lease write. One
// that waits for a lease write fails the test after ten seconds instead of
// hanging it (the test's deferred release then lets it go on).
func unwaited(t *testing.T, attempt func() error) {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- attempt() }()
	select {
	case err := <-done:
		must(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("an attempt to be served from its lease waited for a lease write")
	}
}

// usedContext is a context that calls used the first time any of its
// methods is.
type usedContext struct {
	context.Context
	used func()
}

func (c usedContext) Deadline() (time.Time, bool) { c.used(); return c.Context.Deadline() }
func (c usedContext) Done() <-chan struct{}       { c.used(); return c.Context.Done() }
func (c usedContext) Err() error                  { c.used(); return c.Context.Err() }
func (c usedContext) Value(k any) any             { c.used(); return c.Context.Value(k) }
