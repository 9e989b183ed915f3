package shimsql

import (
	"context"

	"github.com/caduceus-dev/caduceus/shim"
	"github.com/caduceus-dev/caduceus/shim/shimstore"
	"github.com/caduceus-dev/caduceus/store"
)

// NewMemory returns the shim's memory tables (migration 310_shim_memory)
// of db: memory.Store and memory.TurnStore, written once on the store's
// port (shim/shimstore).
func NewMemory(db *store.DB) *shimstore.Memory { return shimstore.NewMemory(db.Port()) }

// recordMemory runs a turn's memory write (shimstore.MemoryWrite) inside
// q, a turn's transaction. The counts are not read: a statement may wait
// for the transaction's next batch (store.ExecLater).
func recordMemory(ctx context.Context, q store.Querier, w shim.MemoryWrite) error {
	for _, st := range shimstore.MemoryWrite(w) {
		if err := store.ExecLater(ctx, q, st.SQL, st.Args...); err != nil {
			return err
		}
	}
	return nil
}
