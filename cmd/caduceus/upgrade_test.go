package main

import (
	"bytes"
	"database/sql"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"github.com/caduceus-dev/caduceus/store/storetest"
)

// fixtureFacts is what make-fixture.sh recorded about the store the old
// release wrote.
type fixtureFacts struct {
	Release      string `json:"release"`
	AdminKey     string `json:"admin_key"`
	RouteKey     string `json:"route_key"`
	AuditRecords int64  `json:"audit_records"`
	DecisionID   string `json:"decision_id"`
}

// migrations are a SQLite store's schema_migrations rows: name -> applied_at.
func migrations(t *testing.T, file string) map[string]int64 {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+file+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rows, err := db.Query(`SELECT name, applied_at FROM schema_migrations`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[string]int64{}
	for rows.Next() {
		var n string
		var at int64
		if err := rows.Scan(&n, &at); err != nil {
			t.Fatal(err)
		}
		out[n] = at
	}
	return out
}

// TestUpgradeFromOldRelease opens, with today's binary, the SQLite data
// directory release ea292f4 wrote (testdata/upgrade, made by its
// make-fixture.sh with that release's binary): the migrations it lacks run
// forward, once, and its own are not run again; its keys still
// authenticate, its trader decision is still there, and every audit chain
// verifies, the old records and the new ones after them.
func TestUpgradeFromOldRelease(t *testing.T) {
	data := t.TempDir()
	file := filepath.Join(data, "caduceus.db")
	if err := copyFile(filepath.Join("testdata", "upgrade", "ea292f4", "caduceus.db"), file); err != nil {
		t.Fatal(err)
	}
	testUpgrade(t, "facts.json", func() map[string]int64 { return migrations(t, file) }, "--data", data)
}

// TestUpgradeFromOldReleasePostgres is TestUpgradeFromOldRelease on the
// Postgres schema release ea292f4 wrote (its pg_dump, postgres.sql),
// restored into a new database.
func TestUpgradeFromOldReleasePostgres(t *testing.T) {
	dsn := os.Getenv(storetest.EnvPostgres)
	if dsn == "" {
		t.Skip("CADUCEUS_TEST_POSTGRES not set; .ci/run sets it")
	}
	db := freshDatabase(t, dsn)
	if out, err := exec.Command("psql", "-q", "-v", "ON_ERROR_STOP=1", "-f", filepath.Join("testdata", "upgrade", "ea292f4", "postgres.sql"), db).CombinedOutput(); err != nil {
		t.Fatalf("psql -f postgres.sql: %v\n%s", err, out)
	}
	u, _ := url.Parse(db)
	q := u.Query()
	q.Set("search_path", "caduceus_ea292f4")
	u.RawQuery = q.Encode()
	pg := u.String()
	testUpgrade(t, "postgres-facts.json", func() map[string]int64 {
		conn, err := sql.Open("pgx", pg)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		rows, err := conn.Query(`SELECT name, applied_at FROM schema_migrations`)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		out := map[string]int64{}
		for rows.Next() {
			var n string
			var at int64
			if err := rows.Scan(&n, &at); err != nil {
				t.Fatal(err)
			}
			out[n] = at
		}
		return out
	}, "--store", pg, "--data", t.TempDir()) // the data directory holds serve's audit signing key
}

// testUpgrade starts today's serve on the store of an old release (store
// names it; facts is what make-fixture.sh recorded about it; migrations
// reads its schema_migrations) and checks it the same way on either store.
func testUpgrade(t *testing.T, facts string, migrations func() map[string]int64, store ...string) {
	var f fixtureFacts
	b, err := os.ReadFile(filepath.Join("testdata", "upgrade", "ea292f4", facts))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &f); err != nil {
		t.Fatal(err)
	}
	old := migrations()
	if len(old) == 0 || len(old) >= len(released) {
		t.Fatalf("the fixture's migrations: %v", old)
	}

	p := startProc(t, nil, append([]string{"--gates", "trader"}, store...)...)
	if strings.Contains(p.stdout.String(), "no admin key existed") {
		t.Error("serve made a new admin key: the old one was not found")
	}
	get := func(key, path string) (int, string) {
		req, _ := http.NewRequest("GET", p.url+path, nil)
		req.Header.Set("Authorization", "Bearer "+key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	if code, body := get(f.AdminKey, "/v1/admin/keys"); code != 200 || !strings.Contains(body, f.AdminKey[4:20]) {
		t.Errorf("the old admin key lists keys: %d %s", code, body)
	}
	if code, body := get(f.RouteKey, "/v1/trader/strategies"); code != 200 {
		t.Errorf("the old route key reads strategies: %d %s", code, body)
	}
	if code, body := get(f.AdminKey, "/v1/trader/decisions/"+f.DecisionID); code != 200 || !strings.Contains(body, f.DecisionID) {
		t.Errorf("the old decision: %d %s", code, body)
	}
	p.stop(t)

	after := migrations()
	for name, at := range old {
		if after[name] != at {
			t.Errorf("migration %s, applied by %s, was applied again (applied_at %d, then %d)", name, f.Release, at, after[name])
		}
	}
	for _, want := range released {
		if _, ok := after[want]; !ok {
			t.Errorf("migration %s did not run on the upgraded store (it holds %v)", want, after)
		}
	}
	code, stdout, stderr := runCaduceus(t, nil, append([]string{"audit", "verify"}, store...)...)
	var n int64
	if m := regexp.MustCompile(`ok: verified (\d+) records`).FindStringSubmatch(stdout); m != nil {
		n = atoi64(m[1])
	}
	if code != 0 || n < f.AuditRecords+3 {
		t.Errorf("audit verify after the upgrade: exit %d, %d records (the old release left %d, and 3 requests followed): %s %s",
			code, n, f.AuditRecords, stdout, stderr)
	}
	// Keys gained an account (040_key_account): the old keys have none, and
	// a key bound to one is created and listed on the upgraded store.
	if code, stdout, stderr := runCaduceus(t, nil, append([]string{"keys", "create", "--tenant", "slot-1", "--scopes", "operate", "--account", "777000222"}, store...)...); code != 0 || !strings.HasPrefix(stdout, "cad_") {
		t.Errorf("keys create --account on the upgraded store: exit %d %s %s", code, stdout, stderr)
	}
	code, stdout, stderr = runCaduceus(t, nil, append([]string{"keys", "list"}, store...)...)
	if code != 0 || strings.Count(stdout, "777000222") != 1 || !strings.Contains(stdout, "ACCOUNT") {
		t.Errorf("keys list on the upgraded store: exit %d %s %s", code, stdout, stderr)
	}
	// A second start migrates nothing.
	startProc(t, nil, append([]string{"--gates", "trader"}, store...)...).stop(t)
	if again := migrations(); !reflect.DeepEqual(again, after) {
		t.Errorf("a second start changed schema_migrations: %v, then %v", after, again)
	}
}

// released are the migrations today's binary knows that a store must hold
// after an upgrade (store/migrate_test.go keeps their names).
var released = []string{
	"000_core", "010_key_changes", "020_key_grants", "030_audit_conversations",
	"100_trader", "200_executor", "210_executor_broker_version",
	"300_shim", "310_shim_memory", "320_shim_spend", "330_shim_spend_leases", "340_shim_receipts_ledger",
	"400_relay", "500_console",
	"040_key_account", "220_executor_tick_refs",
}

func atoi64(s string) int64 {
	var n int64
	for _, c := range s {
		n = n*10 + int64(c-'0')
	}
	return n
}

// TestNewerSchemaIsRefused: a store holding a migration this binary does
// not know (a newer release wrote it) is refused by serve and by every
// command that opens it, with one line naming the store's schema and this
// binary's, and is left as it was.
func TestNewerSchemaIsRefused(t *testing.T) {
	data := t.TempDir()
	if code, _, stderr := cli(t, "keys", "create", "--data", data, "--tenant", "slot-1", "--scopes", "admin"); code != 0 {
		t.Fatal(stderr)
	}
	file := filepath.Join(data, "caduceus.db")
	db, err := sql.Open("sqlite", file)
	if err != nil {
		t.Fatal(err)
	}
	mustExec(t, db, `INSERT INTO schema_migrations (name, applied_at) VALUES ('990_from_a_newer_release', 1)`)
	db.Close()
	before := migrations(t, file)
	for _, args := range [][]string{
		{"serve", "--addr", "127.0.0.1:0", "--data", data},
		{"audit", "verify", "--data", data},
		{"keys", "list", "--data", data},
	} {
		code, _, stderr := runCaduceus(t, nil, args...)
		line := strings.TrimSpace(stderr)
		if code != 1 || strings.Contains(line, "\n") || !strings.Contains(line, "990_from_a_newer_release") ||
			!strings.Contains(line, "500_console") || !strings.Contains(line, "newer than") {
			t.Errorf("%v on a newer schema: exit %d, want 1 and one line naming both schemas: %q", args[0], code, stderr)
		}
	}
	if after := migrations(t, file); !reflect.DeepEqual(after, before) {
		t.Errorf("the refused store changed: %v, then %v", before, after)
	}
}

// TestTwoProcessesMigrateOnePostgresSchema: two processes opening a new
// Postgres schema at once both succeed, and every migration is applied
// once (the advisory lock serializes them).
func TestTwoProcessesMigrateOnePostgresSchema(t *testing.T) {
	dsn := os.Getenv(storetest.EnvPostgres)
	if dsn == "" {
		t.Skip("CADUCEUS_TEST_POSTGRES not set; .ci/run sets it")
	}
	pg := storetest.FreshSchema(t, dsn)
	var cmds [2]*strings.Builder
	var procs [2]interface{ Wait() error }
	for i := range 2 {
		c := caduceusCmd(t, nil, "keys", "create", "--store", pg, "--tenant", "slot-1", "--scopes", "route")
		cmds[i] = &strings.Builder{}
		c.Stdout, c.Stderr = cmds[i], cmds[i]
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		procs[i] = c
	}
	for i, c := range procs {
		if err := c.Wait(); err != nil {
			t.Errorf("process %d: %v: %s", i, err, cmds[i])
		}
	}
	db, err := sql.Open("pgx", pg)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var rows, distinct int
	if err := db.QueryRow(`SELECT COUNT(*), COUNT(DISTINCT name) FROM schema_migrations`).Scan(&rows, &distinct); err != nil {
		t.Fatal(err)
	}
	if rows != distinct || rows < len(released) {
		t.Errorf("schema_migrations after two processes: %d rows, %d names, want %d each", rows, distinct, len(released))
	}
	var keys int
	db.QueryRow(`SELECT COUNT(*) FROM api_keys`).Scan(&keys)
	if keys != 2 {
		t.Errorf("%d keys, want 2", keys)
	}
}

// TestBackupOfAnOlderStoreRunsNoMigration: today's binary backs up the
// store release ea292f4 wrote (as before an upgrade, while the old serve
// may still run it) without migrating it; restoring that backup brings the
// copy forward and verifies it.
func TestBackupOfAnOlderStoreRunsNoMigration(t *testing.T) {
	data := t.TempDir()
	file := filepath.Join(data, "caduceus.db")
	if err := copyFile(filepath.Join("testdata", "upgrade", "ea292f4", "caduceus.db"), file); err != nil {
		t.Fatal(err)
	}
	before := migrations(t, file)
	out := filepath.Join(t.TempDir(), "before-upgrade.db")
	if code, stdout, stderr := cli(t, "backup", "--data", data, "--out", out); code != 0 {
		t.Fatalf("backup: %d %s %s", code, stdout, stderr)
	}
	if after := migrations(t, file); !reflect.DeepEqual(after, before) {
		t.Errorf("backup migrated the store: %v, then %v", before, after)
	}
	if got := migrations(t, out); !reflect.DeepEqual(got, before) {
		t.Errorf("the backup's migrations: %v, want the store's %v", got, before)
	}
	fresh := filepath.Join(t.TempDir(), "data")
	code, stdout, stderr := cli(t, "restore", "--data", fresh, "--from", out)
	if code != 0 || !strings.Contains(stdout, "verified 5 audit records") {
		t.Fatalf("restore of the old backup: %d %s %s", code, stdout, stderr)
	}
	got := migrations(t, filepath.Join(fresh, "caduceus.db"))
	for _, want := range released {
		if _, ok := got[want]; !ok {
			t.Errorf("the restored store lacks migration %s: %v", want, got)
		}
	}
}

// TestBackupOfASynchronousFullStore: a store named with parameters
// (sqlite:PATH?synchronous=full) is backed up from PATH, and keys made
// through that name are in the backup.
func TestBackupOfASynchronousFullStore(t *testing.T) {
	file := filepath.Join(t.TempDir(), "c.db")
	name := "sqlite:" + file + "?synchronous=full"
	if code, stdout, stderr := cli(t, "keys", "create", "--store", name, "--tenant", "slot-1", "--scopes", "route"); code != 0 {
		t.Fatalf("keys create: %d %s %s", code, stdout, stderr)
	}
	if _, err := os.Stat(file); err != nil {
		t.Fatalf("the store is not at its path: %v", err)
	}
	out := filepath.Join(t.TempDir(), "backup.db")
	if code, stdout, stderr := cli(t, "backup", "--store", name, "--out", out); code != 0 {
		t.Fatalf("backup: %d %s %s", code, stdout, stderr)
	}
	code, stdout, stderr := cli(t, "keys", "list", "--store", "sqlite:"+out)
	if code != 0 || !strings.Contains(stdout, "slot-1") {
		t.Fatalf("the backup's keys: %d %s %s", code, stdout, stderr)
	}
}

// TestSQLiteStoreNames: in a config file, sqlite:PATH?synchronous=full
// resolves PATH from the file's directory and keeps the parameter, and
// sqlite:?synchronous=full stays the data directory's file; serve refuses
// a parameter the store does not take before it makes anything; backup
// and restore handle a file whose path holds '?' and '='.
func TestSQLiteStoreNames(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "caduceus.yaml")
	os.WriteFile(cfg, []byte("store: sqlite:rel/c.db?synchronous=full\n"), 0o600)
	if code, out, errOut := cli(t, "keys", "create", "--config", cfg, "--tenant", "slot-1", "--scopes", "route"); code != 0 {
		t.Fatalf("keys create: %d %s %s", code, out, errOut)
	}
	if _, err := os.Stat(filepath.Join(dir, "rel", "c.db")); err != nil {
		t.Errorf("the store is not beside the config file: %v", err)
	}
	data := filepath.Join(dir, "data")
	os.WriteFile(cfg, []byte("store: sqlite:?synchronous=full\ndata: data\n"), 0o600)
	if code, out, errOut := cli(t, "keys", "create", "--config", cfg, "--tenant", "slot-1", "--scopes", "route"); code != 0 {
		t.Fatalf("keys create in the data directory: %d %s %s", code, out, errOut)
	}
	if _, err := os.Stat(filepath.Join(data, "caduceus.db")); err != nil {
		t.Errorf("sqlite:?synchronous=full in a config file is not the data directory's file: %v", err)
	}

	empty := t.TempDir()
	var out, errb bytes.Buffer
	code := run(t.Context(), []string{"serve", "--addr", "127.0.0.1:0", "--data", empty, "--store", "sqlite:?synchronous=off"},
		func(string) string { return "" }, strings.NewReader(""), &out, &errb)
	if code != 2 || !strings.Contains(errb.String(), `synchronous="off"`) {
		t.Errorf("serve with synchronous=off: exit %d, stderr %q (want 2 naming the value)", code, errb.String())
	}
	if entries, _ := os.ReadDir(empty); len(entries) != 0 {
		t.Errorf("a refused store name left %d files in the data directory", len(entries))
	}

	odd := filepath.Join(t.TempDir(), "a?b=c")
	if code, out, errOut := cli(t, "keys", "create", "--data", odd, "--tenant", "slot-1", "--scopes", "route"); code != 0 {
		t.Fatalf("keys create in %s: %d %s %s", odd, code, out, errOut)
	}
	backup := filepath.Join(t.TempDir(), "x?y=z.db")
	if code, out, errOut := cli(t, "backup", "--data", odd, "--out", backup); code != 0 {
		t.Fatalf("backup to %s: %d %s %s", backup, code, out, errOut)
	}
	fresh := filepath.Join(t.TempDir(), "restored?into=here")
	if code, out, errOut := cli(t, "restore", "--data", fresh, "--from", backup); code != 0 || !strings.Contains(out, "verified") {
		t.Fatalf("restore from %s: %d %s %s", backup, code, out, errOut)
	}
}
