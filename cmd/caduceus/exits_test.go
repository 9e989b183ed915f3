package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCLIExits: an unknown subcommand, a bad flag or a wrong argument count
// exits 2 with one line on stderr and nothing on stdout.
func TestCLIExits(t *testing.T) {
	cases := [][]string{
		{"keys", "foo"},
		{"frobnicate"},
		{"shim", "provisions", "dry-run", "x.json"},
		{"shim", "provisions", "sync"},
		{"trader", "imprt", "strategies.yaml"},
		{"audit", "verify", "extra"},
		{"keys", "list", "--bogus"},
		{"keys", "create", "--scopes", "route"},
		{"keys", "revoke"},
		{"shim", "dry-run", "--protocol", "chat", "does-not-exist.json"},
		{"exec", "--payload", "does-not-exist.json", "--skills", ".", "--data", t.TempDir()},
	}
	for _, args := range cases {
		code, out, errOut := cli(t, args...)
		if code != 2 || out != "" || strings.Count(errOut, "\n") != 1 || !strings.HasPrefix(errOut, "caduceus: ") {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want exit 2 and one line", args, code, out, errOut)
		}
	}
	// A group with no subcommand shows its help and succeeds.
	if code, out, _ := cli(t, "keys"); code != 0 || !strings.Contains(out, "create") {
		t.Errorf("keys alone: %d %s", code, out)
	}
}

// TestReadOnlyCommandsCreateNothing: commands that read (or change what must
// exist) never create a data directory or a store; --data naming nothing
// exits 2 naming it. keys create and serve may create them.
func TestReadOnlyCommandsCreateNothing(t *testing.T) {
	base := t.TempDir()
	missing := filepath.Join(base, "typo")
	empty := filepath.Join(base, "empty")
	os.Mkdir(empty, 0o700)
	for _, dir := range []string{missing, filepath.Join(base, "nonexistent", "x"), empty} {
		for _, args := range [][]string{
			{"audit", "verify"}, {"audit", "tail"}, {"keys", "list"}, {"keys", "revoke", "3f9a0c1d2e4b5a67"},
			{"trader", "history"}, {"shim", "dry-run", "--protocol", "chat", ex("shim/chat-refund.json")}, {"console", "--all-tenants"},
		} {
			args = append(args, "--data", dir)
			code, out, errOut := cli(t, args...)
			if code != 2 || out != "" || !strings.Contains(errOut, dir) {
				t.Errorf("%v: exit %d, stdout %q, stderr %q; want exit 2 naming %s", args, code, out, errOut, dir)
			}
		}
	}
	if _, err := os.Stat(missing); !os.IsNotExist(err) {
		t.Errorf("%s was created", missing)
	}
	if _, err := os.Stat(filepath.Join(base, "nonexistent")); !os.IsNotExist(err) {
		t.Error("nonexistent/x was created")
	}
	if entries, _ := os.ReadDir(empty); len(entries) != 0 {
		t.Errorf("a store was created in %s: %v", empty, entries)
	}
	// keys create makes the directory and the store; then the readers work.
	if code, _, errOut := cli(t, "keys", "create", "--data", missing, "--tenant", "slot-1", "--scopes", "route"); code != 0 {
		t.Fatal(errOut)
	}
	if code, out, errOut := cli(t, "audit", "verify", "--data", missing); code != 0 || !strings.HasPrefix(out, "ok:") {
		t.Errorf("verify after keys create: %d %s %s", code, out, errOut)
	}
}

// TestServeValidatesConfigFirst: a bad config exits 2 naming the setting
// before the store is touched (no data directory is made).
func TestServeValidatesConfigFirst(t *testing.T) {
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	bad := map[string]string{
		"executor:\n  scenario: ./paper.yaml\n":                                        "executor.scenario",
		"executor:\n  skills: ./hermes\n":                                              "executor.skills",
		"executor:\n  broker: casino\n":                                                "executor.broker",
		"shim:\n  upstreams: {openai: ftp://x}\n":                                      "upstream openai",
		"relay:\n  gateways: {gw: {tenant: slot-1, secrets: [\"env:NOPE_SECRET\"]}}\n": "NOPE_SECRET",
		"shim:\n  isolation: user\n":                                                   "shim.isolation",
		"shim:\n  attempt_timeout: soon\n":                                             "shim.attempt_timeout",
		"shim:\n  upstreams: {openai: http://x}\n  routes: {r: {kind: openai, base_url: http://x, models: [m]}}\n  plans: {p: {failover: none, models: {m: [{route: r}]}}}\n  prices: {openai/m: {input: 1, output: 1, max_output_tokens: 10}}\n":                                    "exclude each other",
		"shim:\n  routes: {r: {kind: openai, base_url: http://x, models: [m]}, s: {kind: openai, base_url: http://y, models: [m]}}\n  plans: {p: {failover: definite, models: {m: [{route: r}, {route: s}]}}}\n  prices: {openai/m: {input: 1, output: 1, max_output_tokens: 10}}\n": "plans.p.models.m[1]: openai/m is already reached through route \"r\"",
		"shim:\n  routes: {r: {kind: openai, base_url: http://x, models: [m]}}\n  plans: {p: {failover: none, models: {m: [{route: r}]}}}\n":                                                                                                                                         "openai/m has no price",
	}
	for body, want := range bad {
		cfg := filepath.Join(dir, "caduceus.yaml")
		os.WriteFile(cfg, []byte(body), 0o600)
		code, _, errOut := cli(t, "serve", "--config", cfg, "--data", data, "--addr", "127.0.0.1:0")
		if code != 2 || !strings.Contains(errOut, want) {
			t.Errorf("%q: exit %d, %s; want 2 naming %s", body, code, errOut, want)
		}
		if _, err := os.Stat(data); !os.IsNotExist(err) {
			t.Fatalf("%q: the data directory was created before the config was checked", body)
		}
	}
}

// TestStartupLog: the log says which gates are served (relay and executor
// only when configured), offline mode, and warns about an upstream without
// a key.
func TestStartupLog(t *testing.T) {
	in := start(t, "--upstream", "openai=http://127.0.0.1:9/v1")
	logs := in.stderr.String()
	for _, want := range []string{`gates="[trader shim]"`, "relay gate not served", "executor gate: not configured", "store=sqlite",
		"level=WARN msg=\"shim upstream has no key", "set=CADUCEUS_OPENAI_API_KEY"} {
		if !strings.Contains(logs, want) {
			t.Errorf("startup log lacks %q:\n%s", want, logs)
		}
	}
	off := start(t, "--offline", "--gates", "shim")
	if logs := off.stderr.String(); !strings.Contains(logs, "shim offline") || !strings.Contains(logs, `gates=[shim]`) {
		t.Errorf("offline startup log:\n%s", logs)
	}
}

// TestExecHelpExampleRuns: the first example of `exec --help` runs as
// written from the repository root.
func TestExecHelpExampleRuns(t *testing.T) {
	a := &app{env: env{getenv: noEnv}}
	var example string
	for _, c := range a.rootCmd().Commands() {
		if c.Name() == "exec" {
			example = strings.TrimSpace(strings.SplitN(c.Example, "\n", 2)[0])
		}
	}
	args := strings.Fields(strings.TrimPrefix(example, "caduceus "))
	for i, arg := range args {
		if strings.HasPrefix(arg, "examples/") {
			args[i] = filepath.Join("..", "..", arg)
		}
	}
	args = append(args, "--data", t.TempDir())
	code, out, errOut := cli(t, args...)
	if code != 0 || !strings.Contains(out, `"actions"`) {
		t.Errorf("exec --help example %q: exit %d\n%s\n%s", example, code, out, errOut)
	}
}
