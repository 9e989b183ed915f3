// Package storetest runs store tests against every backend: SQLite always
// (a file in the test's temp dir), and Postgres whenever
// CADUCEUS_TEST_POSTGRES holds a DSN, each test in a fresh schema that is
// dropped afterwards.
package storetest

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"net/url"
	"os"
	"path/filepath"
	"testing"

	_ "github.com/jackc/pgx/v5/stdlib"

	"github.com/caduceus-dev/caduceus/store"
)

// EnvPostgres names the environment variable holding the Postgres DSN.
const EnvPostgres = "CADUCEUS_TEST_POSTGRES"

// Each runs fn once per backend as subtests "sqlite" and "postgres".
func Each(t *testing.T, fn func(t *testing.T, db *store.DB)) {
	t.Helper()
	t.Run("sqlite", func(t *testing.T) {
		fn(t, OpenSQLite(t))
	})
	if dsn := os.Getenv(EnvPostgres); dsn != "" {
		t.Run("postgres", func(t *testing.T) {
			fn(t, OpenPostgres(t, dsn))
		})
	}
}

// OpenSQLite opens a migrated store on a new SQLite file.
func OpenSQLite(t testing.TB) *store.DB {
	t.Helper()
	db, err := store.Open(context.Background(), "sqlite:"+filepath.Join(t.TempDir(), "test.db"), "")
	if err != nil {
		t.Fatalf("open sqlite: %v", err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// OpenPostgres opens a migrated store in a fresh schema (see FreshSchema).
func OpenPostgres(t testing.TB, dsn string) *store.DB {
	t.Helper()
	db, err := store.Open(context.Background(), FreshSchema(t, dsn), "")
	if err != nil {
		t.Fatalf("open postgres: %v", err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// FreshSchema creates a new schema on the server at dsn, drops it when the
// test ends, and returns dsn with search_path set to it.
func FreshSchema(t testing.TB, dsn string) string {
	t.Helper()
	var b [6]byte
	rand.Read(b[:])
	schema := "t_" + hex.EncodeToString(b[:])
	admin, err := sql.Open("pgx", dsn)
	if err != nil {
		t.Fatalf("postgres: %v", err)
	}
	if _, err := admin.Exec("CREATE SCHEMA " + schema); err != nil {
		admin.Close()
		t.Fatalf("postgres at %s: create schema: %v", dsn, err)
	}
	t.Cleanup(func() {
		admin.Exec("DROP SCHEMA " + schema + " CASCADE")
		admin.Close()
	})
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatalf("postgres dsn: %v", err)
	}
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	return u.String()
}
