package main

import (
	"bufio"
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// envAsMain makes this test binary act as the caduceus binary, so the
// README's commands run the code under test without a separate build.
const envAsMain = "CADUCEUS_TEST_AS_MAIN"

func TestMain(m *testing.M) {
	if os.Getenv(envAsMain) == "1" {
		os.Exit(run(context.Background(), os.Args[1:], os.Getenv, os.Stdin, os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}

// shBlocks returns the lines of the README's ```sh blocks, block by block.
func shBlocks(t *testing.T, readme string) [][]string {
	t.Helper()
	var blocks [][]string
	var cur []string
	in := false
	sc := bufio.NewScanner(strings.NewReader(readme))
	for sc.Scan() {
		line := sc.Text()
		switch {
		case !in && strings.TrimSpace(line) == "```sh":
			in, cur = true, nil
		case in && strings.TrimSpace(line) == "```":
			in = false
			blocks = append(blocks, cur)
		case in:
			cur = append(cur, line)
		}
	}
	return blocks
}

func stripComment(line string) string {
	if i := strings.Index(line, " #"); i >= 0 {
		line = line[:i]
	}
	return strings.TrimSpace(line)
}

// TestReadmeWalkthrough runs every command of the README's sh blocks, in
// order, as written, from the repository root, with three substitutions: the
// caduceus binary for `go run ./cmd/caduceus`, a free port for 7600 (and a
// temporary data directory through CADUCEUS_DATA), and the admin key the
// first serve printed for `export KEY=...`. `serve` runs in the background
// (a second serve replaces the first, as Ctrl-C would). `go test ./...` is
// not run again (this is it). Every command must exit 0; the curl calls that
// must succeed use -f.
func TestReadmeWalkthrough(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: the README walkthrough starts servers")
	}
	root, _ := filepath.Abs(filepath.Join("..", ".."))
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	blocks := shBlocks(t, string(readme))
	if len(blocks) < 3 {
		t.Fatalf("README has %d sh blocks", len(blocks))
	}
	var setup []string
	for _, l := range blocks[0] {
		if s := stripComment(l); s != "" {
			setup = append(setup, s)
		}
	}
	if strings.Join(setup, "\n") != "go run ./cmd/caduceus serve\ngo test ./..." {
		t.Errorf("the set-up block is not exactly the two commands: %q", setup)
	}
	bin, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := strings.TrimPrefix(ln.Addr().String(), "127.0.0.1:")
	ln.Close()
	tmp := t.TempDir()

	var script strings.Builder
	script.WriteString(`set -eu
start_serve() {
  stop_serve
  "$BIN" serve "$@" --addr "127.0.0.1:$PORT" >>"$TMP/serve.out" 2>>"$TMP/serve.err" &
  echo $! >"$TMP/serve.pid"
  for i in $(seq 1 1200); do
    if curl -sf "http://127.0.0.1:$PORT/healthz" >/dev/null 2>&1; then return 0; fi
    if ! kill -0 "$(cat "$TMP/serve.pid")" 2>/dev/null; then echo "serve exited:"; cat "$TMP/serve.err"; return 1; fi
    sleep 0.05
  done
  echo "serve did not start"; cat "$TMP/serve.err"; return 1
}
stop_serve() {
  if [ -f "$TMP/serve.pid" ]; then
    pid=$(cat "$TMP/serve.pid"); rm -f "$TMP/serve.pid"
    kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true
  fi
}
trap stop_serve EXIT
`)
	serveRE := regexp.MustCompile(`^go run \./cmd/caduceus serve\b(.*)$`)
	sawTest, serves, commands := false, 0, 0
	for _, block := range blocks {
		for _, line := range block {
			cmd := stripComment(line)
			switch {
			case cmd == "":
				continue
			case cmd == "go test ./...":
				sawTest = true
				continue
			case serveRE.MatchString(cmd):
				serves++
				cmd = "start_serve" + serveRE.FindStringSubmatch(cmd)[1]
			case strings.HasPrefix(cmd, "export KEY="):
				cmd = `export KEY=$(grep -m1 '^cad_' "$TMP/serve.out"); test -n "$KEY"`
			}
			cmd = strings.ReplaceAll(cmd, "go run ./cmd/caduceus", `"$BIN"`)
			cmd = strings.ReplaceAll(cmd, "127.0.0.1:7600", "127.0.0.1:$PORT")
			commands++
			script.WriteString("echo '+ " + strings.ReplaceAll(line, "'", `'\''`) + "'\n")
			script.WriteString(cmd + "\n")
			script.WriteString("echo\n")
		}
	}
	if !sawTest || serves < 2 || commands < 15 {
		t.Fatalf("README walkthrough: go test seen %v, %d serves, %d commands", sawTest, serves, commands)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	c := exec.CommandContext(ctx, "bash", "-c", script.String())
	c.Dir = root
	c.Env = append(os.Environ(), envAsMain+"=1", "BIN="+bin, "PORT="+port, "TMP="+tmp,
		"CADUCEUS_DATA="+filepath.Join(tmp, "data"))
	for _, k := range []string{"CONFIG", "STORE", "ADDR", "GATES", "LOG_LEVEL", "NATS", "SKILLS", "SCENARIO", "BROKER", "MCP_URL", "OPENAI_API_KEY", "ANTHROPIC_API_KEY"} {
		c.Env = append(c.Env, "CADUCEUS_"+k+"=") // the walkthrough assumes a clean environment
	}
	out, err := c.CombinedOutput()
	if err != nil {
		serveErr, _ := os.ReadFile(filepath.Join(tmp, "serve.err"))
		t.Fatalf("the README walkthrough failed: %v\n%s\n--- serve log:\n%s", err, out, serveErr)
	}
	for _, want := range []string{"harness_required", "Refunds are processed within 14 days", "PROV-RELEASE", `"status": "reviewed"`, `"status":"placed"`, "ok: verified"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("the walkthrough's output lacks %q:\n%s", want, out)
		}
	}
}

// TestAPIDocListsEveryRoute: docs/api.md names every route of the route
// tables: the core's (server/routes.go) and each gate module's.
func TestAPIDocListsEveryRoute(t *testing.T) {
	var routes []byte
	for _, f := range []string{"server/routes.go", "trader/tradergate/routes.go", "executor/executorgate/routes.go",
		"shim/shimgate/routes.go", "shim/shimgate/responses.go", "relay/relaygate/gate.go"} {
		b, err := os.ReadFile(filepath.Join("..", "..", f))
		if err != nil {
			t.Fatal(err)
		}
		routes = append(routes, b...)
	}
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "api.md"))
	if err != nil {
		t.Fatal(err)
	}
	re := regexp.MustCompile(`"((?:GET|POST|PUT|DELETE|PATCH) /[^"]*)"`)
	found := re.FindAllStringSubmatch(string(routes), -1)
	if len(found) < 30 {
		t.Fatalf("only %d routes found in the route tables", len(found))
	}
	for _, m := range found {
		if !strings.Contains(string(doc), "`"+m[1]+"`") {
			t.Errorf("docs/api.md does not list %s", m[1])
		}
	}
}

// TestAPIDocListsSharedErrorCodes: every code the wrapper, the key check
// and the input rule answer (written in contract, auth and the server's
// middleware, routes and MCP endpoint) is in the error table of
// docs/api.md.
func TestAPIDocListsSharedErrorCodes(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "api.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, table, ok := strings.Cut(string(doc), "## Errors every route shares")
	if !ok {
		t.Fatal("docs/api.md has no section \"Errors every route shares\"")
	}
	table, _, _ = strings.Cut(table, "\n## ")
	anyCode := regexp.MustCompile(`(?:Code: |Invalidf\(|Denyf\(|NotFoundf\(|Conflictf\(|FieldError\([^,]+, |Code[A-Za-z]+ += )"([a-z_]+)"`)
	// auth also refuses key specs (bad_scopes, ...): those are POST
	// /v1/admin/keys's, not every route's; its key refusals are literals.
	keyRefusal := regexp.MustCompile(`Code: "([a-z_]+)"`)
	seen := 0
	for f, re := range map[string]*regexp.Regexp{"contract/error.go": anyCode, "contract/limits.go": anyCode, "contract/caller.go": anyCode,
		"auth/auth.go": keyRefusal, "server/middleware.go": anyCode, "server/routes.go": anyCode, "server/mcp.go": anyCode, "server/idempotency.go": anyCode} {
		src, err := os.ReadFile(filepath.Join("..", "..", f))
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range re.FindAllStringSubmatch(string(src), -1) {
			seen++
			if !strings.Contains(table, "`"+m[1]+"`") {
				t.Errorf("docs/api.md's error table does not list %s (%s)", m[1], f)
			}
		}
	}
	if seen < 15 {
		t.Fatalf("only %d codes found in the sources", seen)
	}
}
