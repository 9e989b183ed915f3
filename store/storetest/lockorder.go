package storetest

import (
	"database/sql"
	"os"
	"testing"
	"time"

	"github.com/caduceus-dev/caduceus/store"
)

// LockOrder is a Postgres store whose connections carry an application
// name, and a connection pool of the test's own, for tests of the order in
// which a writer locks rows: the test locks a row, starts the writer, waits
// until the writer waits for that lock, and reads (FOR UPDATE SKIP LOCKED)
// which other rows the writer holds by then.
type LockOrder struct {
	DB     *store.DB // the writer's store, in a fresh schema
	Locker *sql.DB   // the test's connections to the same schema
	app    string
}

// OnPostgres runs fn as the subtest "postgres" when CADUCEUS_TEST_POSTGRES
// holds a DSN, and skips the test otherwise: for what only Postgres has,
// writers in several processes and the order in which they lock rows.
// .ci/run lists the subtests named postgres, so it shows that they ran.
func OnPostgres(t *testing.T, fn func(t *testing.T, dsn string)) {
	t.Helper()
	dsn := os.Getenv(EnvPostgres)
	if dsn == "" {
		t.Skip(EnvPostgres + " unset: this test is of writers sharing a Postgres database")
	}
	t.Run("postgres", func(t *testing.T) { fn(t, dsn) })
}

// OpenLockOrder opens a LockOrder in a fresh schema of dsn, its store's
// connections named app.
func OpenLockOrder(t *testing.T, dsn, app string) *LockOrder {
	t.Helper()
	fresh := FreshSchema(t, dsn)
	db, err := store.Open(t.Context(), fresh+"&application_name="+app, "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	locker, err := sql.Open("pgx", fresh)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { locker.Close() })
	return &LockOrder{DB: db, Locker: locker, app: app}
}

// WhileWaiting runs lock (a statement that locks a row) in a transaction
// of the test's, then write; once one of the store's connections waits for
// a lock, it calls probe with that transaction, rolls it back, and fails
// the test if write then fails (or ended before waiting).
func (l *LockOrder) WhileWaiting(t *testing.T, lock string, write func() error, probe func(tx *sql.Tx)) {
	t.Helper()
	ctx := t.Context()
	tx, err := l.Locker.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, lock); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- write() }()
	for waiting := 0; waiting == 0; {
		select {
		case err := <-done:
			t.Fatalf("the write ended (%v) while the test held its lock", err)
		case <-time.After(5 * time.Millisecond):
		}
		// Asked outside tx: within a transaction Postgres keeps the backends
		// it first read of pg_stat_activity (their wait events stay live),
		// so a writer's connection opened after the first look was never
		// seen waiting, and the test waited for it until its timeout.
		if err := l.Locker.QueryRowContext(ctx, `SELECT count(*) FROM pg_stat_activity WHERE application_name = $1 AND wait_event_type = 'Lock'`, l.app).Scan(&waiting); err != nil {
			t.Fatal(err)
		}
	}
	probe(tx)
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("the write, once the lock was free: %v", err)
	}
}
