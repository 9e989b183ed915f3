package main

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/caduceus-dev/caduceus/store/storetest"
)

// TestOperationsDoc runs every sh block of docs/operations.md, in order, as
// written, from the repository root, with these substitutions (the page
// names them): `caduceus` is the binary under test; /etc/caduceus,
// /var/lib/caduceus and /var/backups/caduceus are temporary directories;
// 7600 is a free port (and 0.0.0.0 is loopback); the Postgres DSNs name a
// fresh database (and a fresh name for the restored one); `systemctl
// start|stop caduceus` start and stop a serve running the systemd unit's
// ExecStart, and `journalctl -u caduceus -o cat` reads its stderr; podman
// runs with runc, host networking and explicit ulimits (not -p), and its
// image, container and volume get names of the test's own. Every command
// must succeed (set -euo pipefail).
func TestOperationsDoc(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: the operations walkthrough builds releases and an image and starts servers")
	}
	dsn := os.Getenv(storetest.EnvPostgres)
	if dsn == "" {
		t.Skip("CADUCEUS_TEST_POSTGRES not set; .ci/run sets it")
	}
	for _, tool := range []string{"podman", "runc", "make", "curl", "pg_dump", "pg_restore", "psql", "promtool"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s is not installed (.ci/run installs what the tests need)", tool)
		}
	}
	root, _ := filepath.Abs(filepath.Join("..", ".."))
	doc, err := os.ReadFile(filepath.Join(root, "docs", "operations.md"))
	if err != nil {
		t.Fatal(err)
	}
	unit, err := os.ReadFile(filepath.Join(root, "examples", "systemd", "caduceus.service"))
	if err != nil {
		t.Fatal(err)
	}
	execStart := regexp.MustCompile(`(?m)^ExecStart=/usr/local/bin/caduceus (.*)$`).FindStringSubmatch(string(unit))
	if execStart == nil {
		t.Fatal("the unit has no ExecStart of /usr/local/bin/caduceus")
	}
	bin, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	tmp := t.TempDir()
	os.MkdirAll(filepath.Join(tmp, "bin"), 0o755)
	os.WriteFile(filepath.Join(tmp, "bin", "caduceus"), []byte("#!/bin/sh\n"+envAsMain+"=1 exec \""+bin+"\" \"$@\"\n"), 0o755)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := strings.TrimPrefix(ln.Addr().String(), "127.0.0.1:")
	ln.Close()

	var b [5]byte
	rand.Read(b[:])
	id := hex.EncodeToString(b[:])
	image, cname, vname := "localhost/caduceus-doc-"+id+":latest", "caduceus-doc-"+id, "caduceus-doc-"+id+"-data"
	t.Cleanup(func() {
		podman(t, "rm", "-f", cname)
		podman(t, "volume", "rm", "-f", vname)
		podman(t, "rmi", "-f", image)
	})
	source := freshDatabase(t, dsn)
	u, _ := url.Parse(source)
	sourceName := strings.TrimPrefix(u.Path, "/")
	u.Path, u.RawQuery = "", ""
	pgBase := u.String()
	restored := "r_" + id
	t.Cleanup(func() {
		db, err := sql.Open("pgx", dsn)
		if err == nil {
			db.Exec("DROP DATABASE IF EXISTS " + restored + " WITH (FORCE)")
			db.Close()
		}
	})

	// Literal values, not shell variables: quoted heredocs and SQL strings
	// expand nothing.
	subst := strings.NewReplacer(
		"/etc/caduceus", tmp+"/etc",
		"/var/lib/caduceus", tmp+"/data",
		"/var/backups/caduceus", tmp+"/backups",
		"127.0.0.1:7600", "127.0.0.1:"+port,
		"0.0.0.0:7600", "127.0.0.1:"+port,
		"journalctl -u caduceus -o cat", `cat "$TMP/serve.out" "$TMP/serve.err"`,
		"caduceus:latest", image,
		"postgres://caduceus@db.internal:5432/caduceus_restored", pgBase+"/"+restored,
		"caduceus_restored", restored,
		"postgres://caduceus@db.internal:5432/caduceus", pgBase+"/"+sourceName,
	)
	var script strings.Builder
	script.WriteString(`set -euo pipefail
export PATH="$TMP/bin:$PATH"
start_serve() {
  caduceus ` + subst.Replace(execStart[1]) + ` >>"$TMP/serve.out" 2>>"$TMP/serve.err" &
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
systemctl() {
  case "$*" in
    "start caduceus") start_serve ;;
    "stop caduceus") stop_serve ;;
    *) echo "systemctl $*: not part of the test" >&2; return 1 ;;
  esac
}
podman() {
  local args=()
  case "$1" in
    run)
      shift
      args=(run --network host --ulimit nofile=4096:4096 --ulimit nproc=4096:4096 -e "CADUCEUS_ADDR=127.0.0.1:$PORT")
      while [ $# -gt 0 ]; do
        case "$1" in
          -p) shift 2 ;;
          --name) args+=(--name "$CNAME"); shift 2 ;;
          -v) args+=(-v "${2/caduceus-data:/$VNAME:}"); shift 2 ;;
          *) args+=("$1"); shift ;;
        esac
      done ;;
    volume) args=(volume "$2" "$VNAME") ;;
    healthcheck) args=(healthcheck "$2" "$CNAME") ;;
    rm) args=(rm -f "$CNAME") ;;
    exec|logs|stop|start) args=("$1" "$CNAME"); shift 2; args+=("$@") ;;
    *) args=("$@") ;;
  esac
  command podman --runtime runc "${args[@]}"
}
trap stop_serve EXIT
`)
	blocks := shBlocks(t, string(doc))
	if len(blocks) < 8 {
		t.Fatalf("docs/operations.md has %d sh blocks", len(blocks))
	}
	for _, block := range blocks {
		text := strings.Join(block, "\n")
		script.WriteString("echo '+ " + strings.ReplaceAll(strings.ReplaceAll(text, "'", `'\''`), "\n", "\n+ ") + "'\n")
		script.WriteString(subst.Replace(text) + "\n")
		script.WriteString("echo\n")
	}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Minute)
	defer cancel()
	c := exec.CommandContext(ctx, "bash", "-c", script.String())
	c.Dir = root
	c.Env = append(cleanEnv(), "BIN="+bin, "PORT="+port, "TMP="+tmp, "IMAGE="+image, "CNAME="+cname, "VNAME="+vname,
		"PGBASE="+pgBase, "SOURCE="+sourceName, "RESTORED="+restored)
	start := time.Now()
	out, err := c.CombinedOutput()
	if err != nil {
		serveErr, _ := os.ReadFile(filepath.Join(tmp, "serve.err"))
		t.Fatalf("the operations walkthrough failed: %v\n%s\n--- serve log:\n%s", err, out, serveErr)
	}
	t.Logf("the operations walkthrough took %s", time.Since(start).Round(time.Second))
	if os.Getenv("CADUCEUS_TEST_SHOW") != "" {
		t.Log(string(out))
	}
	for _, want := range []string{": OK", "schema 500_console", "cad_", "ok: http://127.0.0.1:" + port + "/healthz answered 200 OK",
		"wrote backup of", "restored ", "the store it replaced is kept at", "ok: verified", `"msg":"request"`,
		`"msg":"config reloaded"`, "caduceus: reload refused: config "} {
		if !strings.Contains(string(out), want) {
			t.Errorf("the walkthrough's output lacks %q:\n%s", want, out)
		}
	}
}
