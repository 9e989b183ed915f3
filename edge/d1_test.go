package edge_test

import (
	"testing"

	"github.com/caduceus-dev/caduceus/deploy/cloudflare/d1test"
	"github.com/caduceus-dev/caduceus/shim"
	"github.com/caduceus-dev/caduceus/shim/memory"
	"github.com/caduceus-dev/caduceus/shim/shimstore"
	"github.com/caduceus-dev/caduceus/shim/shimtest"
	"github.com/caduceus-dev/caduceus/store/port"
)

// The store suites and the edge's own store checks (edge_test.go's
// check functions) on D1 itself: workerd's
// local D1 under Miniflare, through deploy/cloudflare/d1bridge.mjs
// (d1test.Open starts it once per test process and gives each test an
// empty, migrated database of its own). Node and deploy/cloudflare's
// node_modules must be there (.ci/run installs them): without them these
// tests fail, saying so.

// opener opens an empty edge database for a test: open (SQLite) or
// d1test.Open (D1).
type opener func(testing.TB) port.DB

func TestD1ShimStoreContract(t *testing.T) {
	shimtest.TestStore(t, func(t *testing.T) shim.Store { return shimstore.New(d1test.Open(t), nil) })
}

func TestD1MemoryStoreContract(t *testing.T) {
	shimtest.TestMemoryStore(t, func(t *testing.T) memory.Store { return shimstore.NewMemory(d1test.Open(t)) })
}

func TestD1SeedScenarios(t *testing.T) {
	shimtest.TestScenarios(t, func(t *testing.T) shimtest.Stores {
		db := d1test.Open(t)
		return shimtest.Stores{Rules: shimstore.New(db, nil), Memory: shimstore.NewMemory(db), Audit: port.NewAudit(db)}
	})
}

func TestD1AuditChainUnderConcurrentAppends(t *testing.T) {
	checkAuditChainUnderConcurrentAppends(t, d1test.Open)
}

func TestD1KeysAdoptVerifyRevoke(t *testing.T) { checkKeysAdoptVerifyRevoke(t, d1test.Open) }

func TestD1RequestKeysLease(t *testing.T) { checkRequestKeysLease(t, d1test.Open) }

func TestD1TurnsAreOneBatch(t *testing.T) { checkTurnsAreOneBatch(t, d1test.Open) }

func TestD1ChainEndRemembered(t *testing.T) { checkChainEndRemembered(t, d1test.Open) }

func TestD1ProvisionPair(t *testing.T) { checkProvisionPair(t, d1test.Open) }
