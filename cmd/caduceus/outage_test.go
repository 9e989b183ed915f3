package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/caduceus-dev/caduceus/auth"
	"github.com/caduceus-dev/caduceus/internal/pgtest"
	"github.com/caduceus-dev/caduceus/store"
	"github.com/caduceus-dev/caduceus/store/storetest"
)

// outageHold is how long TestPostgresOutageUnderLoad keeps Postgres
// stopped: past the keys' cache TTL, so every process looks its keys up
// in the stopped store (and must not answer 401), and shorter than an
// operator's 10 s to keep the test short.
const outageHold = auth.DefaultCacheTTL + time.Second

// TestPostgresOutageUnderLoad: three serve processes on a private
// Postgres (internal/pgtest) take governed LLM turns (the official OpenAI
// SDK, without its retries, through the shim gateway to a fake provider),
// trader decisions, executor ticks and key listings from twelve clients;
// Postgres is stopped (pg_ctl stop -m fast) for outageHold and started
// again. While it is gone every request is answered, before the clients'
// timeout: 503 with Retry-After, in the OpenAI envelope on the LLM route
// (store_unavailable, or receipt_not_recorded when the turn ran but its
// receipt could not be stored) and as an RFC 9457 problem
// (store_unavailable) on the management routes, never 401, 403 or 500 and
// never with a receipt id; /readyz says 503 on every process. Once
// Postgres is back every process answers /readyz and takes a write,
// without a restart; the load then runs on until the key's daily budget
// runs out. Every acknowledged turn, decision and tick is stored, every
// receipt id a client was given is stored, the spend settled never passes
// the budget and equals the day's total once the processes stop, no
// reservation is left open, and the audit chain verifies.
func TestPostgresOutageUnderLoad(t *testing.T) {
	if os.Getenv(storetest.EnvPostgres) == "" {
		t.Skip("CADUCEUS_TEST_POSTGRES not set; .ci/run sets it")
	}
	if testing.Short() {
		t.Skip("starts a Postgres server and three serve processes")
	}
	pg := pgtest.Start(t)
	dsn := pg.DSN()
	up := &fakeProvider{name: "openai"}
	upSrv := newHTTPServer(t, up)
	data := t.TempDir()
	// 1500 turns of 800 µ$ (100 output tokens at $8 a million).
	const budgetMicros, turnMicros = 1_200_000, 100 * 8
	file := writeConfig(t, data, oneRouteShim(upSrv, `{input: 0, output: 8, max_output_tokens: 100}`, `{day: 1.2}`))
	storeArgs := []string{"--store", dsn, "--data", data}
	routeKey := newTenantKey(t, storeArgs, "slot-1", "--scopes", "route", "--models", "openai/gpt-4.1")
	opKey := newTenantKey(t, storeArgs, "slot-1", "--scopes", "route,operate")
	cronKey := newTenantKey(t, storeArgs, "slot-1", "--scopes", "operate", "--context", "cron", "--harness", "autotrader")
	adminKey := newTenantKey(t, storeArgs, "slot-1", "--scopes", "admin")
	if code, out, errOut := cli(t, append([]string{"trader", "import", "testdata/strategies.yaml", "--tenant", "slot-1"}, storeArgs...)...); code != 0 {
		t.Fatalf("trader import: %s %s", out, errOut)
	}
	var procs []*proc
	for range 3 {
		procs = append(procs, startProc(t, nil, append([]string{"--config", file, "--skills", exSkills, "--scenario", exScenario}, storeArgs...)...))
	}

	// The load: what each request was answered, by process, kind and
	// phase (0 before the stop, 1 while Postgres is stopped, 2 from its
	// start on: the phase a request was sent in).
	const (
		kTurn = iota
		kDecision
		kTick
		kKeys
		kinds
	)
	kindNames := [kinds]string{"turn", "decision", "tick", "keys"}
	var (
		phase    atomic.Int32
		mu       sync.Mutex
		acks     [3][3][kinds]int   // by process, phase, kind: 2xx answers
		unavail  [3][3][kinds]int   // 503s
		acked    [kinds][]string    // the ids of acknowledged writes
		given    []string           // every receipt id a client was handed
		codes    = map[string]int{} // "kind status code": how many
		bad      []string           // what no client may be answered
		budgeted atomic.Int64       // turns refused for the budget
		wg       sync.WaitGroup
		running  atomic.Bool
	)
	running.Store(true)
	client := &http.Client{Timeout: 30 * time.Second}
	note := func(p, ph, kind, status int, code, id string, hdr http.Header, detail string) {
		mu.Lock()
		defer mu.Unlock()
		codes[fmt.Sprintf("%s %d %s", kindNames[kind], status, code)]++
		if r := hdr.Get("X-Caduceus-Receipt"); r != "" {
			given = append(given, r)
		}
		switch {
		case status/100 == 2:
			acks[p][ph][kind]++
			if id != "" {
				acked[kind] = append(acked[kind], id)
			}
		case status == http.StatusServiceUnavailable:
			unavail[p][ph][kind]++
			if hdr.Get("Retry-After") == "" {
				bad = append(bad, fmt.Sprintf("process %d %s: 503 %s without Retry-After: %s", p, kindNames[kind], code, detail))
			}
			if r := hdr.Get("X-Caduceus-Receipt"); r != "" {
				bad = append(bad, fmt.Sprintf("process %d %s: 503 %s names receipt %s", p, kindNames[kind], code, r))
			}
			want := map[string]bool{"store_unavailable": true}
			if kind == kTurn {
				want["receipt_not_recorded"] = true
			}
			if !want[code] {
				bad = append(bad, fmt.Sprintf("process %d %s: 503 with code %q: %s", p, kindNames[kind], code, detail))
			}
		case kind == kTurn && status == http.StatusTooManyRequests && code == "budget_exceeded":
			budgeted.Add(1)
		default:
			bad = append(bad, fmt.Sprintf("process %d %s (phase %d): %d %s: %s", p, kindNames[kind], ph, status, code, detail))
		}
	}
	// rest sends one management request and notes its answer: a 2xx, or
	// an RFC 9457 problem.
	rest := func(p, kind int, method, path, key, body, id string, hdr ...string) {
		ph := int(phase.Load())
		req, _ := http.NewRequest(method, procs[p].url+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+key)
		if body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		for j := 0; j+1 < len(hdr); j += 2 {
			req.Header.Set(hdr[j], hdr[j+1])
		}
		resp, err := client.Do(req)
		if err != nil {
			mu.Lock()
			bad = append(bad, fmt.Sprintf("process %d %s: no answer: %v", p, kindNames[kind], err))
			mu.Unlock()
			return
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		code := ""
		if resp.StatusCode >= 400 {
			var prob struct{ Code string }
			if !strings.HasPrefix(resp.Header.Get("Content-Type"), "application/problem+json") || json.Unmarshal(b, &prob) != nil {
				mu.Lock()
				bad = append(bad, fmt.Sprintf("process %d %s: %d is not a problem: %s %s", p, kindNames[kind], resp.StatusCode, resp.Header.Get("Content-Type"), b))
				mu.Unlock()
			}
			code = prob.Code
		}
		note(p, ph, kind, resp.StatusCode, code, id, resp.Header, string(b))
		if resp.StatusCode == http.StatusServiceUnavailable {
			time.Sleep(100 * time.Millisecond) // the client's back-off
		}
	}
	// turn takes one governed turn through the official SDK.
	sdks := make([]openai.Client, len(procs))
	for p := range procs {
		sdks[p] = openai.NewClient(option.WithBaseURL(procs[p].url+"/v1/"), option.WithAPIKey(routeKey),
			option.WithMaxRetries(0), option.WithRequestTimeout(30*time.Second))
	}
	turn := func(p, c, i int) {
		ph := int(phase.Load())
		var hr *http.Response
		_, err := sdks[p].Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{
			Model: "gpt-4.1", MaxTokens: openai.Int(100),
			Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage(fmt.Sprintf("turn %d of client %d", i, c))},
		}, option.WithResponseInto(&hr))
		var ae *openai.Error
		switch {
		case err == nil:
			note(p, ph, kTurn, hr.StatusCode, "", hr.Header.Get("X-Caduceus-Receipt"), hr.Header, "")
		case errors.As(err, &ae):
			note(p, ph, kTurn, ae.StatusCode, ae.Code, "", ae.Response.Header, ae.RawJSON())
			if ae.StatusCode == http.StatusServiceUnavailable {
				time.Sleep(100 * time.Millisecond) // the client's back-off
			}
		default:
			mu.Lock()
			bad = append(bad, fmt.Sprintf("process %d turn: no answer: %v", p, err))
			mu.Unlock()
		}
	}
	modes := []string{"normal", "reduced", "defensive"}
	for c := range 12 {
		p, kind := c%3, c/3
		wg.Go(func() {
			for i := 0; running.Load(); i++ {
				switch kind {
				case kTurn:
					turn(p, c, i)
				case kDecision:
					id := fmt.Sprintf("dec_out_%d_%d", c, i)
					rest(p, kDecision, "POST", "/v1/trader/decisions", opKey, decisionBody(id, modes[i%3], "outage test"), id)
				case kTick:
					id := fmt.Sprintf("tick-out-%d-%06d", c, i)
					rest(p, kTick, "POST", "/v1/executor/ticks", cronKey, tickBody("outage test"), id, "Idempotency-Key", id)
				case kKeys:
					rest(p, kKeys, "GET", "/v1/admin/keys", adminKey, "", "")
				}
			}
		})
	}
	stopLoad := func() {
		running.Store(false)
		wg.Wait()
	}
	defer stopLoad()
	// await polls cond (under mu) until it holds, or fails the test
	// after limit naming what.
	await := func(what string, limit time.Duration, cond func() bool) {
		t.Helper()
		for start := time.Now(); ; time.Sleep(20 * time.Millisecond) {
			mu.Lock()
			ok := cond()
			mu.Unlock()
			if ok {
				return
			}
			if time.Since(start) > limit {
				mu.Lock()
				defer mu.Unlock()
				t.Fatalf("%s: not within %v; answers so far %v; first bad: %v", what, limit, codes, bad[:min(len(bad), 5)])
			}
		}
	}
	every := func(ph, min int, of *[3][3][kinds]int, ks ...int) func() bool {
		return func() bool {
			for p := range procs {
				for _, k := range ks {
					if of[p][ph][k] < min {
						return false
					}
				}
			}
			return true
		}
	}
	ready := func(p int) int {
		resp, err := client.Get(procs[p].url + "/readyz")
		if err != nil {
			t.Fatalf("process %d /readyz: %v", p, err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}

	// Before: every process acknowledges every kind.
	await("every process acknowledges turns, decisions, ticks and key listings", 60*time.Second, every(0, 3, &acks, kTurn, kDecision, kTick, kKeys))
	phase.Store(1)
	pg.Stop()
	stopped := time.Now()
	// While it is stopped: /readyz says 503 on every process, and every
	// process answers every kind 503.
	for p := range procs {
		for ready(p) != http.StatusServiceUnavailable {
			if time.Since(stopped) > 30*time.Second {
				t.Fatalf("process %d still says ready 30 s after Postgres stopped", p)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	await("every process answers every kind 503 while Postgres is stopped", 30*time.Second, every(1, 1, &unavail, kTurn, kDecision, kTick, kKeys))
	seen := time.Since(stopped)
	time.Sleep(time.Until(stopped.Add(outageHold))) // the outage itself
	for p := range procs {
		if st := ready(p); st != http.StatusServiceUnavailable {
			t.Errorf("process %d /readyz answers %d with Postgres stopped", p, st)
		}
	}
	phase.Store(2)
	pg.Start()
	started := time.Now()

	// After: each process is ready and takes a write of its own, without
	// a restart.
	recovered := make([]time.Duration, len(procs))
	for p := range procs {
		for n := 0; ; n++ {
			if ready(p) == http.StatusOK {
				id := fmt.Sprintf("dec_back_%d_%d", p, n)
				req, _ := http.NewRequest("POST", procs[p].url+"/v1/trader/decisions", strings.NewReader(decisionBody(id, "normal", "back")))
				req.Header.Set("Authorization", "Bearer "+opKey)
				req.Header.Set("Content-Type", "application/json")
				if resp, err := client.Do(req); err == nil {
					resp.Body.Close()
					if resp.StatusCode/100 == 2 {
						mu.Lock()
						acked[kDecision] = append(acked[kDecision], id)
						mu.Unlock()
						recovered[p] = time.Since(started)
						break
					}
				}
			}
			if time.Since(started) > 60*time.Second {
				t.Fatalf("process %d does not serve 60 s after Postgres started again", p)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	t.Logf("Postgres stopped: first 503s of every kind on every process %v after; held %v; every process ready and writing %v after the start (by process: %v)",
		seen.Round(time.Millisecond), outageHold, max(recovered[0], recovered[1], recovered[2]).Round(time.Millisecond), recovered)
	// The load runs on until every process acknowledged every kind again
	// and the budget ran out.
	await("every process acknowledges every kind after the outage", 60*time.Second, every(2, 3, &acks, kTurn, kDecision, kTick, kKeys))
	await("the key's budget runs out", 120*time.Second, func() bool { return budgeted.Load() > 0 })
	stopLoad()
	for _, p := range procs {
		p.stop(t)
	}

	mu.Lock()
	defer mu.Unlock()
	for _, b := range bad[:min(len(bad), 10)] {
		t.Errorf("%s", b)
	}
	if len(bad) > 10 {
		t.Errorf("... and %d more", len(bad)-10)
	}
	t.Logf("answers (kind status code: count): %v", codes)
	var turnsBefore, turnsAfter, during int
	for p := range procs {
		turnsBefore += acks[p][0][kTurn]
		turnsAfter += acks[p][2][kTurn]
		for k := range kinds {
			during += unavail[p][1][k]
		}
	}
	t.Logf("turns answered: %d before the stop, %d after the start; %d answers 503 while stopped; %d turns refused for the budget",
		turnsBefore, turnsAfter, during, budgeted.Load())

	db, err := store.Open(context.Background(), dsn, "")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	one := func(q string, args ...any) int64 {
		t.Helper()
		got, err := store.AppendRows([]int64(nil), store.QueryRows(t.Context(), db, "n", store.ScanValue[int64], q, args...))
		if err != nil || len(got) != 1 {
			t.Fatalf("%s: %v %v", q, got, err)
		}
		return got[0]
	}
	strs := func(q string) map[string]bool {
		t.Helper()
		got, err := store.AppendRows([]string(nil), store.QueryRows(t.Context(), db, "ids", store.ScanValue[string], q))
		if err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		set := map[string]bool{}
		for _, s := range got {
			set[s] = true
		}
		return set
	}
	receipts := strs(`SELECT id FROM shim_receipts`)
	for _, id := range append(acked[kTurn], given...) {
		if !receipts[id] {
			t.Errorf("receipt %s, handed to a client, is not in the store", id)
		}
	}
	decisions := strs(`SELECT decision_id FROM trader_decisions`)
	for _, id := range acked[kDecision] {
		if !decisions[id] {
			t.Errorf("acknowledged decision %s is not in the store", id)
		}
	}
	ticks := strs(`SELECT key FROM idempotency WHERE scope = 'executor.tick' AND result IS NOT NULL`)
	for _, id := range acked[kTick] {
		if !ticks[id] {
			t.Errorf("acknowledged tick %s is not in the store", id)
		}
	}
	settled := one(`SELECT COALESCE(SUM(settled), 0) FROM shim_spend WHERE state = 'settled'`)
	if settled > budgetMicros {
		t.Errorf("settled %d µ$, past the budget of %d", settled, budgetMicros)
	}
	if answered := int64(len(acked[kTurn])) * turnMicros; settled < answered {
		t.Errorf("settled %d µ$ for %d answered turns of %d µ$: some answered turns are not paid for", settled, len(acked[kTurn]), turnMicros)
	}
	if open := one(`SELECT COUNT(*) FROM shim_spend WHERE state = 'reserved'`); open != 0 {
		t.Errorf("%d reservations open after every process stopped", open)
	}
	// A turn that ran while its receipt could not be stored (503
	// receipt_not_recorded) was paid for upstream but its settlement could
	// not be written: its cost stays held in its process's lease, which
	// the processes could return only in part when they stopped. The
	// day's total counts it, so the budget holds it as spent.
	held := one(`SELECT COALESCE(SUM(amount), 0) FROM shim_spend_leases WHERE state = 'open'`)
	unrecorded := int64(codes["turn 503 receipt_not_recorded"])
	if held > unrecorded*turnMicros {
		t.Errorf("open leases hold %d µ$ after every process stopped; the %d turns that ran unrecorded cost at most %d", held, unrecorded, unrecorded*turnMicros)
	}
	day := one(`SELECT COALESCE(SUM(amount), 0) FROM shim_spend_totals WHERE scope LIKE 'key:%' AND length(period) = 10`)
	if day != settled+held {
		t.Errorf("the key's day total is %d µ$; the settled spend %d and what open leases hold %d", day, settled, held)
	}
	if day > budgetMicros {
		t.Errorf("the key's day total is %d µ$, past the budget of %d", day, budgetMicros)
	}
	code, out, errOut := cli(t, append([]string{"audit", "verify"}, storeArgs...)...)
	if code != 0 || !strings.HasPrefix(out, "ok: verified") {
		t.Errorf("audit verify: %d %s %s", code, out, errOut)
	}
	t.Logf("stored: %d receipts (%d acknowledged), %d decisions (%d acknowledged), %d ticks (%d acknowledged); settled %d µ$, %d µ$ held by open leases, day total %d µ$ of %d; %s",
		len(receipts), len(acked[kTurn]), len(decisions), len(acked[kDecision]), len(ticks), len(acked[kTick]), settled, held, day, budgetMicros, strings.TrimSpace(out))
}
