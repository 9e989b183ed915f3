package store_test

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/caduceus-dev/caduceus/contract"
	"github.com/caduceus-dev/caduceus/internal/pgtest"
	"github.com/caduceus-dev/caduceus/store"
	"github.com/caduceus-dev/caduceus/store/storetest"
)

// TestIsUnavailableClassifies: connection failures and the server's
// refusals of a session are unavailable, wrapped or not; a statement's own
// errors (syntax, constraints, serialization) and a caller's cancellation
// are not.
func TestIsUnavailableClassifies(t *testing.T) {
	pg := func(code string) error { return &pgconn.PgError{Code: code, Message: "m"} }
	for _, c := range []struct {
		err  error
		want bool
	}{
		{pg("57P01"), true}, // admin_shutdown
		{pg("57P02"), true}, // crash_shutdown
		{pg("57P03"), true}, // cannot_connect_now
		{pg("08006"), true}, // connection_failure
		{pg("53300"), true}, // too_many_connections
		{&pgconn.ConnectError{}, true},
		{driver.ErrBadConn, true},
		{pgconn.ErrConnClosed, true},
		{syscall.ECONNREFUSED, true},
		{fmt.Errorf("store: begin: %w", syscall.ECONNRESET), true},
		{contract.Internal(fmt.Errorf("shim: read: %w", pg("57P01"))), true},
		{pg("42601"), false}, // syntax_error
		{pg("23505"), false}, // unique_violation
		{pg("40001"), false}, // serialization_failure
		{context.Canceled, false},
		{errors.New("store: something else"), false},
		{nil, false},
	} {
		if got := store.IsUnavailable(c.err); got != c.want {
			t.Errorf("IsUnavailable(%v) = %v, want %v", c.err, got, c.want)
		}
	}
}

// TestStoreAcrossAPostgresOutage: on a private Postgres, while the server
// is stopped (pg_ctl stop -m fast) and then while it is killed (SIGKILL),
// every read, write and transaction of an open store fails at once (well
// within its 10 s deadline) with an error IsUnavailable reports; once the
// server is started again the same store, never reopened, reads what was
// committed before and commits again.
func TestStoreAcrossAPostgresOutage(t *testing.T) {
	if os.Getenv(storetest.EnvPostgres) == "" {
		t.Skip(storetest.EnvPostgres + " unset: the Postgres tests are off")
	}
	srv := pgtest.Start(t)
	ctx := t.Context()
	db, err := store.Open(ctx, srv.DSN(), "")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec(ctx, `CREATE TABLE outage (n BIGINT)`); err != nil {
		t.Fatal(err)
	}
	written := 0
	write := func() error {
		return db.InTx(ctx, func(tx *store.Tx) error {
			_, err := tx.Exec(ctx, `INSERT INTO outage (n) VALUES (?)`, written)
			return err
		})
	}
	for range 3 {
		if err := write(); err != nil {
			t.Fatal(err)
		}
		written++
	}
	for _, outage := range []struct {
		name       string
		down, back func()
	}{{"stop", srv.Stop, srv.Start}, {"kill", srv.Kill, srv.Start}} {
		outage.down()
		for what, op := range map[string]func(context.Context) error{
			"ping": db.Ping,
			"read": func(ctx context.Context) error {
				var n int
				return db.QueryRow(ctx, `SELECT COUNT(*) FROM outage`).Scan(&n)
			},
			"exec": func(ctx context.Context) error {
				_, err := db.Exec(ctx, `INSERT INTO outage (n) VALUES (-1)`)
				return err
			},
			"tx": func(context.Context) error { return write() },
		} {
			// Twice: the first meets the pool's broken connections, the
			// second connects anew.
			for range 2 {
				octx, cancel := context.WithTimeout(ctx, 10*time.Second)
				err := op(octx)
				cancel()
				if err == nil || errors.Is(err, context.DeadlineExceeded) || !store.IsUnavailable(err) {
					t.Fatalf("%s: %s while Postgres is down: %v (want an unavailable error, before the deadline)", outage.name, what, err)
				}
			}
		}
		outage.back()
		if err := db.Ping(ctx); err != nil {
			t.Fatalf("%s: ping after the start: %v", outage.name, err)
		}
		if err := write(); err != nil {
			t.Fatalf("%s: write after the start: %v", outage.name, err)
		}
		written++
		var n int
		if err := db.QueryRow(ctx, `SELECT COUNT(*) FROM outage WHERE n >= 0`).Scan(&n); err != nil || n != written {
			t.Fatalf("%s: %d rows (%v) after the start, want the %d committed", outage.name, n, err, written)
		}
	}
}

// TestSQLiteFullIsUnavailable: SQLite's "database or disk is full" is
// unavailable (the disk, not the statement, refused it).
func TestSQLiteFullIsUnavailable(t *testing.T) {
	db, err := store.Open(t.Context(), "sqlite:"+filepath.Join(t.TempDir(), "full.db"), "")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ctx := t.Context()
	if _, err := db.Exec(ctx, `CREATE TABLE big (b BLOB)`); err != nil {
		t.Fatal(err)
	}
	// max_page_count caps the file as a full disk would.
	err = db.InTx(ctx, func(tx *store.Tx) error {
		var pages int
		if err := tx.QueryRow(ctx, `PRAGMA page_count`).Scan(&pages); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, fmt.Sprintf(`PRAGMA max_page_count = %d`, pages+2)); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `INSERT INTO big (b) VALUES (zeroblob(1000000))`)
		return err
	})
	if err == nil || !store.IsUnavailable(err) {
		t.Fatalf("a write past the file's limit: %v, want an unavailable error", err)
	}
}
