package shim_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"

	"github.com/caduceus-dev/caduceus/audit"
	"github.com/caduceus-dev/caduceus/contract"
	"github.com/caduceus-dev/caduceus/shim"
	"github.com/caduceus-dev/caduceus/shim/shimtest"
)

// gatedStore counts ListProvisions and holds each until release closes.
type gatedStore struct {
	*shimtest.Memory
	reads   atomic.Int64
	release chan struct{}
}

func (g *gatedStore) ListProvisions(ctx context.Context, tenant contract.TenantSlot) ([]shim.Provision, error) {
	g.reads.Add(1)
	<-g.release
	return g.Memory.ListProvisions(ctx, tenant)
}

// TestProvisionsRefillOnce: requests that find a tenant's provisions
// stale while one of them is reading them wait for that read, rather than
// each reading the same rows: 16 at once cost one read, and all of them
// get its result; once it is cached, the next costs none.
func TestProvisionsRefillOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := &gatedStore{Memory: shimtest.NewMemory(), release: make(chan struct{})}
		svc := shim.New(shim.Config{Store: store, Audit: audit.NewMemory()})
		const tenant contract.TenantSlot = "slot-1"
		var wg sync.WaitGroup
		got := make([][]shim.Provision, 16)
		errs := make([]error, 16)
		for i := range got {
			wg.Go(func() { got[i], errs[i] = shim.Provisions(svc, t.Context(), tenant) })
		}
		synctest.Wait() // every caller waits: on the read, or for it
		if n := store.reads.Load(); n != 1 {
			t.Fatalf("%d reads for 16 callers at once, want 1", n)
		}
		close(store.release)
		wg.Wait()
		for i, err := range errs {
			if err != nil {
				t.Errorf("caller %d: %v", i, err)
			}
		}
		if _, err := shim.Provisions(svc, t.Context(), tenant); err != nil || store.reads.Load() != 1 {
			t.Errorf("cached: %v, %d reads, want 1", err, store.reads.Load())
		}
	})
}

// firstBlocks is a store whose first ListProvisions is held until release
// closes; every later one answers at once.
type firstBlocks struct {
	*shimtest.Memory
	reads   atomic.Int64
	release chan struct{}
}

func (f *firstBlocks) ListProvisions(ctx context.Context, tenant contract.TenantSlot) ([]shim.Provision, error) {
	if f.reads.Add(1) == 1 {
		<-f.release
	}
	return f.Memory.ListProvisions(ctx, tenant)
}

// TestProvisionsOwnReads: with Config.OwnReads (the edge's), a request
// that finds the provisions stale while another's read of them is in
// flight reads them itself and returns without waiting for that read —
// in a Worker, waiting on another request's I/O gets the waiter canceled
// as hung. Without it (serve's), it waits for the read in flight.
func TestProvisionsOwnReads(t *testing.T) {
	for _, own := range []bool{true, false} {
		synctest.Test(t, func(t *testing.T) {
			store := &firstBlocks{Memory: shimtest.NewMemory(), release: make(chan struct{})}
			svc := shim.New(shim.Config{Store: store, Audit: audit.NewMemory(), OwnReads: own})
			const tenant contract.TenantSlot = "slot-1"
			first, second := make(chan error, 1), make(chan error, 1)
			go func() { _, err := shim.Provisions(svc, t.Context(), tenant); first <- err }()
			synctest.Wait() // the first caller is in its read
			go func() { _, err := shim.Provisions(svc, t.Context(), tenant); second <- err }()
			synctest.Wait() // the second has returned, or waits
			reads := store.reads.Load()
			var returned bool
			select {
			case err := <-second:
				returned = true
				if err != nil {
					t.Errorf("OwnReads %v: second caller: %v", own, err)
				}
			default:
			}
			switch {
			case own && (reads != 2 || !returned):
				t.Errorf("OwnReads: %d reads, second caller returned %v; want 2 reads, and it not waiting for the first's", reads, returned)
			case !own && (reads != 1 || returned):
				t.Errorf("shared reads: %d reads, second caller returned %v; want 1 read, the second waiting for it", reads, returned)
			}
			close(store.release)
			if err := <-first; err != nil {
				t.Errorf("OwnReads %v: first caller: %v", own, err)
			}
			if !returned {
				if err := <-second; err != nil {
					t.Errorf("OwnReads %v: second caller: %v", own, err)
				}
			}
		})
	}
}
