package store_test

import (
	"context"
	"database/sql"
	"errors"
	"testing"

	"github.com/caduceus-dev/caduceus/audit"
	"github.com/caduceus-dev/caduceus/store"
	"github.com/caduceus-dev/caduceus/store/storetest"
)

// TestCommitOutcomeUnknown (Postgres): the connection of a group commit
// drops after its COMMIT reached the server, which committed, and before
// the answer reached the store (the proxy cuts it, CutAfterCommit). The
// caller is answered an error that says the outcome is unknown
// (store.ErrCommitUnknown) and that counts as the store being unavailable
// (store.IsUnavailable), not a success; the batch is not run again, so
// its audit record and its row are in the database exactly once; the
// chain head is no longer known, and the next append, on another
// connection, lands after the lost one on a chain that verifies. Both with
// the head known (the one-round-trip pass) and not (the locked pass).
func TestCommitOutcomeUnknown(t *testing.T) {
	storetest.OnPostgres(t, func(t *testing.T, dsn string) {
		ctx := t.Context()
		db, px, schema := storeThroughProxy(t, dsn)
		direct, err := sql.Open("pgx", schema) // not through the proxy
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { direct.Close() })
		if _, err := direct.ExecContext(ctx, `CREATE TABLE landed (id TEXT)`); err != nil {
			t.Fatal(err)
		}
		seq := int64(0)
		appendOne := func(resource string) {
			t.Helper()
			rec, err := db.Audit().Append(ctx, entry("slot-1", "shim.proxy", resource, nil))
			if err != nil || rec.Seq != seq+1 {
				t.Fatalf("append %s: seq %d, %v; want seq %d", resource, rec.Seq, err, seq+1)
			}
			seq++
		}
		appendOne("receipt/first")
		for _, known := range []bool{true, false} {
			name := map[bool]string{true: "head known", false: "head not known"}[known]
			if !known {
				db.ForgetHeads()
			}
			if db.KnowsHead("slot-1") != known {
				t.Fatalf("%s: the store knows the head: %v", name, !known)
			}
			lost := "receipt/lost " + name
			cut := px.CutAfterCommit()
			err := db.InTxFor(ctx, "slot-1", func(tx *store.Tx) error {
				if _, err := store.AppendAudit(context.Background(), tx, entry("slot-1", "shim.proxy", lost, nil)); err != nil {
					return err
				}
				return tx.ExecLater(context.Background(), `INSERT INTO landed (id) VALUES (?)`, lost)
			})
			select {
			case <-cut:
			default:
				t.Fatalf("%s: the proxy never cut the commit's connection (the transaction answered %v)", name, err)
			}
			if err == nil || !store.IsUnavailable(err) || !errors.Is(err, store.ErrCommitUnknown) {
				t.Fatalf("%s: the transaction whose commit's answer was lost answered %v; want store.ErrCommitUnknown, unavailable", name, err)
			}
			var rows, records int
			if err := direct.QueryRowContext(ctx, `SELECT count(*) FROM landed WHERE id = $1`, lost).Scan(&rows); err != nil {
				t.Fatal(err)
			}
			if err := direct.QueryRowContext(ctx, `SELECT count(*) FROM audit_records WHERE resource = $1`, lost).Scan(&records); err != nil {
				t.Fatal(err)
			}
			if rows != 1 || records != 1 {
				t.Fatalf("%s: the lost commit's row is in the database %d times, its audit record %d; want each once (the server committed it once)", name, rows, records)
			}
			seq++ // the lost one
			if db.KnowsHead("slot-1") {
				t.Fatalf("%s: a commit whose outcome is unknown left the head known", name)
			}
			appendOne("receipt/after " + name)
		}
		rep, err := audit.Verify(ctx, db.Audit(), nil)
		if err != nil || rep.Break != nil || rep.Records != seq {
			t.Fatalf("verify = %+v %v; want one whole chain of %d records", rep, err, seq)
		}
	})
}
