//go:build !js

package d1test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/caduceus-dev/caduceus/store/port"
)

// A unique violation reaches Go as D1 threw it, in Exec and in Batch, with
// the words the edge's stores look for (chainMoved, a receipt twice); a
// batch that fails stores none of its statements.
func TestD1UniqueViolationKeepsD1Message(t *testing.T) {
	db := Open(t)
	ctx := context.Background()
	key := `INSERT INTO idempotency (tenant, scope, key, body_hash, created_at) VALUES (?, 's', ?, 'h', 0)`
	if n, err := db.Exec(ctx, key, "slot-1", "k1"); err != nil || n != 1 {
		t.Fatalf("first insert: %d %v", n, err)
	}
	_, err := db.Exec(ctx, key, "slot-1", "k1")
	var d1 *Error
	if !errors.As(err, &d1) || !port.Unique(err) || !strings.Contains(err.Error(), "UNIQUE constraint failed: idempotency.tenant, idempotency.scope, idempotency.key") {
		t.Fatalf("second insert: %v (%T), want D1's unique constraint failure on the idempotency key, as port.ErrUnique", err, err)
	}
	rec := `INSERT INTO audit_records (tenant, seq, id, at, action, resource, outcome, body, prev_hash, hash) VALUES (?, ?, ?, '', '', '', '', '', '', '')`
	err = db.Batch(ctx, []port.Statement{
		{SQL: key, Args: []any{"slot-1", "k2"}},
		{SQL: rec, Args: []any{"slot-1", int64(1), "evt_1"}},
		{SQL: rec, Args: []any{"slot-1", int64(1), "evt_2"}},
	})
	if !port.Unique(err) || !strings.Contains(err.Error(), "UNIQUE constraint failed: audit_records.tenant, audit_records.seq") {
		t.Fatalf("batch inserting seq 1 twice: %v, want the unique failure on (tenant, seq)", err)
	}
	rows, err := db.Query(ctx, `SELECT (SELECT count(*) FROM idempotency), (SELECT count(*) FROM audit_records)`)
	if err != nil || len(rows) != 1 || rows[0].Int(0) != 1 || rows[0].Int(1) != 0 {
		t.Fatalf("after the failed batch: %v %v, want the one key and no record", rows, err)
	}
	if _, err := db.Query(ctx, `SELECT nope FROM idempotency`); err == nil || !strings.Contains(err.Error(), "no such column: nope") {
		t.Fatalf("a bad column: %v, want D1's message", err)
	}
}

// The edge's integers (seqs, versions, microsecond times) come back from
// INTEGER columns exactly; D1 binds each as a JavaScript number (REAL,
// which the column's affinity stores as an integer), so past 2^53 they
// cannot: the test logs what D1 does there.
func TestD1IntegersRoundTrip(t *testing.T) {
	db := Open(t)
	ctx := context.Background()
	now := time.Now().UnixMicro()
	vals := []int64{0, 1, -1, 42, now, -now, time.Date(2262, 1, 1, 0, 0, 0, 0, time.UTC).UnixMicro(), 1 << 53, -(1 << 53), 1<<53 - 1}
	for i, v := range vals {
		if _, err := db.Exec(ctx, `INSERT INTO idempotency (tenant, scope, key, body_hash, created_at) VALUES ('t', 's', ?, 'h', ?)`, string(rune('a'+i)), v); err != nil {
			t.Fatal(err)
		}
		rows, err := db.Query(ctx, `SELECT created_at, typeof(created_at), created_at = ? FROM idempotency WHERE key = ?`, v, string(rune('a'+i)))
		if err != nil || len(rows) != 1 {
			t.Fatalf("%d: %v %v", v, rows, err)
		}
		if r := rows[0]; r.Int(0) != v || r.Str(1) != "integer" || r.Int(2) != 1 {
			t.Errorf("%d came back as %v (%T, %s; equal to the argument: %v)", v, r[0], r[0], r.Str(1), r[2])
		}
	}
	rows, err := db.Query(ctx, `SELECT typeof(?), ?, ?`, int64(7), int64(1<<53+1), int64(math.MaxInt64))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("D1 binds an int64 argument as %v; 2^53+1 comes back as %.0f, MaxInt64 as %.0f", rows[0][0], rows[0][1], rows[0][2])
}

// reset leaves the database as the migrations make it, whatever a test
// did to it (TestTurnsAreOneBatch drops a table).
func TestD1ResetEmpties(t *testing.T) {
	db := Open(t).(*DB)
	ctx := context.Background()
	if _, err := db.Exec(ctx, `INSERT INTO api_key_grants (tenant, key_id, model, created_at) VALUES ('t', '', 'openai/gpt-4.1', 0)`); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(ctx, `DROP TABLE shim_entities`); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(ctx, `CREATE TABLE stray (x INTEGER)`); err != nil {
		t.Fatal(err)
	}
	if err := db.reset(ctx); err != nil {
		t.Fatal(err)
	}
	rows, err := db.Query(ctx, `SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE '\_cf\_%' ESCAPE '\' ORDER BY name`)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, r := range rows {
		names = append(names, r.Str(0))
	}
	if got := strings.Join(names, " "); got != "api_key_grants api_keys audit_heads audit_records idempotency key_changes shim_context shim_entities shim_ledger shim_outcomes shim_provisions shim_receipts shim_sync_marks" {
		t.Fatalf("tables after reset: %s", got)
	}
	if rows, err := db.Query(ctx, `SELECT count(*) FROM api_key_grants`); err != nil || rows[0].Int(0) != 0 {
		t.Fatalf("api_key_grants after reset: %v %v, want empty", rows, err)
	}
}

// A BLOB comes back as bytes (d1.go reads D1's ArrayBuffer into a
// []byte), NULL as nil; a []byte argument is refused, as js.ValueOf
// refuses it in the Worker.
func TestD1BlobsAndNulls(t *testing.T) {
	db := Open(t)
	ctx := context.Background()
	rows, err := db.Query(ctx, `SELECT x'00ff10', x'', NULL, ?`, nil)
	if err != nil {
		t.Fatal(err)
	}
	if want := (port.Row{[]byte{0, 0xff, 0x10}, []byte{}, nil, nil}); !reflect.DeepEqual(normal(rows)[0], want) {
		t.Fatalf("got %#v, want %#v", rows[0], want)
	}
	if _, err := db.Query(ctx, `SELECT ?`, []byte{1}); err == nil || !strings.Contains(err.Error(), "[]uint8") {
		t.Fatalf("a []byte argument: %v, want it refused", err)
	}
}

// The decoders of the bridge's answers take any bytes: they fail or give
// rows of d1.go's value types, which encode back to the same rows.
func FuzzDecode(f *testing.F) {
	f.Add([]byte(`{"rows":[[1,"a",null,{"blob":"AQL/"}],[1.5e300,true,""]]}`))
	f.Add([]byte(`{"rows":[]}`))
	f.Add([]byte(`{"changes":3}`))
	f.Add([]byte(`{"error":"D1_ERROR: UNIQUE constraint failed: api_keys.id: SQLITE_CONSTRAINT"}`))
	f.Add([]byte(`{"rows":[[{"blob":"!!"}]]}`))
	f.Add([]byte(`{"rows":[[[1,2]],[{"blob":"AA==","x":1}]]}`))
	f.Add([]byte(`{"changes":-1}`))
	f.Add([]byte(`{"changes":1e3}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		if rows, err := DecodeRows(body); err == nil {
			enc := make([][]any, len(rows))
			for i, r := range rows {
				enc[i] = make([]any, len(r))
				for j, v := range r {
					switch x := v.(type) {
					case nil, string, float64, bool:
						enc[i][j] = x
					case []byte:
						enc[i][j] = blob{base64.StdEncoding.EncodeToString(x)}
					default:
						t.Fatalf("row %d column %d: %T", i, j, v)
					}
				}
			}
			b, err := json.Marshal(map[string]any{"rows": enc})
			if err != nil {
				t.Fatal(err)
			}
			again, err := DecodeRows(b)
			if err != nil || !reflect.DeepEqual(normal(again), normal(rows)) {
				t.Fatalf("%s decoded to %#v, encoded to %s, decoded again to %#v %v", body, rows, b, again, err)
			}
		}
		if n, err := DecodeChanges(body); err == nil && n < 0 {
			t.Fatalf("%s: %d changes", body, n)
		}
		for _, status := range []int{400, 422, 500} {
			if err := DecodeError(status, body); err == nil || err.Error() == "" && status != 422 {
				t.Fatalf("%s (%d): error %v", body, status, err)
			}
		}
	})
}

// normal makes empty blobs comparable (nil and empty slices alike).
func normal(rows []port.Row) []port.Row {
	for _, r := range rows {
		for j, v := range r {
			if b, ok := v.([]byte); ok && len(b) == 0 {
				r[j] = []byte{}
			}
		}
	}
	return rows
}
