package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/caduceus-dev/caduceus/audit"
	"github.com/caduceus-dev/caduceus/store"
)

func (a *app) backupCmd() *cobra.Command {
	var out string
	cmd := &cobra.Command{
		Use:   "backup",
		Short: "Copy the SQLite store to a new file while serve keeps running",
		Long: `Write a consistent copy of the SQLite store to a new file (SQLite's VACUUM
INTO, in one read transaction): it holds every write committed before the
backup began, and serve keeps answering and writing meanwhile. The file is
written beside --out and renamed into place, so --out is whole or absent; an
existing --out is refused. It runs no migration: a new binary backs up the
store an older serve still runs, before the upgrade. The audit signing key (audit-signing.key in the data
directory) is not in the copy: keep it apart. A Postgres store is backed up
with pg_dump (docs/operations.md).`,
		Example: `  caduceus backup --out /backup/caduceus-2026-12-01.db
  caduceus backup --data /srv/caduceus --out /backup/caduceus.db`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if a.sqliteFile() == "" {
				return &exitError{2, errors.New(strings.TrimPrefix(store.ErrBackupPostgres.Error(), "store: "))}
			}
			if err := a.storeMustExist(); err != nil {
				return err
			}
			// The shared lock keeps a restore out while the copy is made;
			// no migration runs (store.Backup opens the file itself).
			lock, err := lockStore(a.sqliteFile(), false)
			if errors.Is(err, errStoreInUse) {
				return &exitError{1, fmt.Errorf("the store %s is being restored (caduceus restore holds its lock); back it up when that has finished", a.sqliteFile())}
			} else if err != nil {
				return err
			}
			defer lock.Close()
			start := time.Now()
			if err := store.Backup(cmd.Context(), a.sqliteFile(), out); err != nil {
				return &exitError{1, errors.New(strings.TrimPrefix(err.Error(), "store: "))}
			}
			st, err := os.Stat(out)
			if err != nil {
				return err
			}
			fmt.Fprintf(a.stdout, "wrote backup of %s to %s (%d bytes, %s)\n", a.sqliteFile(), out, st.Size(), time.Since(start).Round(time.Millisecond))
			return nil
		},
	}
	cmd.Flags().StringVar(&out, "out", "", "the new file to write the backup to (required)")
	cmd.MarkFlagRequired("out")
	return cmd
}

func (a *app) restoreCmd() *cobra.Command {
	var from string
	cmd := &cobra.Command{
		Use:   "restore",
		Short: "Replace the SQLite store with a backup, after verifying its audit chains",
		Long: `Restore a backup made by caduceus backup into the data directory (or --store
sqlite:PATH). It refuses while any process has the store open (serve holds
its lock file, FILE.lock, for as long as it runs): stop serve first. The backup
is copied beside the store, its migrations are brought forward and every
audit chain is verified; only then does it replace the store, and the store
it replaces is kept as FILE.before-restore-TIME. A backup that does not
verify changes nothing. A Postgres store is restored with pg_restore
(docs/operations.md).`,
		Example: `  caduceus restore --from /backup/caduceus-2026-12-01.db
  caduceus restore --data /srv/caduceus --from /backup/caduceus.db`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return a.restore(cmd.Context(), from) },
	}
	cmd.Flags().StringVar(&from, "from", "", "the backup file to restore (required)")
	cmd.MarkFlagRequired("from")
	return cmd
}

func (a *app) restore(ctx context.Context, from string) error {
	file := a.sqliteFile()
	if file == "" {
		return &exitError{2, errors.New("restore replaces a SQLite store; restore Postgres with pg_restore (docs/operations.md)")}
	}
	if err := checkSQLiteFile(from); err != nil {
		return &exitError{2, fmt.Errorf("--from %s: %w", from, err)}
	}
	lock, err := lockStore(file, true)
	if errors.Is(err, errStoreInUse) {
		return &exitError{1, fmt.Errorf("the store %s is in use (a caduceus serve or another command has it open and holds %s.lock): stop it before restoring; nothing was changed", file, file)}
	} else if err != nil {
		return err
	}
	defer lock.Close()

	tmp := file + ".restoring"
	removeDB(tmp)
	if err := copyFile(from, tmp); err != nil {
		removeDB(tmp)
		return fmt.Errorf("restore: %w", err)
	}
	rep, err := verifyStoreFile(ctx, tmp)
	if err != nil {
		removeDB(tmp)
		return &exitError{1, fmt.Errorf("--from %s: %s; nothing was changed", from, strings.TrimPrefix(err.Error(), "store: "))}
	}
	if rep.Break != nil {
		removeDB(tmp)
		return &exitError{1, fmt.Errorf("--from %s does not verify: %v; nothing was changed", from, rep.Break)}
	}
	kept := ""
	if _, err := os.Stat(file); err == nil {
		kept = file + ".before-restore-" + time.Now().UTC().Format("20060102T150405Z")
		if err := moveDB(file, kept); err != nil {
			removeDB(tmp)
			return fmt.Errorf("restore: keeping the current store: %w", err)
		}
	}
	if err := moveDB(tmp, file); err != nil {
		return fmt.Errorf("restore: %w (the previous store is at %s)", err, kept)
	}
	if err := syncDir(filepath.Dir(file)); err != nil {
		return fmt.Errorf("restore: %w", err)
	}
	fmt.Fprintf(a.stdout, "restored %s to %s: verified %d audit records in %d tenants\n", from, file, rep.Records, rep.Tenants)
	if kept != "" {
		fmt.Fprintf(a.stdout, "the store it replaced is kept at %s\n", kept)
	}
	return nil
}

// checkSQLiteFile refuses a file that is not a SQLite database.
func checkSQLiteFile(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	head := make([]byte, 16)
	if _, err := io.ReadFull(f, head); err != nil || !bytes.Equal(head, []byte("SQLite format 3\x00")) {
		return errors.New("not a SQLite database (want a file written by caduceus backup)")
	}
	return nil
}

// verifyStoreFile opens the SQLite store in file (its migrations run
// forward, as serve would run them) and verifies every audit chain.
func verifyStoreFile(ctx context.Context, file string) (audit.Report, error) {
	db, err := store.Open(ctx, store.SQLiteName(file, false), "")
	if err != nil {
		return audit.Report{}, err
	}
	defer db.Close()
	return audit.VerifyWith(ctx, db.Audit(), audit.Options{})
}

func copyFile(from, to string) error {
	in, err := os.Open(from)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(to, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	if err := out.Sync(); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// moveDB renames a SQLite database and its write-ahead log (when there is
// one, it belongs to the file); the shared-memory index is rebuilt from
// the log, so it is removed.
func moveDB(from, to string) error {
	if err := os.Rename(from, to); err != nil {
		return err
	}
	if err := os.Rename(from+"-wal", to+"-wal"); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	os.Remove(from + "-shm")
	return nil
}

func removeDB(path string) {
	for _, p := range []string{path, path + "-wal", path + "-shm"} {
		os.Remove(p)
	}
}

func syncDir(dir string) error {
	f, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer f.Close()
	return f.Sync()
}
