package main

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/caduceus-dev/caduceus/store/storetest"
)

// benchRow is the fields after target's name in the bench's table ("" when
// the table has no such row).
func benchRow(out, target string) []string {
	for line := range strings.Lines(out) {
		if strings.HasPrefix(line, target+" ") {
			return strings.Fields(strings.TrimPrefix(line, target))
		}
	}
	return nil
}

// TestBenchRunsEveryTarget: `caduceus bench`, briefly, answers every
// request of every target, a --peer among them that answers only with the
// header its --peer-header gives (the upstream's URL in it), and ends the
// peer's process when it is done (the figures themselves are not checked here:
// benchmarks are read by people, not asserted).
func TestBenchRunsEveryTarget(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the load generator")
	}
	bin := buildPeerProxy(t)
	pidFile := filepath.Join(t.TempDir(), "pid")
	code, out, errOut := cli(t, "bench", "--rounds", "1", "--duration", "300ms", "--warmup", "0s", "--conns", "4", "--data", t.TempDir(),
		"--peer", "a peer=PEERPROXY_PIDFILE="+pidFile+` PEERPROXY_REQUIRE="X-Upstream: $CADUCEUS_BENCH_UPSTREAM/v1" exec `+bin,
		"--peer-header", "a peer=X-Upstream: $CADUCEUS_BENCH_UPSTREAM/v1",
		"--compare-store", "sqlite:?synchronous=full")
	if code != 0 {
		t.Fatalf("bench: %d\n%s\n%s", code, out, errOut)
	}
	for _, target := range []string{"upstream (fake, direct)", "bare-proxy", "caduceus (sqlite)", "caduceus governed (sqlite)", "governed+balance+rpm (sqlite)",
		"caduceus (sqlite synchronous=full)", "caduceus governed (sqlite synchronous=full)", "governed+balance+rpm (sqlite synchronous=full)", "a peer"} {
		f := benchRow(out, target)
		if len(f) < 5 || f[0] == "0" || f[3] != "0" || f[4] == "-" {
			t.Errorf("%s: row %q (want requests answered, 0 errors and a CPU figure)\n%s", target, f, out)
		}
	}
	b, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(string(b))
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Errorf("the peer (pid %d) is still there after the bench: %v", pid, err)
	}
	if code, _, _ := cli(t, "bench", "--profile", "nothing"); code != 2 {
		t.Errorf("--profile nothing: exit %d, want 2", code)
	}
}

// TestBenchComparesPostgres: a Postgres --compare-store takes its turns
// beside SQLite, answers every request of its three targets, and its rows
// (only its rows) carry the server's CPU per 1,000 requests.
func TestBenchComparesPostgres(t *testing.T) {
	dsn := os.Getenv(storetest.EnvPostgres)
	if dsn == "" {
		t.Skip("CADUCEUS_TEST_POSTGRES not set; .ci/run sets it")
	}
	if testing.Short() {
		t.Skip("runs the load generator")
	}
	pg := storetest.FreshSchema(t, dsn)
	code, out, errOut := cli(t, "bench", "--rounds", "1", "--duration", "300ms", "--warmup", "0s", "--conns", "4", "--data", t.TempDir(), "--compare-store", pg)
	if code != 0 {
		t.Fatalf("bench: %d\n%s\n%s", code, out, errOut)
	}
	if !strings.Contains(out, "store sqlite and postgres") {
		t.Errorf("the header does not name both stores:\n%s", out)
	}
	for _, target := range []string{"caduceus (sqlite)", "caduceus governed (sqlite)", "caduceus (postgres)", "caduceus governed (postgres)", "governed+balance+rpm (postgres)"} {
		f := benchRow(out, target)
		// req/s p50 p99 errors cpu-ms/1k db-cpu-ms/1k ratio
		if len(f) < 7 || f[0] == "0" || f[3] != "0" {
			t.Fatalf("%s: row %q (want requests answered and 0 errors)\n%s", target, f, out)
		}
		if onPG := strings.Contains(target, "postgres"); onPG == (f[5] == "-") {
			t.Errorf("%s: db-cpu-ms/1k %q (want a figure on Postgres only)\n%s", target, f[5], out)
		}
	}
}

// TestBenchCompareStoreRefused: a --compare-store that cannot be opened,
// or that names a store of the same kind as another (its targets would
// share names), exits 2 naming the value.
func TestBenchCompareStoreRefused(t *testing.T) {
	for _, c := range []struct{ store, says string }{
		{"sqlite:?synchronous=off", `--compare-store "sqlite:?synchronous=off"`},
		{"sqlite:?synchronous=normal", "a second sqlite store"},
		{"mysql://x", `--compare-store "mysql://x"`},
	} {
		code, out, errOut := cli(t, "bench", "--rounds", "1", "--duration", "10ms", "--warmup", "0s", "--data", t.TempDir(), "--compare-store", c.store)
		if code != 2 || !strings.Contains(errOut, c.says) {
			t.Errorf("--compare-store %s: exit %d, stderr %q (want 2, saying %q)\n%s", c.store, code, errOut, c.says, out)
		}
	}
}

// TestBenchPeerRefused: a --peer value that is no NAME=COMMAND, or whose
// name is taken, a --peer-header value for no --peer, without ":" or
// with an empty header name, and a --peer-model value for no --peer,
// without a model or for a peer given one already, exit 2 with an error naming the value and
// what is wrong with it; a peer that exits at once fails the bench with an
// error naming it.
func TestBenchPeerRefused(t *testing.T) {
	for _, c := range []struct {
		args []string
		why  string
	}{
		{[]string{"--peer", "other"}, "want NAME=COMMAND"},
		{[]string{"--peer", "=other.sh"}, "name before"},
		{[]string{"--peer", "other="}, "command after"},
		{[]string{"--peer", "bare-proxy=other.sh"}, "is taken"},
		{[]string{"--peer", "caduceus governed (postgres)=other.sh"}, "is taken"},
		{[]string{"--peer", "governed+balance+rpm (another store)=other.sh"}, "is taken"},
		{[]string{"--peer", "b=one.sh", "--peer", "b=other.sh"}, "is taken"},
		{[]string{"--peer", "b=one.sh", "--peer-header", "c=X-Key: v"}, `no --peer is named "c"`},
		{[]string{"--peer-header", "b=X-Key: v"}, `no --peer is named "b"`},
		{[]string{"--peer", "b=one.sh", "--peer-header", "b=X-Key v"}, `no ":"`},
		{[]string{"--peer", "b=one.sh", "--peer-header", "b=: v"}, "header's name before"},
		{[]string{"--peer", "b=one.sh", "--peer-header", "b=X-Key: v", "--peer-header", "b"}, "want NAME=Header: value"},
		{[]string{"--peer", "b=one.sh", "--peer-model", "c=openai/m"}, `no --peer is named "c"`},
		{[]string{"--peer-model", "b=openai/m"}, `no --peer is named "b"`},
		{[]string{"--peer", "b=one.sh", "--peer-model", "b"}, "want NAME=MODEL"},
		{[]string{"--peer", "b=one.sh", "--peer-model", "b="}, "model after"},
		{[]string{"--peer", "b=one.sh", "--peer-model", "b=openai/m", "--peer-model", "b=other/m"}, "has a model already"},
	} {
		code, out, errOut := cli(t, append([]string{"bench"}, c.args...)...)
		bad := c.args[len(c.args)-1]
		if code != 2 || !strings.Contains(errOut, strconv.Quote(bad)) || !strings.Contains(errOut, c.why) || out != "" {
			t.Errorf("bench %q: exit %d, stderr %q, stdout %q; want 2 and an error naming %q and saying %q", c.args, code, errOut, out, bad, c.why)
		}
	}
	if testing.Short() {
		return
	}
	start := time.Now()
	code, _, errOut := cli(t, "bench", "--rounds", "1", "--duration", "100ms", "--warmup", "0s", "--data", t.TempDir(),
		"--peer", "quitter=echo no port for me >&2; exit 1")
	if code == 0 || !strings.Contains(errOut, "peer quitter exited") || !strings.Contains(errOut, "no port for me") {
		t.Errorf("a peer that exits at once: exit %d, stderr %q", code, errOut)
	}
	if d := time.Since(start); d > 30*time.Second {
		t.Errorf("the bench took %v to give up on a peer that exited at once", d)
	}
}

// TestBenchAddedLatencyAtOneConnection: with --conns 1, after its table
// the bench prints the latency each target and peer adds over the fake
// upstream called directly, round by round: a row for every target but
// the direct upstream, with an added p50 and p99 and the number of rounds
// (all of them) they come from. The peer here answers only requests that
// ask for the model --peer-model gives it. The figures' values are not
// checked (read by people, not asserted).
func TestBenchAddedLatencyAtOneConnection(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the load generator")
	}
	bin := buildPeerProxy(t)
	code, out, errOut := cli(t, "bench", "--rounds", "2", "--duration", "200ms", "--warmup", "0s", "--conns", "1", "--data", t.TempDir(),
		"--peer", "named peer=PEERPROXY_REQUIRE_MODEL=openai/gpt-4o-mini exec "+bin,
		"--peer-model", "named peer=openai/gpt-4o-mini")
	if code != 0 {
		t.Fatalf("bench: %d\n%s\n%s", code, out, errOut)
	}
	if f := benchRow(out, "named peer"); len(f) < 5 || f[0] == "0" || f[3] != "0" {
		t.Errorf("the peer's row %q: want requests answered and 0 errors\n%s", f, out)
	}
	const head = "added latency over upstream (fake, direct): each round's p50 and p99 less upstream (fake, direct)'s in the same round, the median over rounds"
	_, added, ok := strings.Cut(out, "\n"+head+"\n")
	if !ok {
		t.Fatalf("no added-latency table headed %q:\n%s", head, out)
	}
	if !strings.HasPrefix(added, "target ") || !strings.Contains(strings.SplitN(added, "\n", 2)[0], "added-p50  added-p99  rounds") {
		t.Errorf("the added-latency table's columns:\n%s", added)
	}
	if benchRow(added, "upstream (fake, direct)") != nil {
		t.Errorf("the direct upstream has a row of its own in the added-latency table:\n%s", added)
	}
	for _, target := range []string{"bare-proxy", "caduceus (sqlite)", "caduceus governed (sqlite)", "governed+balance+rpm (sqlite)", "named peer"} {
		f := benchRow(added, target)
		if len(f) != 3 || f[2] != "2" {
			t.Errorf("%s: added-latency row %q (want an added p50, p99 and 2 rounds)\n%s", target, f, out)
			continue
		}
		for _, d := range f[:2] {
			if _, err := time.ParseDuration(d); err != nil {
				t.Errorf("%s: added latency %q is not a duration: %v", target, d, err)
			}
		}
	}
}

// buildPeerProxy builds the bench package's test peer (a reverse proxy
// of its own process) into a temporary directory.
func buildPeerProxy(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "peerproxy")
	if out, err := exec.Command("go", "build", "-o", bin, "../../bench/testdata/peerproxy").CombinedOutput(); err != nil {
		t.Fatalf("building the test peer: %v\n%s", err, out)
	}
	return bin
}

// TestBenchLoadsACaduceusBuildAsAPeer: bench/peers/caduceus.sh runs a
// Caduceus binary (this test's, as main) governed, hands the bench the
// route key it made through $CADUCEUS_BENCH_HEADERS, and every request of
// the peer's load is answered — the way two builds compare in one run.
func TestBenchLoadsACaduceusBuildAsAPeer(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	wrapper := filepath.Join(t.TempDir(), "caduceus")
	if err := os.WriteFile(wrapper, []byte("#!/bin/sh\nexec env "+envAsMain+"=1 "+self+" \"$@\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := cli(t, "bench", "--rounds", "1", "--duration", "300ms", "--warmup", "0s", "--conns", "2", "--data", t.TempDir(),
		"--peer", "this build=CADUCEUS_PEER_BIN="+wrapper+" ../../bench/peers/caduceus.sh")
	if code != 0 {
		t.Fatalf("bench: %d\n%s\n%s", code, out, errOut)
	}
	if f := benchRow(out, "this build"); len(f) < 5 || f[0] == "0" || f[3] != "0" {
		t.Fatalf("the peer's row %q (want requests answered and 0 errors)\n%s", f, out)
	}
	code, _, errOut = cli(t, "bench", "--rounds", "1", "--duration", "100ms", "--data", t.TempDir(), "--peer-wait", "10s",
		"--peer", "nobin=../../bench/peers/caduceus.sh")
	if code == 0 || !strings.Contains(errOut, "set CADUCEUS_PEER_BIN to the caduceus binary to run") {
		t.Errorf("without CADUCEUS_PEER_BIN: exit %d\n%s", code, errOut)
	}
}

// TestBenchPromptAndGuardrails: --prompt-bytes pads the request and
// --guardrails runs the Caduceus targets with a policy that redacts every
// kind, which the bench's header states; a negative size, or a padded
// request with a peer (loaded with its own request), exits 2 naming it.
func TestBenchPromptAndGuardrails(t *testing.T) {
	for _, c := range []struct {
		args []string
		why  string
	}{
		{[]string{"--prompt-bytes", "-1"}, "--prompt-bytes -1"},
		{[]string{"--peer", "b=one.sh", "--prompt-bytes", "1024"}, "not combined with --peer"},
	} {
		code, out, errOut := cli(t, append([]string{"bench"}, c.args...)...)
		if code != 2 || !strings.Contains(errOut, c.why) || out != "" {
			t.Errorf("bench %q: exit %d, stderr %q; want 2 and %q", c.args, code, errOut, c.why)
		}
	}
	code, out, errOut := cli(t, "bench", "--rounds", "1", "--duration", "100ms", "--warmup", "0s", "--conns", "1", "--data", t.TempDir(),
		"--guardrails", "--prompt-bytes", "4096")
	if code != 0 || !regexp.MustCompile(`request 4[0-9]{3} bytes; Caduceus's guardrails: redact every kind`).MatchString(out) {
		t.Fatalf("bench --guardrails --prompt-bytes 4096: exit %d\n%s\n%s", code, out, errOut)
	}
	// The governed target's row (… req/s p50 p99 errors cpu-ms/1k ratio)
	// shows no errors: every request with its padding passed the policy.
	seen := false
	for _, line := range strings.Split(out, "\n") {
		if f := strings.Fields(line); strings.HasPrefix(line, "caduceus governed") && strings.HasSuffix(line, "x") && len(f) >= 9 {
			seen = true
			if f[len(f)-3] != "0" {
				t.Errorf("errors under guardrails: %s", line)
			}
		}
	}
	if !seen {
		t.Errorf("no governed row in\n%s", out)
	}
}
