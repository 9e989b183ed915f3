package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// ErrBackupPostgres: a Postgres store is backed up with pg_dump, not here.
var ErrBackupPostgres = errors.New("store: backup copies a SQLite store; back up Postgres with pg_dump (docs/operations.md)")

// Backup writes a consistent copy of the SQLite database in file to the
// new file out while the store stays open to writers in other processes
// (serve): VACUUM INTO runs in one read transaction, so the copy holds
// every transaction committed before it began and none of those after, and
// WAL lets commits go on meanwhile. It opens the file itself and runs no
// migration: a newer binary backing up the store of an older serve (before
// an upgrade) leaves its schema alone. The copy is written beside out,
// synced and renamed into place, so out is either whole or absent. An
// existing out is refused and left alone.
func Backup(ctx context.Context, file, out string) error {
	if _, err := os.Stat(file); err != nil {
		return fmt.Errorf("store: backup: %w", err)
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
	// '?', '#' and '%' in the path are escaped: in the file: URI they would
	// end the path or decode.
	uri := "file:" + strings.NewReplacer("%", "%25", "?", "%3f", "#", "%23").Replace(file) + "?_busy_timeout=10000"
	db, err := sql.Open("sqlite", uri)
	if err != nil {
		return fmt.Errorf("store: backup: %w", err)
	}
	defer db.Close()
	if _, err := db.ExecContext(ctx, "VACUUM INTO ?", part); err != nil {
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
