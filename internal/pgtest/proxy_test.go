package pgtest_test

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/caduceus-dev/caduceus/internal/pgtest"
	"github.com/caduceus-dev/caduceus/store/storetest"
)

// TestProxyCountsRoundTrips: through the proxy (1 ms each way), three
// statements sent one after another are three round trips, the same three
// sent as one pipelined batch are one, and a LISTEN connection's
// notification, which the client did not ask for, is none; the trace
// names each round trip's statements and its connection's
// application_name.
func TestProxyCountsRoundTrips(t *testing.T) {
	dsn := os.Getenv(storetest.EnvPostgres)
	if dsn == "" {
		t.Skip(storetest.EnvPostgres + " unset: the Postgres tests are off")
	}
	ctx := context.Background()
	px := pgtest.NewProxy(t, dsn, time.Millisecond)
	cfg, err := pgx.ParseConfig(px.DSN(dsn))
	if err != nil {
		t.Fatal(err)
	}
	cfg.DefaultQueryExecMode = pgx.QueryExecModeSimpleProtocol
	cfg.RuntimeParams["application_name"] = "proxy test"
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	listener, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer listener.Close(ctx)
	if _, err := listener.Exec(ctx, "LISTEN proxy_test"); err != nil {
		t.Fatal(err)
	}
	px.Trace(true)
	count := func(what string, want int64, fn func()) {
		t.Helper()
		px.Trips()
		before := px.RoundTrips()
		fn()
		if got := px.RoundTrips() - before; got != want {
			t.Errorf("%s: %d round trips, want %d:\n%v", what, got, want, px.Trips())
		}
	}
	one := func(q string) {
		if _, err := conn.Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	count("three statements one by one", 3, func() { one("SELECT 1"); one("SELECT 2"); one("SELECT 3") })
	count("three statements in one batch", 1, func() {
		var b pgx.Batch
		b.Queue("SELECT 1")
		b.Queue("SELECT 2")
		b.Queue("SELECT 3")
		if err := conn.SendBatch(ctx, &b).Close(); err != nil {
			t.Fatal(err)
		}
	})
	count("a notification heard", 1, func() {
		one("NOTIFY proxy_test") // the one round trip: the notifier's
		if _, err := listener.WaitForNotification(ctx); err != nil {
			t.Fatal(err)
		}
	})
	px.Trips()
	one("SELECT 42")
	if trips := px.Trips(); len(trips) != 1 || trips[0].App != "proxy test" || len(trips[0].Statements) != 1 || trips[0].Statements[0] != "SELECT 42" {
		t.Errorf("trace of one statement: %v", trips)
	}
}

// TestProxyCutsAfterCommit: with CutAfterCommit armed, a transaction's
// COMMIT through the proxy fails on the client, its connection gone, while
// the server committed it: the row is there, read on a connection that
// does not pass through the proxy. Statements before the COMMIT are
// relayed as ever.
func TestProxyCutsAfterCommit(t *testing.T) {
	dsn := os.Getenv(storetest.EnvPostgres)
	if dsn == "" {
		t.Skip(storetest.EnvPostgres + " unset: the Postgres tests are off")
	}
	ctx := context.Background()
	schema := storetest.FreshSchema(t, dsn)
	direct, err := pgx.Connect(ctx, schema)
	if err != nil {
		t.Fatal(err)
	}
	defer direct.Close(ctx)
	if _, err := direct.Exec(ctx, "CREATE TABLE cut (n INTEGER)"); err != nil {
		t.Fatal(err)
	}
	px := pgtest.NewProxy(t, schema, 0)
	conn, err := pgx.Connect(ctx, px.DSN(schema))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	cut := px.CutAfterCommit()
	for _, q := range []string{"BEGIN", "INSERT INTO cut (n) VALUES (1)"} {
		if _, err := conn.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	select {
	case <-cut:
		t.Fatal("cut before the COMMIT")
	default:
	}
	if _, err := conn.Exec(ctx, "COMMIT"); err == nil {
		t.Fatal("COMMIT through the cut answered")
	}
	select {
	case <-cut:
	default:
		t.Fatal("the COMMIT failed but the proxy did not cut")
	}
	if !conn.IsClosed() {
		t.Error("the client's connection is not closed after the cut")
	}
	var n int
	if err := direct.QueryRow(ctx, "SELECT count(*) FROM cut").Scan(&n); err != nil || n != 1 {
		t.Fatalf("rows committed: %d, %v; want 1 (the server committed)", n, err)
	}
}
