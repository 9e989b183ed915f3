package shimtest

import (
	"testing"

	"github.com/caduceus-dev/caduceus/shim"
)

func TestMemory(t *testing.T) {
	TestStore(t, func(*testing.T) shim.Store { return NewMemory() })
}

func TestMemoryStoreInMemory(t *testing.T) {
	TestMemoryStore(t, func(*testing.T) shim.MemoryStore { return NewMemoryStore() })
}
