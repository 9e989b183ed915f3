package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/caduceus-dev/caduceus/store"
)

// The kinds of request a faultLoad sends.
const (
	kTurn = iota
	kDecision
	kTick
	kKeys
	kinds
)

var kindNames = [kinds]string{"turn", "decision", "tick", "keys"}

// faultKeys are the slot-1 keys a faultLoad sends with.
type faultKeys struct{ route, op, cron, admin string }

// newFaultKeys creates the keys of a faultLoad and imports the testdata
// strategies, on the store storeArgs name.
func newFaultKeys(t *testing.T, storeArgs []string) faultKeys {
	t.Helper()
	k := faultKeys{
		route: newTenantKey(t, storeArgs, "slot-1", "--scopes", "route", "--models", "openai/gpt-4.1"),
		op:    newTenantKey(t, storeArgs, "slot-1", "--scopes", "route,operate"),
		cron:  newTenantKey(t, storeArgs, "slot-1", "--scopes", "operate", "--context", "cron", "--harness", "autotrader"),
		admin: newTenantKey(t, storeArgs, "slot-1", "--scopes", "admin"),
	}
	if code, out, errOut := cli(t, append([]string{"trader", "import", "testdata/strategies.yaml", "--tenant", "slot-1"}, storeArgs...)...); code != 0 {
		t.Fatalf("trader import: %s %s", out, errOut)
	}
	return k
}

// faultLoad is the load of the fault tests: four clients per serve
// process, each sending one kind of request in a loop — governed LLM
// turns through the official OpenAI SDK (its retries off), trader
// decisions, executor ticks (each with an Idempotency-Key) and key
// listings — and noting every answer by process, phase (set by the test:
// the phase a request was sent in) and kind. A 2xx is an acknowledgement;
// a 503 must carry Retry-After, no receipt id, and the code
// store_unavailable (or, on a turn, receipt_not_recorded); a turn may be
// refused 429 budget_exceeded; anything else, a missing answer included,
// is bad. A client that is answered 503 backs off: its next request waits
// its turn in the retry lane, which holds one request at a time (the
// next goes once the one before it is answered), so while the store is
// gone the clients retry one after the other, not all at once.
type faultLoad struct {
	t     *testing.T
	procs []*proc
	keys  faultKeys
	phase atomic.Int32

	mu      sync.Mutex
	acks    [][4][kinds]int // by process, phase, kind: 2xx answers
	unavail [][4][kinds]int // 503s
	acked   [kinds][]string // the ids of acknowledged writes
	given   []string        // every receipt id a client was handed
	codes   map[string]int  // "kind status code": how many
	bad     []string        // what no client may be answered
	// failed are the decisions the trader answered 200 "failed" with
	// store_failed (or concurrent_update): its own refusal, recorded as an
	// attempt, nothing changed.
	failed []string

	budgeted atomic.Int64  // turns refused for the budget
	retry    chan struct{} // the retry lane: a request in it holds its one place
	running  atomic.Bool
	wg       sync.WaitGroup
	client   *http.Client
	sdks     []openai.Client
}

// startFaultLoad starts the load on procs.
func startFaultLoad(t *testing.T, procs []*proc, keys faultKeys) *faultLoad {
	l := &faultLoad{t: t, procs: procs, keys: keys, codes: map[string]int{},
		acks: make([][4][kinds]int, len(procs)), unavail: make([][4][kinds]int, len(procs)),
		retry: make(chan struct{}, 1), client: &http.Client{Timeout: 30 * time.Second}}
	for _, p := range procs {
		l.sdks = append(l.sdks, openai.NewClient(option.WithBaseURL(p.url+"/v1/"), option.WithAPIKey(keys.route),
			option.WithMaxRetries(0), option.WithRequestTimeout(30*time.Second)))
	}
	l.running.Store(true)
	modes := []string{"normal", "reduced", "defensive"}
	for c := range kinds * len(procs) {
		p, kind := c%len(procs), c/len(procs)
		l.wg.Go(func() {
			unavailable := false // the last answer was a 503: back off
			for i := 0; l.running.Load(); i++ {
				retrying := unavailable
				if retrying {
					l.retry <- struct{}{} // in the lane once the retry before is answered
				}
				switch kind {
				case kTurn:
					unavailable = l.turn(p, c, i)
				case kDecision:
					id := fmt.Sprintf("dec_fault_%d_%d", c, i)
					unavailable = l.rest(p, kDecision, "POST", "/v1/trader/decisions", keys.op, decisionBody(id, modes[i%3], "fault test"), id)
				case kTick:
					id := fmt.Sprintf("tick-fault-%d-%06d", c, i)
					unavailable = l.rest(p, kTick, "POST", "/v1/executor/ticks", keys.cron, tickBody("fault test"), id, "Idempotency-Key", id)
				case kKeys:
					unavailable = l.rest(p, kKeys, "GET", "/v1/admin/keys", keys.admin, "", "")
				}
				if retrying {
					<-l.retry
				}
			}
		})
	}
	t.Cleanup(l.stop)
	return l
}

// stop ends the load and waits for its clients.
func (l *faultLoad) stop() {
	l.running.Store(false)
	l.wg.Wait()
}

// note records one answer.
func (l *faultLoad) note(p, ph, kind, status int, code, id string, hdr http.Header, detail string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.codes[fmt.Sprintf("%s %d %s", kindNames[kind], status, code)]++
	if r := hdr.Get("X-Caduceus-Receipt"); r != "" {
		l.given = append(l.given, r)
	}
	switch {
	case status/100 == 2 && kind == kDecision && (code == "store_failed" || code == "concurrent_update"):
		l.failed = append(l.failed, id)
	case status/100 == 2 && code != "":
		l.bad = append(l.bad, fmt.Sprintf("process %d %s (phase %d): %d %s: %s", p, kindNames[kind], ph, status, code, detail))
	case status/100 == 2:
		l.acks[p][ph][kind]++
		if id != "" {
			l.acked[kind] = append(l.acked[kind], id)
		}
	case status == http.StatusServiceUnavailable:
		l.unavail[p][ph][kind]++
		if hdr.Get("Retry-After") == "" {
			l.bad = append(l.bad, fmt.Sprintf("process %d %s: 503 %s without Retry-After: %s", p, kindNames[kind], code, detail))
		}
		if r := hdr.Get("X-Caduceus-Receipt"); r != "" {
			l.bad = append(l.bad, fmt.Sprintf("process %d %s: 503 %s names receipt %s", p, kindNames[kind], code, r))
		}
		if code != "store_unavailable" && (kind != kTurn || code != "receipt_not_recorded") {
			l.bad = append(l.bad, fmt.Sprintf("process %d %s: 503 with code %q: %s", p, kindNames[kind], code, detail))
		}
	case kind == kTurn && status == http.StatusTooManyRequests && code == "budget_exceeded":
		l.budgeted.Add(1)
	default:
		l.bad = append(l.bad, fmt.Sprintf("process %d %s (phase %d): %d %s: %s", p, kindNames[kind], ph, status, code, detail))
	}
}

// badf records what no client may be answered.
func (l *faultLoad) badf(format string, args ...any) {
	l.mu.Lock()
	l.bad = append(l.bad, fmt.Sprintf(format, args...))
	l.mu.Unlock()
}

// rest sends one management request and notes its answer: a 2xx, or an
// RFC 9457 problem; it says whether the answer was a 503.
func (l *faultLoad) rest(p, kind int, method, path, key, body, id string, hdr ...string) (unavailable bool) {
	ph := int(l.phase.Load())
	req, _ := http.NewRequest(method, l.procs[p].url+path, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+key)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for j := 0; j+1 < len(hdr); j += 2 {
		req.Header.Set(hdr[j], hdr[j+1])
	}
	resp, err := l.client.Do(req)
	if err != nil {
		l.badf("process %d %s: no answer: %v", p, kindNames[kind], err)
		return false
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	code := ""
	if resp.StatusCode/100 == 2 && kind == kDecision {
		// The trader answers a decision it could not store 200, status
		// failed, with the code store_failed, when it can record the
		// failed attempt.
		var d struct {
			OK     bool
			Status string
			Errors []struct{ Code string }
		}
		if err := json.Unmarshal(b, &d); err != nil {
			l.badf("process %d decision: %d is not a decision's answer: %s", p, resp.StatusCode, b)
		}
		if !d.OK && d.Status == "failed" && len(d.Errors) > 0 {
			code = d.Errors[0].Code
		}
	}
	if resp.StatusCode >= 400 {
		var prob struct{ Code string }
		if !strings.HasPrefix(resp.Header.Get("Content-Type"), "application/problem+json") || json.Unmarshal(b, &prob) != nil {
			l.badf("process %d %s: %d is not a problem: %s %s", p, kindNames[kind], resp.StatusCode, resp.Header.Get("Content-Type"), b)
		}
		code = prob.Code
	}
	l.note(p, ph, kind, resp.StatusCode, code, id, resp.Header, string(b))
	return resp.StatusCode == http.StatusServiceUnavailable
}

// turn takes one governed turn through the official SDK and says whether
// it was answered 503.
func (l *faultLoad) turn(p, c, i int) (unavailable bool) {
	ph := int(l.phase.Load())
	var hr *http.Response
	_, err := l.sdks[p].Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{
		Model: "gpt-4.1", MaxTokens: openai.Int(100),
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage(fmt.Sprintf("turn %d of client %d", i, c))},
	}, option.WithResponseInto(&hr))
	var ae *openai.Error
	switch {
	case err == nil:
		l.note(p, ph, kTurn, hr.StatusCode, "", hr.Header.Get("X-Caduceus-Receipt"), hr.Header, "")
	case errors.As(err, &ae):
		l.note(p, ph, kTurn, ae.StatusCode, ae.Code, "", ae.Response.Header, ae.RawJSON())
		return ae.StatusCode == http.StatusServiceUnavailable
	default:
		l.badf("process %d turn: no answer: %v", p, err)
	}
	return false
}

// await polls cond (under the load's lock) until it holds, or fails the
// test after limit naming what.
func (l *faultLoad) await(what string, limit time.Duration, cond func() bool) {
	l.t.Helper()
	l.awaitUnlocked(what, limit, func() bool {
		l.mu.Lock()
		defer l.mu.Unlock()
		return cond()
	})
}

// awaitUnlocked polls cond (which takes the load's lock itself, if at all)
// every 20 ms until it holds, or fails the test after limit naming what.
func (l *faultLoad) awaitUnlocked(what string, limit time.Duration, cond func() bool) {
	l.t.Helper()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for start := time.Now(); !cond(); <-tick.C {
		if time.Since(start) > limit {
			l.mu.Lock()
			defer l.mu.Unlock()
			l.t.Fatalf("%s: not within %v; answers so far %v; first bad: %v", what, limit, l.codes, l.bad[:min(len(l.bad), 5)])
		}
	}
}

// every is a condition for await: every process has at least n answers
// of each of ks in phase ph, counted in of (l.acks or l.unavail).
func (l *faultLoad) every(of [][4][kinds]int, ph, n int, ks ...int) func() bool {
	return func() bool {
		for p := range l.procs {
			for _, k := range ks {
				if of[p][ph][k] < n {
					return false
				}
			}
		}
		return true
	}
}

// check stops the load and fails the test for every bad answer; it logs
// the answers by kind, status and code.
func (l *faultLoad) check() {
	l.t.Helper()
	l.stop()
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, b := range l.bad[:min(len(l.bad), 10)] {
		l.t.Errorf("%s", b)
	}
	if len(l.bad) > 10 {
		l.t.Errorf("... and %d more", len(l.bad)-10)
	}
	if len(l.bad) > 0 {
		// What the processes logged as errors says why they answered so.
		l.logProcesses("level=ERROR")
	}
	l.t.Logf("answers (kind status code: count): %v", l.codes)
}

// logProcesses logs every line a process wrote to its stderr that holds
// any of marks.
func (l *faultLoad) logProcesses(marks ...string) {
	l.t.Helper()
	for i, p := range l.procs {
		for line := range strings.Lines(p.stderr.String()) {
			if slices.ContainsFunc(marks, func(m string) bool { return strings.Contains(line, m) }) {
				l.t.Logf("process %d logged: %s", i, strings.TrimSpace(line))
			}
		}
	}
}

// runOut lets the load run on until every process acknowledged every
// kind after the fault (phase 2) and the key's budget ran out, checks the
// answers, stops the processes, and says how many answers were 503s
// during the fault (phase 1).
func (l *faultLoad) runOut(fault string) (during int) {
	l.t.Helper()
	l.await("every process acknowledges every kind after "+fault, 60*time.Second, l.every(l.acks, 2, 3, kTurn, kDecision, kTick, kKeys))
	l.await("the key's budget runs out", 120*time.Second, func() bool { return l.budgeted.Load() > 0 })
	l.check()
	for _, p := range l.procs {
		p.stop(l.t)
	}
	for k := range kinds {
		during += l.total(l.unavail, 1, k)
	}
	return during
}

// total is how many answers of kind in phase ph of counts holds, summed
// over the processes.
func (l *faultLoad) total(of [][4][kinds]int, ph, kind int) int {
	n := 0
	for p := range of {
		n += of[p][ph][kind]
	}
	return n
}

// ready is the status of process p's /readyz.
func (l *faultLoad) ready(p int) int {
	l.t.Helper()
	resp, err := l.client.Get(l.procs[p].url + "/readyz")
	if err != nil {
		l.t.Fatalf("process %d /readyz: %v", p, err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// awaitUnready waits until every process answers /readyz 503 (the
// database gone), failing the test after limit.
func (l *faultLoad) awaitUnready(limit time.Duration) {
	l.t.Helper()
	for p := range l.procs {
		l.awaitUnlocked(fmt.Sprintf("process %d says not ready", p), limit, func() bool { return l.ready(p) == http.StatusServiceUnavailable })
	}
}

// awaitWriting waits until every process answers /readyz 200 and
// acknowledges a trader decision of its own (ids prefix_P_N, recorded as
// acknowledged), failing the test after limit; it returns how long after
// since each process took its write.
func (l *faultLoad) awaitWriting(since time.Time, limit time.Duration, prefix string) []time.Duration {
	l.t.Helper()
	took := make([]time.Duration, len(l.procs))
	for p := range l.procs {
		n := 0
		l.awaitUnlocked(fmt.Sprintf("process %d serves and writes again", p), limit, func() bool {
			if l.ready(p) != http.StatusOK {
				return false
			}
			n++
			id := fmt.Sprintf("%s_%d_%d", prefix, p, n)
			req, _ := http.NewRequest("POST", l.procs[p].url+"/v1/trader/decisions", strings.NewReader(decisionBody(id, "normal", prefix)))
			req.Header.Set("Authorization", "Bearer "+l.keys.op)
			req.Header.Set("Content-Type", "application/json")
			resp, err := l.client.Do(req)
			if err != nil {
				return false
			}
			resp.Body.Close()
			if resp.StatusCode/100 != 2 {
				return false
			}
			l.mu.Lock()
			l.acked[kDecision] = append(l.acked[kDecision], id)
			l.mu.Unlock()
			took[p] = time.Since(since)
			return true
		})
	}
	return took
}

// checkStored checks, once the processes have stopped, that db holds every
// receipt a client was handed and every acknowledged decision and tick,
// that the spend settled pays for every answered turn and stays within
// budgetMicros, that no reservation is open, that what open leases still
// hold is at most the cost of the turns that ran while their receipt
// could not be stored, and that the key's day total is the settled spend
// plus what they hold, within the budget. It returns the settled spend and
// what the leases hold.
func (l *faultLoad) checkStored(db *store.DB, budgetMicros, turnMicros int64) (settled, held int64) {
	t := l.t
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	one := func(q string) int64 {
		t.Helper()
		got, err := store.AppendRows([]int64(nil), store.QueryRows(t.Context(), db, "n", store.ScanValue[int64], q))
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
	for _, id := range append(l.acked[kTurn], l.given...) {
		if !receipts[id] {
			t.Errorf("receipt %s, handed to a client, is not in the store", id)
		}
	}
	decisions := strs(`SELECT decision_id FROM trader_decisions`)
	for _, id := range l.acked[kDecision] {
		if !decisions[id] {
			t.Errorf("acknowledged decision %s is not in the store", id)
		}
	}
	attempts := strs(`SELECT decision_id FROM trader_attempts WHERE status = 'failed'`)
	for _, id := range l.failed {
		if decisions[id] || !attempts[id] {
			t.Errorf("decision %s, answered failed, is decided in the store (%v) or its failed attempt is not recorded (%v)", id, decisions[id], attempts[id])
		}
	}
	ticks := strs(`SELECT key FROM idempotency WHERE scope = 'executor.tick' AND result IS NOT NULL`)
	for _, id := range l.acked[kTick] {
		if !ticks[id] {
			t.Errorf("acknowledged tick %s is not in the store", id)
		}
	}
	settled = one(`SELECT COALESCE(SUM(settled), 0) FROM shim_spend WHERE state = 'settled'`)
	if settled > budgetMicros {
		t.Errorf("settled %d µ$, past the budget of %d", settled, budgetMicros)
	}
	if answered := int64(len(l.acked[kTurn])) * turnMicros; settled < answered {
		t.Errorf("settled %d µ$ for %d answered turns of %d µ$: some answered turns are not paid for", settled, len(l.acked[kTurn]), turnMicros)
	}
	if open := one(`SELECT COUNT(*) FROM shim_spend WHERE state = 'reserved'`); open != 0 {
		t.Errorf("%d reservations open after every process stopped", open)
	}
	// A turn that ran while its receipt could not be stored (503
	// receipt_not_recorded) was paid for upstream but its settlement could
	// not be written: its cost stays held in its process's lease, which
	// the process could return only in part when it stopped. The day's
	// total counts it, so the budget holds it as spent.
	held = one(`SELECT COALESCE(SUM(amount), 0) FROM shim_spend_leases WHERE state = 'open'`)
	unrecorded := int64(0)
	for k, n := range l.codes {
		if strings.HasPrefix(k, "turn 503 receipt_not_recorded") {
			unrecorded += int64(n)
		}
	}
	if held > unrecorded*turnMicros {
		t.Errorf("open leases hold %d µ$ after every process stopped; the %d turns that ran unrecorded cost at most %d", held, unrecorded, unrecorded*turnMicros)
		// What the processes said of their leases and of the ledger's
		// writes says which of them kept what, and why.
		l.logProcesses("level=ERROR", "level=WARN", "lease")
	}
	day := one(`SELECT COALESCE(SUM(amount), 0) FROM shim_spend_totals WHERE scope LIKE 'key:%' AND length(period) = 10`)
	if day != settled+held {
		t.Errorf("the key's day total is %d µ$; the settled spend %d and what open leases hold %d", day, settled, held)
	}
	if day > budgetMicros {
		t.Errorf("the key's day total is %d µ$, past the budget of %d", day, budgetMicros)
	}
	t.Logf("stored: %d receipts (%d acknowledged), %d decisions (%d acknowledged, %d answered failed), %d ticks (%d acknowledged); settled %d µ$, %d µ$ held by open leases, day total %d µ$ of %d",
		len(receipts), len(l.acked[kTurn]), len(decisions), len(l.acked[kDecision]), len(l.failed), len(ticks), len(l.acked[kTick]), settled, held, day, budgetMicros)
	return settled, held
}
