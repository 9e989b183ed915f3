package store_test

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"testing/fstest"

	_ "github.com/caduceus-dev/caduceus/executor/executorsql"
	_ "github.com/caduceus-dev/caduceus/relay/relaysql"
	_ "github.com/caduceus-dev/caduceus/shim/shimsql"
	"github.com/caduceus-dev/caduceus/store"
	"github.com/caduceus-dev/caduceus/store/storetest"
	_ "github.com/caduceus-dev/caduceus/trader/tradersql"
)

// released are the migrations of every release so far, by the name
// schema_migrations records. A database made by an older release holds
// these names: a file renamed (or moved under another name) would run its
// DDL again on that database and fail on the tables it already has.
var released = []string{
	"000_core", "010_key_changes", "020_key_grants", "030_audit_conversations",
	"100_trader", "200_executor", "210_executor_broker_version",
	"300_shim", "310_shim_memory", "320_shim_spend", "330_shim_spend_leases", "340_shim_receipts_ledger",
	"400_relay", "500_console",
}

// TestMigrationsKeepTheirNames: with every gate's adapter linked in (as in
// the binary), a new store records each released migration under its
// released name, in name order, whichever package now holds its file.
func TestMigrationsKeepTheirNames(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		names, err := store.AppendRows([]string(nil), store.QueryRows(t.Context(), db, "migrations", store.ScanValue[string],
			`SELECT name FROM schema_migrations ORDER BY applied_at, name`))
		if err != nil {
			t.Fatal(err)
		}
		for _, want := range released {
			if !slices.Contains(names, want) {
				t.Errorf("released migration %s was not applied under its name (applied: %v)", want, names)
			}
		}
		if !slices.IsSorted(names) {
			t.Errorf("migrations applied out of name order: %v", names)
		}
	})
}

// TestRegisterMigrationsRefusesADuplicateName: two packages registering a
// file of one name is a wiring bug, caught when the program starts.
func TestRegisterMigrationsRefusesADuplicateName(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Fatal("a second 100_trader.sql was registered")
		}
	}()
	store.RegisterMigrations("test", fstest.MapFS{"100_trader.sql": {Data: []byte("SELECT 1")}}, ".")
}

// TestOpenRefusesANewerSchema: a store that records a migration no package
// registered (a newer release wrote it) is refused by Open with a
// *SchemaTooNewError naming the store's schema and this program's, before
// anything runs; on SQLite and Postgres.
func TestOpenRefusesANewerSchema(t *testing.T) {
	dsns := map[string]string{"sqlite": "sqlite:" + filepath.Join(t.TempDir(), "caduceus.db")}
	if pg := os.Getenv(storetest.EnvPostgres); pg != "" {
		dsns["postgres"] = storetest.FreshSchema(t, pg)
	}
	for name, dsn := range dsns {
		t.Run(name, func(t *testing.T) {
			db, err := store.Open(t.Context(), dsn, "")
			if err != nil {
				t.Fatal(err)
			}
			if _, err := db.Exec(t.Context(), `INSERT INTO schema_migrations (name, applied_at) VALUES ('990_newer', 1)`); err != nil {
				t.Fatal(err)
			}
			db.Close()
			_, err = store.Open(t.Context(), dsn, "")
			e, ok := errors.AsType[*store.SchemaTooNewError](err)
			if !ok {
				t.Fatalf("Open of a newer schema: %v", err)
			}
			if e.Store != "990_newer" || e.Binary != store.SchemaVersion() || !slices.Equal(e.Unknown, []string{"990_newer"}) ||
				!strings.Contains(err.Error(), "990_newer") || !strings.Contains(err.Error(), store.SchemaVersion()) {
				t.Errorf("the refusal: %+v: %v", e, err)
			}
		})
	}
}
