package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/caduceus-dev/caduceus/executor/executorgate"
	"github.com/caduceus-dev/caduceus/shim/shimserve"
)

// TestConfigSectionsAreStrict: a gate's section is decoded strictly into
// its module's type, and a top-level key no module claims is refused;
// either exits 2 naming the key, before the store exists.
func TestConfigSectionsAreStrict(t *testing.T) {
	for name, tc := range map[string]struct{ file, want string }{
		"unknown key in a section":  {"shim:\n  offline: true\n  ofline: false\n", "line 3: field ofline not found in type shimserve.Section"},
		"unknown section":           {"trader: {}\n", `unknown setting "trader"`},
		"section of the wrong type": {"executor: [1, 2]\n", "line 1: cannot unmarshal !!seq into executorgate.Section"},
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			file := filepath.Join(dir, "caduceus.yaml")
			if err := os.WriteFile(file, []byte(tc.file), 0o600); err != nil {
				t.Fatal(err)
			}
			data := filepath.Join(dir, "data")
			var stderr bytes.Buffer
			code := run(context.Background(), []string{"serve", "--config", file, "--data", data}, func(string) string { return "" }, strings.NewReader(""), &bytes.Buffer{}, &stderr)
			if code != 2 || !strings.Contains(stderr.String(), tc.want) {
				t.Fatalf("exit %d, stderr %q; want 2 naming %q", code, stderr.String(), tc.want)
			}
			if _, err := os.Stat(data); !os.IsNotExist(err) {
				t.Fatalf("a refused config made the data directory: %v", err)
			}
		})
	}
}

// TestConfigSectionsLayer: a section's settings layer file < environment <
// flags, as the module declares them; a path from the file resolves from
// the file's directory.
func TestConfigSectionsLayer(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "caduceus.yaml")
	if err := os.WriteFile(file, []byte("executor:\n  broker: paper\n  scenario: paper.yaml\n  skills: sk\nshim:\n  offline: false\n  upstreams: {openai: 'https://file.example'}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	load := func(env map[string]string, args ...string) *app {
		t.Helper()
		a := &app{env: env_(env)}
		cmd := a.serveCmd()
		if err := cmd.ParseFlags(args); err != nil {
			t.Fatal(err)
		}
		a.configFile = file
		if err := a.loadConfig(cmd); err != nil {
			t.Fatal(err)
		}
		return a
	}
	ex := func(a *app) *executorgate.Section { return a.sections().Of("executor").(*executorgate.Section) }
	sh := func(a *app) *shimserve.Section { return a.sections().Of("shim").(*shimserve.Section) }

	a := load(nil)
	if got := ex(a); got.Broker != "paper" || got.Scenario != filepath.Join(dir, "paper.yaml") || got.Skills != filepath.Join(dir, "sk") {
		t.Fatalf("from the file: %+v", got)
	}
	a = load(map[string]string{"CADUCEUS_BROKER": "robinhood", "CADUCEUS_SCENARIO": "rel.yaml"})
	if got := ex(a); got.Broker != "robinhood" || got.Scenario != "rel.yaml" {
		t.Fatalf("the environment over the file: %+v", got)
	}
	a = load(map[string]string{"CADUCEUS_BROKER": "robinhood"}, "--broker", "paper", "--offline", "--upstream", "openai=https://flag.example", "--upstream", "anthropic=https://a.example")
	if got := ex(a); got.Broker != "paper" {
		t.Fatalf("the flag over the environment: %+v", got)
	}
	if got := sh(a); !got.Offline || got.Upstreams["openai"] != "https://flag.example" || got.Upstreams["anthropic"] != "https://a.example" {
		t.Fatalf("the shim's flags over the file: %+v", got)
	}

	// A flag value its module refuses exits 2 naming it.
	a = &app{env: env_(nil)}
	cmd := a.serveCmd()
	if err := cmd.ParseFlags([]string{"--upstream", "openai"}); err != nil {
		t.Fatal(err)
	}
	a.configFile = file
	if err := a.loadConfig(cmd); err == nil || !strings.Contains(err.Error(), `--upstream "openai": want NAME=URL`) {
		t.Fatalf("a bad --upstream: %v", err)
	}
}

// env_ is an environment of the map's variables alone.
func env_(vars map[string]string) env {
	return env{getenv: func(k string) string { return vars[k] }, stdin: strings.NewReader(""), stdout: &bytes.Buffer{}, stderr: &bytes.Buffer{}}
}
