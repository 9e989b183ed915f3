package main

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/creack/pty"
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
	// No cron id and no terminal: claude-code, and it says so.
	e = runExec(t, t.TempDir(), map[string]string{}, null)
	if e.Context != "claude-code" || !hasNote(e, "HERMES_CRON_RUN_ID is not set and standard input is not a terminal") {
		t.Errorf("bare run: %+v", e)
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
