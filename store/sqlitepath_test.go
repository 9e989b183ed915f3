package store_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
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

// TestSQLiteSynchronous: the writer commits with synchronous=NORMAL (1)
// unless the store name asks for full (2), on a named file and on the data
// directory's; a parameter the store does not know is refused naming it,
// and no file is made.
func TestSQLiteSynchronous(t *testing.T) {
	for _, c := range []struct {
		dsn  func(dir string) string
		want int
	}{
		{func(dir string) string { return "sqlite:" + filepath.Join(dir, "c.db") }, 1},
		{func(dir string) string { return "sqlite:" + filepath.Join(dir, "c.db") + "?synchronous=full" }, 2},
		{func(dir string) string { return "file:" + filepath.Join(dir, "c.db") + "?synchronous=normal" }, 1},
		{func(string) string { return "sqlite:?synchronous=full" }, 2},
	} {
		dir := t.TempDir()
		dsn := c.dsn(dir)
		db, err := store.Open(t.Context(), dsn, dir)
		if err != nil {
			t.Fatalf("%s: %v", dsn, err)
		}
		var got int
		err = db.InTx(t.Context(), func(tx *store.Tx) error { return tx.QueryRow(t.Context(), "PRAGMA synchronous").Scan(&got) })
		name := db.Name()
		db.Close()
		if err != nil || got != c.want {
			t.Errorf("%s: the writer's synchronous is %d (%v), want %d", dsn, got, err, c.want)
		}
		if wantName := map[int]string{1: "sqlite", 2: "sqlite synchronous=full"}[c.want]; name != wantName {
			t.Errorf("%s: named %q, want %q", dsn, name, wantName)
		}
	}
	dir := t.TempDir()
	for _, dsn := range []string{"sqlite:" + filepath.Join(dir, "c.db") + "?synchronous=off", "sqlite:" + filepath.Join(dir, "c.db") + "?mode=ro"} {
		if _, err := store.Open(t.Context(), dsn, dir); err == nil || !strings.Contains(err.Error(), "sqlite") {
			t.Errorf("%s: accepted or unclear (%v)", dsn, err)
		}
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("a refused store name left %d files behind", len(entries))
	}
}
