package store_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/caduceus-dev/caduceus/audit"
	"github.com/caduceus-dev/caduceus/auth"
	"github.com/caduceus-dev/caduceus/contract"
	"github.com/caduceus-dev/caduceus/store"
	"github.com/caduceus-dev/caduceus/store/storetest"
)

func TestOpenRefusesUnknownStore(t *testing.T) {
	_, err := store.Open(context.Background(), "mysql://root:secret@localhost/x", "")
	if err == nil {
		t.Fatal("mysql DSN accepted")
	}
	if got := err.Error(); !contains(got, "unsupported store") || contains(got, "secret") {
		t.Errorf("error %q should name the problem and hide the password", got)
	}
}

func TestMigrationsRunOnce(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := t.Context()
		var n int
		if err := db.QueryRow(ctx, `SELECT COUNT(*) FROM schema_migrations`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			t.Fatal("no migration recorded")
		}
		if err := db.Ping(ctx); err != nil {
			t.Fatal(err)
		}
	})
}

func TestSQLiteReopenKeepsData(t *testing.T) {
	dir := t.TempDir()
	ctx := t.Context()
	db, err := store.Open(ctx, "", dir)
	if err != nil {
		t.Fatal(err)
	}
	svc := auth.NewService(db.Keys(), nil, 0)
	_, key, err := svc.Create(ctx, auth.Spec{Tenant: "slot-1", Scopes: []contract.Scope{contract.ScopeAdmin}})
	if err != nil {
		t.Fatal(err)
	}
	db.Close()
	db, err = store.Open(ctx, "", dir) // migrations must not run twice
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Keys().Key(ctx, key.ID); err != nil {
		t.Fatalf("key lost across reopen: %v", err)
	}
	var mode string
	if err := db.QueryRow(ctx, `PRAGMA journal_mode`).Scan(&mode); err != nil || mode != "wal" {
		t.Errorf("journal_mode = %q, %v; want wal", mode, err)
	}
	var fk int
	if err := db.QueryRow(ctx, `PRAGMA foreign_keys`).Scan(&fk); err != nil || fk != 1 {
		t.Errorf("foreign_keys = %d, %v; want 1", fk, err)
	}
}

func createWidgets(t *testing.T, db *store.DB) {
	t.Helper()
	if _, err := db.Exec(t.Context(), `CREATE TABLE widgets (tenant TEXT NOT NULL, id TEXT NOT NULL, name TEXT NOT NULL, revision BIGINT NOT NULL, PRIMARY KEY (tenant, id))`); err != nil {
		t.Fatal(err)
	}
	for _, tenant := range []string{"slot-1", "slot-2"} {
		if _, err := db.Exec(t.Context(), `INSERT INTO widgets (tenant, id, name, revision) VALUES (?, 'w1', 'first', 1)`, tenant); err != nil {
			t.Fatal(err)
		}
	}
}

func widgetName(t *testing.T, db *store.DB, tenant string) (string, int64) {
	var name string
	var rev int64
	if err := db.QueryRow(t.Context(), `SELECT name, revision FROM widgets WHERE tenant = ? AND id = 'w1'`, tenant).Scan(&name, &rev); err != nil {
		t.Fatal(err)
	}
	return name, rev
}

func TestIdempotent(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := t.Context()
		createWidgets(t, db)
		runs := 0
		apply := func(tx *store.Tx) ([]byte, error) {
			runs++
			if _, err := tx.Exec(ctx, `UPDATE widgets SET name = name || '+' WHERE tenant = 'slot-1'`); err != nil {
				return nil, err
			}
			return []byte(`{"ok":true}`), nil
		}
		res, replay, err := db.Idempotent(ctx, "slot-1", "widgets.touch", "key-00000001", []byte(`{"a":1,"b":[1,2]}`), apply)
		if err != nil || replay || string(res) != `{"ok":true}` {
			t.Fatalf("first = %s %v %v", res, replay, err)
		}
		// Same key, same canonical body (reordered, spaced): the stored result.
		res, replay, err = db.Idempotent(ctx, "slot-1", "widgets.touch", "key-00000001", []byte(`{ "b":[1,2], "a":1 }`), apply)
		if err != nil || !replay || string(res) != `{"ok":true}` {
			t.Fatalf("replay = %s %v %v", res, replay, err)
		}
		// Same key, different body: conflict, nothing runs.
		_, _, err = db.Idempotent(ctx, "slot-1", "widgets.touch", "key-00000001", []byte(`{"a":2}`), apply)
		if e, ok := errors.AsType[*contract.Error](err); !ok || e.Kind != contract.KindConflict || e.Code != "idempotency_key_conflict" {
			t.Fatalf("different body = %v; want conflict", err)
		}
		// The key is per tenant: slot-2 may use it independently.
		if _, replay, err := db.Idempotent(ctx, "slot-2", "widgets.touch", "key-00000001", []byte(`{"a":2}`), func(*store.Tx) ([]byte, error) { return []byte(`{}`), nil }); err != nil || replay {
			t.Fatalf("slot-2 = %v %v", replay, err)
		}
		if runs != 1 {
			t.Errorf("fn ran %d times; want 1", runs)
		}
		if name, _ := widgetName(t, db, "slot-1"); name != "first+" {
			t.Errorf("name %q; want first+", name)
		}
		// A failed fn leaves the key free for a retry.
		boom := errors.New("boom")
		if _, _, err := db.Idempotent(ctx, "slot-1", "widgets.touch", "key-00000002", []byte(`{}`), func(*store.Tx) ([]byte, error) { return nil, boom }); !errors.Is(err, boom) {
			t.Fatalf("failing fn = %v", err)
		}
		if _, replay, err := db.Idempotent(ctx, "slot-1", "widgets.touch", "key-00000002", []byte(`{}`), func(*store.Tx) ([]byte, error) { return []byte(`{"retried":true}`), nil }); err != nil || replay {
			t.Fatalf("retry after failure = %v %v", replay, err)
		}
		if _, _, err := db.Idempotent(ctx, "slot-1", "widgets.touch", "bad key", []byte(`{}`), apply); contract.KindOf(err) != contract.KindInvalid {
			t.Errorf("bad key = %v; want invalid", err)
		}
	})
}

func TestIdempotentConcurrentDuplicates(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := t.Context()
		createWidgets(t, db)
		var runs atomic.Int32
		var replays atomic.Int32
		var wg sync.WaitGroup
		for range 30 {
			wg.Go(func() {
				res, replay, err := db.Idempotent(ctx, "slot-1", "widgets.touch", "dup-key-0001", []byte(`{"x":1}`), func(tx *store.Tx) ([]byte, error) {
					runs.Add(1)
					_, err := tx.Exec(ctx, `UPDATE widgets SET revision = revision + 1 WHERE tenant = 'slot-1'`)
					return []byte(`{"done":1}`), err
				})
				if err != nil {
					t.Error(err)
					return
				}
				if string(res) != `{"done":1}` {
					t.Errorf("result %s", res)
				}
				if replay {
					replays.Add(1)
				}
			})
		}
		wg.Wait()
		if runs.Load() != 1 || replays.Load() != 29 {
			t.Fatalf("runs=%d replays=%d; want 1 and 29", runs.Load(), replays.Load())
		}
		if _, rev := widgetName(t, db, "slot-1"); rev != 2 {
			t.Errorf("revision %d; want 2 (exactly one application)", rev)
		}
	})
}

func entry(tenant contract.TenantSlot, action, resource string, payload any) audit.Entry {
	return audit.Entry{
		Outcome: contract.AuditOutcome{
			At:       contract.Timestamp(time.Now()),
			Identity: contract.Identity{TenantSlot: tenant, Subject: auth.Subject("k1"), Surface: contract.SurfaceAPI, Trust: contract.TrustRouter},
			Action:   action, Resource: resource, Outcome: contract.OutcomeAllow,
		},
		Payload: payload,
	}
}

func TestAuditChainAndTamper(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := t.Context()
		log := db.Audit()
		for i := range 10 {
			for _, tenant := range []contract.TenantSlot{"slot-1", "slot-2"} {
				if _, err := log.Append(ctx, entry(tenant, "widgets.read", fmt.Sprint("w", i), map[string]any{"i": i})); err != nil {
					t.Fatal(err)
				}
			}
		}
		rep, err := audit.Verify(ctx, log, nil)
		if err != nil || rep.Break != nil || rep.Records != 20 || rep.Tenants != 2 {
			t.Fatalf("clean verify = %+v %v", rep, err)
		}
		recs, err := log.Tail(ctx, store.AuditFilter{Tenant: "slot-1", Limit: 3})
		if err != nil || len(recs) != 3 || recs[0].Seq != 10 || recs[0].Outcome.Resource != "w9" {
			t.Fatalf("tail = %+v %v", recs, err)
		}
		var p struct{ I int }
		if err := json.Unmarshal(recs[0].Payload, &p); err != nil || p.I != 9 {
			t.Errorf("payload %s", recs[0].Payload)
		}

		// Alter a body: the record is named.
		if _, err := db.Exec(ctx, `UPDATE audit_records SET body = REPLACE(body, '"i":4', '"i":5') WHERE tenant = 'slot-1' AND seq = 5`); err != nil {
			t.Fatal(err)
		}
		rep, _ = audit.Verify(ctx, log, nil, "slot-1")
		if rep.Break == nil || rep.Break.Seq != 5 {
			t.Fatalf("altered body: break = %+v", rep.Break)
		}
		// The other tenant's chain is still whole.
		if rep, _ := audit.Verify(ctx, log, nil, "slot-2"); rep.Break != nil {
			t.Fatalf("slot-2 broken: %+v", rep.Break)
		}
		// Alter an index column only.
		if _, err := db.Exec(ctx, `UPDATE audit_records SET outcome = 'deny' WHERE tenant = 'slot-2' AND seq = 3`); err != nil {
			t.Fatal(err)
		}
		if rep, _ := audit.Verify(ctx, log, nil, "slot-2"); rep.Break == nil || rep.Break.Seq != 3 {
			t.Fatalf("altered column: break = %+v", rep.Break)
		}
	})
}

func TestAuditRemovedRows(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := t.Context()
		log := db.Audit()
		for i := range 5 {
			if _, err := log.Append(ctx, entry("slot-7", "widgets.read", fmt.Sprint(i), nil)); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := db.Exec(ctx, `DELETE FROM audit_records WHERE tenant = 'slot-7' AND seq = 5`); err != nil {
			t.Fatal(err)
		}
		if rep, _ := audit.Verify(ctx, log, nil); rep.Break == nil {
			t.Fatal("removed tail row not noticed")
		}
		if _, err := db.Exec(ctx, `DELETE FROM audit_records WHERE tenant = 'slot-7' AND seq = 2`); err != nil {
			t.Fatal(err)
		}
		if rep, _ := audit.Verify(ctx, log, nil); rep.Break == nil || rep.Break.Seq != 3 {
			t.Fatalf("removed middle row: %+v", rep.Break)
		}
	})
}

func TestAuditConcurrentAppendsNeverFork(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := t.Context()
		log := db.Audit()
		var wg sync.WaitGroup
		for g := range 8 {
			wg.Go(func() {
				for i := range 25 {
					if _, err := log.Append(ctx, entry("slot-3", "widgets.write", fmt.Sprint(g, "-", i), nil)); err != nil {
						t.Error(err)
					}
				}
			})
		}
		wg.Wait()
		rep, err := audit.Verify(ctx, log, nil)
		if err != nil || rep.Break != nil || rep.Records != 200 {
			t.Fatalf("verify = %+v %v", rep, err)
		}
	})
}

// TestAuditVerifyWhileAppending: verifying a chain (as the checkpointer
// does every interval, and audit verify beside a running serve) while
// other transactions append to it never reports a break: each tenant's
// head and records are read as of one moment. Verified chains only grow.
func TestAuditVerifyWhileAppending(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := t.Context()
		log := db.Audit()
		stop := make(chan struct{})
		// The verifier starts once an append has committed: on a busy
		// machine 2,000 verifications of an empty log could otherwise all
		// run before the first commit.
		appended := make(chan struct{})
		var first sync.Once
		var wg sync.WaitGroup
		for g := range 4 {
			wg.Go(func() {
				for i := 0; ; i++ {
					select {
					case <-stop:
						return
					default:
					}
					if _, err := log.Append(ctx, entry(contract.TenantSlot(fmt.Sprint("slot-", 1+g%2)), "widgets.write", fmt.Sprint(g, "-", i), nil)); err != nil {
						t.Error(err)
						first.Do(func() { close(appended) })
						return
					}
					first.Do(func() { close(appended) })
				}
			})
		}
		<-appended
		var last int64
		for i := 0; i < 2000 && last < 400; i++ {
			rep, err := audit.VerifyWith(ctx, log, audit.Options{})
			if err != nil || rep.Break != nil {
				close(stop)
				wg.Wait()
				t.Fatalf("verify during appends: %+v %v", rep.Break, err)
			}
			if rep.Records < last {
				t.Errorf("verified %d records after %d", rep.Records, last)
			}
			last = rep.Records
		}
		close(stop)
		wg.Wait()
		if last == 0 {
			t.Fatal("nothing was appended while verifying")
		}
	})
}

func TestAuditAppendRefusesInvalidEntry(t *testing.T) {
	db := storetest.OpenSQLite(t)
	e := entry("slot-1", "Not An Action", "x", nil)
	if _, err := db.Audit().Append(t.Context(), e); contract.KindOf(err) != contract.KindInvalid {
		t.Fatalf("bad action = %v; want invalid", err)
	}
	seq, _, _ := db.Audit().Head(t.Context(), "slot-1")
	if seq != 0 {
		t.Errorf("refused entry changed the chain head to %d", seq)
	}
}

func TestAuditAppendSurvivesCancelledContext(t *testing.T) {
	db := storetest.OpenSQLite(t)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := db.Audit().Append(ctx, entry("slot-1", "widgets.read", "x", nil)); err != nil {
		t.Fatalf("append with a cancelled request context: %v", err)
	}
}

func TestAuditInTxRollsBackWithTheChange(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := t.Context()
		boom := errors.New("boom")
		err := db.InTx(ctx, func(tx *store.Tx) error {
			if _, err := store.AppendAudit(ctx, tx, entry("slot-1", "widgets.write", "x", nil)); err != nil {
				return err
			}
			return boom
		})
		if !errors.Is(err, boom) {
			t.Fatal(err)
		}
		if seq, _, _ := db.Audit().Head(ctx, "slot-1"); seq != 0 {
			t.Errorf("rolled-back record left head at %d", seq)
		}
	})
}

func TestKeys(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := t.Context()
		svc := auth.NewService(db.Keys(), nil, 0)
		token, key, err := svc.Create(ctx, auth.Spec{Tenant: "slot-4", Scopes: []contract.Scope{"route", "configure"}, Harness: "claude-code", RunContext: contract.RunCron})
		if err != nil {
			t.Fatal(err)
		}
		caller, err := svc.Verify(ctx, token)
		if err != nil {
			t.Fatal(err)
		}
		if caller.Identity.TenantSlot != "slot-4" || !caller.Has("configure") || caller.Has("admin") || caller.Harness != "claude-code" || caller.RunContext != contract.RunCron {
			t.Errorf("caller %+v", caller)
		}
		if err := contract.Def("identity").Validate(caller.Identity); err != nil {
			t.Errorf("identity does not validate: %v", err)
		}
		var stored string
		db.QueryRow(ctx, `SELECT secret_hash FROM api_keys WHERE id = ?`, key.ID).Scan(&stored)
		if contains(token, stored) || len(stored) != 64 {
			t.Errorf("stored secret hash %q looks wrong", stored)
		}
		if err := svc.Revoke(ctx, key.ID); err != nil {
			t.Fatal(err)
		}
		if _, err := svc.Verify(ctx, token); contract.KindOf(err) != contract.KindUnauthenticated {
			t.Errorf("revoked key verified: %v", err)
		}
		if err := svc.Revoke(ctx, key.ID); contract.KindOf(err) != contract.KindConflict {
			t.Errorf("second revoke = %v", err)
		}
		if err := svc.Revoke(ctx, "0000000000000000"); contract.KindOf(err) != contract.KindNotFound {
			t.Errorf("revoke unknown = %v", err)
		}
		keys, _ := svc.List(ctx)
		if len(keys) != 1 || keys[0].RevokedAt == nil {
			t.Errorf("list = %+v", keys)
		}
	})
}

func contains(s, sub string) bool { return sub != "" && strings.Contains(s, sub) }

// TestReaderStatementsCached: reads on SQLite's reader pool run through
// prepared statements kept per query: a query repeated from many goroutines
// at once answers correctly every time, more distinct queries than the cache
// holds still answer (unprepared past the bound), a bad query reports its
// error, and reads after Close fail instead of using a closed statement.
func TestReaderStatementsCached(t *testing.T) {
	db, err := store.Open(context.Background(), "sqlite:"+filepath.Join(t.TempDir(), "r.db"), "")
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for g := range 16 {
		wg.Go(func() {
			for i := range 50 {
				var got int
				if err := db.QueryRow(ctx, `SELECT ? + 1`, g*1000+i).Scan(&got); err != nil || got != g*1000+i+1 {
					errs <- fmt.Errorf("goroutine %d read %d: got %d, %v", g, i, got, err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	for i := range 300 { // past the cache's bound of 256 queries
		var got int
		if err := db.QueryRow(ctx, fmt.Sprintf(`SELECT %d + ?`, i), 1).Scan(&got); err != nil || got != i+1 {
			t.Fatalf("distinct query %d: got %d, %v", i, got, err)
		}
	}
	rows, err := db.Query(ctx, `SELECT ? UNION ALL SELECT ?`, 1, 2)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for rows.Next() {
		n++
	}
	if rows.Close(); n != 2 {
		t.Fatalf("%d rows; want 2", n)
	}
	if err := db.QueryRow(ctx, `SELECT nope FROM nowhere`).Scan(new(int)); err == nil || !strings.Contains(err.Error(), "nowhere") {
		t.Fatalf("bad query: %v; want an error naming the table", err)
	}
	db.Close()
	if err := db.QueryRow(ctx, `SELECT ? + 1`, 1).Scan(new(int)); err == nil {
		t.Fatal("read after Close succeeded")
	}
}
