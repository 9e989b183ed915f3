package store

import (
	"context"
	"embed"
	"fmt"
	"io/fs"
	"sort"
	"strings"
)

// migrations are applied in file-name order, each once, each in its own
// transaction. Ranges: 000-099 core, 100-199 trader, 200-299 executor,
// 300-399 shim, 400-499 relay, 500-599 console. A file, once released, is never edited:
// changes are new files.
//
//go:embed migrations/*.sql
var migrations embed.FS

// migrationLock is the Postgres advisory lock key held while migrating, so
// processes starting together on one database migrate one at a time.
const migrationLock = 0x6361_6475_6365 // "caduce"

func (db *DB) migrate(ctx context.Context) error {
	names, err := fs.Glob(migrations, "migrations/*.sql")
	if err != nil {
		return err
	}
	sort.Strings(names)

	conn, err := db.w.Conn(ctx)
	if err != nil {
		return fmt.Errorf("store: migrate: %w", err)
	}
	defer conn.Close()
	if db.dialect == Postgres {
		if _, err := conn.ExecContext(ctx, "SELECT pg_advisory_lock($1)", migrationLock); err != nil {
			return fmt.Errorf("store: migrate lock: %w", err)
		}
		defer conn.ExecContext(context.WithoutCancel(ctx), "SELECT pg_advisory_unlock($1)", migrationLock)
	}
	if _, err := conn.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (name TEXT PRIMARY KEY, applied_at BIGINT NOT NULL)`); err != nil {
		return fmt.Errorf("store: migrate: %w", err)
	}
	for _, path := range names {
		name := strings.TrimSuffix(strings.TrimPrefix(path, "migrations/"), ".sql")
		body, err := migrations.ReadFile(path)
		if err != nil {
			return err
		}
		// The check is inside the transaction: on SQLite the immediate
		// transaction holds the write lock, on Postgres the advisory lock
		// is held, so two processes never both apply one file.
		tx, err := conn.BeginTx(ctx, nil)
		if err != nil {
			return fmt.Errorf("store: migrate %s: %w", name, err)
		}
		var n int
		if err := tx.QueryRowContext(ctx, db.dialect.Rebind("SELECT COUNT(*) FROM schema_migrations WHERE name = ?"), name).Scan(&n); err != nil {
			tx.Rollback()
			return fmt.Errorf("store: migrate: %w", err)
		}
		if n > 0 {
			tx.Rollback()
			continue
		}
		if _, err := tx.ExecContext(ctx, string(body)); err != nil {
			tx.Rollback()
			return fmt.Errorf("store: migrate %s: %w", name, err)
		}
		if _, err := tx.ExecContext(ctx, db.dialect.Rebind("INSERT INTO schema_migrations (name, applied_at) VALUES (?, ?)"), name, Micros(db.Now())); err != nil {
			tx.Rollback()
			return fmt.Errorf("store: migrate %s: %w", name, err)
		}
		if err := tx.Commit(); err != nil {
			return fmt.Errorf("store: migrate %s: %w", name, err)
		}
	}
	return nil
}
