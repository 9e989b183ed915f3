package shimtest

import (
	"testing"

	"github.com/caduceus-dev/caduceus/audit"

	"github.com/caduceus-dev/caduceus/shim"
	"github.com/caduceus-dev/caduceus/shim/memory"
)

func TestMemory(t *testing.T) {
	TestStore(t, func(*testing.T) shim.Store { return NewMemory() })
}

func TestMemoryStoreInMemory(t *testing.T) {
	TestMemoryStore(t, func(*testing.T) memory.Store { return NewMemoryStore() })
}

func TestScenariosInMemory(t *testing.T) {
	TestScenarios(t, func(*testing.T) Stores {
		return Stores{Rules: NewMemory(), Memory: NewMemoryStore(), Audit: audit.NewMemory()}
	})
}
