package main

import (
	"encoding/json"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/caduceus-dev/caduceus/examples"
)

// ex is the path of an example file from this package's directory; every
// path a test reads through it is counted, so TestEveryExampleIsLoaded can
// prove no example goes untested.
func ex(name string) string {
	exampleUses.add(name)
	return filepath.Join("..", "..", "examples", filepath.FromSlash(name))
}

type useSet struct{ m map[string]bool }

func (u *useSet) add(name string) {
	if u.m == nil {
		u.m = map[string]bool{}
	}
	u.m[name] = true
}

var exampleUses useSet

func exampleEnv(k string) string { return demoEnv[k] }

// TestExamples loads every example the way the README uses it: the config
// starts serve with every gate; the bundle applies with the CLI and through
// the API; the strategies import and the decisions apply; the payload runs
// against the paper scenario; relay token works with only the gateway's
// secret. (`caduceus demo`, tested below, drives the rest through HTTP.)
func testExampleFiles(t *testing.T) {
	// The config starts serve with every gate on SQLite.
	in := startEnv(t, exampleEnv, "--config", ex("caduceus.yaml"))
	logs := in.stderr.String()
	for _, want := range []string{"gates=\"[trader executor shim relay]\"", "store=sqlite", "shim offline"} {
		if !strings.Contains(logs, want) {
			t.Errorf("startup log lacks %q:\n%s", want, logs)
		}
	}
	_, out, _ := cli(t, "keys", "create", "--data", in.data, "--tenant", "slot-1", "--scopes", "route,configure,operate", "--harness", "claude-code")
	key := strings.TrimSpace(out)
	for path, file := range map[string]string{"/v1/provisions": "shim/warranty-provision.json", "/v1/context": "shim/context-entry.json"} {
		body, err := os.ReadFile(ex(file))
		if err != nil {
			t.Fatal(err)
		}
		var v any
		if err := json.Unmarshal(body, &v); err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		if code, resp := in.do(t, "POST", path, key, v, "X-Caduceus-Harness", "claude-code"); code != http.StatusCreated {
			t.Errorf("POST %s %s: %d %v", path, file, code, resp)
		}
	}
	tick, _ := os.ReadFile(ex("executor/tick.json"))
	_, cronKey, _ := cli(t, "keys", "create", "--data", in.data, "--tenant", "slot-1", "--scopes", "operate", "--context", "cron", "--harness", "autotrader")
	if code, resp := in.do(t, "POST", "/v1/executor/ticks", strings.TrimSpace(cronKey), json.RawMessage(tick)); code != 200 || !strings.Contains(mustJSON(resp), `"status":"placed"`) {
		t.Errorf("tick.json over HTTP: %d %s", code, mustJSON(resp))
	}

	// The shim bundle, with the CLI, on a fresh data directory.
	data := t.TempDir()
	code, out, errOut := cli(t, "shim", "provisions", "apply", ex("shim/bundle.yaml"), "--data", data, "--harness", "claude-code")
	if code != 0 || strings.Count(out, `"result": "created"`) != 5 {
		t.Fatalf("apply bundle: %d %s %s", code, out, errOut)
	}
	dry := func(file, want string) {
		t.Helper()
		code, out, errOut := cli(t, "shim", "dry-run", "--protocol", strings.Split(filepath.Base(file), "-")[0], ex(file), "--data", data)
		if code != 0 || !strings.Contains(out, want) {
			t.Errorf("dry-run %s: %d %s %s; want %q", file, code, out, errOut, want)
		}
	}
	dry("shim/chat-refund.json", "Refunds are processed within 14 days")
	dry("shim/chat-release.json", `"reason": "semantic:`)
	dry("shim/messages-deploy.json", "make deploy-staging")

	// Strategies and decisions.
	if code, out, errOut := cli(t, "trader", "import", ex("trader/strategies.yaml"), "--data", data); code != 0 {
		t.Fatalf("import: %s %s", out, errOut)
	}
	// A dry run changes nothing: noop, would_apply.
	code, out, errOut = cli(t, "trader", "apply", "--payload", ex("trader/switch-dry-run.json"), "--data", data)
	if code != 0 || !strings.Contains(out, `"status": "noop"`) || !strings.Contains(out, `"dry_run": true`) || !strings.Contains(out, `"mode_change": "would_apply"`) {
		t.Errorf("apply trader/switch-dry-run.json: %d %s %s", code, out, errOut)
	}
	for _, f := range []string{"trader/switch.json", "trader/pause.json"} {
		code, out, errOut := cli(t, "trader", "apply", "--payload", ex(f), "--data", data)
		if code != 0 || !strings.Contains(out, `"status": "applied"`) || strings.Contains(out, `"replayed"`) {
			t.Errorf("apply %s: %d %s %s", f, code, out, errOut)
		}
	}
	// Sent again: the first answer plus replayed: true.
	code, out, errOut = cli(t, "trader", "apply", "--payload", ex("trader/pause.json"), "--data", data)
	if code != 0 || !strings.Contains(out, `"status": "applied"`) || !strings.Contains(out, `"replayed": true`) {
		t.Errorf("apply trader/pause.json again: %d %s %s", code, out, errOut)
	}

	// The payload against the paper scenario, as cron.
	cron := map[string]string{"HERMES_CRON_RUN_ID": "example", "HERMES_PROFILE": "autotrader"}
	code, out, errOut = cliEnv(t, cron, "exec", "--data", data, "--payload", ex("executor/payload.json"), "--skills", ex("executor"),
		"--scenario", ex("executor/paper.yaml"))
	if code != 0 || !strings.Contains(out, `"status": "placed"`) {
		t.Errorf("exec payload: %d %s %s", code, out, errOut)
	}
	exampleUses.add("executor/skills/investing/strategists/momentum/SKILL.md")

	// relay token needs the gateway's secret only, not the platforms'.
	only := map[string]string{"CADUCEUS_EXAMPLE_GATEWAY_SECRET": demoEnv["CADUCEUS_EXAMPLE_GATEWAY_SECRET"]}
	code, out, errOut = cliEnv(t, only, "relay", "token", "--gateway", "gw-example", "--config", ex("caduceus.yaml"))
	if code != 0 || strings.TrimSpace(out) == "" {
		t.Errorf("relay token with only the gateway secret: %d %s", code, errOut)
	}
	if code, _, errOut := cliEnv(t, nil, "relay", "token", "--gateway", "gw-example", "--config", ex("caduceus.yaml")); code != 2 || !strings.Contains(errOut, "CADUCEUS_EXAMPLE_GATEWAY_SECRET") {
		t.Errorf("relay token without the secret: %d %s", code, errOut)
	}
	exampleUses.add("relay/telegram-update.json") // posted by the demo (testDemo)
	exampleUses.add("README.md")
}

// TestExamples runs both, then checks that every file in examples/ was
// used by one of them.
func TestExamples(t *testing.T) {
	files := t.Run("files", testExampleFiles)
	demo := t.Run("demo", testDemo)
	unit := t.Run("systemd", testSystemdUnit)
	if !files || !demo || !unit {
		return
	}
	var missing []string
	fs.WalkDir(examples.FS, ".", func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && !exampleUses.m[p] {
			missing = append(missing, p)
		}
		return err
	})
	entries, _ := os.ReadDir(filepath.Join("..", "..", "examples"))
	for _, e := range entries {
		if e.Name() == "examples.go" {
			continue
		}
		if _, err := fs.Stat(examples.FS, e.Name()); err != nil {
			missing = append(missing, e.Name()+" (not embedded)")
		}
	}
	slices.Sort(missing)
	if len(missing) > 0 {
		t.Errorf("examples no test loads: %v", missing)
	}
}

// testDemo runs `caduceus demo` end to end: every gate answers, the audit
// chain verifies, and the temporary directory is gone afterwards.
func testDemo(t *testing.T) {
	code, out, errOut := cli(t, "demo")
	if code != 0 {
		t.Fatalf("demo: %d\n%s\n%s", code, out, errOut)
	}
	for _, want := range []string{
		"[1/7]", "ready in", "[7/7]",
		"refused: harness_required",
		"answered by PROV-REFUNDS, no provider called: \"Refunds are processed within 14 days",
		"PROV-RELEASE (semantic:",
		"POST /v1/messages -> 503",
		"context cron: SPY buy placed",
		"session key agent:main:telegram:group:-1001234:42",
		"/sendMessage",
		"answered PONG",
		"trader.apply                 allow",
		"ok: verified",
		"What to try next",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("demo output lacks %q", want)
		}
	}
	if strings.Contains(out, demoEnv["CADUCEUS_EXAMPLE_TELEGRAM_TOKEN"]) {
		t.Error("the demo printed the bot token")
	}
	for _, f := range []string{"trader/switch.json", "shim/bundle.yaml", "shim/chat-refund.json", "shim/chat-release.json", "shim/messages-deploy.json", "executor/tick.json", "relay/telegram-update.json"} {
		exampleUses.add(f)
	}
	m := regexp.MustCompile(`SQLite in (\S+)/data`).FindStringSubmatch(out)
	if m == nil {
		t.Fatal("the demo named no data directory")
	}
	if _, err := os.Stat(m[1]); !os.IsNotExist(err) {
		t.Errorf("the demo left %s behind: %v", m[1], err)
	}
}
