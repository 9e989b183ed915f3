package storetest

import (
	"context"
	"database/sql"
	"testing"
	"time"

	"github.com/caduceus-dev/caduceus/internal/proctest"
)

// AwaitBackendsGone waits until the backends pids (pg_backend_pid()) of
// the Postgres server at dsn, which runs on this machine, have exited and
// the postmaster has reaped them (their CPU is then in its reaped
// children's): each exit on a pidfd, then one new connection, which the
// postmaster accepts only after it has reaped the children whose exit
// was signalled to it before (it handles SIGCHLD before it accepts). It
// fails the test when a backend still runs 30 s after its client left.
func AwaitBackendsGone(t testing.TB, dsn string, pids ...int) {
	t.Helper()
	for _, pid := range pids {
		exited, err := proctest.AwaitExit(pid, 30*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if !exited {
			t.Fatalf("postgres backend %d still runs 30 s after its client closed", pid)
		}
	}
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := db.PingContext(context.Background()); err != nil {
		t.Fatalf("postgres after the backends ended: %v", err)
	}
}
