package main

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/caduceus-dev/caduceus/internal/pgtest"
	"github.com/caduceus-dev/caduceus/store"
	"github.com/caduceus-dev/caduceus/store/storetest"
)

// TestPostgresFailoverUnderLoad: a private primary Postgres with a
// synchronous standby (pgtest.NewStandby: pg_basebackup -R, streaming;
// synchronous_commit = on and synchronous_standby_names naming it, so a
// commit returns once the standby has flushed it) and three serve
// processes given both hosts in one DSN with
// target_session_attrs=read-write, under the faultLoad of
// TestPostgresOutageUnderLoad. The primary is killed (SIGKILL to its
// postmaster); once every process has answered every kind 503 (the
// standby, read-only, is refused by target_session_attrs) the standby is
// promoted (pg_ctl promote). Every process then answers /readyz 200 and
// takes a write, without a restart; the load runs on until the key's
// daily budget runs out. No answer is 401, 403 or 500, every 503 carries
// Retry-After, and on the new primary every acknowledged turn, decision
// and tick (before the kill and after the promotion) is stored, the spend
// stays within the budget, no reservation is left open and the audit
// chain verifies.
func TestPostgresFailoverUnderLoad(t *testing.T) {
	if os.Getenv(storetest.EnvPostgres) == "" {
		t.Skip("CADUCEUS_TEST_POSTGRES not set; .ci/run sets it")
	}
	if testing.Short() {
		t.Skip("starts two Postgres servers and three serve processes")
	}
	primary := pgtest.Start(t)
	standby := pgtest.NewStandby(primary, "standby1", true)
	if got := primary.SQL("SHOW synchronous_commit"); got != "on" {
		t.Fatalf("synchronous_commit is %q on the primary, want on", got)
	}
	dsn := fmt.Sprintf("postgres://postgres@127.0.0.1:%d,127.0.0.1:%d/postgres?sslmode=disable&target_session_attrs=read-write",
		primary.Port(), standby.Port())
	up := &fakeProvider{name: "openai"}
	upSrv := newHTTPServer(t, up)
	data := t.TempDir()
	// 1500 turns of 800 µ$ (100 output tokens at $8 a million).
	const budgetMicros, turnMicros = 1_200_000, 100 * 8
	file := writeConfig(t, data, oneRouteShim(upSrv, `{input: 0, output: 8, max_output_tokens: 100}`, `{day: 1.2}`))
	storeArgs := []string{"--store", dsn, "--data", data}
	keys := newFaultKeys(t, storeArgs)
	var procs []*proc
	for range 3 {
		procs = append(procs, startProc(t, nil, append([]string{"--config", file, "--skills", exSkills, "--scenario", exScenario}, storeArgs...)...))
	}
	l := startFaultLoad(t, procs, keys)

	// Before: every process acknowledges every kind, on the primary.
	l.await("every process acknowledges turns, decisions, ticks and key listings", 60*time.Second, l.every(l.acks, 0, 3, kTurn, kDecision, kTick, kKeys))
	l.phase.Store(1)
	primary.Kill()
	killed := time.Now()
	// The gap: no primary. Every process says 503 on /readyz and answers
	// every kind 503 until the standby is promoted.
	l.awaitUnready(30 * time.Second)
	l.await("every process answers every kind 503 while there is no primary", 30*time.Second, l.every(l.unavail, 1, 1, kTurn, kDecision, kTick, kKeys))
	gap := time.Since(killed)
	l.phase.Store(2)
	standby.Promote()
	promoted := time.Now()

	// After: each process is ready and takes a write of its own on the new
	// primary, without a restart.
	recovered := l.awaitWriting(promoted, 60*time.Second, "dec_failover")
	last := max(recovered[0], recovered[1], recovered[2])
	t.Logf("primary killed: every process answered every kind 503 within %v; promotion took %v; every process ready and writing %v after the promotion (by process: %v), %v after the kill",
		gap.Round(time.Millisecond), promoted.Sub(killed.Add(gap)).Round(time.Millisecond), last.Round(time.Millisecond), recovered,
		promoted.Add(last).Sub(killed).Round(time.Millisecond))
	during := l.runOut("the failover")
	t.Logf("turns answered: %d before the kill, %d after the promotion; %d answers 503 without a primary; %d turns refused for the budget",
		l.total(l.acks, 0, kTurn), l.total(l.acks, 2, kTurn), during, l.budgeted.Load())

	// Everything is checked on the new primary alone.
	if got := standby.SQL("SELECT pg_is_in_recovery()"); got != "f" {
		t.Fatalf("the promoted standby is in recovery: %q", got)
	}
	db, err := store.Open(context.Background(), standby.DSN(), "")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	l.checkStored(db, budgetMicros, turnMicros)
	code, out, errOut := cli(t, "audit", "verify", "--store", standby.DSN(), "--data", data)
	if code != 0 || !strings.HasPrefix(out, "ok: verified") {
		t.Errorf("audit verify: %d %s %s", code, out, errOut)
	}
	t.Logf("%s", strings.TrimSpace(out))
}
