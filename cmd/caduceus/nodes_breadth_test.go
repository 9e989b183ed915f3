package main

import (
	"io"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/caduceus-dev/caduceus/store/storetest"
)

// TestTwoProcessesShareRateLimitsAndRouteHealth: two serve processes on
// one Postgres, configured as docs/shim.md's load-balancing example with
// one key's rpm of 10.
//
//   - 40 requests of that key at once, half to each process, are answered
//     exactly 10 times; the 30 others are 429 rate_limit_exceeded with the
//     provider's rate-limit headers, and reach no provider.
//   - azure-eu answering 503: once process A found it unhealthy (three
//     failures in a row), B sends it nothing, and both report it in
//     /metrics as caduceus_shim_route_healthy 0.
func TestTwoProcessesShareRateLimitsAndRouteHealth(t *testing.T) {
	dsn := os.Getenv(storetest.EnvPostgres)
	if dsn == "" {
		t.Skip("CADUCEUS_TEST_POSTGRES not set; .ci/run sets it")
	}
	if testing.Short() {
		t.Skip("starts two serve processes")
	}
	pg := storetest.FreshSchema(t, dsn)
	conf, ups := balanceExampleAtFakes(t)
	data := t.TempDir()
	storeArgs := []string{"--store", pg, "--data", data}
	mkKey := func() string {
		t.Helper()
		code, out, errOut := cli(t, append([]string{"keys", "create", "--tenant", "slot-1", "--scopes", "route", "--models", "azure-eu/gpt-4.1,azure-us/gpt-4.1,openai/gpt-4.1"}, storeArgs...)...)
		if code != 0 {
			t.Fatalf("keys create: %s", errOut)
		}
		return strings.TrimSpace(out)
	}
	limited, other := mkKey(), mkKey()
	conf = strings.Replace(conf, "  route_health:", "  budgets:\n    keys: {"+strings.Split(limited, "_")[1]+": {rpm: 10}}\n  route_health:", 1)
	file := writeConfig(t, data, conf)
	env := []string{"AZURE_EU_KEY=sk-eu", "AZURE_US_KEY=sk-us", "OPENAI_API_KEY=sk-openai"}
	a := startProc(t, env, append([]string{"--config", file}, storeArgs...)...)
	b := startProc(t, env, append([]string{"--config", file}, storeArgs...)...)
	client := &http.Client{Timeout: 30 * time.Second}
	turn := func(p *proc, key string) (int, http.Header, string) {
		t.Helper()
		req, _ := http.NewRequest("POST", p.url+"/v1/chat/completions", strings.NewReader(`{"model":"gpt-4.1","max_tokens":100,"messages":[{"role":"user","content":"hi"}]}`))
		req.Header.Set("Authorization", "Bearer "+key)
		req.Header.Set("Content-Type", "application/json")
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, resp.Header, string(body)
	}
	calls := func() (n int32) {
		for _, f := range ups {
			n += f.calls.Load()
		}
		return n
	}

	// The key's rpm across the two processes. The windows are UTC
	// minutes: start well before a minute ends.
	startEarlyInMinute(45)
	before := calls()
	var mu sync.Mutex
	got := map[int]int{}
	var wg sync.WaitGroup
	for i := range 40 {
		p := a
		if i%2 == 1 {
			p = b
		}
		wg.Go(func() {
			st, h, body := turn(p, limited)
			if st == http.StatusTooManyRequests && (!strings.Contains(body, "rate_limit_exceeded") ||
				h.Get("X-Ratelimit-Limit-Requests") != "10" || h.Get("X-Ratelimit-Remaining-Requests") != "0" || h.Get("Retry-After") == "") {
				t.Errorf("a refusal past the rpm: %v %s", h, body)
			}
			mu.Lock()
			got[st]++
			mu.Unlock()
		})
	}
	wg.Wait()
	if got[200] != 10 || got[429] != 30 {
		t.Fatalf("40 requests at once against an rpm of 10 on two processes: %v", got)
	}
	if n := calls() - before; n != 10 {
		t.Fatalf("the providers were called %d times for 10 answers", n)
	}

	// Route health: A finds azure-eu failing; B skips it.
	ups["azure-eu"].fail.Store(503)
	for i := 0; ; i++ {
		if i == 60 {
			t.Fatal("A did not find azure-eu unhealthy in 60 requests")
		}
		if st, _, body := turn(a, other); st != 200 {
			t.Fatalf("A with azure-eu failing: %d %s", st, body)
		}
		if strings.Contains(metricsOf(t, a), `caduceus_shim_route_healthy{route="azure-eu"} 0`) {
			break
		}
	}
	found := time.Now()
	euCalls := ups["azure-eu"].calls.Load()
	for range 30 {
		if st, _, body := turn(b, other); st != 200 {
			t.Fatalf("B after A found azure-eu unhealthy: %d %s", st, body)
		}
	}
	if n := ups["azure-eu"].calls.Load() - euCalls; n != 0 {
		t.Fatalf("B sent azure-eu %d of 30 requests after A found it unhealthy (%v before)", n, time.Since(found))
	}
	if m := metricsOf(t, b); !strings.Contains(m, `caduceus_shim_route_healthy{route="azure-eu"} 0`) {
		t.Errorf("B's /metrics does not report azure-eu unhealthy:\n%s", m)
	}
}

// metricsOf is p's /metrics scrape.
func metricsOf(t *testing.T, p *proc) string {
	t.Helper()
	resp, err := http.Get(p.url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}
