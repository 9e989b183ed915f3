package store

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// ErrBackupPostgres: a Postgres store is backed up with pg_dump, not here.
var ErrBackupPostgres = errors.New("store: backup copies a SQLite store; back up Postgres with pg_dump (docs/operations.md)")

// Backup writes a consistent copy of a SQLite store to the new file out
// while the store stays open to writers (other processes' included):
// VACUUM INTO runs in one read transaction on a reader connection, so the
// copy holds every transaction committed before it began and none of those
// after, and WAL lets commits go on meanwhile. The copy is written beside
// out, synced and renamed into place, so out is either whole or absent. An
// existing out is refused and left alone.
func (db *DB) Backup(ctx context.Context, out string) error {
	if db.dialect != SQLite {
		return ErrBackupPostgres
	}
	if _, err := os.Lstat(out); err == nil {
		return fmt.Errorf("store: backup: %s already exists (choose a new file)", out)
	} else if !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("store: backup: %w", err)
	}
	dir := filepath.Dir(out)
	if st, err := os.Stat(dir); err != nil || !st.IsDir() {
		return fmt.Errorf("store: backup: directory %s does not exist", dir)
	}
	part := out + ".partial"
	os.Remove(part) // a previous attempt's, never a finished backup
	if _, err := db.r.ExecContext(ctx, "VACUUM INTO ?", part); err != nil {
		os.Remove(part)
		return fmt.Errorf("store: backup: %w", err)
	}
	if err := syncFile(part); err != nil {
		os.Remove(part)
		return fmt.Errorf("store: backup: %w", err)
	}
	if err := os.Rename(part, out); err != nil {
		os.Remove(part)
		return fmt.Errorf("store: backup: %w", err)
	}
	return syncFile(dir)
}

// syncFile flushes a file (or a directory's entries) to disk.
func syncFile(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	return f.Sync()
}
