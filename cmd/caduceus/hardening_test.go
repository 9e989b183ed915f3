package main

import (
	"bytes"
	"database/sql"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

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
			status, got := rawDo(t, in, o.method, o.path, in.adminKey, "application/json", o.body, false)
			if status != o.status || !strings.Contains(got, o.code) {
				t.Errorf("%s %s: %d %s, want %d naming %s", o.method, o.path, status, got, o.status, o.code)
			}
		})
	}

	// Nothing was written (but the audit trail of the refusals), the
	// process is alive and the audit chains verify.
	after := tableCounts(t, db, dialect)
	for table, n := range before {
		if table == "audit_records" || table == "audit_heads" {
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
