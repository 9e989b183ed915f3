package store_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/caduceus-dev/caduceus/audit"
	"github.com/caduceus-dev/caduceus/store"
)

// TestCheckpointsRunOffTheWriter: the writer never checkpoints
// (wal_autocheckpoint is 0 on it), yet what is committed reaches the
// database file, copied by the background checkpoints, and the chain reads
// back whole after the store is opened again.
func TestCheckpointsRunOffTheWriter(t *testing.T) {
	path := filepath.Join(t.TempDir(), "c.db")
	ctx := context.Background()
	db, err := store.Open(ctx, "sqlite:"+path, "")
	if err != nil {
		t.Fatal(err)
	}
	size := func() int64 {
		fi, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		return fi.Size()
	}
	before := size()
	const n = 600 // a few hundred WAL pages
	for i := range n {
		if _, err := db.Audit().Append(ctx, entry("slot-1", "widgets.write", fmt.Sprint("w", i), map[string]any{"pad": fmt.Sprintf("%0600d", i)})); err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(20 * store.CheckpointEvery)
	for size() < before+200*1024 {
		if time.Now().After(deadline) {
			t.Fatalf("database file %d bytes after %d appends (was %d): no checkpoint copied the log", size(), n, before)
		}
		runtime.Gosched()
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db, err = store.Open(ctx, "sqlite:"+path, "")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rep, err := audit.Verify(ctx, db.Audit(), nil)
	if err != nil || rep.Break != nil || rep.Records != n {
		t.Fatalf("verify after reopening = %+v %v", rep, err)
	}
}

// TestCheckpointsStartTheLogOver: under a steady stream of commits the log
// is started over (RESTART past restartFrames) instead of growing with
// every commit; without that, these appends leave a log of about 380 MB.
func TestCheckpointsStartTheLogOver(t *testing.T) {
	path := filepath.Join(t.TempDir(), "c.db")
	ctx := context.Background()
	db, err := store.Open(ctx, "sqlite:"+path, "")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	const limit = 200 << 20
	var largest int64
	for i := range 20000 {
		if _, err := db.Audit().Append(ctx, entry("slot-1", "widgets.write", fmt.Sprint("w", i), map[string]any{"pad": fmt.Sprintf("%0300d", i)})); err != nil {
			t.Fatal(err)
		}
		if i%500 == 0 {
			if fi, err := os.Stat(path + "-wal"); err == nil {
				largest = max(largest, fi.Size())
			}
		}
	}
	if largest > limit {
		t.Fatalf("the log grew to %d MiB", largest>>20)
	}
	t.Logf("largest log %d MiB", largest>>20)
}
