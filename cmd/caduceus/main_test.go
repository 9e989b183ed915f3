package main

import (
	"bufio"
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/spf13/cobra"
	_ "modernc.org/sqlite"

	"github.com/caduceus-dev/caduceus/store/storetest"
)

// syncBuffer is a bytes.Buffer safe for the server goroutine and the test.
type syncBuffer struct {
	mu      sync.Mutex
	b       bytes.Buffer
	written chan struct{} // signalled after each write once await made it
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n, err := s.b.Write(p)
	if s.written != nil {
		select {
		case s.written <- struct{}{}:
		default:
		}
	}
	return n, err
}

// await returns the first match of re in what was written, waiting for
// writes until it appears; it fails the test when exited yields first (the
// command ended) or after 30 s.
func (s *syncBuffer) await(t testing.TB, re *regexp.Regexp, exited <-chan int) []string {
	t.Helper()
	s.mu.Lock()
	if s.written == nil {
		s.written = make(chan struct{}, 1)
	}
	written := s.written
	s.mu.Unlock()
	timeout := time.After(30 * time.Second)
	for {
		if m := re.FindStringSubmatch(s.String()); m != nil {
			return m
		}
		select {
		case <-written:
		case code := <-exited:
			t.Fatalf("exited with %d before writing %s: %s", code, re, s.String())
		case <-timeout:
			t.Fatalf("%s never written: %s", re, s.String())
		}
	}
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func noEnv(string) string { return "" }

// cli runs one command the way a user would and returns its exit code and output.
func cli(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(t.Context(), args, noEnv, strings.NewReader(""), &out, &errb)
	return code, out.String(), errb.String()
}

type instance struct {
	url      string
	adminKey string
	data     string
	stderr   *syncBuffer
	done     chan int
	cancel   context.CancelFunc
	// storeArgs name its store to another command (--data DIR or --store DSN), when a test sets them.
	storeArgs []string
}

var listenRE = regexp.MustCompile(`listening on (http://\S+)`)
var keyRE = regexp.MustCompile(`(?m)^(cad_[0-9a-f]{16}_[a-z2-7]{52})$`)

// start runs `caduceus serve` on port 0 with a temp data dir (plus extra
// args) and waits for /healthz.
func start(t *testing.T, extra ...string) *instance {
	t.Helper()
	return startEnv(t, noEnv, extra...)
}

// startEnv is start with an environment.
func startEnv(t *testing.T, getenv func(string) string, extra ...string) *instance {
	t.Helper()
	data := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	in := &instance{data: data, stderr: &syncBuffer{}, done: make(chan int, 1), cancel: cancel}
	stdout := &syncBuffer{}
	args := append([]string{"serve", "--addr", "127.0.0.1:0", "--data", data}, extra...)
	go func() { in.done <- run(ctx, args, getenv, strings.NewReader(""), stdout, in.stderr) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-in.done:
		case <-time.After(15 * time.Second):
			t.Error("server did not shut down")
		}
	})
	in.url = in.stderr.await(t, listenRE, in.done)[1]
	if m := keyRE.FindStringSubmatch(stdout.String()); m != nil {
		in.adminKey = m[1]
	}
	resp, err := http.Get(in.url + "/healthz")
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("healthz: %v %v", resp, err)
	}
	resp.Body.Close()
	return in
}

func (in *instance) do(t *testing.T, method, path, key string, body any, hdr ...string) (int, map[string]any) {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, _ := http.NewRequestWithContext(t.Context(), method, in.url+path, rd)
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var m map[string]any
	b, _ := io.ReadAll(resp.Body)
	if len(b) > 0 {
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatalf("%s %s: not JSON: %s", method, path, b)
		}
		// Management errors are problems; the trader's decision route answers
		// in its own contract even when it refuses (400 with a response).
		contractAnswer := method == "POST" && path == "/v1/trader/decisions"
		if resp.StatusCode >= 400 && !contractAnswer && resp.Header.Get("Content-Type") != "application/problem+json" {
			t.Errorf("%s %s: error with content type %q", method, path, resp.Header.Get("Content-Type"))
		}
	}
	return resp.StatusCode, m
}

func TestServeFirstStartPrintsAdminKeyOnce(t *testing.T) {
	in := start(t)
	if in.adminKey == "" {
		t.Fatal("first start printed no admin key")
	}
	code, body := in.do(t, "GET", "/v1/admin/keys", in.adminKey, nil)
	if code != 200 {
		t.Fatalf("admin key refused: %d %v", code, body)
	}
	// A second start on the same data directory makes no new key.
	in.cancel()
	<-in.done
	var out, errb syncBuffer
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, []string{"serve", "--addr", "127.0.0.1:0", "--data", in.data}, noEnv, nil, &out, &errb)
	}()
	errb.await(t, listenRE, done)
	cancel()
	if code := <-done; code != 0 {
		t.Errorf("graceful shutdown exit code %d", code)
	}
	in.done <- 0 // for the cleanup
	if keyRE.MatchString(out.String()) {
		t.Errorf("second start printed a key again: %s", out.String())
	}
}

func TestAuthRefusals(t *testing.T) {
	in := start(t)
	code, out, errOut := cli(t, "keys", "create", "--data", in.data, "--tenant", "slot-1", "--scopes", "route")
	if code != 0 {
		t.Fatalf("keys create: %d %s", code, errOut)
	}
	routeKey := strings.TrimSpace(out)
	if !keyRE.MatchString(routeKey) {
		t.Fatalf("keys create printed %q, want the key alone", out)
	}
	cases := []struct {
		name   string
		key    string
		hdr    []string
		status int
		code   string
	}{
		{"no key", "", nil, 401, "missing_key"},
		{"garbage key", "not-a-key", nil, 401, "bad_key"},
		{"wrong secret", routeKey[:len(routeKey)-4] + "aaaa", nil, 401, "bad_key"},
		{"missing scope", routeKey, nil, 403, "missing_scope"},
		{"cookie only", "", []string{"Cookie", "session=abc"}, 401, "cookie_refused"},
		{"browser navigation", in.adminKey, []string{"Sec-Fetch-Mode", "navigate"}, 403, "browser_refused"},
		{"x-api-key works", "", []string{"x-api-key", in.adminKey}, 200, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			status, body := in.do(t, "GET", "/v1/admin/keys", c.key, nil, c.hdr...)
			if status != c.status {
				t.Fatalf("status %d want %d: %v", status, c.status, body)
			}
			if c.code != "" && body["code"] != c.code {
				t.Errorf("code %v want %s (%v)", body["code"], c.code, body)
			}
		})
	}
	// The known-key refusals (wrong secret, missing scope, navigation) are in
	// the tenant's audit trail as deny.
	_, body := in.do(t, "GET", "/v1/audit?limit=50", in.adminKey, nil)
	denies := 0
	for _, r := range body["records"].([]any) {
		o := r.(map[string]any)["outcome"].(map[string]any)
		if o["outcome"] == "deny" {
			denies++
		}
	}
	if denies != 3 {
		t.Errorf("%d deny records; want 3 (wrong secret, missing scope, navigation)", denies)
	}
}

func TestKeysOverHTTPStayInTenant(t *testing.T) {
	in := start(t)
	code, body := in.do(t, "POST", "/v1/admin/keys", in.adminKey, map[string]any{"scopes": []string{"route"}, "harness": "claude-code"})
	if code != 201 || !keyRE.MatchString(body["key"].(string)) || body["tenant"] != "slot-1" {
		t.Fatalf("create: %d %v", code, body)
	}
	newKey, newID := body["key"].(string), body["id"].(string)
	if code, body := in.do(t, "POST", "/v1/admin/keys", in.adminKey, map[string]any{"tenant": "slot-2", "scopes": []string{"admin"}}); code != 403 || body["code"] != "cross_tenant" {
		t.Errorf("cross-tenant create: %d %v", code, body)
	}
	if code, body := in.do(t, "POST", "/v1/admin/keys", in.adminKey, map[string]any{"scopes": []string{"root"}}); code != 400 || body["field"] != "scopes" {
		t.Errorf("bad scope: %d %v", code, body)
	}
	if code, body := in.do(t, "POST", "/v1/admin/keys", in.adminKey, map[string]any{"scopes": []string{"route"}, "color": "red"}); code != 400 {
		t.Errorf("unknown field: %d %v", code, body)
	}
	// A key of another tenant, made offline, is invisible and unrevocable here.
	_, out, _ := cli(t, "keys", "create", "--data", in.data, "--tenant", "slot-2", "--scopes", "admin")
	other := strings.TrimSpace(out)
	otherID := strings.Split(other, "_")[1]
	if code, _ := in.do(t, "DELETE", "/v1/admin/keys/"+otherID, in.adminKey, nil); code != 404 {
		t.Errorf("revoking another tenant's key: %d", code)
	}
	_, body = in.do(t, "GET", "/v1/admin/keys", other, nil)
	if keys := body["keys"].([]any); len(keys) != 1 {
		t.Errorf("slot-2 admin sees %d keys; want its own only", len(keys))
	}
	if code, _ := in.do(t, "DELETE", "/v1/admin/keys/"+newID, in.adminKey, nil); code != 204 {
		t.Fatalf("revoke: %d", code)
	}
	if code, body := in.do(t, "GET", "/v1/audit", newKey, nil); code != 401 || body["code"] != "key_revoked" {
		t.Errorf("revoked key: %d %v", code, body)
	}
}

type headerTransport struct {
	key string
}

func (h headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+h.key)
	return http.DefaultTransport.RoundTrip(r)
}

func mcpSession(t *testing.T, in *instance, key string) *mcp.ClientSession {
	t.Helper()
	client := mcp.NewClient(&mcp.Implementation{Name: "caduceus-test", Version: "1"}, nil)
	transport := &mcp.StreamableClientTransport{
		Endpoint:             in.url + "/mcp",
		HTTPClient:           &http.Client{Transport: headerTransport{key}},
		DisableStandaloneSSE: true,
		MaxRetries:           -1,
	}
	sess, err := client.Connect(t.Context(), transport, nil)
	if err != nil {
		t.Fatalf("mcp connect: %v", err)
	}
	t.Cleanup(func() { sess.Close() })
	return sess
}

func TestMCPWhoami(t *testing.T) {
	in := start(t)
	_, out, _ := cli(t, "keys", "create", "--data", in.data, "--tenant", "slot-9", "--scopes", "route,operate", "--harness", "hermes", "--context", "cron")
	key := strings.TrimSpace(out)
	sess := mcpSession(t, in, key)
	tools, err := sess.ListTools(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tl := range tools.Tools {
		names = append(names, tl.Name)
	}
	if !strings.Contains(strings.Join(names, ","), "whoami") {
		t.Fatalf("tools %v lack whoami", names)
	}
	res, err := sess.CallTool(t.Context(), &mcp.CallToolParams{Name: "whoami"})
	if err != nil {
		t.Fatal(err)
	}
	if res.IsError {
		t.Fatalf("whoami error: %+v", res.Content)
	}
	var who struct {
		Identity struct {
			TenantSlot string `json:"tenant_slot"`
			Subject    string `json:"subject"`
			Surface    string `json:"surface"`
			Trust      string `json:"trust"`
		} `json:"identity"`
		Scopes     []string `json:"scopes"`
		Harness    string   `json:"harness"`
		RunContext string   `json:"run_context"`
	}
	b, _ := json.Marshal(res.StructuredContent)
	if err := json.Unmarshal(b, &who); err != nil {
		t.Fatal(err)
	}
	keyID := strings.Split(key, "_")[1]
	if who.Identity.TenantSlot != "slot-9" || who.Identity.Surface != "api" || who.Identity.Trust != "router" ||
		!strings.HasPrefix(who.Identity.Subject, "usr_") || strings.Contains(who.Identity.Subject, keyID) ||
		who.Harness != "hermes" || who.RunContext != "cron" || strings.Join(who.Scopes, ",") != "operate,route" {
		t.Errorf("whoami = %+v", who)
	}
	// The MCP endpoint is authenticated like every route.
	resp, err := http.Post(in.url+"/mcp", "application/json", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 401 {
		t.Errorf("anonymous /mcp = %d", resp.StatusCode)
	}
	// Each MCP request left an audit record naming its method.
	_, body := in.do(t, "GET", "/v1/audit?limit=100", in.adminKey, nil)
	_ = body // slot-1's trail; slot-9's is checked through the CLI:
	code, tail, _ := cli(t, "audit", "tail", "--data", in.data, "--tenant", "slot-9", "--json", "-n", "100")
	if code != 0 || !strings.Contains(tail, `"resource":"mcp:tools/call:whoami"`) || !strings.Contains(tail, `"resource":"mcp:tools/list"`) {
		t.Errorf("audit tail lacks the MCP calls: %s", tail)
	}
}

func TestAuditRecordPerRequestAndVerifyDetectsTampering(t *testing.T) {
	in := start(t)
	const n = 7
	for range n {
		in.do(t, "GET", "/v1/admin/keys", in.adminKey, nil)
	}
	in.do(t, "GET", "/v1/admin/nope", in.adminKey, nil) // unknown route: not_found, still recorded
	code, out, _ := cli(t, "audit", "tail", "--data", in.data, "--json", "-n", "100")
	if code != 0 {
		t.Fatal(out)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != n+1 {
		t.Fatalf("%d audit records for %d requests:\n%s", len(lines), n+1, out)
	}
	if !strings.Contains(lines[0], `"outcome":"not_found"`) {
		t.Errorf("newest record %s; want the not_found", lines[0])
	}
	code, out, errOut := cli(t, "audit", "verify", "--data", in.data)
	if code != 0 || !strings.Contains(out, fmt.Sprintf("verified %d records", n+1)) {
		t.Fatalf("verify clean: %d %s %s", code, out, errOut)
	}
	// Alter one row directly in the database.
	db, err := sql.Open("sqlite", filepath.Join(in.data, "caduceus.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var id string
	if err := db.QueryRow(`SELECT id FROM audit_records WHERE seq = 3`).Scan(&id); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`UPDATE audit_records SET body = REPLACE(body, '"allow"', '"deny"') WHERE seq = 3`); err != nil {
		t.Fatal(err)
	}
	code, _, errOut = cli(t, "audit", "verify", "--data", in.data)
	if code != 1 || !strings.Contains(errOut, id) || !strings.Contains(errOut, "seq 3") {
		t.Errorf("verify after tampering: exit %d, stderr %q; want 1 naming %s", code, errOut, id)
	}
}

func TestMetricsAndReady(t *testing.T) {
	in := start(t)
	in.do(t, "GET", "/v1/admin/keys", in.adminKey, nil)
	in.do(t, "GET", "/v1/admin/keys", "", nil)
	resp, err := http.Get(in.url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var allow, deny bool
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		l := sc.Text()
		allow = allow || strings.HasPrefix(l, `caduceus_http_requests_total{outcome="allow",route="GET /v1/admin/keys"} 1`)
		deny = deny || strings.HasPrefix(l, `caduceus_http_requests_total{outcome="deny",route="GET /v1/admin/keys"} 1`)
	}
	if !allow || !deny {
		t.Errorf("metrics lack per-route outcome counts (allow %v deny %v)", allow, deny)
	}
	r, err := http.Get(in.url + "/readyz")
	if err != nil || r.StatusCode != 200 {
		t.Errorf("readyz %v %v", r, err)
	}
}

func TestCLIBadInput(t *testing.T) {
	dir := t.TempDir()
	cases := [][]string{
		{"keys", "create", "--data", dir, "--tenant", "tenant-1", "--scopes", "route"},
		{"keys", "create", "--data", dir, "--tenant", "slot-0", "--scopes", "admin"},
		{"keys", "create", "--data", dir, "--tenant", "slot-1", "--scopes", "superuser"},
		{"keys", "create", "--data", dir, "--tenant", "slot-1", "--scopes", "route", "--context", "nightly"},
		{"audit", "verify", "--data", dir, "--tenant", "everyone"},
		{"serve", "--data", dir, "--gates", "casino"},
	}
	for _, args := range cases {
		code, out, errOut := cli(t, args...)
		if code != 2 || out != "" || !strings.HasPrefix(errOut, "caduceus: ") {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want exit 2 and a message", args, code, out, errOut)
		}
	}
	// Nothing was created by the refused commands.
	_, out, _ := cli(t, "keys", "list", "--data", dir)
	if strings.Count(strings.TrimSpace(out), "\n") != 0 {
		t.Errorf("refused commands left keys: %s", out)
	}
}

func TestConfigFileEnvFlagOrder(t *testing.T) {
	dir := t.TempDir()
	fileData := filepath.Join(dir, "from-file")
	envData := filepath.Join(dir, "from-env")
	flagData := filepath.Join(dir, "from-flag")
	cfgPath := filepath.Join(dir, "caduceus.yaml")
	os.WriteFile(cfgPath, []byte("data: "+fileData+"\n"), 0o600)
	get := func(env map[string]string) func(string) string { return func(k string) string { return env[k] } }
	mk := func(getenv func(string) string, args ...string) {
		var out, errb bytes.Buffer
		if code := run(t.Context(), append([]string{"keys", "create", "--tenant", "slot-1", "--scopes", "route", "--config", cfgPath}, args...), getenv, nil, &out, &errb); code != 0 {
			t.Fatalf("%v: %s", args, errb.String())
		}
	}
	mk(noEnv)
	mk(get(map[string]string{"CADUCEUS_DATA": envData}))
	mk(get(map[string]string{"CADUCEUS_DATA": envData}), "--data", flagData)
	for _, d := range []string{fileData, envData, flagData} {
		if _, err := os.Stat(filepath.Join(d, "caduceus.db")); err != nil {
			t.Errorf("no store in %s: %v", d, err)
		}
	}
	os.WriteFile(cfgPath, []byte("dta: x\n"), 0o600)
	if code, _, errOut := cli(t, "keys", "list", "--config", cfgPath); code != 2 || !strings.Contains(errOut, "dta") {
		t.Errorf("unknown config key: %d %s", code, errOut)
	}
}

func TestServeOnPostgres(t *testing.T) {
	dsn := os.Getenv(storetest.EnvPostgres)
	if dsn == "" {
		t.Skip("CADUCEUS_TEST_POSTGRES not set; .ci/run sets it")
	}
	pg := storetest.FreshSchema(t, dsn)
	in := start(t, "--store", pg)
	if in.adminKey == "" {
		t.Fatal("no admin key on a fresh Postgres store")
	}
	code, out, errOut := cli(t, "keys", "create", "--store", pg, "--tenant", "slot-5", "--scopes", "route")
	if code != 0 {
		t.Fatal(errOut)
	}
	sess := mcpSession(t, in, strings.TrimSpace(out))
	if _, err := sess.CallTool(t.Context(), &mcp.CallToolParams{Name: "whoami"}); err != nil {
		t.Fatal(err)
	}
	in.do(t, "GET", "/v1/admin/keys", in.adminKey, nil)
	code, out, errOut = cli(t, "audit", "verify", "--store", pg)
	if code != 0 || !strings.Contains(out, "in 2 tenants") {
		t.Fatalf("verify on postgres: %d %s %s", code, out, errOut)
	}
	if _, err := sqlExec(pg, `UPDATE audit_records SET body = REPLACE(body, '"allow"', '"deny"') WHERE tenant = 'slot-1' AND seq = 1`); err != nil {
		t.Fatal(err)
	}
	if code, _, errOut := cli(t, "audit", "verify", "--store", pg); code != 1 || !strings.Contains(errOut, "slot-1") {
		t.Errorf("verify after tampering on postgres: %d %s", code, errOut)
	}
}

func sqlExec(dsn, q string) (sql.Result, error) {
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		return nil, err
	}
	defer db.Close()
	return db.Exec(q)
}

func TestVersion(t *testing.T) {
	code, out, _ := cli(t, "version")
	if code != 0 || !regexp.MustCompile(`^caduceus \S+ commit \S+ go\S+ \S+/\S+ schema \d{3}_\w+\n$`).MatchString(out) {
		t.Errorf("version: %d %q", code, out)
	}
}

// TestEveryCommandHasAnExample: DESIGN §4 asks every command's --help to
// show an example.
func TestEveryCommandHasAnExample(t *testing.T) {
	a := &app{env: env{getenv: noEnv}}
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		if c.Name() == "help" || c.Name() == "completion" {
			return // cobra's own
		}
		if c.Example == "" {
			t.Errorf("%q has no example", c.CommandPath())
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(a.rootCmd())
}

// startEarlyInMinute returns at once when the current UTC minute is at
// most latest seconds old, or else in the first second of the next one:
// serve's rate windows are its clock's UTC minutes, and a test whose
// requests must share one begins early enough in it.
func startEarlyInMinute(latest int) {
	now := time.Now().UTC()
	if now.Second() <= latest {
		return
	}
	// The minute's turn is an event of the wall clock alone: serve's clock cannot be injected.
	time.Sleep(now.Truncate(time.Minute).Add(time.Minute + time.Second).Sub(now))
}
