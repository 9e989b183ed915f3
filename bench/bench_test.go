package bench

import (
	"bytes"
	"context"
	"database/sql"
	"os"
	"strings"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib"

	"github.com/caduceus-dev/caduceus/store/storetest"
)

// TestReportShowsTheDatabaseCPUWhenKnown: the db-cpu-ms/1k column appears
// only when a result has its database's CPU, per 1,000 requests, with "-"
// for the results that have none; without it the table is as before.
func TestReportShowsTheDatabaseCPUWhenKnown(t *testing.T) {
	bare := Result{Name: "bare", Requests: 1000, Elapsed: time.Second, CPU: 100 * time.Millisecond}
	cad := Result{Name: "cad", Requests: 2000, Elapsed: time.Second, CPU: 600 * time.Millisecond, DBCPU: 580 * time.Millisecond, HasDBCPU: true}
	var out bytes.Buffer
	Report(&out, "bare", []Result{bare, cad})
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 3 || !strings.Contains(lines[0], "db-cpu-ms/1k") {
		t.Fatalf("table:\n%s", out.String())
	}
	if f := strings.Fields(lines[1]); f[6] != "-" || f[5] != "100" {
		t.Errorf("bare's row %q: want cpu 100 and db-cpu -", lines[1])
	}
	if f := strings.Fields(lines[2]); f[5] != "300" || f[6] != "290" || f[7] != "2.00x" {
		t.Errorf("cad's row %q: want cpu 300, db-cpu 290, 2.00x", lines[2])
	}
	out.Reset()
	Report(&out, "bare", []Result{bare})
	if strings.Contains(out.String(), "db-cpu") {
		t.Errorf("no result has a database's CPU, yet:\n%s", out.String())
	}
	merged := cad
	merged.Merge(Result{Name: "cad", Requests: 10, Elapsed: time.Second})
	if merged.HasDBCPU {
		t.Error("a merge with a round that could not read the database's CPU still claims it")
	}
}

// TestPostgresCPUCountsTheServersWork: with the test Postgres on this
// machine, the server's CPU read before and after a burst of statements
// grows, and the burst's own backend, closed, ended and reaped before the
// second reading, is still counted (through the postmaster's reaped
// children).
func TestPostgresCPUCountsTheServersWork(t *testing.T) {
	dsn := os.Getenv("CADUCEUS_TEST_POSTGRES")
	if dsn == "" {
		t.Skip("needs CADUCEUS_TEST_POSTGRES")
	}
	before, err := PostgresCPU()
	if err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := db.Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var pid int
	if err := conn.QueryRowContext(context.Background(), `SELECT pg_backend_pid()`).Scan(&pid); err != nil {
		t.Fatal(err)
	}
	var n int64
	if err := conn.QueryRowContext(context.Background(), `SELECT count(*) FROM generate_series(1, 3000000)`).Scan(&n); err != nil || n != 3000000 {
		t.Fatalf("burst: %d, %v", n, err)
	}
	conn.Close()
	db.Close()
	storetest.AwaitBackendsGone(t, dsn, pid) // the burst's backend has ended and been reaped
	after, err := PostgresCPU()
	if err != nil {
		t.Fatal(err)
	}
	if after-before < 100*time.Millisecond {
		t.Errorf("the server's CPU grew %v over a burst of 3 million rows, want at least 100ms", after-before)
	}
}
