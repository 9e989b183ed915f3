package store_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/caduceus-dev/caduceus/store"
)

// TestSQLitePathWithSpecialCharacters: a data directory whose name holds
// '#', '?' or '%' keeps its database inside it (the driver's DSN used to
// end the path at '#' or '?', so the file went to another directory).
func TestSQLitePathWithSpecialCharacters(t *testing.T) {
	for _, name := range []string{"runs#01", "what?", "100%"} {
		dir := filepath.Join(t.TempDir(), name)
		db, err := store.Open(context.Background(), "", dir)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if _, err := db.Audit().Tenants(t.Context()); err != nil {
			t.Fatal(err)
		}
		db.Close()
		if _, err := os.Stat(filepath.Join(dir, store.DefaultFile)); err != nil {
			t.Errorf("%s: the database is not in its data directory: %v", name, err)
		}
	}
}
