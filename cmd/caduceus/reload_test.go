package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/caduceus-dev/caduceus/store"
)

// holdingProvider is a fakeProvider that holds a request whose body holds
// "HOLD ME" until release is closed, after telling arrived.
type holdingProvider struct {
	*fakeProvider
	arrived chan struct{}
	release chan struct{}
}

func (h *holdingProvider) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	if bytes.Contains(b, []byte("HOLD ME")) {
		close(h.arrived)
		<-h.release
	}
	r.Body = io.NopCloser(bytes.NewReader(b))
	h.fakeProvider.ServeHTTP(w, r)
}

// serveLog is a child serve's stderr, line by line, for waiting on lines.
type serveLog struct {
	mu    sync.Mutex
	cond  *sync.Cond
	lines []string
	done  bool
}

func newServeLog(r io.Reader) *serveLog {
	l := &serveLog{}
	l.cond = sync.NewCond(&l.mu)
	go func() {
		sc := bufio.NewScanner(r)
		for sc.Scan() {
			l.mu.Lock()
			l.lines = append(l.lines, sc.Text())
			l.cond.Broadcast()
			l.mu.Unlock()
		}
		l.mu.Lock()
		l.done = true
		l.cond.Broadcast()
		l.mu.Unlock()
	}()
	return l
}

// mark is the number of lines logged so far.
func (l *serveLog) mark() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.lines)
}

// wait returns the first line at or after from holding sub; it fails the
// test when the process's log ends first.
func (l *serveLog) wait(t *testing.T, from int, sub string) string {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	for i := from; ; i++ {
		for i >= len(l.lines) && !l.done {
			l.cond.Wait()
		}
		if i >= len(l.lines) {
			t.Fatalf("serve's log ended without %q:\n%s", sub, strings.Join(l.lines, "\n"))
		}
		if strings.Contains(l.lines[i], sub) {
			return l.lines[i]
		}
	}
}

func (l *serveLog) since(from int) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.lines[from:]...)
}

// startServeProcess runs serve with args (and env added to the test's
// environment) in a child process, as the real binary, and waits for it
// to listen.
func startServeProcess(t *testing.T, env []string, args ...string) (*exec.Cmd, *serveLog, string) {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	args = append([]string{"serve", "--addr", "127.0.0.1:0"}, args...)
	child := exec.Command(self, "-test.run=^$")
	child.Env = append(append(os.Environ(), env...), "CADUCEUS_TEST_RUN_MAIN=1", "CADUCEUS_TEST_ARGS="+strings.Join(args, " "))
	stderr, err := child.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	child.Stdout = io.Discard
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { child.Process.Kill(); child.Wait() })
	log := newServeLog(stderr)
	return child, log, listenRE.FindStringSubmatch(log.wait(t, 0, "listening on "))[1]
}

// reloadConf is the test's config: model gpt-4.1 on route, at the price
// factor times (input 2, cached input 1, output 8 dollars per million
// tokens), and tenant slot-2 with a budget of one microdollar a day when
// tight.
func reloadConf(a, b, route string, factor int, tight bool, extra string) string {
	conf := fmt.Sprintf(`shim:
  routes:
    a: {kind: openai, base_url: %s/v1, models: [gpt-4.1]}
    b: {kind: openai, base_url: %s/v1, models: [gpt-4.1]}
  plans:
    main:
      failover: none
      models:
        gpt-4.1: [{route: %s}]
  prices:
    openai/gpt-4.1: {input: %d, cached_input: %d, output: %d, max_output_tokens: 4096}
  budgets:
    key: {day: 1000}
`, a, b, route, 2*factor, factor, 8*factor)
	if tight {
		conf += "    tenants: {slot-2: {day: 0.000001}}\n"
	}
	return conf + extra
}

// TestReloadUnderLoad reloads a serve process (SIGHUP, then caduceus
// reload) while 8 clients call its LLM route: the reload changes the plan's
// route, the price and a budget; the requests after it use the new config,
// none fails, and one in flight during it completes on the old route. A
// config that fails its checks is refused whole, the log says why, and the
// config in force stays.
func TestReloadUnderLoad(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a serve process")
	}
	upA := &holdingProvider{fakeProvider: &fakeProvider{name: "route-a"}, arrived: make(chan struct{}), release: make(chan struct{})}
	upB := &fakeProvider{name: "route-b"}
	srvA, srvB := newHTTPServer(t, upA), newHTTPServer(t, upB)
	var releaseOnce sync.Once
	release := func() { releaseOnce.Do(func() { close(upA.release) }) }
	t.Cleanup(release) // before the fakes close, on a failure too
	data := t.TempDir()
	file := filepath.Join(data, "caduceus.yaml")
	write := func(conf string) {
		t.Helper()
		if err := os.WriteFile(file, []byte(conf), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(reloadConf(srvA, srvB, "a", 1, false, ""))
	mk := func(tenant string) string {
		t.Helper()
		code, out, errOut := cli(t, "keys", "create", "--tenant", tenant, "--scopes", "route", "--models", "openai/gpt-4.1", "--data", data)
		if code != 0 {
			t.Fatalf("keys create: %s", errOut)
		}
		return strings.TrimSpace(out)
	}
	llmKey, probeKey := mk("slot-1"), mk("slot-2")

	child, log, url := startServeProcess(t, nil, "--config", file, "--data", data, "--gates", "shim", "--mcp-allowed-origin", "https://flag.example")
	// caduceus reload finds the serve through its data directory.
	log.wait(t, 0, `msg="shim plan"`)

	client := &http.Client{Timeout: 60 * time.Second}
	chat := func(key, content string) (status int, body, receipt string, err error) {
		req, _ := http.NewRequest("POST", url+"/v1/chat/completions", strings.NewReader(
			fmt.Sprintf(`{"model":"gpt-4.1","max_tokens":50,"messages":[{"role":"user","content":%q}]}`, content)))
		req.Header.Set("Authorization", "Bearer "+key)
		req.Header.Set("Content-Type", "application/json")
		resp, err := client.Do(req)
		if err != nil {
			return 0, "", "", err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b), resp.Header.Get("X-Caduceus-Receipt"), err
	}
	servedBy := func(body string) string {
		for _, r := range []string{"route-a", "route-b"} {
			if strings.Contains(body, "from "+r) {
				return r
			}
		}
		return "?"
	}
	if code, body, _, err := chat(probeKey, "probe"); err != nil || code != 200 || servedBy(body) != "route-a" {
		t.Fatalf("slot-2 before the reload: %d %v %s", code, err, body)
	}

	// The load. phase is the config in force as the test knows it: 1
	// before the first reload, 2 while it is under way, 3 once serve has
	// logged it, 4 during the second (caduceus reload), 5 once it is
	// logged. Each answer is kept with the phases at its start and end.
	type answer struct {
		from, to int
		by       string
		receipt  string
	}
	var (
		phase     atomic.Int32
		stop      atomic.Bool
		mu        sync.Mutex
		answers   []answer
		failures  []string
		wg        sync.WaitGroup
		answered  = make(chan struct{}) // told only while awaitAnswers waits
		turnCount atomic.Int64
	)
	phase.Store(1)
	t.Cleanup(func() { stop.Store(true); wg.Wait() })
	for range 8 {
		wg.Go(func() {
			for !stop.Load() {
				from := int(phase.Load())
				code, body, receipt, err := chat(llmKey, fmt.Sprintf("turn %d", turnCount.Add(1)))
				to := int(phase.Load())
				mu.Lock()
				if err != nil || code != 200 {
					failures = append(failures, fmt.Sprintf("phase %d-%d: %d %v %s", from, to, code, err, body))
				} else {
					answers = append(answers, answer{from, to, servedBy(body), receipt})
				}
				mu.Unlock()
				select {
				case answered <- struct{}{}:
				default:
				}
			}
		})
	}
	// awaitAnswers waits for n more answers of the load.
	awaitAnswers := func(n int) {
		for range n {
			<-answered
		}
	}
	awaitAnswers(30)

	// A request in flight on the old config: route a holds it.
	held := make(chan answer, 1)
	go func() {
		code, body, receipt, err := chat(llmKey, "HOLD ME")
		if err != nil || code != 200 {
			mu.Lock()
			failures = append(failures, fmt.Sprintf("the held request: %d %v %s", code, err, body))
			mu.Unlock()
		}
		held <- answer{by: servedBy(body), receipt: receipt}
	}()
	<-upA.arrived

	// SIGHUP with a config that moves the plan to route b, doubles the
	// price and gives slot-2 a budget of a microdollar (and changes the log
	// level, which a reload does not change).
	write("log_level: debug\nmcp_allowed_origins: [https://file.example]\n" + reloadConf(srvA, srvB, "b", 2, true, ""))
	m := log.mark()
	phase.Store(2)
	if err := child.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	log.wait(t, m, `msg="config reloaded"`)
	phase.Store(3)
	if line := log.wait(t, m, "change only at a restart"); !strings.Contains(line, "settings=log_level") {
		t.Errorf("the reload's warning does not name log_level: %s", line)
	}
	// The flag still wins over the file.
	mcp := func(origin string) string {
		req, _ := http.NewRequest("POST", url+"/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`))
		req.Header.Set("Authorization", "Bearer "+llmKey)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Origin", origin)
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return fmt.Sprintf("%d %s", resp.StatusCode, b)
	}
	if got := mcp("https://file.example"); !strings.Contains(got, "origin_refused") {
		t.Errorf("/mcp from the origin of the reloaded file, not of the flag: %s (want origin_refused: the flag wins)", got)
	}
	if got := mcp("https://flag.example"); strings.Contains(got, "origin_refused") {
		t.Errorf("/mcp from the flag's origin after the reload: %s", got)
	}
	awaitAnswers(30)
	if code, body, _, err := chat(probeKey, "probe"); err != nil || code != 429 || !strings.Contains(body, "budget_exceeded") {
		t.Errorf("slot-2 after the reload (a budget of one microdollar): %d %v %s", code, err, body)
	}
	release()
	h := <-held
	if h.by != "route-a" {
		t.Errorf("the request in flight during the reload was answered by %s, want route-a (the config it started on)", h.by)
	}

	// A config that fails its checks (a plan naming no route) is refused
	// whole: the log says why, and the config in force stays.
	write(reloadConf(srvA, srvB, "nowhere", 5, false, ""))
	m = log.mark()
	if err := child.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	if line := log.wait(t, m, "reload refused"); !strings.Contains(line, "nowhere") || !strings.Contains(line, "level=ERROR") {
		t.Errorf("the refusal does not say why: %s", line)
	}
	awaitAnswers(30)
	if code, body, _, err := chat(probeKey, "probe"); err != nil || code != 429 {
		t.Errorf("slot-2 after the refused reload: %d %v %s (want the budget in force, 429)", code, err, body)
	}

	// caduceus reload: back to route a at the same price (phase 5), then a
	// refused one.
	write(reloadConf(srvA, srvB, "a", 2, false, ""))
	m = log.mark()
	phase.Store(4)
	code, out, errOut := cli(t, "reload", "--data", data)
	if code != 0 || !strings.Contains(out, "reloaded "+file) {
		t.Fatalf("caduceus reload: %d %s %s", code, out, errOut)
	}
	log.wait(t, m, `msg="config reloaded"`)
	phase.Store(5)
	awaitAnswers(30)
	if code, body, _, err := chat(probeKey, "probe"); err != nil || code != 200 || servedBy(body) != "route-a" {
		t.Errorf("slot-2 after caduceus reload (no budget of its own): %d %v %s", code, err, body)
	}
	write("shim:\n  routes: {a: {kind: openai, base_url: " + srvA + "/v1, models: [gpt-4.1]}}\n  upstreams: {openai: " + srvB + "}\n  plans: {main: {models: {gpt-4.1: [{route: a}]}}}\n")
	m = log.mark()
	code, out, errOut = cli(t, "reload", "--data", data)
	if code != 1 || !strings.Contains(errOut, "reload refused: shim.upstreams and shim.routes exclude each other") {
		t.Errorf("caduceus reload of a bad config: %d %q %q", code, out, errOut)
	}
	log.wait(t, m, "reload refused")
	awaitAnswers(30)

	stop.Store(true)
	wg.Wait()
	if err := child.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := child.Wait(); err != nil {
		t.Fatalf("serve exited with %v:\n%s", err, strings.Join(log.since(0), "\n"))
	}
	for _, f := range failures {
		t.Errorf("a request failed: %s", f)
	}
	// Once serve has stopped, caduceus reload signals nothing: not with its
	// pid file gone, nor with one a dead serve left (here naming this test's
	// own process, which a SIGHUP would end).
	if code, _, errOut := cli(t, "reload", "--data", data); code != 1 || !strings.Contains(errOut, "no serve is running") {
		t.Errorf("caduceus reload with no serve: %d %s", code, errOut)
	}
	if err := os.WriteFile(filepath.Join(data, "caduceus.pid"), []byte(fmt.Sprintf("%d\n", os.Getpid())), 0o600); err != nil {
		t.Fatal(err)
	}
	if code, _, errOut := cli(t, "reload", "--data", data); code != 1 || !strings.Contains(errOut, "did not stop cleanly") {
		t.Errorf("caduceus reload with a stale pid file: %d %s", code, errOut)
	}
	for _, line := range log.since(0) {
		if strings.Contains(line, "level=ERROR") && !strings.Contains(line, "reload refused") {
			t.Errorf("logged: %s", line)
		}
	}

	// Which route answered, and at which price, by phase.
	db, err := store.Open(context.Background(), "", data)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	settled := func(receipt string) int64 {
		t.Helper()
		var v int64
		if err := db.QueryRow(t.Context(), `SELECT settled FROM shim_spend WHERE id = ?`, receipt+"-0").Scan(&v); err != nil {
			t.Fatalf("the spend of receipt %s: %v", receipt, err)
		}
		return v
	}
	const v1Cost = 600*2 + 400*1 + 100*8 // microdollars: 1000 tokens in (400 cached), 100 out
	if got := settled(h.receipt); got != v1Cost {
		t.Errorf("the held request cost %d µ$, want %d (the price it started on)", got, v1Cost)
	}
	want := map[int]struct {
		by   string
		cost int64
	}{1: {"route-a", v1Cost}, 3: {"route-b", 2 * v1Cost}, 5: {"route-a", 2 * v1Cost}}
	count := map[int]int{}
	for _, a := range answers {
		if _, steady := want[a.from]; !steady || a.from != a.to {
			continue // started or ended while a reload was under way
		}
		count[a.from]++
		if w := want[a.from]; a.by != w.by {
			t.Errorf("a request of phase %d was answered by %s, want %s", a.from, a.by, w.by)
		} else if got := settled(a.receipt); got != w.cost {
			t.Errorf("a request of phase %d cost %d µ$, want %d", a.from, got, w.cost)
		}
	}
	for _, p := range []int{1, 3, 5} {
		if count[p] < 10 {
			t.Errorf("only %d requests wholly in phase %d", count[p], p)
		}
	}
	t.Logf("%d answers (by phase %v), %d failures", len(answers), count, len(failures))
}

// TestReloadRelayPlatforms reloads the relay's platform entries: a bot the
// re-read file adds answers its webhooks, one it drops no longer does, and
// a file whose new bot names an empty env: secret is refused whole.
func TestReloadRelayPlatforms(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a serve process")
	}
	data := t.TempDir()
	file := filepath.Join(data, "caduceus.yaml")
	conf := func(bots string) string {
		return "relay:\n  telegram_base_url: http://127.0.0.1:9\n  gateways:\n    gw-a: {tenant: slot-1, secrets: [\"env:RELOAD_GW_SECRET\"]}\n  telegram:\n" + bots
	}
	const (
		oldBot = "    oldbot: {token: \"env:RELOAD_TG_TOKEN\", secret_token: old-webhook-secret, tenant: slot-1}\n"
		newBot = "    newbot: {token: \"env:RELOAD_TG_TOKEN\", secret_token: new-webhook-secret, tenant: slot-2}\n"
		badBot = "    badbot: {token: \"env:RELOAD_NO_SUCH_TOKEN\", secret_token: bad-webhook-secret, tenant: slot-2}\n"
	)
	if err := os.WriteFile(file, []byte(conf(oldBot)), 0o600); err != nil {
		t.Fatal(err)
	}
	_, log, url := startServeProcess(t, []string{"RELOAD_GW_SECRET=a-shared-gateway-secret-of-40-characters", "RELOAD_TG_TOKEN=123:TGTOKEN"},
		"--config", file, "--data", data, "--gates", "relay")
	post := func(bot, secret string) int {
		t.Helper()
		update := `{"update_id":1,"message":{"message_id":77,"from":{"id":42,"first_name":"Al"},"chat":{"id":-1001,"type":"supergroup","title":"Team"},"date":1700000000,"text":"hello agent"}}`
		req, _ := http.NewRequest("POST", url+"/hooks/telegram/"+bot, strings.NewReader(update))
		req.Header.Set("X-Telegram-Bot-Api-Secret-Token", secret)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if a, b := post("oldbot", "old-webhook-secret"), post("newbot", "new-webhook-secret"); a != 200 || b == 200 {
		t.Fatalf("before the reload: oldbot %d, newbot %d (want 200 and a refusal)", a, b)
	}
	if err := os.WriteFile(file, []byte(conf(newBot)), 0o600); err != nil {
		t.Fatal(err)
	}
	m := log.mark()
	if code, out, errOut := cli(t, "reload", "--data", data); code != 0 {
		t.Fatalf("caduceus reload: %d %s %s", code, out, errOut)
	}
	log.wait(t, m, `msg="config reloaded"`)
	if a, b := post("oldbot", "old-webhook-secret"), post("newbot", "new-webhook-secret"); a == 200 || b != 200 {
		t.Errorf("after the reload: oldbot %d, newbot %d (want a refusal and 200)", a, b)
	}
	if err := os.WriteFile(file, []byte(conf(newBot+badBot)), 0o600); err != nil {
		t.Fatal(err)
	}
	m = log.mark()
	if code, _, errOut := cli(t, "reload", "--data", data); code != 1 || !strings.Contains(errOut, "RELOAD_NO_SUCH_TOKEN") {
		t.Errorf("caduceus reload of a bot whose secret is empty: %d %s", code, errOut)
	}
	if line := log.wait(t, m, "reload refused"); !strings.Contains(line, "RELOAD_NO_SUCH_TOKEN") {
		t.Errorf("the refusal does not name the empty variable: %s", line)
	}
	if b, c := post("newbot", "new-webhook-secret"), post("badbot", "bad-webhook-secret"); b != 200 || c == 200 {
		t.Errorf("after the refused reload: newbot %d, badbot %d (want the config in force: 200 and a refusal)", b, c)
	}
}
