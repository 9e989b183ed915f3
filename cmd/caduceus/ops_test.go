package main

import (
	"bytes"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	_ "modernc.org/sqlite"

	"github.com/caduceus-dev/caduceus/store/storetest"
)

// proc is a caduceus process: this test binary acting as the binary
// (envAsMain), so the code under test runs as operators run it, in a
// process of its own.
type proc struct {
	cmd            *exec.Cmd
	url, adminKey  string
	stdout, stderr *syncBuffer
	done           chan int
}

// caduceusCmd is a command line of the binary under test.
func caduceusCmd(t testing.TB, env []string, args ...string) *exec.Cmd {
	t.Helper()
	bin, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	c := exec.Command(bin, args...)
	c.Env = append(cleanEnv(), envAsMain+"=1")
	c.Env = append(c.Env, env...)
	return c
}

// cleanEnv is the test's environment without any CADUCEUS_ setting.
func cleanEnv() []string {
	var out []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "CADUCEUS_") {
			out = append(out, kv)
		}
	}
	return out
}

// runCaduceus runs one command of the binary to its end.
func runCaduceus(t *testing.T, env []string, args ...string) (int, string, string) {
	t.Helper()
	c := caduceusCmd(t, env, args...)
	var out, errb bytes.Buffer
	c.Stdout, c.Stderr = &out, &errb
	err := c.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return code, out.String(), errb.String()
}

// startProc starts `caduceus serve` in a process of its own on a free port
// and waits until it listens; it is stopped (SIGTERM) when the test ends.
func startProc(t testing.TB, env []string, args ...string) *proc {
	t.Helper()
	p := &proc{stdout: &syncBuffer{}, stderr: &syncBuffer{}, done: make(chan int, 1)}
	p.cmd = caduceusCmd(t, env, append([]string{"serve", "--addr", "127.0.0.1:0"}, args...)...)
	p.cmd.Stdout, p.cmd.Stderr = p.stdout, p.stderr
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan int, 1)
	go func() {
		p.cmd.Wait()
		code := p.cmd.ProcessState.ExitCode()
		p.done <- code
		exited <- code
	}()
	t.Cleanup(func() { p.stop(t) })
	p.url = p.stderr.await(t, listenAnyRE, exited)[1]
	return p
}

// awaitKey is the admin key a first start prints (on stdout, which may
// arrive after stderr's "listening").
func (p *proc) awaitKey(t testing.TB) string {
	t.Helper()
	p.adminKey = p.stdout.await(t, keyRE, nil)[1]
	return p.adminKey
}

// listenAnyRE finds the address serve listens on in a text or JSON log.
var listenAnyRE = regexp.MustCompile(`(?:listening on |"msg":"listening","addr":")(http://[^\s"]+)`)

// stop sends SIGTERM and waits for the process to end (once).
func (p *proc) stop(t testing.TB) {
	t.Helper()
	select {
	case code := <-p.done:
		p.done <- code
		return
	default:
	}
	p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case code := <-p.done:
		p.done <- code
	case <-time.After(30 * time.Second):
		p.cmd.Process.Kill()
		t.Error("serve did not stop within 30 s of SIGTERM")
	}
}

// createKey makes a route key for slot-1 through the API and returns its id.
func createKey(client *http.Client, url, admin string) (string, error) {
	req, _ := http.NewRequest("POST", url+"/v1/admin/keys", strings.NewReader(`{"tenant":"slot-1","scopes":["route"]}`))
	req.Header.Set("Authorization", "Bearer "+admin)
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	var out struct {
		ID string `json:"id"`
	}
	if resp.StatusCode != http.StatusCreated {
		return "", &httpStatusError{resp.StatusCode}
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		return "", err
	}
	return out.ID, nil
}

type httpStatusError struct{ code int }

func (e *httpStatusError) Error() string { return http.StatusText(e.code) }

// keyIDs are the ids of the keys in the SQLite store file.
func keyIDs(t *testing.T, file string) map[string]bool {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+file+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rows, err := db.Query(`SELECT id FROM api_keys`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	ids := map[string]bool{}
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			t.Fatal(err)
		}
		ids[id] = true
	}
	return ids
}

// TestBackupUnderLoadAndRestore: 8 clients create keys (each a write and an
// audit record) against a serve process; `caduceus backup` copies the store
// meanwhile; restore refuses the store serve has open and changes nothing;
// once serve has stopped, restore replaces the store with the backup,
// verifying its audit chains, and the restored store holds every key
// acknowledged before the backup began.
func TestBackupUnderLoadAndRestore(t *testing.T) {
	data := t.TempDir()
	p := startProc(t, nil, "--data", data, "--gates", "trader")
	p.awaitKey(t)

	var mu sync.Mutex
	var acked []string
	var loadErr error
	stop := make(chan struct{})
	// loaded is closed once 300 keys are acknowledged, or a client failed.
	loaded := make(chan struct{})
	isLoaded := sync.OnceFunc(func() { close(loaded) })
	var wg sync.WaitGroup
	client := &http.Client{Timeout: 30 * time.Second}
	for range 8 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				id, err := createKey(client, p.url, p.adminKey)
				mu.Lock()
				if err != nil && loadErr == nil {
					loadErr = err
				}
				if err == nil {
					acked = append(acked, id)
				}
				if err != nil || len(acked) >= 300 {
					isLoaded()
				}
				mu.Unlock()
				if err != nil {
					return
				}
			}
		})
	}
	count := func() int { mu.Lock(); defer mu.Unlock(); return len(acked) }
	<-loaded
	mu.Lock()
	before, err := append([]string(nil), acked...), loadErr
	mu.Unlock()
	if err != nil {
		t.Fatalf("load: %v", err)
	}
	out := filepath.Join(t.TempDir(), "backup.db")
	start := time.Now()
	code, stdout, stderr := runCaduceus(t, nil, "backup", "--data", data, "--out", out)
	took := time.Since(start)
	if code != 0 {
		t.Fatalf("backup under load: exit %d: %s %s", code, stdout, stderr)
	}
	during := count() - len(before)
	if !strings.Contains(stdout, "wrote backup of") {
		t.Errorf("backup output: %q", stdout)
	}
	// The same file again is refused, and left as it was.
	st1, _ := os.Stat(out)
	if code, _, stderr := runCaduceus(t, nil, "backup", "--data", data, "--out", out); code != 1 || !strings.Contains(stderr, "already exists") {
		t.Errorf("backup over an existing file: exit %d: %s", code, stderr)
	}
	if st2, _ := os.Stat(out); st2.Size() != st1.Size() || !st2.ModTime().Equal(st1.ModTime()) {
		t.Error("the refused backup changed the existing file")
	}

	// Restore refuses while serve has the store open, and changes nothing.
	dbFile := filepath.Join(data, "caduceus.db")
	inode := func() uint64 {
		st, err := os.Stat(dbFile)
		if err != nil {
			t.Fatal(err)
		}
		return st.Sys().(*syscall.Stat_t).Ino
	}
	ino := inode()
	code, _, stderr = runCaduceus(t, nil, "restore", "--data", data, "--from", out)
	if code != 1 || !strings.Contains(stderr, "is in use") || !strings.Contains(stderr, "nothing was changed") || strings.Count(strings.TrimSpace(stderr), "\n") != 0 {
		t.Errorf("restore onto a live store: exit %d: %q", code, stderr)
	}
	if inode() != ino {
		t.Error("the refused restore replaced the live store")
	}
	if m, _ := filepath.Glob(filepath.Join(data, "caduceus.db.*restor*")); len(m) != 0 {
		t.Errorf("the refused restore left files: %v", m)
	}

	close(stop)
	wg.Wait()
	if loadErr != nil {
		t.Fatalf("load: %v", loadErr)
	}
	total := count()
	p.stop(t)
	t.Logf("backup of a store under load from 8 clients: %s, %d keys acknowledged before it began, %d during it, %d in all",
		took.Round(time.Millisecond), len(before), during, total)

	code, stdout, stderr = runCaduceus(t, nil, "restore", "--data", data, "--from", out)
	if code != 0 {
		t.Fatalf("restore after serve stopped: exit %d: %s %s", code, stdout, stderr)
	}
	if !regexp.MustCompile(`verified \d+ audit records in \d+ tenants`).MatchString(stdout) || !strings.Contains(stdout, "kept at") {
		t.Errorf("restore output: %q", stdout)
	}
	ids := keyIDs(t, dbFile)
	for _, id := range before {
		if !ids[id] {
			t.Errorf("key %s was acknowledged before the backup began but is not in the restored store", id)
		}
	}
	if len(ids) >= total+1 {
		t.Errorf("the restored store holds %d keys; serve had made %d in all: it is not the backup", len(ids), total+1)
	}
	if code, stdout, stderr := runCaduceus(t, nil, "audit", "verify", "--data", data); code != 0 || !strings.Contains(stdout, "ok: verified") {
		t.Errorf("audit verify of the restored store: exit %d: %s %s", code, stdout, stderr)
	}
	// The store it replaced is kept, whole.
	kept, _ := filepath.Glob(filepath.Join(data, "caduceus.db.before-restore-*"))
	if len(kept) == 0 {
		t.Fatal("the replaced store was not kept")
	}
	if n := len(keyIDs(t, kept[0])); n != total+1 {
		t.Errorf("the kept store holds %d keys, want %d", n, total+1)
	}
	// serve starts on the restored store and the restored keys work.
	p2 := startProc(t, nil, "--data", data, "--gates", "trader")
	if _, err := createKey(client, p2.url, p.adminKey); err != nil {
		t.Errorf("the admin key after restore: %v", err)
	}
}

// TestRestoreRefusesBadBackups: a missing file, a file that is not SQLite
// and a backup whose audit chain was altered are refused with one line
// naming what is wrong, and the store is left as it was; backup refuses a
// Postgres store, a missing store and an existing --out.
func TestRestoreRefusesBadBackups(t *testing.T) {
	dir := t.TempDir()
	in := start(t, "--gates", "trader")
	for range 3 {
		if code, _ := in.do(t, "GET", "/v1/admin/keys", in.adminKey, nil); code != 200 {
			t.Fatalf("list keys: %d", code)
		}
	}
	good := filepath.Join(dir, "good.db")
	if code, _, stderr := cli(t, "backup", "--data", in.data, "--out", good); code != 0 {
		t.Fatal(stderr)
	}
	tampered := filepath.Join(dir, "tampered.db")
	if code, _, stderr := cli(t, "backup", "--data", in.data, "--out", tampered); code != 0 {
		t.Fatal(stderr)
	}
	// The store restore is refused onto: stopped, one key, no records.
	data := filepath.Join(dir, "data")
	if code, _, stderr := cli(t, "keys", "create", "--data", data, "--tenant", "slot-1", "--scopes", "admin"); code != 0 {
		t.Fatal(stderr)
	}
	db, err := sql.Open("sqlite", tampered)
	if err != nil {
		t.Fatal(err)
	}
	mustExec(t, db, `UPDATE audit_records SET body = replace(body, 'slot-1', 'slot-9') WHERE seq = 1`)
	db.Close()
	notSQLite := filepath.Join(dir, "notes.txt")
	os.WriteFile(notSQLite, []byte("not a database, but long enough to have a header\n"), 0o600)

	file := filepath.Join(data, "caduceus.db")
	before, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		from string
		code int
		want string
	}{
		{filepath.Join(dir, "missing.db"), 2, "no such file"},
		{notSQLite, 2, "not a SQLite database"},
		{tampered, 1, "does not verify"},
	} {
		code, _, stderr := cli(t, "restore", "--data", data, "--from", c.from)
		if code != c.code || !strings.Contains(stderr, c.want) || strings.Count(strings.TrimSpace(stderr), "\n") != 0 {
			t.Errorf("restore --from %s: exit %d, want %d and one line naming %q: %q", filepath.Base(c.from), code, c.code, c.want, stderr)
		}
		after, err := os.ReadFile(file)
		if err != nil || !bytes.Equal(before, after) {
			t.Errorf("restore --from %s changed the store", filepath.Base(c.from))
		}
		if m, _ := filepath.Glob(filepath.Join(data, "caduceus.db.*restor*")); len(m) != 0 {
			t.Errorf("restore --from %s left files: %v", filepath.Base(c.from), m)
		}
	}
	// A backup restores into a new data directory (a new machine).
	fresh := filepath.Join(dir, "fresh")
	if code, stdout, stderr := cli(t, "restore", "--data", fresh, "--from", good); code != 0 || strings.Contains(stdout, "kept at") {
		t.Errorf("restore into a new data directory: exit %d: %s %s", code, stdout, stderr)
	}
	if code, stdout, _ := cli(t, "audit", "verify", "--data", fresh); code != 0 || !regexp.MustCompile(`ok: verified [1-9]\d* records`).MatchString(stdout) {
		t.Errorf("audit verify after restoring into a new directory: %d %s", code, stdout)
	}

	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"backup", "--store", "postgres://postgres@127.0.0.1:5432/test", "--out", filepath.Join(dir, "pg.db")}, 2, "pg_dump"},
		{[]string{"restore", "--store", "postgres://postgres@127.0.0.1:5432/test", "--from", good}, 2, "pg_restore"},
		{[]string{"backup", "--data", filepath.Join(dir, "none"), "--out", filepath.Join(dir, "none.db")}, 2, "does not exist"},
		{[]string{"backup", "--data", data, "--out", good}, 1, "already exists"},
		{[]string{"backup", "--data", data, "--out", filepath.Join(dir, "no", "such", "dir.db")}, 1, "does not exist"},
		{[]string{"backup", "--data", data}, 2, "out"},
		{[]string{"restore", "--data", data}, 2, "from"},
	} {
		code, _, stderr := cli(t, c.args...)
		if code != c.code || !strings.Contains(stderr, c.want) {
			t.Errorf("%v: exit %d, want %d naming %q: %q", c.args, code, c.code, c.want, stderr)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "none")); err == nil {
		t.Error("backup of a missing store made a data directory")
	}
}

// TestPostgresDumpRestoreVerifies: the pg_dump and pg_restore commands of
// docs/operations.md copy a live Postgres store (serve answering) into a
// new database, where keys and every audit record are present and the
// chains verify.
func TestPostgresDumpRestoreVerifies(t *testing.T) {
	dsn := os.Getenv(storetest.EnvPostgres)
	if dsn == "" {
		t.Skip("CADUCEUS_TEST_POSTGRES not set; .ci/run sets it")
	}
	pg := storetest.FreshSchema(t, dsn)
	schema := regexp.MustCompile(`search_path=(t_[0-9a-f]+)`).FindStringSubmatch(pg)[1]
	in := start(t, "--store", pg, "--gates", "trader")
	for range 5 {
		if _, err := createKey(http.DefaultClient, in.url, in.adminKey); err != nil {
			t.Fatal(err)
		}
	}
	dump := filepath.Join(t.TempDir(), "caduceus.dump")
	if out, err := exec.Command("pg_dump", "--format=custom", "--schema="+schema, "--file="+dump, dsn).CombinedOutput(); err != nil {
		t.Fatalf("pg_dump: %v: %s", err, out)
	}
	var n int64
	src, _ := sql.Open("pgx", pg)
	defer src.Close()
	if err := src.QueryRow(`SELECT COUNT(*) FROM audit_records`).Scan(&n); err != nil || n < 5 {
		t.Fatalf("audit records at the source: %d %v", n, err)
	}
	keysAt := func(dsn string) int {
		db, _ := sql.Open("pgx", dsn)
		defer db.Close()
		var k int
		if err := db.QueryRow(`SELECT COUNT(*) FROM api_keys`).Scan(&k); err != nil {
			t.Fatal(err)
		}
		return k
	}
	wantKeys := keysAt(pg)

	restored := freshDatabase(t, dsn)
	if out, err := exec.Command("pg_restore", "--no-owner", "--exit-on-error", "--dbname="+restored, dump).CombinedOutput(); err != nil {
		t.Fatalf("pg_restore: %v: %s", err, out)
	}
	u, _ := url.Parse(restored)
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	target := u.String()
	code, stdout, stderr := cli(t, "audit", "verify", "--store", target)
	if code != 0 || !strings.Contains(stdout, "ok: verified") {
		t.Fatalf("audit verify of the restored database: exit %d: %s %s", code, stdout, stderr)
	}
	var got int64
	fmt.Sscanf(stdout, "ok: verified %d records", &got)
	if got < n {
		t.Errorf("the restored database verified %d audit records; the source held %d before the dump", got, n)
	}
	if k := keysAt(target); k != wantKeys {
		t.Errorf("the restored database holds %d keys, the source %d", k, wantKeys)
	}
}

// freshDatabase creates a database on the server of dsn, dropped when the
// test ends, and returns dsn naming it.
func freshDatabase(t *testing.T, dsn string) string {
	t.Helper()
	var b [6]byte
	rand.Read(b[:])
	name := "r_" + hex.EncodeToString(b[:])
	admin, err := sql.Open("pgx", dsn)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := admin.Exec("CREATE DATABASE " + name); err != nil {
		admin.Close()
		t.Fatalf("create database: %v", err)
	}
	t.Cleanup(func() {
		admin.Exec("DROP DATABASE " + name + " WITH (FORCE)")
		admin.Close()
	})
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	u.Path = "/" + name
	return u.String()
}

// TestHealthCommand: `caduceus health` exits 0 when the server's /healthz
// answers 200 (by --url, or by the serve address with 0.0.0.0 probed on
// loopback), 1 with one line when nothing answers, 2 for a bad --url.
func TestHealthCommand(t *testing.T) {
	in := start(t, "--gates", "trader")
	hostport := strings.TrimPrefix(in.url, "http://")
	_, port, _ := strings.Cut(hostport, ":")
	for _, args := range [][]string{
		{"health", "--url", in.url + "/healthz"},
		{"health", "--addr", hostport},
		{"health", "--addr", "0.0.0.0:" + port},
	} {
		if code, stdout, stderr := cli(t, args...); code != 0 || !strings.Contains(stdout, "200 OK") {
			t.Errorf("%v: exit %d: %s %s", args, code, stdout, stderr)
		}
	}
	code, _, stderr := cli(t, "health", "--url", in.url+"/nothing-here")
	if code != 1 || !strings.Contains(stderr, "unhealthy") || !strings.Contains(stderr, "404") {
		t.Errorf("health of a 404: exit %d: %q", code, stderr)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := ln.Addr().String()
	ln.Close()
	code, _, stderr = cli(t, "health", "--addr", closed)
	if code != 1 || !strings.Contains(stderr, "unhealthy") || strings.Count(strings.TrimSpace(stderr), "\n") != 0 {
		t.Errorf("health of a closed port: exit %d: %q", code, stderr)
	}
	if code, _, stderr := cli(t, "health", "--url", "ftp://example"); code != 2 || !strings.Contains(stderr, "--url") {
		t.Errorf("health --url ftp: exit %d: %q", code, stderr)
	}
}
