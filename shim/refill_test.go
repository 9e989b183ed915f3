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
