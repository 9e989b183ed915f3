package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
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

// TestServeStopsWithoutLoss: serve as a real process under load from 16
// clients (LLM turns through the governed gateway, trader decisions,
// executor ticks) gets SIGTERM. It stops taking connections, lets what is
// in flight finish, ends its background work (the spend journal, the
// leases, the audit checkpoints) and closes the store last: every receipt,
// spend row, decision and tick a client was answered is in the store, the
// audit chains verify, and nothing is logged as an error after the signal.
func TestServeStopsWithoutLoss(t *testing.T) { eachStore(t, testStopWithoutLoss) }

func testStopWithoutLoss(t *testing.T, serveArgs ...string) {
	if testing.Short() {
		t.Skip("starts a serve process")
	}
	up := &fakeProvider{name: "openai"}
	upSrv := newHTTPServer(t, up)
	data := t.TempDir()
	file := writeConfig(t, data, oneRouteShim(upSrv, `{input: 2, output: 8, max_output_tokens: 4096}`, `{day: 1000}`))
	storeArgs := []string{"--data", data}
	for i, a := range serveArgs {
		if a == "--store" {
			storeArgs = []string{"--store", serveArgs[i+1], "--data", data} // --data: the signing key's directory
		}
	}
	mk := func(args ...string) string { return newKey(t, storeArgs, args...) }
	llmKey := mk("--scopes", "route", "--models", "openai/gpt-4.1")
	opKey := mk("--scopes", "route,operate")
	cronKey := mk("--scopes", "operate", "--context", "cron", "--harness", "autotrader")
	if code, out, errOut := cli(t, append([]string{"trader", "import", "testdata/strategies.yaml"}, storeArgs...)...); code != 0 {
		t.Fatalf("trader import: %s %s", out, errOut)
	}

	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	args := append([]string{"serve", "--addr", "127.0.0.1:0", "--config", file, "--skills", exSkills, "--scenario", exScenario,
		"--audit-checkpoint-file", filepath.Join(data, "checkpoint.json"), "--audit-checkpoint-interval", "1s"}, storeArgs...)
	child := exec.Command(self, "-test.run=^$")
	child.Env = append(os.Environ(), "CADUCEUS_TEST_RUN_MAIN=1", "CADUCEUS_TEST_ARGS="+strings.Join(args, " "))
	stderr, err := child.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	child.Stdout = io.Discard
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { child.Process.Kill(); child.Wait() })
	var logMu sync.Mutex
	var log []string
	listening := make(chan string, 1)
	logDone := make(chan struct{})
	go func() {
		defer close(logDone)
		lines := bufio.NewScanner(stderr)
		for lines.Scan() {
			logMu.Lock()
			log = append(log, lines.Text())
			logMu.Unlock()
			if m := listenRE.FindStringSubmatch(lines.Text()); m != nil {
				listening <- m[1]
			}
		}
	}()
	var url string
	select {
	case <-logDone:
		logMu.Lock()
		defer logMu.Unlock()
		t.Fatalf("serve exited before it listened:\n%s", strings.Join(log, "\n"))
	case url = <-listening:
	case <-time.After(30 * time.Second):
		logMu.Lock()
		defer logMu.Unlock()
		t.Fatalf("serve did not start:\n%s", strings.Join(log, "\n"))
	}

	// The load: each client records what it was answered. loaded is
	// closed once it is enough to stop under (what the check after the
	// stop asks for); stopped once the clients are told to stop.
	var (
		mu                         sync.Mutex
		receipts, decisions, ticks []string
		stopped                    = make(chan struct{})
		n                          atomic.Int64
		wg                         sync.WaitGroup
		loaded                     = make(chan struct{})
	)
	isLoaded := sync.OnceFunc(func() { close(loaded) })
	stop := sync.OnceFunc(func() { close(stopped) })
	defer stop() // a test that failed early lets its clients go
	acked := func(list *[]string, id string) {
		mu.Lock()
		defer mu.Unlock()
		*list = append(*list, id)
		if len(receipts) >= 10 && len(decisions) >= 5 && len(ticks) >= 5 {
			isLoaded()
		}
	}
	stopping := func() bool {
		select {
		case <-stopped:
			return true
		default:
			return false
		}
	}
	client := &http.Client{Timeout: 30 * time.Second}
	post := func(path, key, body string, hdr ...string) (*http.Response, []byte, error) {
		req, _ := http.NewRequest("POST", url+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+key)
		req.Header.Set("Content-Type", "application/json")
		for i := 0; i+1 < len(hdr); i += 2 {
			req.Header.Set(hdr[i], hdr[i+1])
		}
		resp, err := client.Do(req)
		if err != nil {
			return nil, nil, err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		return resp, b, err
	}
	modes := []string{"normal", "reduced", "defensive"}
	for c := range 16 {
		wg.Go(func() {
			for !stopping() {
				i := n.Add(1)
				var err error
				switch {
				case c < 8: // LLM turns, streamed and not
					body := fmt.Sprintf(`{"model":"gpt-4.1","max_tokens":50,"stream":%v,"messages":[{"role":"user","content":"turn %d"}]}`, c%2 == 0, i)
					var resp *http.Response
					if resp, _, err = post("/v1/chat/completions", llmKey, body); err == nil && resp.StatusCode == 200 {
						acked(&receipts, resp.Header.Get("X-Caduceus-Receipt"))
					}
				case c < 12: // trader decisions
					id := fmt.Sprintf("dec_stop_%d", i)
					body := decisionBody(id, modes[i%3], "stop test")
					var resp *http.Response
					if resp, _, err = post("/v1/trader/decisions", opKey, body); err == nil && resp.StatusCode == 200 {
						acked(&decisions, id)
					}
				default: // executor ticks
					key := fmt.Sprintf("tick-stop-%08d", i)
					body := tickBody("stop test")
					var resp *http.Response
					if resp, _, err = post("/v1/executor/ticks", cronKey, body, "Idempotency-Key", key); err == nil && resp.StatusCode == 200 {
						acked(&ticks, key)
					}
				}
				if err != nil { // refused during the stop: stop once told
					<-stopped
					return
				}
			}
		})
	}
	select {
	case <-loaded:
	case <-logDone:
		logMu.Lock()
		defer logMu.Unlock()
		t.Fatalf("serve exited under load:\n%s", strings.Join(log, "\n"))
	case <-time.After(60 * time.Second):
		mu.Lock()
		defer mu.Unlock()
		t.Fatalf("too little load 60 s after the clients began: %d receipts, %d decisions, %d ticks", len(receipts), len(decisions), len(ticks))
	}
	logMu.Lock()
	signalledAt := len(log)
	logMu.Unlock()
	if err := child.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { <-logDone; exited <- child.Wait() }()
	var exitErr error
	select {
	case exitErr = <-exited:
	case <-time.After(60 * time.Second):
		t.Fatal("serve did not stop within 60 s of SIGTERM")
	}
	stop()
	wg.Wait()
	if exitErr != nil {
		t.Fatalf("serve exited with %v:\n%s", exitErr, strings.Join(log, "\n"))
	}
	if len(receipts) < 10 || len(decisions) < 5 || len(ticks) < 5 {
		t.Fatalf("too little load before the signal: %d receipts, %d decisions, %d ticks", len(receipts), len(decisions), len(ticks))
	}
	for _, line := range log[signalledAt:] {
		if strings.Contains(line, "level=ERROR") {
			t.Errorf("logged after SIGTERM: %s", line)
		}
	}

	// Everything acknowledged is in the store.
	dsn, dir := "", data
	if storeArgs[0] == "--store" {
		dsn, dir = storeArgs[1], ""
	}
	db, err := store.Open(context.Background(), dsn, dir)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ids := func(q string) map[string]bool {
		t.Helper()
		got, err := store.AppendRows([]string(nil), store.QueryRows(t.Context(), db, "ids", store.ScanValue[string], q))
		if err != nil {
			t.Fatal(err)
		}
		m := map[string]bool{}
		for _, id := range got {
			m[id] = true
		}
		return m
	}
	missing := func(what string, acked []string, stored map[string]bool, suffix string) {
		for _, id := range acked {
			if !stored[id+suffix] {
				t.Errorf("acknowledged %s %s is not in the store after the stop", what, id)
			}
		}
	}
	missing("receipt", receipts, ids(`SELECT id FROM shim_receipts`), "")
	missing("spend row of receipt", receipts, ids(`SELECT id FROM shim_spend`), "-0")
	missing("decision", decisions, ids(`SELECT decision_id FROM trader_decisions`), "")
	missing("tick", ticks, ids(`SELECT key FROM idempotency WHERE scope = 'executor.tick' AND result IS NOT NULL`), "")
	if open := ids(`SELECT id FROM shim_spend WHERE state = 'reserved'`); len(open) > 0 {
		t.Errorf("%d reservations left open after the stop", len(open))
	}
	if code, out, errOut := cli(t, append([]string{"audit", "verify"}, storeArgs...)...); code != 0 {
		t.Errorf("audit verify after the stop: %d %s %s", code, out, errOut)
	}
	t.Logf("answered before or during the stop: %d receipts, %d decisions, %d ticks", len(receipts), len(decisions), len(ticks))
}

// decisionBody is a trader decision setting the risk mode of the
// testdata strategies' concern (as the load tests send it).
func decisionBody(id, mode, reason string) string {
	return fmt.Sprintf(`{"decision_id":%q,"concern_id":"qndd8o9ppop6:xrpusd","account_id":"qndd8o9ppop6","market_symbol":"xrpusd","action":"set_risk_mode","risk_mode":%q,"reason":%q,"confidence":0.5,"dry_run":false,"override":false,"requested_at":"2026-04-16T20:15:00Z"}`, id, mode, reason)
}

// tickBody is an executor tick buying one SPY share at market.
func tickBody(reason string) string {
	return fmt.Sprintf(`{"payload":{"strategy":"momentum","mode":"live","intents":[{"symbol":"SPY","side":"buy","quantity_type":"shares","qty":1,"order_type":"market","intent_price":481.60,"max_slippage_pct":1,"time_in_force":"gfd","reason":%q}]}}`, reason)
}

// newKey creates a key of tenant slot-1 with args (its scopes, models,
// ...) through `caduceus keys create` on the store storeArgs name.
func newKey(t *testing.T, storeArgs []string, args ...string) string {
	t.Helper()
	return newTenantKey(t, storeArgs, "slot-1", args...)
}

// newTenantKey is newKey for a key of tenant.
func newTenantKey(t *testing.T, storeArgs []string, tenant string, args ...string) string {
	t.Helper()
	code, out, errOut := cli(t, append(append([]string{"keys", "create", "--tenant", tenant}, args...), storeArgs...)...)
	if code != 0 {
		t.Fatalf("keys create --tenant %s %v: %s", tenant, args, errOut)
	}
	return strings.TrimSpace(out)
}

// oneRouteShim is a config's shim section: the fake upstream at url as the
// route openai, serving gpt-4.1 through the plan main (no failover) at
// price, under a budget for every key.
func oneRouteShim(url, price, keyBudget string) string {
	return fmt.Sprintf(`shim:
  routes:
    openai: {kind: openai, base_url: %s/v1, models: [gpt-4.1]}
  plans:
    main:
      failover: none
      models:
        gpt-4.1: [{route: openai}]
  prices:
    openai/gpt-4.1: %s
  budgets:
    key: %s
`, url, price, keyBudget)
}

// writeConfig writes text as dir/caduceus.yaml and returns its path.
func writeConfig(t *testing.T, dir, text string) string {
	t.Helper()
	file := filepath.Join(dir, "caduceus.yaml")
	if err := os.WriteFile(file, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return file
}

// newHTTPServer serves h on a loopback port for the test and returns its URL.
func newHTTPServer(t *testing.T, h http.Handler) string {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv.URL
}
