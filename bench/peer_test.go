package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/caduceus-dev/caduceus/internal/proctest"
)

var peerProxy struct {
	once sync.Once
	path string
	err  error
}

// peerProxyBin is testdata/peerproxy built once into a temporary directory:
// a reverse proxy that runs as a process of its own.
func peerProxyBin(t *testing.T) string {
	t.Helper()
	peerProxy.once.Do(func() {
		dir, err := os.MkdirTemp("", "caduceus-peerproxy-")
		if err != nil {
			peerProxy.err = err
			return
		}
		peerProxy.path = filepath.Join(dir, "peerproxy")
		out, err := exec.Command("go", "build", "-o", peerProxy.path, "./testdata/peerproxy").CombinedOutput()
		if err != nil {
			peerProxy.err = errors.New(err.Error() + ": " + string(out))
		}
	})
	if peerProxy.err != nil {
		t.Fatalf("building testdata/peerproxy: %v", peerProxy.err)
	}
	return peerProxy.path
}

func TestMain(m *testing.M) {
	code := m.Run()
	if peerProxy.path != "" {
		os.RemoveAll(filepath.Dir(peerProxy.path))
	}
	os.Exit(code)
}

// waitGone waits for pid to exit (a zombie counts: a process reparented
// to init is reaped by it, not by us), on its pidfd.
func waitGone(t *testing.T, what string, pid int) {
	t.Helper()
	exited, err := proctest.AwaitExit(pid, 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if !exited {
		t.Errorf("%s (pid %d) is still running 30 s after Close", what, pid)
	}
}

func readPid(t *testing.T, file string) int {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatalf("pid file %q: %v", b, err)
	}
	return pid
}

// TestPeerIsLoadedWithItsProcessesCPU: a peer started through sh that
// starts the proxy as its child (so the proxy is a descendant in the peer's
// process group, not the leader) answers the bench's load, its CPU per
// request includes the proxy's hashing (what the same binary spends on it
// alone) on top of what the bare proxy costs, and Close ends both the
// shell and the proxy.
func TestPeerIsLoadedWithItsProcessesCPU(t *testing.T) {
	bin := peerProxyBin(t)
	up, err := FakeUpstream()
	if err != nil {
		t.Fatal(err)
	}
	defer up.Close()
	bare, err := BareProxy(up.URL, 2)
	if err != nil {
		t.Fatal(err)
	}
	defer bare.Close()
	const spin = 20000
	pidFile := filepath.Join(t.TempDir(), "pid")
	p, err := StartPeer(t.Context(), PeerSpec{Name: "spinner",
		Command: "PEERPROXY_SPIN=" + strconv.Itoa(spin) + " PEERPROXY_PIDFILE=" + pidFile + " " + bin + " & wait"},
		up.URL, ChatBody, 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	closed := false
	defer func() {
		if !closed {
			p.Close()
		}
	}()
	proxyPid := readPid(t, pidFile)
	if proxyPid == p.Pid() {
		t.Fatalf("the proxy is the group's leader (pid %d): want it a child of sh", proxyPid)
	}

	load := func(url string) Load {
		return Load{URL: url + "/v1/chat/completions", Body: ChatBody, Conns: 2, Duration: 400 * time.Millisecond, Warmup: 100 * time.Millisecond}
	}
	bareRes := Run(t.Context(), "bare-proxy", load(bare.URL))
	l := load(p.URL)
	l.ExtraCPU = p.CPU
	peerRes := Run(t.Context(), "spinner", l)
	if peerRes.Requests == 0 || peerRes.Errors != 0 || peerRes.CPUUnknown {
		t.Fatalf("peer: %d requests, %d errors (%s), cpu unknown %v", peerRes.Requests, peerRes.Errors, peerRes.FirstErr, peerRes.CPUUnknown)
	}
	if bareRes.Requests == 0 {
		t.Fatalf("bare proxy: no request answered (%s)", bareRes.FirstErr)
	}

	// What the peer's hashing costs per 1,000 requests: the same binary
	// hashing as much as 20 requests do, alone.
	cal := exec.Command(bin)
	cal.Env = append(os.Environ(), "PEERPROXY_CALIBRATE="+strconv.Itoa(20*spin))
	if out, err := cal.CombinedOutput(); err != nil {
		t.Fatalf("calibrating: %v\n%s", err, out)
	}
	hashPer1k := float64((cal.ProcessState.UserTime() + cal.ProcessState.SystemTime()).Microseconds()) / 20
	if peerRes.CPUPer1k() < bareRes.CPUPer1k()+hashPer1k/2 {
		t.Errorf("peer: %.0f cpu-ms/1k, bare proxy %.0f, the peer's hashing alone about %.0f: the peer's own processes' CPU is not counted",
			peerRes.CPUPer1k(), bareRes.CPUPer1k(), hashPer1k)
	}

	leader := p.Pid()
	p.Close()
	closed = true
	waitGone(t, "the peer's shell", leader)
	waitGone(t, "the peer's proxy", proxyPid)
}

// TestPeerIgnoringSIGTERMIsKilled: a peer that ignores SIGTERM is killed
// once Grace has passed.
func TestPeerIgnoringSIGTERMIsKilled(t *testing.T) {
	bin := peerProxyBin(t)
	up, err := FakeUpstream()
	if err != nil {
		t.Fatal(err)
	}
	defer up.Close()
	p, err := StartPeer(t.Context(), PeerSpec{Name: "stubborn", Command: "PEERPROXY_IGNORE_TERM=1 exec " + bin}, up.URL, ChatBody, 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	p.Grace = 200 * time.Millisecond
	pid := p.Pid()
	p.Close()
	waitGone(t, "a peer ignoring SIGTERM", pid)
}

// TestPeerThatFailsToStart: a peer that exits at once, and one that never
// answers, are errors naming the peer, with the end of its output, and the
// one that never answered is killed.
func TestPeerThatFailsToStart(t *testing.T) {
	up, err := FakeUpstream()
	if err != nil {
		t.Fatal(err)
	}
	defer up.Close()
	_, err = StartPeer(t.Context(), PeerSpec{Name: "quitter", Command: "echo cannot listen here >&2; exit 3"}, up.URL, ChatBody, 30*time.Second)
	if err == nil || !strings.Contains(err.Error(), "peer quitter exited") || !strings.Contains(err.Error(), "cannot listen here") {
		t.Errorf("a peer that exits at once: %v", err)
	}

	pidFile := filepath.Join(t.TempDir(), "pid")
	start := time.Now()
	_, err = StartPeer(t.Context(), PeerSpec{Name: "mute", Command: "echo $$ > " + pidFile + "; echo still starting; exec sleep 60"}, up.URL, ChatBody, 300*time.Millisecond)
	if err == nil || !strings.Contains(err.Error(), "peer mute did not answer") || !strings.Contains(err.Error(), "still starting") {
		t.Errorf("a peer that never answers: %v", err)
	}
	if time.Since(start) > 20*time.Second {
		t.Errorf("giving up on a peer that never answers took %v (wait 300ms)", time.Since(start))
	}
	waitGone(t, "a peer that never answered", readPid(t, pidFile))

	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := StartPeer(ctx, PeerSpec{Name: "late", Command: "exec sleep 60"}, up.URL, ChatBody, 30*time.Second); err == nil || !strings.Contains(err.Error(), "peer late") {
		t.Errorf("a start whose context has ended: %v", err)
	}
}

func TestParsePeer(t *testing.T) {
	for _, c := range []struct{ in, name, command string }{
		{"other=/tmp/other.sh", "other", "/tmp/other.sh"},
		{"light=LOGGING=off sh other.sh", "light", "LOGGING=off sh other.sh"},
	} {
		got, err := ParsePeer(c.in)
		if err != nil || got.Name != c.name || got.Command != c.command {
			t.Errorf("ParsePeer(%q) = %+v, %v; want %q, %q", c.in, got, err, c.name, c.command)
		}
	}
	for _, in := range []string{"other", "=cmd", " =cmd", "name=", "name=  ", ""} {
		if _, err := ParsePeer(in); err == nil || !strings.Contains(err.Error(), strconv.Quote(in)) {
			t.Errorf("ParsePeer(%q): %v, want an error naming the value", in, err)
		}
	}
}

// TestReportShowsUnknownCPU: a result whose processes' CPU could not be
// read in full shows "-" for its CPU, in every round merged with it.
func TestReportShowsUnknownCPU(t *testing.T) {
	r := Result{Name: "peer", Requests: 100, Elapsed: time.Second, CPU: 10 * time.Millisecond}
	r.Merge(Result{Name: "peer", Requests: 100, Elapsed: time.Second, CPUUnknown: true})
	var out bytes.Buffer
	Report(&out, "", []Result{r})
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if f := strings.Fields(lines[len(lines)-1]); len(lines) != 2 || f[5] != "-" {
		t.Errorf("table:\n%s\nwant the peer's cpu-ms/1k \"-\"", out.String())
	}
}

// TestPeerHeaders: a peer that answers 2xx only with a header whose value
// is the upstream's URL gets it, $CADUCEUS_BENCH_UPSTREAM expanded, with
// its readiness check and with every request of its load; without it,
// the peer never gets ready and the error says what it answered.
func TestPeerHeaders(t *testing.T) {
	bin := peerProxyBin(t)
	up, err := FakeUpstream()
	if err != nil {
		t.Fatal(err)
	}
	defer up.Close()
	command := `PEERPROXY_REQUIRE="X-Upstream: $CADUCEUS_BENCH_UPSTREAM/v1" exec ` + bin
	p, err := StartPeer(t.Context(), PeerSpec{Name: "picky", Command: command,
		Header: http.Header{"X-Upstream": {"$" + EnvPeerUpstream + "/v1"}}}, up.URL, ChatBody, 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if got := p.Header.Get("X-Upstream"); got != up.URL+"/v1" {
		t.Errorf("the peer's header X-Upstream %q, want %q", got, up.URL+"/v1")
	}
	res := Run(t.Context(), "picky", Load{URL: p.URL + "/v1/chat/completions", Header: p.Header, Body: ChatBody,
		Conns: 2, Duration: 200 * time.Millisecond, Warmup: 50 * time.Millisecond})
	if res.Requests == 0 || res.Errors != 0 {
		t.Errorf("load with the header: %d requests, %d errors (%s)", res.Requests, res.Errors, res.FirstErr)
	}

	_, err = StartPeer(t.Context(), PeerSpec{Name: "refused", Command: command}, up.URL, ChatBody, 500*time.Millisecond)
	if err == nil || !strings.Contains(err.Error(), "peer refused did not answer") || !strings.Contains(err.Error(), "status 401") {
		t.Errorf("a peer started without the header it needs: %v, want no answer in time and its 401", err)
	}
}

func TestParsePeerHeader(t *testing.T) {
	for _, c := range []struct{ in, peer, key, value string }{
		{"portkey=x-portkey-provider: openai", "portkey", "x-portkey-provider", "openai"},
		{"p=Authorization:Bearer x", "p", "Authorization", "Bearer x"},
		{"a peer=X-Host:  http://h:1/v1 ", "a peer", "X-Host", "http://h:1/v1"},
		{"p=X-Empty:", "p", "X-Empty", ""},
		{"p=X-Eq: a=b", "p", "X-Eq", "a=b"},
	} {
		peer, key, value, err := ParsePeerHeader(c.in)
		if err != nil || peer != c.peer || key != c.key || value != c.value {
			t.Errorf("ParsePeerHeader(%q) = %q, %q, %q, %v; want %q, %q, %q", c.in, peer, key, value, err, c.peer, c.key, c.value)
		}
	}
	for _, c := range []struct{ in, why string }{
		{"X-Header: v", "want NAME=Header: value"},
		{"=X-Header: v", "the peer's name"},
		{"p=X-Header v", `no ":"`},
		{"p=: v", "header's name before"},
		{"p=  : v", "header's name before"},
		{"p=X Header: v", "not a token"},
		{"p=X-Header: a\nb", "CR, LF or NUL"},
		{"p=content-type: text/plain", "sets Content-Type itself"},
		{"p=Host: example.com", "sets Host itself"},
	} {
		_, _, _, err := ParsePeerHeader(c.in)
		if err == nil || !strings.Contains(err.Error(), strconv.Quote(c.in)) || !strings.Contains(err.Error(), c.why) {
			t.Errorf("ParsePeerHeader(%q): %v, want an error naming the value and saying %q", c.in, err, c.why)
		}
	}
}

func TestExpandUpstream(t *testing.T) {
	const up = "http://127.0.0.1:9"
	for in, want := range map[string]string{
		"$CADUCEUS_BENCH_UPSTREAM/v1":                           up + "/v1",
		"${CADUCEUS_BENCH_UPSTREAM}v1":                          up + "v1",
		"a $CADUCEUS_BENCH_UPSTREAM b $CADUCEUS_BENCH_UPSTREAM": "a " + up + " b " + up,
		"$CADUCEUS_BENCH_UPSTREAM_2 $CADUCEUS_BENCH_UPSTREAMx":  "$CADUCEUS_BENCH_UPSTREAM_2 $CADUCEUS_BENCH_UPSTREAMx",
		"$CADUCEUS_BENCH_PORT $HOME":                            "$CADUCEUS_BENCH_PORT $HOME",
		"no variable":                                           "no variable",
	} {
		if got := expandUpstream(in, up); got != want {
			t.Errorf("expandUpstream(%q) = %q, want %q", in, got, want)
		}
	}
}

// FuzzParsePeerHeader: any value parses or is refused without a panic; one
// it accepts has a peer name, a header name that is a token and a value
// net/http can send, and writing it back as NAME=Header: value parses to
// the same three.
func FuzzParsePeerHeader(f *testing.F) {
	for _, s := range []string{"p=X-A: b", "p=x-portkey-custom-host: $CADUCEUS_BENCH_UPSTREAM/v1", "=X: y", "p=: y", "p=X y", "p=Host: h", "p=X: a\r\nb", "p=X:"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		peer, key, value, err := ParsePeerHeader(s)
		if err != nil {
			return
		}
		if strings.TrimSpace(peer) == "" || key == "" || strings.ContainsAny(value, "\r\n\x00") {
			t.Fatalf("%q accepted as peer %q, header %q, value %q", s, peer, key, value)
		}
		// A token: visible ASCII but the RFC 9110 delimiters.
		if strings.IndexFunc(key, func(r rune) bool { return r <= ' ' || r >= 0x7f || strings.ContainsRune(`"(),/:;<=>?@[\]{}`, r) }) >= 0 {
			t.Fatalf("%q: header name %q is not a token", s, key)
		}
		p2, k2, v2, err := ParsePeerHeader(peer + "=" + key + ": " + value)
		if err != nil || p2 != peer || k2 != key || v2 != value {
			t.Fatalf("%q: written back, parses as %q %q %q, %v", s, p2, k2, v2, err)
		}
	})
}

func TestParsePeerModel(t *testing.T) {
	for _, c := range []struct{ in, peer, model string }{
		{"bifrost=openai/gpt-4o-mini", "bifrost", "openai/gpt-4o-mini"},
		{"a peer=m=1", "a peer", "m=1"},
	} {
		peer, model, err := ParsePeerModel(c.in)
		if err != nil || peer != c.peer || model != c.model {
			t.Errorf("ParsePeerModel(%q) = %q, %q, %v; want %q, %q", c.in, peer, model, err, c.peer, c.model)
		}
	}
	for _, c := range []struct{ in, why string }{
		{"openai/gpt-4o-mini", "want NAME=MODEL"},
		{"=openai/gpt-4o-mini", "the peer's name"},
		{"bifrost=", "model after"},
		{"bifrost= openai/gpt-4o-mini", "spaces around"},
	} {
		_, _, err := ParsePeerModel(c.in)
		if err == nil || !strings.Contains(err.Error(), strconv.Quote(c.in)) || !strings.Contains(err.Error(), c.why) {
			t.Errorf("ParsePeerModel(%q): %v, want an error naming the value and saying %q", c.in, err, c.why)
		}
	}
}

// TestPeerModel: a peer that answers only requests asking for its own
// model gets ready, and is loaded without an error, with the spec's Model
// in the body; with the bench's model it never gets ready.
func TestPeerModel(t *testing.T) {
	bin := peerProxyBin(t)
	up, err := FakeUpstream()
	if err != nil {
		t.Fatal(err)
	}
	defer up.Close()
	const model = "openai/" + Model
	command := "PEERPROXY_REQUIRE_MODEL=" + model + " exec " + bin
	spec := PeerSpec{Name: "named", Command: command, Model: model}
	if !bytes.Equal(spec.Body(), ChatBodyFor(model)) || !bytes.Equal((PeerSpec{}).Body(), ChatBody) {
		t.Fatalf("PeerSpec.Body: %s", spec.Body())
	}
	p, err := StartPeer(t.Context(), spec, up.URL, spec.Body(), 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if !bytes.Equal(p.Body, spec.Body()) {
		t.Errorf("the peer's Body %s, want %s", p.Body, spec.Body())
	}
	res := Run(t.Context(), "named", Load{URL: p.URL + "/v1/chat/completions", Body: p.Body, Conns: 1, Duration: 100 * time.Millisecond})
	if res.Requests == 0 || res.Errors != 0 {
		t.Errorf("load with the peer's model: %d requests, %d errors (%s)", res.Requests, res.Errors, res.FirstErr)
	}
	_, err = StartPeer(t.Context(), PeerSpec{Name: "unnamed", Command: command}, up.URL, (PeerSpec{}).Body(), 500*time.Millisecond)
	if err == nil || !strings.Contains(err.Error(), "peer unnamed did not answer") || !strings.Contains(err.Error(), "status 400") {
		t.Errorf("a peer asked for the bench's model: %v, want no answer in time and its 400", err)
	}
}

// bifrostScript runs peers/bifrost.sh through StartPeer with env (NAME=value
// words) before it.
func bifrostScript(t *testing.T, env string, wait time.Duration) (*Peer, *Server, error) {
	t.Helper()
	up, err := FakeUpstream()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { up.Close() })
	p, err := StartPeer(t.Context(), PeerSpec{Name: "bifrost", Command: "BIFROST_SCHEMA= " + env + " exec sh peers/bifrost.sh", Model: "openai/" + Model},
		up.URL, ChatBodyFor("openai/"+Model), wait)
	return p, up, err
}

// TestPeerBifrostScriptNeedsItsBinary: bench/peers/bifrost.sh without
// BIFROST_BIN, or with one that is not there, exits at once saying so.
func TestPeerBifrostScriptNeedsItsBinary(t *testing.T) {
	for env, says := range map[string]string{
		"BIFROST_BIN=":                          "BIFROST_BIN is not set",
		"BIFROST_BIN=/nonexistent/bifrost-http": "BIFROST_BIN=/nonexistent/bifrost-http is not an executable file",
	} {
		_, _, err := bifrostScript(t, env, 30*time.Second)
		if err == nil || !strings.Contains(err.Error(), "peer bifrost exited") || !strings.Contains(err.Error(), says) {
			t.Errorf("%s: %v, want the peer to exit saying %q", env, err, says)
		}
	}
}

// TestPeerBifrostScriptConfig: bench/peers/bifrost.sh, with a stand-in for
// Bifrost's binary that records what it is given and then proxies (the
// test peer), runs it on 127.0.0.1:$CADUCEUS_BENCH_PORT in a temporary
// directory holding a config.json whose one provider is openai at the fake
// upstream, with a dummy key, no config or logs store, request logging
// off and no plugins, and the empty schema beside it; the directory is
// gone once the peer is closed.
func TestPeerBifrostScriptConfig(t *testing.T) {
	bin := peerProxyBin(t)
	dir := t.TempDir()
	record := filepath.Join(dir, "record")
	fake := filepath.Join(dir, "bifrost-http")
	if err := os.WriteFile(fake, []byte(`#!/bin/sh
{ echo "$*"; pwd; } > "$FAKE_RECORD"
cp config.json "$FAKE_RECORD.json"
cp config.schema.json "$FAKE_RECORD.schema"
exec "$FAKE_PROXY"
`), 0o755); err != nil {
		t.Fatal(err)
	}
	p, up, err := bifrostScript(t, "BIFROST_BIN="+fake+" FAKE_RECORD="+record+" FAKE_PROXY="+bin, 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	closed := false
	defer func() {
		if !closed {
			p.Close()
		}
	}()
	b, err := os.ReadFile(record)
	if err != nil {
		t.Fatal(err)
	}
	args, appDir, _ := strings.Cut(strings.TrimSpace(string(b)), "\n")
	port := strings.TrimPrefix(p.URL, "http://127.0.0.1:")
	if want := "-app-dir " + appDir + " -host 127.0.0.1 -port " + port + " -log-level warn"; args != want {
		t.Errorf("Bifrost's arguments %q, want %q", args, want)
	}
	if schema, err := os.ReadFile(record + ".schema"); err != nil || strings.TrimSpace(string(schema)) != "{}" {
		t.Errorf("config.schema.json %q, %v; want the empty schema", schema, err)
	}
	var cfg struct {
		Client struct {
			EnableLogging         *bool `json:"enable_logging"`
			DisableContentLogging bool  `json:"disable_content_logging"`
		}
		ConfigStore struct{ Enabled *bool } `json:"config_store"`
		LogsStore   struct{ Enabled *bool } `json:"logs_store"`
		Framework   struct {
			Pricing struct {
				URL string `json:"pricing_url"`
			}
		}
		Providers map[string]struct {
			Keys []struct {
				Value string
			}
			Network struct {
				BaseURL string `json:"base_url"`
			} `json:"network_config"`
		}
		Plugins *[]any
	}
	raw, err := os.ReadFile(record + ".json")
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, &cfg); err != nil {
		t.Fatalf("config.json: %v\n%s", err, raw)
	}
	openai, ok := cfg.Providers["openai"]
	switch {
	case cfg.Client.EnableLogging == nil || *cfg.Client.EnableLogging || !cfg.Client.DisableContentLogging:
		t.Errorf("request logging not off:\n%s", raw)
	case cfg.ConfigStore.Enabled == nil || *cfg.ConfigStore.Enabled || cfg.LogsStore.Enabled == nil || *cfg.LogsStore.Enabled:
		t.Errorf("a config or logs store not off:\n%s", raw)
	case cfg.Plugins == nil || len(*cfg.Plugins) != 0:
		t.Errorf("plugins not an empty list:\n%s", raw)
	case len(cfg.Providers) != 1 || !ok || openai.Network.BaseURL != up.URL || len(openai.Keys) != 1 || openai.Keys[0].Value == "":
		t.Errorf("want one provider, openai at %s with one key:\n%s", up.URL, raw)
	case !strings.HasPrefix(cfg.Framework.Pricing.URL, up.URL+"/"):
		t.Errorf("the pricing datasheet's URL %q is not on the fake upstream", cfg.Framework.Pricing.URL)
	}

	p.Close()
	closed = true
	if _, err := os.Stat(appDir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Bifrost's directory %s is still there after Close: %v", appDir, err)
	}
}

// TestPeerWritesItsHeaders: a peer that needs a header only it knows (a
// key it made) writes it to its headers file before it answers; the
// readiness check and the load send it. A malformed line is refused by
// name.
func TestPeerWritesItsHeaders(t *testing.T) {
	bin := peerProxyBin(t)
	up, err := FakeUpstream()
	if err != nil {
		t.Fatal(err)
	}
	defer up.Close()
	command := `echo "X-Peer-Key: k-$$" > "$` + EnvPeerHeaders + `"; PEERPROXY_REQUIRE="X-Peer-Key: k-$$" exec ` + bin
	p, err := StartPeer(t.Context(), PeerSpec{Name: "keyed", Command: command}, up.URL, ChatBody, 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if got := p.Header.Get("X-Peer-Key"); !strings.HasPrefix(got, "k-") {
		t.Fatalf("the peer's header X-Peer-Key %q", got)
	}
	res := Run(t.Context(), "keyed", Load{URL: p.URL + "/v1/chat/completions", Header: p.Header, Body: ChatBody,
		Conns: 2, Duration: 200 * time.Millisecond, Warmup: 50 * time.Millisecond})
	if res.Requests == 0 || res.Errors != 0 {
		t.Errorf("load with the peer's header: %d requests, %d errors (%s)", res.Requests, res.Errors, res.FirstErr)
	}
	_, err = StartPeer(t.Context(), PeerSpec{Name: "garbled", Command: `echo "no colon here" > "$` + EnvPeerHeaders + `"; exec ` + bin}, up.URL, ChatBody, 30*time.Second)
	if err == nil || !strings.Contains(err.Error(), `peer garbled: its headers file holds "no colon here"`) {
		t.Errorf("a malformed headers file: %v", err)
	}
}
