package pgtest_test

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"testing"

	_ "github.com/jackc/pgx/v5/stdlib"

	"github.com/caduceus-dev/caduceus/internal/pgtest"
	"github.com/caduceus-dev/caduceus/store/storetest"
)

// TestStopStartKill: a private server keeps a committed row across a
// stop and start on the same port and across a SIGKILL of its postmaster
// and the crash recovery of the next start; while stopped it refuses
// connections.
func TestStopStartKill(t *testing.T) {
	if os.Getenv(storetest.EnvPostgres) == "" {
		t.Skip(storetest.EnvPostgres + " unset: the Postgres tests are off")
	}
	srv := pgtest.Start(t)
	ctx := context.Background()
	db, err := sql.Open("pgx", srv.DSN())
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.ExecContext(ctx, `CREATE TABLE kept (v TEXT)`); err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, `INSERT INTO kept VALUES ('one')`); err != nil {
		t.Fatal(err)
	}
	count := func() int {
		t.Helper()
		var n int
		if err := db.QueryRowContext(ctx, `SELECT COUNT(*) FROM kept`).Scan(&n); err != nil {
			t.Fatalf("read after restart: %v", err)
		}
		return n
	}

	srv.Stop()
	if err := db.PingContext(ctx); err == nil {
		t.Fatal("the stopped server answered a ping")
	}
	srv.Start()
	if n := count(); n != 1 {
		t.Fatalf("%d rows after stop and start, want 1", n)
	}
	if _, err := db.ExecContext(ctx, `INSERT INTO kept VALUES ('two')`); err != nil {
		t.Fatal(err)
	}
	srv.Kill()
	if err := db.PingContext(ctx); err == nil {
		t.Fatal("the killed server answered a ping")
	}
	srv.Start()
	if n := count(); n != 2 {
		t.Fatalf("%d rows after kill and start, want 2", n)
	}
}

// TestStandbyPromote: a row committed on a primary with a synchronous
// standby is on the standby once the primary is killed and the standby
// promoted, and the promoted standby takes writes; a DSN naming both
// hosts with target_session_attrs=read-write reaches it.
func TestStandbyPromote(t *testing.T) {
	if os.Getenv(storetest.EnvPostgres) == "" {
		t.Skip(storetest.EnvPostgres + " unset: the Postgres tests are off")
	}
	primary := pgtest.Start(t)
	standby := pgtest.NewStandby(primary, "standby1", true)
	primary.SQL(`CREATE TABLE kept (v TEXT)`)
	primary.SQL(`INSERT INTO kept VALUES ('one')`)
	primary.Kill()
	standby.Promote()
	if n := standby.SQL(`SELECT COUNT(*) FROM kept`); n != "1" {
		t.Fatalf("%s rows on the promoted standby, want 1", n)
	}
	db, err := sql.Open("pgx", fmt.Sprintf("postgres://postgres@127.0.0.1:%d,127.0.0.1:%d/postgres?sslmode=disable&target_session_attrs=read-write", primary.Port(), standby.Port()))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.ExecContext(context.Background(), `INSERT INTO kept VALUES ('two')`); err != nil {
		t.Fatalf("a write through the two-host DSN after the promotion: %v", err)
	}
}
