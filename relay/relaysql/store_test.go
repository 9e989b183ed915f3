package relaysql_test

import (
	"os"
	"testing"

	"github.com/caduceus-dev/caduceus/relay"
	"github.com/caduceus-dev/caduceus/relay/relaysql"
	"github.com/caduceus-dev/caduceus/relay/relaytest"
	"github.com/caduceus-dev/caduceus/store/storetest"
)

// TestRelayStore runs the relay.Store conformance suite on SQLite, and on
// Postgres when CADUCEUS_TEST_POSTGRES is set; each subtest gets a fresh
// database (or schema).
func TestRelayStore(t *testing.T) {
	t.Run("sqlite", func(t *testing.T) {
		relaytest.TestStore(t, func(t *testing.T) relay.Store { return relaysql.New(storetest.OpenSQLite(t)) })
	})
	if dsn := os.Getenv(storetest.EnvPostgres); dsn != "" {
		t.Run("postgres", func(t *testing.T) {
			relaytest.TestStore(t, func(t *testing.T) relay.Store { return relaysql.New(storetest.OpenPostgres(t, dsn)) })
		})
	}
}
