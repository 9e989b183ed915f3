package edge_test

import (
	"os"
	"testing"

	"github.com/caduceus-dev/caduceus/store/port"
	"github.com/caduceus-dev/caduceus/store/storetest"
)

// The edge's stores on the server's databases: the same checks as on D1
// (d1_test.go) and on the D1 schema in SQLite (edge_test.go), on the
// store's port as `caduceus serve` answers it (store.DB.Port), on SQLite
// and, when CADUCEUS_TEST_POSTGRES is set, on Postgres: one port, three
// databases, one implementation. (shimtest's suites run shim/shimstore on
// both through shim/shimsql's tests, which wrap it.)
func TestStoresOnServerDatabases(t *testing.T) {
	dbs := map[string]opener{"sqlite": func(t testing.TB) port.DB { return storetest.OpenSQLite(t).Port() }}
	if dsn := os.Getenv(storetest.EnvPostgres); dsn != "" {
		dbs["postgres"] = func(t testing.TB) port.DB { return storetest.OpenPostgres(t, dsn).Port() }
	}
	for _, name := range []string{"sqlite", "postgres"} {
		open, ok := dbs[name]
		if !ok {
			continue
		}
		t.Run(name, func(t *testing.T) {
			t.Run("AuditChainUnderConcurrentAppends", func(t *testing.T) { checkAuditChainUnderConcurrentAppends(t, open) })
			t.Run("KeysAdoptVerifyRevoke", func(t *testing.T) { checkKeysAdoptVerifyRevoke(t, open) })
			t.Run("RequestKeysLease", func(t *testing.T) { checkRequestKeysLease(t, open) })
			t.Run("TurnsAreOneBatch", func(t *testing.T) { checkTurnsAreOneBatch(t, open) })
			t.Run("ChainEndRemembered", func(t *testing.T) { checkChainEndRemembered(t, open) })
			t.Run("ProvisionPair", func(t *testing.T) { checkProvisionPair(t, open) })
		})
	}
}
