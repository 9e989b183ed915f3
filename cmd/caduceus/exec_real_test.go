package main

import (
	"bytes"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/creack/pty"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestIsTerminal: a terminal is what the isatty ioctl says it is. /dev/null
// is a character device but not a terminal; a pipe and a file are neither;
// the slave side of a pseudo-terminal is one.
func TestIsTerminal(t *testing.T) {
	null, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	defer null.Close()
	if st, _ := null.Stat(); st.Mode()&os.ModeCharDevice == 0 {
		t.Fatalf("%s is not a character device here; the test would not prove anything", os.DevNull)
	}
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer pr.Close()
	defer pw.Close()
	file, err := os.Create(filepath.Join(t.TempDir(), "stdin"))
	if err != nil {
		t.Fatal(err)
	}
	defer file.Close()
	ptmx, tty, err := pty.Open()
	if err != nil {
		t.Fatalf("open pty: %v", err)
	}
	defer ptmx.Close()
	defer tty.Close()

	for _, c := range []struct {
		name string
		r    any
		want bool
	}{
		{"/dev/null", null, false},
		{"pipe", pr, false},
		{"regular file", file, false},
		{"pty", tty, true},
		{"not a file", strings.NewReader(""), false},
		{"nil file", (*os.File)(nil), false},
	} {
		var got bool
		switch r := c.r.(type) {
		case *os.File:
			got = isTerminal(r)
		case *strings.Reader:
			got = isTerminal(r)
		}
		if got != c.want {
			t.Errorf("%s: isTerminal = %v, want %v", c.name, got, c.want)
		}
	}
}

type execEnvelope struct {
	Context string   `json:"context"`
	Notes   []string `json:"notes"`
	Actions []struct {
		Status string `json:"status"`
		Reason string `json:"reason"`
	} `json:"actions"`
}

// runExec runs `caduceus exec` through run with stdin as given.
func runExec(t *testing.T, data string, env map[string]string, stdin *os.File, extra ...string) execEnvelope {
	t.Helper()
	var out, errb bytes.Buffer
	args := append([]string{"exec", "--data", data, "--payload", exPayload, "--skills", exSkills, "--scenario", exScenario}, extra...)
	if code := run(t.Context(), args, func(k string) string { return env[k] }, stdin, &out, &errb); code != 0 {
		t.Fatalf("exec exit %d: %s", code, errb.String())
	}
	var e execEnvelope
	if err := json.Unmarshal(out.Bytes(), &e); err != nil {
		t.Fatalf("not an envelope: %s", out.String())
	}
	return e
}

func hasNote(e execEnvelope, sub string) bool {
	for _, n := range e.Notes {
		if strings.Contains(n, sub) {
			return true
		}
	}
	return false
}

// TestExecContextFromStdin: a cron run whose standard input is /dev/null
// (systemd, cron, subprocess with stdin=DEVNULL) places; the same run on a
// real terminal does not, and the envelope says why.
func TestExecContextFromStdin(t *testing.T) {
	cron := map[string]string{"HERMES_CRON_RUN_ID": "r1", "HERMES_PROFILE": "autotrader"}
	null, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	defer null.Close()
	e := runExec(t, t.TempDir(), cron, null)
	if e.Context != "cron" || len(e.Actions) != 1 || e.Actions[0].Status != "placed" {
		t.Fatalf("cron with stdin on /dev/null: %+v", e)
	}
	if hasNote(e, "run context") {
		t.Errorf("a placing cron run carries a context note: %q", e.Notes)
	}

	pr, pw, _ := os.Pipe()
	pw.Close()
	defer pr.Close()
	if e := runExec(t, t.TempDir(), cron, pr); e.Context != "cron" || e.Actions[0].Status != "placed" {
		t.Errorf("cron with stdin on a pipe: %+v", e)
	}

	ptmx, tty, err := pty.Open()
	if err != nil {
		t.Fatalf("open pty: %v", err)
	}
	defer ptmx.Close()
	defer tty.Close()
	e = runExec(t, t.TempDir(), cron, tty)
	if e.Context != "claude-code" || e.Actions[0].Status == "placed" {
		t.Fatalf("cron run id on a terminal placed: %+v", e)
	}
	if !hasNote(e, "run context claude-code (detected from: HERMES_CRON_RUN_ID is set but standard input is a terminal") {
		t.Errorf("no note saying which context and why: %q", e.Notes)
	}

	// Chat on a real terminal: places only on the matching directive.
	chat := map[string]string{"HERMES_SESSION_TYPE": "chat", "HERMES_PROFILE": "autotrader"}
	e = runExec(t, t.TempDir(), chat, tty)
	if e.Context != "chat" || e.Actions[0].Status != "reviewed" || e.Actions[0].Reason != "execute_directive_mismatch" {
		t.Fatalf("chat without directive: %+v", e)
	}
	if !hasNote(e, "run context chat (detected from: HERMES_SESSION_TYPE=chat and standard input is a terminal)") {
		t.Errorf("no chat context note: %q", e.Notes)
	}
	if e := runExec(t, t.TempDir(), chat, tty, "--message", "EXECUTE: buy SPY 1"); e.Context != "chat" || e.Actions[0].Status != "placed" {
		t.Errorf("chat with directive on a terminal: %+v", e)
	}
	// No cron id and no terminal: the payload's context_hint "cron" makes
	// it cron (seed 001), and without the hint it is claude-code; each
	// says so.
	e = runExec(t, t.TempDir(), map[string]string{}, null)
	if e.Context != "cron" || e.Actions[0].Status != "placed" {
		t.Errorf("bare run with context_hint cron: %+v", e)
	}
	raw, err := os.ReadFile(exPayload)
	if err != nil {
		t.Fatal(err)
	}
	unhinted := filepath.Join(t.TempDir(), "unhinted.json")
	if err := os.WriteFile(unhinted, bytes.Replace(raw, []byte(`"context_hint": "cron", `), nil, 1), 0o600); err != nil {
		t.Fatal(err)
	}
	e = runExec(t, t.TempDir(), map[string]string{}, null, "--payload", unhinted)
	if e.Context != "claude-code" || !hasNote(e, "HERMES_CRON_RUN_ID is not set and standard input is not a terminal") {
		t.Errorf("bare run without a hint: %+v", e)
	}
}

// The test binary runs main() itself when asked to (TestExecBinaryStdinDevNull),
// so the real entry point reads the real process's standard input.
func init() {
	if os.Getenv("CADUCEUS_TEST_RUN_MAIN") == "1" {
		os.Args = append([]string{"caduceus"}, strings.Fields(os.Getenv("CADUCEUS_TEST_ARGS"))...)
		main()
	}
}

// TestExecBinaryStdinDevNull runs the real entry point in a child process
// with standard input on /dev/null, as cron and systemd start a job.
func TestExecBinaryStdinDevNull(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	data := t.TempDir()
	cmd := exec.Command(self)
	cmd.Env = append(os.Environ(),
		"CADUCEUS_TEST_RUN_MAIN=1",
		"CADUCEUS_TEST_ARGS=exec --data "+data+" --payload "+exPayload+" --skills "+exSkills+" --scenario "+exScenario,
		"HERMES_CRON_RUN_ID=r1", "HERMES_PROFILE=autotrader")
	cmd.Stdin = nil // os/exec connects a nil Stdin to /dev/null
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("caduceus exec: %v: %s", err, errb.String())
	}
	var e execEnvelope
	if err := json.Unmarshal(out.Bytes(), &e); err != nil {
		t.Fatalf("not an envelope: %s", out.String())
	}
	if e.Context != "cron" || len(e.Actions) != 1 || e.Actions[0].Status != "placed" {
		t.Fatalf("cron run with stdin on /dev/null: %+v", e)
	}
}

// TestExecHelpNamesEnvironment: --help documents every variable exec reads
// and how the context is decided.
func TestExecHelpNamesEnvironment(t *testing.T) {
	code, out, _ := cli(t, "exec", "--help")
	if code != 0 {
		t.Fatalf("exec --help: %d", code)
	}
	for _, s := range []string{"HERMES_CRON_RUN_ID", "HERMES_SESSION_TYPE", "HERMES_PROFILE ", "HERMES_PROFILE_ACCOUNT", EnvRobinhoodToken, "isatty", "/dev/null", "--idempotency-key"} {
		if !strings.Contains(out, s) {
			t.Errorf("exec --help does not mention %q", s)
		}
	}
}

// TestServeRefusesUnusableExecutor: with the executor gate asked for and
// unusable, serve exits non-zero with one line naming the flag or file.
func TestServeRefusesUnusableExecutor(t *testing.T) {
	emptyScenario := filepath.Join(t.TempDir(), "empty.yaml")
	os.WriteFile(emptyScenario, []byte("accounts: []\n"), 0o600)
	for _, c := range []struct {
		name string
		env  map[string]string
		args []string
		want string
	}{
		{"missing skills root", nil, []string{"--skills", "/nonexistent/skills", "--scenario", exScenario}, "--skills /nonexistent/skills"},
		{"skills without strategists", nil, []string{"--skills", t.TempDir(), "--scenario", exScenario}, "skills/investing/strategists"},
		{"paper without scenario", nil, []string{"--skills", exSkills}, "--scenario FILE"},
		{"missing scenario", nil, []string{"--skills", exSkills, "--scenario", "/nonexistent/paper.yaml"}, "--scenario /nonexistent/paper.yaml"},
		{"scenario without accounts", nil, []string{"--skills", exSkills, "--scenario", emptyScenario}, "has no accounts"},
		{"robinhood without url", nil, []string{"--skills", exSkills, "--broker", "robinhood"}, "--mcp-url"},
		{"robinhood without token", nil, []string{"--skills", exSkills, "--broker", "robinhood", "--mcp-url", "http://127.0.0.1:1/mcp"}, EnvRobinhoodToken},
		{"gate named, nothing configured", nil, []string{"--gates", "executor"}, "--skills"},
	} {
		var out, errb bytes.Buffer
		args := append([]string{"serve", "--addr", "127.0.0.1:0", "--data", t.TempDir()}, c.args...)
		code := run(t.Context(), args, func(k string) string { return c.env[k] }, strings.NewReader(""), &out, &errb)
		lines := strings.Split(strings.TrimSpace(errb.String()), "\n")
		last := lines[len(lines)-1]
		if code == 0 || !strings.Contains(last, c.want) || !strings.Contains(last, "executor gate") {
			t.Errorf("%s: exit %d, stderr %q; want non-zero and a line naming %q", c.name, code, errb.String(), c.want)
		}
	}
}

// TestServeWithoutExecutorConfig: plain `caduceus serve` still starts; a
// tick is answered with a problem naming what to configure, not a 5xx.
func TestServeWithoutExecutorConfig(t *testing.T) {
	in := start(t)
	payload, _ := os.ReadFile(exPayload)
	status, resp := in.do(t, "POST", "/v1/executor/ticks", in.adminKey, map[string]any{"payload": json.RawMessage(payload)})
	if status != 404 || resp["code"] != "executor_not_configured" || !strings.Contains(resp["detail"].(string), "--skills") {
		t.Fatalf("tick on an unconfigured executor: %d %v", status, resp)
	}
}

// TestTickSkillsRootGone: the skills root removed after start is a problem
// naming it (not a 500).
func TestTickSkillsRootGone(t *testing.T) {
	skills := t.TempDir()
	if err := os.MkdirAll(filepath.Join(skills, "skills/investing/strategists"), 0o755); err != nil {
		t.Fatal(err)
	}
	in := start(t, "--skills", skills, "--scenario", exScenario)
	os.RemoveAll(skills)
	payload, _ := os.ReadFile(exPayload)
	status, resp := in.do(t, "POST", "/v1/executor/ticks", in.adminKey, map[string]any{"payload": json.RawMessage(payload)})
	if status >= 500 || resp["code"] != "skills_root_missing" || !strings.Contains(resp["detail"].(string), skills) {
		t.Fatalf("tick with the skills root gone: %d %v", status, resp)
	}
}

// TestExecutorIdempotencyKeys: the same key on HTTP (Idempotency-Key), MCP
// (idempotency_key) and the CLI (--idempotency-key) replays the stored
// envelope; another input under the key is a conflict; 100 concurrent
// duplicates over HTTP run one tick.
func TestExecutorIdempotencyKeys(t *testing.T) {
	in := start(t, "--skills", exSkills, "--scenario", exScenario)
	payload, _ := os.ReadFile(exPayload)
	body := map[string]any{"payload": json.RawMessage(payload)}
	_, cronKey, _ := cli(t, "keys", "create", "--data", in.data, "--tenant", "slot-1", "--scopes", "operate", "--context", "cron", "--harness", "autotrader")
	key := strings.TrimSpace(cronKey)

	status, first := in.do(t, "POST", "/v1/executor/ticks", key, body, "Idempotency-Key", "http-key-0001")
	if status != 200 || first["replay"] != nil || first["idempotency_key"] != "http-key-0001" || !strings.Contains(mustJSON(first["actions"]), `"status":"placed"`) {
		t.Fatalf("first keyed tick: %d %v", status, first)
	}
	status, again := in.do(t, "POST", "/v1/executor/ticks", key, body, "Idempotency-Key", "http-key-0001")
	if status != 200 || again["replay"] != true || again["tick_id"] != first["tick_id"] || mustJSON(again["actions"]) != mustJSON(first["actions"]) {
		t.Fatalf("retry: %d %v", status, again)
	}
	other := map[string]any{"payload": json.RawMessage(payload), "message": "EXECUTE: buy SPY 1"}
	if status, resp := in.do(t, "POST", "/v1/executor/ticks", key, other, "Idempotency-Key", "http-key-0001"); status != 409 || resp["code"] != "idempotency_key_conflict" {
		t.Fatalf("same key, other body: %d %v", status, resp)
	}
	mismatch := map[string]any{"payload": json.RawMessage(payload), "idempotency_key": "body-key-0001"}
	if status, resp := in.do(t, "POST", "/v1/executor/ticks", key, mismatch, "Idempotency-Key", "http-key-0002"); status != 400 {
		t.Fatalf("header and body keys differ: %d %v", status, resp)
	}
	// Without a key the envelope says the tick was not idempotent.
	if _, resp := in.do(t, "POST", "/v1/executor/ticks", key, body); !strings.Contains(mustJSON(resp["notes"]), "not idempotent") {
		t.Fatalf("unkeyed tick without a note: %v", resp)
	}

	const n = 100
	ticks := make([]string, n)
	replays := make([]bool, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			b, _ := json.Marshal(body)
			req, _ := http.NewRequest("POST", in.url+"/v1/executor/ticks", bytes.NewReader(b))
			req.Header.Set("Authorization", "Bearer "+key)
			req.Header.Set("Idempotency-Key", "http-dup-0001")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Error(err)
				return
			}
			defer resp.Body.Close()
			var env struct {
				TickID string `json:"tick_id"`
				Replay bool   `json:"replay"`
			}
			if resp.StatusCode != 200 || json.NewDecoder(resp.Body).Decode(&env) != nil {
				t.Errorf("duplicate %d: status %d", i, resp.StatusCode)
				return
			}
			if env.Replay != (resp.Header.Get("Idempotent-Replayed") == "true") {
				t.Errorf("duplicate %d: Idempotent-Replayed header disagrees with the envelope", i)
			}
			ticks[i], replays[i] = env.TickID, env.Replay
		})
	}
	wg.Wait()
	fresh := 0
	for i := range n {
		if ticks[i] != ticks[0] || ticks[i] == "" {
			t.Fatalf("duplicate %d ran its own tick %q (first %q)", i, ticks[i], ticks[0])
		}
		if !replays[i] {
			fresh++
		}
	}
	if fresh != 1 {
		t.Fatalf("%d of %d duplicates ran; want 1", fresh, n)
	}

	// MCP: the idempotency_key argument.
	sess := mcpSession(t, in, key)
	args := map[string]any{"payload": json.RawMessage(payload), "idempotency_key": "mcp-key-0001"}
	var tickID string
	for i, wantReplay := range []bool{false, true} {
		res, err := sess.CallTool(t.Context(), &mcp.CallToolParams{Name: "execute_intents", Arguments: args})
		if err != nil || res.IsError {
			t.Fatalf("execute_intents %d: %v %+v", i, err, res)
		}
		m, _ := res.StructuredContent.(map[string]any)
		if (m["replay"] == true) != wantReplay || (tickID != "" && m["tick_id"] != tickID) {
			t.Fatalf("execute_intents %d: %v", i, m)
		}
		tickID, _ = m["tick_id"].(string)
	}
	args["message"] = "different"
	if res, err := sess.CallTool(t.Context(), &mcp.CallToolParams{Name: "execute_intents", Arguments: args}); err != nil || !res.IsError || !strings.Contains(mustJSON(res.Content), "idempotency key") {
		t.Fatalf("MCP same key, other input: %v %+v", err, res)
	}

	// CLI: --idempotency-key.
	data := t.TempDir()
	cron := map[string]string{"HERMES_CRON_RUN_ID": "r1", "HERMES_PROFILE": "autotrader"}
	execArgs := []string{"exec", "--data", data, "--payload", exPayload, "--skills", exSkills, "--scenario", exScenario, "--idempotency-key", "cli-key-0001"}
	code, out1, _ := cliEnv(t, cron, execArgs...)
	code2, out2, _ := cliEnv(t, cron, execArgs...)
	var e1, e2 map[string]any
	json.Unmarshal([]byte(out1), &e1)
	json.Unmarshal([]byte(out2), &e2)
	if code != 0 || code2 != 0 || e1["replay"] != nil || e2["replay"] != true || e1["tick_id"] != e2["tick_id"] {
		t.Fatalf("CLI replay: %d %s / %d %s", code, out1, code2, out2)
	}
	if code, out, errOut := cliEnv(t, cron, append(execArgs, "--message", "other")...); code != 2 || out != "" || !strings.Contains(errOut, "cli-key-0001") {
		t.Fatalf("CLI same key, other input: %d %q %q", code, out, errOut)
	}
}
