package shimsql_test

import (
	"os"
	"testing"

	"github.com/caduceus-dev/caduceus/shim/memory"
	"github.com/caduceus-dev/caduceus/shim/shimsql"
	"github.com/caduceus-dev/caduceus/shim/shimtest"
	"github.com/caduceus-dev/caduceus/store/storetest"
)

// TestShimMemoryStore runs the memory.Store conformance suite on
// SQLite and, when CADUCEUS_TEST_POSTGRES is set, on Postgres.
func TestShimMemoryStore(t *testing.T) {
	t.Run("sqlite", func(t *testing.T) {
		shimtest.TestMemoryStore(t, func(t *testing.T) memory.Store { return shimsql.NewMemory(storetest.OpenSQLite(t)) })
	})
	if dsn := os.Getenv(storetest.EnvPostgres); dsn != "" {
		t.Run("postgres", func(t *testing.T) {
			shimtest.TestMemoryStore(t, func(t *testing.T) memory.Store { return shimsql.NewMemory(storetest.OpenPostgres(t, dsn)) })
		})
	}
}

// TestShimScenarios runs the seed 003 memory and governance invariants
// (H07, H09, H12, H13, H19) on SQLite and, when CADUCEUS_TEST_POSTGRES is
// set, on Postgres.
func TestShimScenarios(t *testing.T) {
	t.Run("sqlite", func(t *testing.T) {
		shimtest.TestScenarios(t, func(t *testing.T) shimtest.Stores {
			db := storetest.OpenSQLite(t)
			return shimtest.Stores{Rules: shimsql.New(db), Memory: shimsql.NewMemory(db), Audit: db.Audit()}
		})
	})
	if dsn := os.Getenv(storetest.EnvPostgres); dsn != "" {
		t.Run("postgres", func(t *testing.T) {
			shimtest.TestScenarios(t, func(t *testing.T) shimtest.Stores {
				db := storetest.OpenPostgres(t, dsn)
				return shimtest.Stores{Rules: shimsql.New(db), Memory: shimsql.NewMemory(db), Audit: db.Audit()}
			})
		})
	}
}
