package edge_test

import (
	"database/sql"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/caduceus-dev/caduceus/audit"
	"github.com/caduceus-dev/caduceus/contract"
	_ "github.com/caduceus-dev/caduceus/shim/shimsql" // the shim's migrations
	"github.com/caduceus-dev/caduceus/store"
	"github.com/caduceus-dev/caduceus/store/port"
)

// TestD1SchemaIsTheServers: the edge's migrations give D1 the server's
// tables for every table the edge uses (columns with their affinity, NOT
// NULL, default and key; indexes), so the stores written on the port run
// on both: a server migration that changes one of them needs an edge
// migration too.
func TestD1SchemaIsTheServers(t *testing.T) {
	edgeDB, err := sql.Open("sqlite", "file:"+filepath.Join(t.TempDir(), "edge.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer edgeDB.Close()
	applyMigrations(t, edgeDB)
	path := filepath.Join(t.TempDir(), "server.db")
	srv, err := store.Open(t.Context(), "sqlite:"+path, "")
	if err != nil {
		t.Fatal(err)
	}
	srv.Close()
	serverDB, err := sql.Open("sqlite", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	defer serverDB.Close()
	edge, server := schemaOf(t, edgeDB), schemaOf(t, serverDB)
	if len(edge) < 13 {
		t.Fatalf("the edge's schema has %d tables: %v", len(edge), slices.Sorted(maps.Keys(edge)))
	}
	for _, table := range slices.Sorted(maps.Keys(edge)) {
		if server[table] != edge[table] {
			t.Errorf("%s:\n  edge:   %s\n  server: %s", table, edge[table], server[table])
		}
	}
}

// schemaOf describes each table of db (but SQLite's and the migration
// bookkeeping's): its columns by name with their type's affinity, NOT
// NULL, default and place in the primary key, and its indexes by name with
// their columns, uniqueness and whether they are partial.
func schemaOf(t *testing.T, db *sql.DB) map[string]string {
	t.Helper()
	tables := map[string]string{}
	var names []string
	each(t, db, `SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' AND name NOT IN ('d1_migrations', 'schema_migrations')`, func(r []any) {
		names = append(names, fmt.Sprint(r[0]))
	})
	for _, n := range names {
		var cols []string
		each(t, db, `SELECT name, type, "notnull", COALESCE(dflt_value, ''), pk FROM pragma_table_info(?)`, func(r []any) {
			cols = append(cols, fmt.Sprintf("%s %s notnull=%v default=%s pk=%v", r[0], affinity(fmt.Sprint(r[1])), r[2], r[3], r[4]))
		}, n)
		var idx []string
		each(t, db, `SELECT name, "unique", partial FROM pragma_index_list(?)`, func(r []any) {
			var on []string
			each(t, db, `SELECT COALESCE(name, '') FROM pragma_index_info(?)`, func(c []any) { on = append(on, fmt.Sprint(c[0])) }, fmt.Sprint(r[0]))
			name := fmt.Sprint(r[0])
			if strings.HasPrefix(name, "sqlite_autoindex_") {
				name = "(key)"
			}
			idx = append(idx, fmt.Sprintf("%s(%s) unique=%v partial=%v", name, strings.Join(on, ","), r[1], r[2]))
		}, n)
		slices.Sort(cols)
		slices.Sort(idx)
		tables[n] = strings.Join(cols, "; ") + " | " + strings.Join(idx, "; ")
	}
	return tables
}

func each(t *testing.T, db *sql.DB, q string, fn func([]any), args ...any) {
	t.Helper()
	rows, err := db.Query(q, args...)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	cols, _ := rows.Columns()
	for rows.Next() {
		r := make([]any, len(cols))
		ptrs := make([]any, len(cols))
		for i := range r {
			ptrs[i] = &r[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			t.Fatal(err)
		}
		fn(r)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
}

// affinity is SQLite's type affinity of a declared column type.
func affinity(decl string) string {
	d := strings.ToUpper(decl)
	switch {
	case strings.Contains(d, "INT"):
		return "INTEGER"
	case strings.Contains(d, "CHAR"), strings.Contains(d, "CLOB"), strings.Contains(d, "TEXT"):
		return "TEXT"
	case d == "", strings.Contains(d, "BLOB"):
		return "BLOB"
	case strings.Contains(d, "REAL"), strings.Contains(d, "FLOA"), strings.Contains(d, "DOUB"):
		return "REAL"
	}
	return "NUMERIC"
}

// A D1 database of the first edge schema (0001: a key as one JSON row, a
// tenant's grants as one JSON row, an audit chain without heads) keeps
// what it holds through 0002: the keys read back with their scopes, own
// and tenant grants and revocation; the chains verify, their heads are
// their last records, and an append goes on from there.
func TestD1UpgradeFromTheFirstSchema(t *testing.T) {
	raw, err := sql.Open("sqlite", "file:"+filepath.Join(t.TempDir(), "edge.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	first, _ := migrations.ReadFile("migrations/0001_caduceus_edge.sql")
	if _, err := raw.Exec(string(first)); err != nil {
		t.Fatal(err)
	}
	created := time.Date(2026, 11, 30, 12, 0, 0, 123456000, time.UTC)
	for _, k := range []struct{ id, tenant, doc string }{
		{"key_a", "slot-1", `{"id":"key_a","tenant":"slot-1","scopes":["route","configure"],"harness":"claude-code","account":"acct-1","secret_hash":"h1","grants":["openai/gpt-4.1"],"created_at":` + fmt.Sprint(created.UnixMicro()) + `}`},
		{"key_b", "slot-1", `{"id":"key_b","tenant":"slot-1","scopes":["route"],"secret_hash":"h2","created_at":` + fmt.Sprint(created.UnixMicro()+1) + `}`},
	} {
		if _, err := raw.Exec(`INSERT INTO keys (id, tenant, doc) VALUES (?, ?, ?)`, k.id, k.tenant, k.doc); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := raw.Exec(`UPDATE keys SET revoked_at = ? WHERE id = 'key_b'`, created.UnixMicro()+5); err != nil {
		t.Fatal(err)
	}
	if _, err := raw.Exec(`INSERT INTO tenant_grants (tenant, grants) VALUES ('slot-1', '["anthropic/claude-sonnet-4","openai/gpt-4.1"]')`); err != nil {
		t.Fatal(err)
	}
	// Records sealed as the first edge appended them (no conversation
	// columns, no head rows), one naming a conversation.
	ctx := t.Context()
	var last audit.Record
	for i := range 3 {
		e := entry("slot-1", "shim.proxy")
		if i == 1 {
			e.Provenance = &contract.Provenance{Surface: "api", Actor: contract.Actor{Type: contract.ActorUser, ID: "a"}, RecordedAt: string(contract.Timestamp(created)),
				ConversationID: "conv_01M8QY2XPM56VK5TJV0E5G9E24", SessionID: "sess_1"}
		}
		s, err := audit.Prepare(e, contract.NewID(contract.PrefixEvent))
		if err != nil {
			t.Fatal(err)
		}
		prev, seq := audit.Genesis, int64(i+1)
		if i > 0 {
			prev = last.Hash
		}
		if last, err = s.Seal(seq, prev); err != nil {
			t.Fatal(err)
		}
		if _, err := raw.Exec(`INSERT INTO audit_records (tenant, seq, id, at, action, resource, outcome, body, prev_hash, hash) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			"slot-1", last.Seq, last.ID, last.Outcome.At, last.Outcome.Action, last.Outcome.Resource, string(last.Outcome.Outcome), string(last.Body), last.PrevHash, last.Hash); err != nil {
			t.Fatal(err)
		}
	}
	second, _ := migrations.ReadFile("migrations/0002_server_tables.sql")
	if _, err := raw.Exec(string(second)); err != nil {
		t.Fatalf("0002 on a 0001 database: %v", err)
	}
	db := sqliteDB{raw}
	keys := port.NewKeys(db, nil, nil)
	a, err := keys.Key(ctx, "key_a")
	if err != nil {
		t.Fatal(err)
	}
	if a.Tenant != "slot-1" || a.SecretHash != "h1" || a.Harness != "claude-code" || a.Account != "acct-1" || !a.CreatedAt.Equal(created) || a.RevokedAt != nil ||
		!slices.Equal(a.Scopes, []contract.Scope{"route", "configure"}) || !slices.Equal(a.Grants, []string{"anthropic/claude-sonnet-4", "openai/gpt-4.1"}) {
		t.Fatalf("key_a after 0002: %+v", a)
	}
	b, err := keys.Key(ctx, "key_b")
	if err != nil || b.RevokedAt == nil || b.RevokedAt.UnixMicro() != created.UnixMicro()+5 || !slices.Equal(b.Grants, []string{"anthropic/claude-sonnet-4", "openai/gpt-4.1"}) {
		t.Fatalf("key_b after 0002: %+v %v", b, err)
	}
	if g, err := keys.TenantGrants(ctx, "slot-1"); err != nil || len(g) != 2 {
		t.Fatalf("tenant grants after 0002: %v %v", g, err)
	}
	trail := port.NewAudit(db)
	if seq, hash, found, err := trail.FindHead(ctx, "slot-1"); err != nil || !found || seq != 3 || hash != last.Hash {
		t.Fatalf("head after 0002: %d %q %v %v, want 3 %q", seq, hash, found, err, last.Hash)
	}
	var conv, session sql.NullString
	if err := raw.QueryRow(`SELECT conversation_id, session_id FROM audit_records WHERE seq = 2`).Scan(&conv, &session); err != nil || conv.String != "conv_01M8QY2XPM56VK5TJV0E5G9E24" || session.String != "sess_1" {
		t.Fatalf("record 2's conversation after 0002: %v %v %v", conv, session, err)
	}
	rec, err := trail.Append(ctx, entry("slot-1", "shim.proxy"))
	if err != nil || rec.Seq != 4 || rec.PrevHash != last.Hash {
		t.Fatalf("append after 0002: %+v %v", rec, err)
	}
	rep, err := audit.Verify(ctx, trail, nil)
	if err != nil || rep.Records != 4 || rep.Break != nil {
		t.Fatalf("verify after 0002: %+v %v", rep, err)
	}
}
