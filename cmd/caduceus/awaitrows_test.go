package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// awaitRows waits until cond, which reads the Postgres store dsn names,
// holds: it is checked at once, then again at every change to tables, of
// which a statement trigger the test adds (and drops again) notifies a
// channel of its own. It fails the test with what (what is not so yet)
// when limit passes first.
func awaitRows(t *testing.T, dsn string, tables []string, limit time.Duration, what func() string, cond func() bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), limit)
	defer cancel()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var b [6]byte
	rand.Read(b[:])
	name := "caduceus_test_rows_" + hex.EncodeToString(b[:])
	if _, err := conn.Exec(ctx, fmt.Sprintf(`CREATE FUNCTION %[1]s() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN PERFORM pg_notify('%[1]s', TG_TABLE_NAME); RETURN NULL; END $$`, name)); err != nil {
		t.Fatal(err)
	}
	defer conn.Exec(context.Background(), "DROP FUNCTION "+name+" CASCADE") // and its triggers
	for _, table := range tables {
		if _, err := conn.Exec(ctx, fmt.Sprintf(`CREATE TRIGGER %s AFTER INSERT OR UPDATE OR DELETE ON %s FOR EACH STATEMENT EXECUTE FUNCTION %[1]s()`,
			name, table)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := conn.Exec(ctx, "LISTEN "+name); err != nil {
		t.Fatal(err)
	}
	for !cond() {
		if _, err := conn.WaitForNotification(ctx); err != nil {
			t.Fatalf("%v after the test began waiting: %s (%v)", limit, what(), err)
		}
	}
}
