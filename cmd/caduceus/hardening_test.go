package main

import (
	"bytes"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/caduceus-dev/caduceus/audit"
	"github.com/caduceus-dev/caduceus/contract"
	"github.com/caduceus-dev/caduceus/store/storetest"
)

// nested is a JSON object whose "x" member nests arrays so that the whole
// document is depth levels deep (the outer object counts as one).
func nested(depth int) string {
	return `{"x":` + strings.Repeat("[", depth-1) + strings.Repeat("]", depth-1) + `}`
}

type badInput struct {
	name        string
	body        string
	contentType string
	status      int
	code        string
}

// badInputs are the malformed variants every JSON route refuses the same way.
func badInputs() []badInput {
	deep := func(n int) badInput {
		return badInput{name: fmt.Sprintf("deep_%d", n), body: nested(n), status: 400, code: contract.CodeTooDeep}
	}
	return []badInput{
		deep(9999), deep(10000), deep(10001), deep(contract.MaxJSONDepth + 1),
		{name: "invalid_utf8", body: "{\"reason\":\"caf\xe9\"}", status: 400, code: contract.CodeBadUTF8},
		{name: "nul_escape", body: `{"reason":"a\u0000b"}`, status: 400, code: contract.CodeNULCharacter},
		{name: "text_plain", body: `{}`, contentType: "text/plain", status: 415, code: contract.CodeUnsupportedMedia},
		{name: "form", body: `a=b`, contentType: "application/x-www-form-urlencoded", status: 415, code: contract.CodeUnsupportedMedia},
		{name: "duplicate_key", body: `{"reason":"a","reason":"b"}`, status: 400, code: contract.CodeDuplicateKey},
		{name: "trailing_data", body: `{"reason":"a"}{"reason":"b"}garbage`, status: 400, code: contract.CodeTrailingData},
		{name: "not_json", body: `{"reason":`, status: 400, code: contract.CodeBadJSON},
	}
}

// mcpCall wraps arguments (raw JSON text) in a tools/call request.
func mcpCall(tool, args string) string {
	return `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"` + tool + `","arguments":` + args + `}}`
}

type route struct {
	method, path string
	// tool, on /mcp, is the tool whose arguments carry the variant.
	tool string
}

func TestMalformedInputEveryRoute(t *testing.T) {
	t.Run("sqlite", func(t *testing.T) {
		in := start(t)
		db, err := sql.Open("sqlite", filepath.Join(in.data, "caduceus.db"))
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		malformedMatrix(t, in, db, "sqlite", "--data", in.data)
	})
	t.Run("postgres", func(t *testing.T) {
		dsn := os.Getenv(storetest.EnvPostgres)
		if dsn == "" {
			t.Skip("CADUCEUS_TEST_POSTGRES not set; .ci/run sets it")
		}
		pg := storetest.FreshSchema(t, dsn)
		in := start(t, "--store", pg)
		db, err := sql.Open("pgx", pg)
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		malformedMatrix(t, in, db, "postgres", "--store", pg)
	})
}

func malformedMatrix(t *testing.T, in *instance, db *sql.DB, dialect string, storeArgs ...string) {
	if code, _, errOut := cli(t, append([]string{"trader", "import", "testdata/strategies.yaml"}, storeArgs...)...); code != 0 {
		t.Fatal(errOut)
	}
	before := tableCounts(t, db, dialect)

	routes := []route{
		{method: "POST", path: "/v1/admin/keys"},
		{method: "POST", path: "/v1/trader/decisions"},
		{method: "PUT", path: "/v1/trader/strategies/0c555fee-e4c8-4543-ae70-c132517017e1"},
		{method: "PUT", path: "/v1/trader/concerns/qndd8o9ppop6:xrpusd"},
		{method: "POST", path: "/v1/executor/ticks"},
		{method: "POST", path: "/v1/provisions"},
		{method: "PUT", path: "/v1/provisions/PROV-X"},
		{method: "POST", path: "/v1/context"},
		{method: "PUT", path: "/v1/context/verb:x"},
		{method: "POST", path: "/v1/dry-run"},
		{method: "POST", path: "/v1/sync"},
		{method: "POST", path: "/api/preview"},
		{method: "POST", path: "/v1/chat/completions"},
		{method: "POST", path: "/v1/responses"},
		{method: "POST", path: "/v1/messages"},
	}
	for _, tool := range []string{"apply_control_decision", "execute_intents", "list_strategies", "get_strategy", "shim_preview", "whoami"} {
		routes = append(routes, route{method: "POST", path: "/mcp", tool: tool})
	}
	for _, rt := range routes {
		for _, v := range badInputs() {
			name := strings.ReplaceAll(rt.method+rt.path, "/", "_") + "_" + rt.tool + "/" + v.name
			t.Run(name, func(t *testing.T) {
				body := v.body
				if rt.tool != "" {
					body = mcpCall(rt.tool, body)
					if v.code == contract.CodeTrailingData {
						// Trailing data after the JSON-RPC message itself.
						body = mcpCall(rt.tool, `{}`) + `{"jsonrpc":"2.0"}garbage`
					}
				}
				ct := v.contentType
				if ct == "" {
					ct = "application/json"
				}
				status, got := rawDo(t, in, rt.method, rt.path, in.adminKey, ct, body, rt.path == "/mcp")
				if status >= 500 {
					t.Fatalf("%s %s %s: %d %s", rt.method, rt.path, v.name, status, got)
				}
				if status != v.status {
					t.Errorf("%s %s %s: status %d, want %d: %s", rt.method, rt.path, v.name, status, v.status, got)
				}
				if !strings.Contains(got, v.code) {
					t.Errorf("%s %s %s: answer does not name %s: %s", rt.method, rt.path, v.name, v.code, got)
				}
			})
		}
	}

	// Paths and queries: invalid UTF-8 and NUL in a path id, a body on a
	// DELETE, a limit above the maximum.
	others := []struct {
		method, path, body string
		status             int
		code               string
	}{
		{"DELETE", "/v1/admin/keys/%FF%FE", "", 400, contract.CodeBadUTF8},
		{"DELETE", "/v1/provisions/%FF", "", 400, contract.CodeBadUTF8},
		{"DELETE", "/v1/context/%00", "", 400, contract.CodeNULCharacter},
		{"PUT", "/v1/provisions/%C3%28", `{}`, 400, contract.CodeBadUTF8},
		{"PUT", "/v1/trader/strategies/%FF", `{}`, 400, contract.CodeBadUTF8},
		{"POST", "/v1/trader/decisions?x=%FF", `{}`, 400, contract.CodeBadUTF8},
		{"DELETE", "/v1/provisions/PROV-X", `{"a":1}`, 400, "unexpected_body"},
		{"DELETE", "/v1/admin/keys/0000000000000000", `{"a":1}`, 400, "unexpected_body"},
		{"GET", "/v1/audit?limit=100000", "", 400, "bad_limit"},
		{"GET", "/v1/trader/history?limit=1001", "", 400, "bad_limit"},
		{"GET", "/v1/receipts?limit=5000", "", 400, "bad_limit"},
		{"GET", "/v1/memory?limit=0", "", 400, "bad_limit"},
	}
	for _, o := range others {
		t.Run(o.method+o.path, func(t *testing.T) {
			records := tableCounts(t, db, dialect)["audit_records"]
			status, got := rawDo(t, in, o.method, o.path, in.adminKey, "application/json", o.body, false)
			if status != o.status || !strings.Contains(got, o.code) {
				t.Errorf("%s %s: %d %s, want %d naming %s", o.method, o.path, status, got, o.status, o.code)
			}
			// Every refusal is recorded, whatever its path holds (Postgres
			// stores no NUL in text).
			if n := tableCounts(t, db, dialect)["audit_records"]; n != records+1 {
				t.Errorf("%s %s: %d audit records written for the refusal, want 1", o.method, o.path, n-records)
			}
		})
	}

	// Nothing was written (but the audit trail of the refusals: on the
	// LLM routes a refusal's receipt is its audit payload, seed 003's "every
	// request gets a receipt"), the process is alive and the audit chains
	// verify.
	after := tableCounts(t, db, dialect)
	for table, n := range before {
		if table == "audit_records" || table == "audit_heads" || table == "shim_receipts" {
			continue
		}
		if after[table] != n {
			t.Errorf("table %s: %d rows before the malformed requests, %d after", table, n, after[table])
		}
	}
	if after["audit_records"] <= before["audit_records"] {
		t.Errorf("the refusals were not audited: %d records before, %d after", before["audit_records"], after["audit_records"])
	}
	resp, err := http.Get(in.url + "/healthz")
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("server not alive after the matrix: %v %v", resp, err)
	}
	resp.Body.Close()
	if code, out, errOut := cli(t, append([]string{"audit", "verify"}, storeArgs...)...); code != 0 {
		t.Fatalf("audit verify after the matrix: %d %s %s", code, out, errOut)
	}
}

func rawDo(t *testing.T, in *instance, method, path, key, contentType, body string, mcpRoute bool) (int, string) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = bytes.NewReader([]byte(body))
	}
	req, err := http.NewRequestWithContext(t.Context(), method, in.url+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("x-api-key", key) // the LLM routes' Anthropic form
	if body != "" {
		req.Header.Set("Content-Type", contentType)
	}
	if mcpRoute {
		req.Header.Set("Accept", "application/json, text/event-stream")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v (process gone?)", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func tableCounts(t *testing.T, db *sql.DB, dialect string) map[string]int {
	t.Helper()
	q := `SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'`
	if dialect == "postgres" {
		q = `SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema()`
	}
	rows, err := db.Query(q)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for rows.Next() {
		var n string
		rows.Scan(&n)
		names = append(names, n)
	}
	rows.Close()
	counts := map[string]int{}
	for _, n := range names {
		var c int
		if err := db.QueryRow(`SELECT COUNT(*) FROM ` + n).Scan(&c); err != nil {
			t.Fatal(err)
		}
		counts[n] = c
	}
	return counts
}

// auditedTraffic makes a few audited requests in slot-1.
func auditedTraffic(t *testing.T, in *instance, n int) {
	t.Helper()
	for range n {
		if code, _ := in.do(t, "GET", "/v1/admin/keys", in.adminKey, nil); code != 200 {
			t.Fatalf("list keys: %d", code)
		}
	}
}

func sqliteOf(t *testing.T, in *instance) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+filepath.Join(in.data, "caduceus.db")+"?_busy_timeout=10000")
	if err != nil {
		t.Fatal(err)
	}
	db.SetMaxOpenConns(1)
	t.Cleanup(func() { db.Close() })
	return db
}

func mustExec(t *testing.T, db *sql.DB, q string, args ...any) {
	t.Helper()
	if _, err := db.Exec(q, args...); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
}

// verifyFails runs audit verify (with extra args) and wants exit 1 with
// stderr naming every one of want.
func verifyFails(t *testing.T, in *instance, extra []string, want ...string) {
	t.Helper()
	code, out, errOut := cli(t, append([]string{"audit", "verify", "--data", in.data}, extra...)...)
	if code != 1 {
		t.Fatalf("audit verify %v: exit %d, want 1: %s %s", extra, code, out, errOut)
	}
	for _, w := range want {
		if !strings.Contains(errOut, w) {
			t.Errorf("audit verify %v: stderr does not name %q: %s", extra, w, errOut)
		}
	}
}

func verifyPasses(t *testing.T, in *instance, extra ...string) string {
	t.Helper()
	code, out, errOut := cli(t, append([]string{"audit", "verify", "--data", in.data}, extra...)...)
	if code != 0 {
		t.Fatalf("audit verify %v: exit %d: %s %s", extra, code, out, errOut)
	}
	return out
}

func lastRecord(t *testing.T, db *sql.DB) (id string, seq int64) {
	t.Helper()
	if err := db.QueryRow(`SELECT id, seq FROM audit_records WHERE tenant = 'slot-1' ORDER BY seq DESC LIMIT 1`).Scan(&id, &seq); err != nil {
		t.Fatal(err)
	}
	return id, seq
}

func TestAuditTamperingIsNamed(t *testing.T) {
	t.Run("head_deleted", func(t *testing.T) {
		in := start(t)
		auditedTraffic(t, in, 5)
		db := sqliteOf(t, in)
		mustExec(t, db, `DELETE FROM audit_heads WHERE tenant = 'slot-1'`)
		out, _ := func() (string, string) { _, o, e := cli(t, "audit", "verify", "--data", in.data); return o, e }()
		if strings.Contains(out, "verified 0 records") {
			t.Fatalf("verify hid the chain: %s", out)
		}
		verifyFails(t, in, nil, "slot-1", "no head row")
		// The next audited write rebuilds the head from the chain.
		auditedTraffic(t, in, 1)
		verifyPasses(t, in)
	})
	t.Run("resource_column", func(t *testing.T) {
		in := start(t)
		auditedTraffic(t, in, 3)
		db := sqliteOf(t, in)
		id, _ := lastRecord(t, db)
		mustExec(t, db, `UPDATE audit_records SET resource = 'key/forged' WHERE id = ?`, id)
		verifyFails(t, in, nil, "slot-1", id, "resource")
	})
	t.Run("at_column", func(t *testing.T) {
		in := start(t)
		auditedTraffic(t, in, 3)
		db := sqliteOf(t, in)
		id, _ := lastRecord(t, db)
		mustExec(t, db, `UPDATE audit_records SET at = '2020-01-01T00:00:00Z' WHERE id = ?`, id)
		verifyFails(t, in, nil, "slot-1", id, "at")
	})
	t.Run("head_rewound", func(t *testing.T) {
		in := start(t)
		auditedTraffic(t, in, 3)
		db := sqliteOf(t, in)
		mustExec(t, db, `UPDATE audit_heads SET seq = seq - 1, hash = (SELECT prev_hash FROM audit_records r WHERE r.tenant = audit_heads.tenant AND r.seq = audit_heads.seq) WHERE tenant = 'slot-1'`)
		verifyFails(t, in, nil, "slot-1", "rewound")
	})
	t.Run("head_hash", func(t *testing.T) {
		in := start(t)
		auditedTraffic(t, in, 3)
		db := sqliteOf(t, in)
		mustExec(t, db, `UPDATE audit_heads SET hash = 'sha256:`+strings.Repeat("ab", 32)+`' WHERE tenant = 'slot-1'`)
		verifyFails(t, in, nil, "slot-1", "head hash")
	})
	t.Run("truncated_and_rewound_against_checkpoint", func(t *testing.T) {
		in := start(t)
		auditedTraffic(t, in, 6)
		cp := filepath.Join(t.TempDir(), "checkpoint.json")
		if code, out, errOut := cli(t, "audit", "checkpoint", "--data", in.data, "--out", cp); code != 0 {
			t.Fatalf("checkpoint: %s %s", out, errOut)
		}
		verifyPasses(t, in, "--checkpoint", cp)
		db := sqliteOf(t, in)
		_, last := lastRecord(t, db)
		// Cut the last three records and rewind the head consistently: the
		// chain alone is whole again.
		mustExec(t, db, `DELETE FROM audit_records WHERE tenant = 'slot-1' AND seq > ?`, last-3)
		mustExec(t, db, `UPDATE audit_heads SET seq = ?, hash = (SELECT hash FROM audit_records WHERE tenant = 'slot-1' AND seq = ?) WHERE tenant = 'slot-1'`, last-3, last-3)
		verifyPasses(t, in)
		verifyFails(t, in, []string{"--checkpoint", cp}, "slot-1", "checkpoint", "records were removed")
	})
	t.Run("every_record_gone_against_checkpoint", func(t *testing.T) {
		in := start(t)
		auditedTraffic(t, in, 2)
		cp := filepath.Join(t.TempDir(), "checkpoint.json")
		if code, _, errOut := cli(t, "audit", "checkpoint", "--data", in.data, "--out", cp); code != 0 {
			t.Fatal(errOut)
		}
		in.cancel()
		<-in.done
		in.done <- 0 // for the cleanup
		db := sqliteOf(t, in)
		mustExec(t, db, `DELETE FROM audit_records WHERE tenant = 'slot-1'`)
		mustExec(t, db, `DELETE FROM audit_heads WHERE tenant = 'slot-1'`)
		verifyFails(t, in, []string{"--checkpoint", cp}, "slot-1", "checkpoint")
	})
	t.Run("history_rewritten_against_checkpoint", func(t *testing.T) {
		in := start(t)
		auditedTraffic(t, in, 4)
		cp := filepath.Join(t.TempDir(), "checkpoint.json")
		if code, _, errOut := cli(t, "audit", "checkpoint", "--data", in.data, "--out", cp); code != 0 {
			t.Fatal(errOut)
		}
		in.cancel()
		<-in.done
		in.done <- 0
		db := sqliteOf(t, in)
		rewriteChain(t, db, "slot-1", 2)
		verifyPasses(t, in) // the chain alone is consistent
		verifyFails(t, in, []string{"--checkpoint", cp}, "slot-1", "checkpoint", "rewritten")
	})
	t.Run("checkpoint_forged_or_foreign", func(t *testing.T) {
		in := start(t)
		auditedTraffic(t, in, 2)
		dir := t.TempDir()
		cp := filepath.Join(dir, "checkpoint.json")
		if code, _, errOut := cli(t, "audit", "checkpoint", "--data", in.data, "--out", cp); code != 0 {
			t.Fatal(errOut)
		}
		b, _ := os.ReadFile(cp)
		var doc map[string]any
		json.Unmarshal(b, &doc)
		heads := doc["heads"].([]any)
		heads[0].(map[string]any)["seq"] = 1
		forged, _ := json.Marshal(doc)
		os.WriteFile(filepath.Join(dir, "forged.json"), forged, 0o600)
		verifyFails(t, in, []string{"--checkpoint", filepath.Join(dir, "forged.json")}, "signature")
		// A checkpoint signed by another installation's key.
		other := t.TempDir()
		cli(t, "keys", "create", "--data", other, "--tenant", "slot-1", "--scopes", "admin")
		if code, _, errOut := cli(t, "audit", "checkpoint", "--data", other, "--out", filepath.Join(dir, "other.json")); code != 0 {
			t.Fatal(errOut)
		}
		verifyFails(t, in, []string{"--checkpoint", filepath.Join(dir, "other.json")}, "trusted key")
	})
}

// rewriteChain alters the body of record from (changing its reason) and
// re-links every later record and the head, as an attacker with write
// access to the database but not the checkpoint key would.
func rewriteChain(t *testing.T, db *sql.DB, tenant string, from int64) {
	t.Helper()
	rows, err := db.Query(`SELECT seq, body, prev_hash FROM audit_records WHERE tenant = ? AND seq >= ? ORDER BY seq`, tenant, from)
	if err != nil {
		t.Fatal(err)
	}
	type row struct {
		seq        int64
		body, prev string
	}
	var rs []row
	for rows.Next() {
		var r row
		rows.Scan(&r.seq, &r.body, &r.prev)
		rs = append(rs, r)
	}
	rows.Close()
	prev := rs[0].prev
	for i, r := range rs {
		body := r.body
		if i == 0 {
			body = strings.Replace(body, `"outcome":"allow"`, `"outcome":"allow","reason":"rewritten"`, 1)
		}
		h, err := audit.Link(prev, []byte(body))
		if err != nil {
			t.Fatal(err)
		}
		mustExec(t, db, `UPDATE audit_records SET body = ?, prev_hash = ?, hash = ? WHERE tenant = ? AND seq = ?`, body, prev, h, tenant, r.seq)
		prev = h
	}
	mustExec(t, db, `UPDATE audit_heads SET hash = ? WHERE tenant = ?`, prev, tenant)
}

func TestAuditCheckpointServedAndWritten(t *testing.T) {
	file := filepath.Join(t.TempDir(), "anchor.json")
	in := start(t, "--audit-checkpoint-file", file, "--audit-checkpoint-interval", "1s")
	auditedTraffic(t, in, 2)
	code, cp := in.do(t, "GET", "/v1/audit/checkpoint", in.adminKey, nil)
	if code != 200 || cp["signature"] == nil || cp["key_id"] == nil {
		t.Fatalf("GET /v1/audit/checkpoint: %d %v", code, cp)
	}
	heads, _ := cp["heads"].([]any)
	if len(heads) != 1 || heads[0].(map[string]any)["tenant"] != "slot-1" {
		t.Fatalf("checkpoint covers other tenants or none: %v", heads)
	}
	served := filepath.Join(t.TempDir(), "served.json")
	b, _ := json.Marshal(cp)
	os.WriteFile(served, b, 0o600)
	verifyPasses(t, in, "--checkpoint", served)
	// serve wrote one to the file at start, and logged it.
	in.stderr.await(t, regexp.MustCompile(`audit checkpoint written`), in.done)
	verifyPasses(t, in, "--checkpoint", file)
}

func TestSecFetchModeAndMCPOrigin(t *testing.T) {
	in := start(t, "--mcp-allowed-origin", "https://ok.example")
	if code, m := in.do(t, "GET", "/v1/admin/keys", in.adminKey, nil, "Sec-Fetch-Mode", "NaviGate"); code != 403 || m["code"] != "browser_refused" {
		t.Errorf("Sec-Fetch-Mode NaviGate: %d %v", code, m)
	}
	body := `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`
	for _, c := range []struct {
		origin string
		status int
	}{{"https://evil.example", 403}, {"http://localhost:7600", 403}, {"https://ok.example", 200}, {"", 200}} {
		req, _ := http.NewRequestWithContext(t.Context(), "POST", in.url+"/mcp", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+in.adminKey)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if c.origin != "" {
			req.Header.Set("Origin", c.origin)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != c.status {
			t.Errorf("Origin %q: %d %s, want %d", c.origin, resp.StatusCode, b, c.status)
		}
		if c.status == 403 && !strings.Contains(string(b), "origin_refused") {
			t.Errorf("Origin %q refused without naming why: %s", c.origin, b)
		}
	}
}

// TestCLIRevocationReachesRunningServer: `caduceus keys revoke` on the data
// directory is refused by the running server. That the server hears of it
// through the key watcher rather than the 5 s cache TTL is proven without
// a clock by store's TestRevocationReachesAnotherProcess (the same key
// service and watcher serve wires, with a cache that never expires); the
// figure is BenchmarkRevocationPropagation's.
func TestCLIRevocationReachesRunningServer(t *testing.T) {
	in := start(t)
	code, out, errOut := cli(t, "keys", "create", "--data", in.data, "--tenant", "slot-1", "--scopes", "route")
	if code != 0 {
		t.Fatal(errOut)
	}
	key := strings.TrimSpace(out)
	if code, _ := in.do(t, "GET", "/v1/trader/strategies", key, nil); code != 200 {
		t.Fatalf("fresh key refused: %d", code)
	}
	id := strings.Split(key, "_")[1]
	if code, _, errOut := cli(t, "keys", "revoke", "--data", in.data, id); code != 0 {
		t.Fatal(errOut)
	}
	// Each request is an answer from the server: ask until it refuses.
	giveUp := time.After(30 * time.Second)
	for n := 0; ; n++ {
		code, m := in.do(t, "GET", "/v1/trader/strategies", key, nil)
		if code == 401 && m["code"] == "key_revoked" {
			t.Logf("refused after %d requests accepted past the revocation", n)
			return
		}
		if code != 200 {
			t.Fatalf("request %d after the revocation: %d %v", n, code, m)
		}
		select {
		case <-giveUp:
			t.Fatalf("the server still accepts a key the CLI revoked (%d requests)", n)
		default:
		}
	}
}
