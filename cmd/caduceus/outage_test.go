package main

import (
	"context"
	"errors"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	aoption "github.com/anthropics/anthropic-sdk-go/v2/option"
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
// Postgres (internal/pgtest) take a faultLoad — governed LLM turns (the
// official OpenAI SDK, without its retries, through the shim gateway to a
// fake provider), trader decisions, executor ticks and key listings from
// twelve clients; Postgres is stopped (pg_ctl stop -m fast) for outageHold
// (or killed) and started again. While it is gone every request is answered, before
// the clients' timeout: 503 with Retry-After, in the OpenAI envelope on
// the LLM route (store_unavailable, or receipt_not_recorded when the turn
// ran but its receipt could not be stored) and as an RFC 9457 problem
// (store_unavailable) on the management routes, never 401, 403 or 500 and
// never with a receipt id; a key no process has seen is answered 503
// store_unavailable, not 401, through the OpenAI and the Anthropic SDKs;
// /readyz says 503 on every process. Once
// Postgres is back every process answers /readyz and takes a write,
// without a restart; the load then runs on until the key's daily budget
// runs out. Every acknowledged turn, decision and tick is stored, every
// receipt id a client was given is stored, the spend never passes the
// budget, no reservation is left open, and the audit chain verifies.
//
// It runs twice: Postgres stopped (stop: its sessions end with 57P01
// admin_shutdown) and Postgres killed (kill: SIGKILL to the postmaster, its
// connections cut, crash recovery at the start).
func TestPostgresOutageUnderLoad(t *testing.T) {
	if os.Getenv(storetest.EnvPostgres) == "" {
		t.Skip("CADUCEUS_TEST_POSTGRES not set; .ci/run sets it")
	}
	if testing.Short() {
		t.Skip("starts a Postgres server and three serve processes")
	}
	t.Run("stop", func(t *testing.T) { postgresOutage(t, (*pgtest.Server).Stop) })
	t.Run("kill", func(t *testing.T) { postgresOutage(t, (*pgtest.Server).Kill) })
}

// postgresOutage is TestPostgresOutageUnderLoad with down taking Postgres
// away.
func postgresOutage(t *testing.T, down func(*pgtest.Server)) {
	pg := pgtest.Start(t)
	dsn := pg.DSN()
	up := &fakeProvider{name: "openai"}
	upSrv := newHTTPServer(t, up)
	data := t.TempDir()
	// 1500 turns of 800 µ$ (100 output tokens at $8 a million).
	const budgetMicros, turnMicros = 1_200_000, 100 * 8
	file := writeConfig(t, data, oneRouteShim(upSrv, `{input: 0, output: 8, max_output_tokens: 100}`, `{day: 1.2}`))
	storeArgs := []string{"--store", dsn, "--data", data}
	keys := newFaultKeys(t, storeArgs)
	// A key no process has seen before the outage: its lookup meets the
	// stopped store.
	unseen := newTenantKey(t, storeArgs, "slot-1", "--scopes", "route", "--models", "openai/gpt-4.1")
	var procs []*proc
	for range 3 {
		procs = append(procs, startProc(t, nil, append([]string{"--config", file, "--skills", exSkills, "--scenario", exScenario}, storeArgs...)...))
	}
	l := startFaultLoad(t, procs, keys)

	// Before: every process acknowledges every kind.
	l.await("every process acknowledges turns, decisions, ticks and key listings", 60*time.Second, l.every(l.acks, 0, 3, kTurn, kDecision, kTick, kKeys))
	l.phase.Store(1)
	down(pg)
	stopped := time.Now()
	// While it is stopped: /readyz says 503 on every process, and every
	// process answers every kind 503.
	l.awaitUnready(30 * time.Second)
	l.await("every process answers every kind 503 while Postgres is stopped", 30*time.Second, l.every(l.unavail, 1, 1, kTurn, kDecision, kTick, kKeys))
	seen := time.Since(stopped)
	// A key that must be looked up is answered 503 store_unavailable,
	// never 401, in each SDK's own envelope.
	for i, p := range procs {
		oc := openai.NewClient(option.WithBaseURL(p.url+"/v1/"), option.WithAPIKey(unseen), option.WithMaxRetries(0))
		_, err := oc.Chat.Completions.New(t.Context(), openai.ChatCompletionNewParams{Model: "gpt-4.1", MaxTokens: openai.Int(100),
			Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")}})
		var oe *openai.Error
		if !errors.As(err, &oe) || oe.StatusCode != 503 || oe.Code != "store_unavailable" || oe.Response.Header.Get("Retry-After") != "1" ||
			oe.Response.Header.Get("X-Should-Retry") == "false" {
			t.Errorf("process %d: an unseen key through the OpenAI SDK while Postgres is stopped: %v (want 503 store_unavailable with Retry-After)", i, err)
		}
		ac := anthropic.NewClient(aoption.WithBaseURL(p.url), aoption.WithAPIKey(unseen), aoption.WithMaxRetries(0))
		_, err = ac.Messages.New(t.Context(), anthropic.MessageNewParams{Model: "claude-sonnet-4-5", MaxTokens: 100,
			Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hi"))}})
		var ae *anthropic.Error
		if !errors.As(err, &ae) || ae.StatusCode != 503 || !strings.Contains(ae.RawJSON(), `"message":"store_unavailable: `) ||
			ae.Response.Header.Get("Retry-After") != "1" || ae.RequestID == "" {
			t.Errorf("process %d: an unseen key through the Anthropic SDK while Postgres is stopped: %v (want 503 store_unavailable with Retry-After)", i, err)
		}
	}
	// The outage's length is under test (past the serve processes' key cache TTL, their real clocks): no event ends it.
	time.Sleep(time.Until(stopped.Add(outageHold)))
	for p := range procs {
		if st := l.ready(p); st != http.StatusServiceUnavailable {
			t.Errorf("process %d /readyz answers %d with Postgres stopped", p, st)
		}
	}
	l.phase.Store(2)
	pg.Start()
	started := time.Now()

	// After: each process is ready and takes a write of its own, without
	// a restart.
	recovered := l.awaitWriting(started, 60*time.Second, "dec_back")
	t.Logf("Postgres gone: 503s of every kind on every process %v after; held %v; every process ready and writing %v after the start (by process: %v)",
		seen.Round(time.Millisecond), outageHold, max(recovered[0], recovered[1], recovered[2]).Round(time.Millisecond), recovered)
	// The load runs on until every process acknowledged every kind again
	// and the budget ran out.
	during := l.runOut("the outage")
	t.Logf("turns answered: %d before the stop, %d after the start; %d answers 503 while stopped; %d turns refused for the budget",
		l.total(l.acks, 0, kTurn), l.total(l.acks, 2, kTurn), during, l.budgeted.Load())

	db, err := store.Open(context.Background(), dsn, "")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	l.checkStored(db, budgetMicros, turnMicros)
	code, out, errOut := cli(t, append([]string{"audit", "verify"}, storeArgs...)...)
	if code != 0 || !strings.HasPrefix(out, "ok: verified") {
		t.Errorf("audit verify: %d %s %s", code, out, errOut)
	}
	t.Logf("%s", strings.TrimSpace(out))
}
