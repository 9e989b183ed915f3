package store

import (
	"context"
	"database/sql"
	"embed"
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strings"
	"sync"
)

// Migrations are applied in file-name order across every registered set,
// each file once, each in its own transaction. The core's files are here
// (000-099 keys, audit and idempotency; 500-599 the console); each gate's
// store adapter registers its own set (RegisterMigrations) with its range:
// 100-199 trader, 200-299 executor, 300-399 shim, 400-499 relay. A file,
// once released, is never edited: changes are new files. A file's name is
// what schema_migrations records, so a file moves between packages freely.
//
//go:embed migrations/*.sql
var coreMigrations embed.FS

var (
	migrationsMu sync.Mutex
	migrationSet = map[string]migration{} // by name
)

type migration struct {
	name, owner string
	body        []byte
}

func init() { RegisterMigrations("store", coreMigrations, "migrations") }

// RegisterMigrations adds the *.sql files in dir of fsys to the migrations
// every Open applies. A gate's store adapter calls it from an init
// function, so a program that uses the adapter has its tables; owner names
// it in errors. Two files of one name panic: a wiring bug.
func RegisterMigrations(owner string, fsys fs.FS, dir string) {
	names, err := fs.Glob(fsys, path.Join(dir, "*.sql"))
	if err != nil {
		panic(err)
	}
	migrationsMu.Lock()
	defer migrationsMu.Unlock()
	for _, p := range names {
		body, err := fs.ReadFile(fsys, p)
		if err != nil {
			panic(err)
		}
		name := strings.TrimSuffix(path.Base(p), ".sql")
		if prev, ok := migrationSet[name]; ok {
			panic(fmt.Sprintf("store: migration %s registered by %s and %s", name, prev.owner, owner))
		}
		migrationSet[name] = migration{name: name, owner: owner, body: body}
	}
}

// registeredMigrations returns the registered migrations in name order.
func registeredMigrations() []migration {
	migrationsMu.Lock()
	defer migrationsMu.Unlock()
	out := make([]migration, 0, len(migrationSet))
	for _, m := range migrationSet {
		out = append(out, m)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	return out
}

// migrationLock is the Postgres advisory lock key held while migrating, so
// processes starting together on one database migrate one at a time.
const migrationLock = 0x6361_6475_6365 // "caduce"

func (db *DB) migrate(ctx context.Context) error {
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
	if err := refuseNewer(ctx, conn); err != nil {
		return err
	}
	for _, m := range registeredMigrations() {
		// The check is inside the transaction: on SQLite the immediate
		// transaction holds the write lock, on Postgres the advisory lock
		// is held, so two processes never both apply one file.
		tx, err := conn.BeginTx(ctx, nil)
		if err != nil {
			return fmt.Errorf("store: migrate %s: %w", m.name, err)
		}
		var n int
		if err := tx.QueryRowContext(ctx, db.dialect.Rebind("SELECT COUNT(*) FROM schema_migrations WHERE name = ?"), m.name).Scan(&n); err != nil {
			tx.Rollback()
			return fmt.Errorf("store: migrate: %w", err)
		}
		if n > 0 {
			tx.Rollback()
			continue
		}
		if _, err := tx.ExecContext(ctx, string(m.body)); err != nil {
			tx.Rollback()
			return fmt.Errorf("store: migrate %s (%s): %w", m.name, m.owner, err)
		}
		if _, err := tx.ExecContext(ctx, db.dialect.Rebind("INSERT INTO schema_migrations (name, applied_at) VALUES (?, ?)"), m.name, Micros(db.Now())); err != nil {
			tx.Rollback()
			return fmt.Errorf("store: migrate %s: %w", m.name, err)
		}
		if err := tx.Commit(); err != nil {
			return fmt.Errorf("store: migrate %s: %w", m.name, err)
		}
	}
	return nil
}

// SchemaVersion is the schema this program writes: the name of the newest
// migration registered.
func SchemaVersion() string {
	ms := registeredMigrations()
	if len(ms) == 0 {
		return ""
	}
	return ms[len(ms)-1].name
}

// SchemaTooNewError: the store holds migrations this program does not
// know, so a newer release wrote it. Open refuses it before changing
// anything: an older program would misread tables it does not know.
type SchemaTooNewError struct {
	Store   string   // the store's schema version: its newest migration
	Binary  string   // SchemaVersion
	Unknown []string // the store's migrations this program does not know
}

func (e *SchemaTooNewError) Error() string {
	return fmt.Sprintf("store: the store's schema %s is newer than this program's %s (unknown migrations: %s)",
		e.Store, e.Binary, strings.Join(e.Unknown, ", "))
}

// refuseNewer returns a *SchemaTooNewError when schema_migrations names a
// migration no package registered.
func refuseNewer(ctx context.Context, conn *sql.Conn) error {
	rows, err := conn.QueryContext(ctx, `SELECT name FROM schema_migrations ORDER BY name`)
	if err != nil {
		return fmt.Errorf("store: migrate: %w", err)
	}
	defer rows.Close()
	known := map[string]bool{}
	for _, m := range registeredMigrations() {
		known[m.name] = true
	}
	e := &SchemaTooNewError{Binary: SchemaVersion()}
	for rows.Next() {
		var name string
		if err := rows.Scan(&name); err != nil {
			return fmt.Errorf("store: migrate: %w", err)
		}
		e.Store = name // names arrive in order: the last is the newest
		if !known[name] {
			e.Unknown = append(e.Unknown, name)
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("store: migrate: %w", err)
	}
	if len(e.Unknown) > 0 {
		return e
	}
	return nil
}
