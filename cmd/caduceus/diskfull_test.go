package main

import (
	"context"
	"errors"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/caduceus-dev/caduceus/store"
)

// TestSQLiteDiskFullUnderLoad: one serve process on SQLite in a 48 MiB
// tmpfs takes a faultLoad (governed turns through the official OpenAI
// SDK, trader decisions, executor ticks, key listings); another file then
// takes every free byte of the file system. The writes are refused 503
// with Retry-After (store_unavailable, or receipt_not_recorded for a turn
// that ran), never 500, and never with a receipt id; reads (key listings)
// and /healthz still answer 200. Once the file is removed, writes are
// acknowledged again by the same process. Every acknowledged turn,
// decision and tick is stored, the database passes its integrity check,
// no reservation is left open, and the audit chain verifies.
//
// It mounts the tmpfs, so it needs root: without it the test is skipped,
// but fails under CI (CI set), which runs as root.
func TestSQLiteDiskFullUnderLoad(t *testing.T) {
	if testing.Short() {
		t.Skip("fills a file system under a serve process")
	}
	if os.Geteuid() != 0 {
		if os.Getenv("CI") != "" {
			t.Fatal("CI must run the disk-full test as root: it mounts a tmpfs")
		}
		t.Skip("mounting a size-limited tmpfs needs root")
	}
	mnt := filepath.Join(t.TempDir(), "mnt")
	if err := os.Mkdir(mnt, 0o700); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=48m,mode=0700", "tmpfs", mnt).CombinedOutput(); err != nil {
		t.Fatalf("mount a tmpfs: %v %s", err, out)
	}
	// Registered before the process's stop, so it runs after it.
	t.Cleanup(func() {
		if out, err := exec.Command("umount", mnt).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v %s", mnt, err, out)
		}
	})
	up := &fakeProvider{name: "openai"}
	upSrv := newHTTPServer(t, up)
	const budgetMicros, turnMicros = 100_000_000, 100 * 8
	file := writeConfig(t, t.TempDir(), oneRouteShim(upSrv, `{input: 0, output: 8, max_output_tokens: 100}`, `{day: 100}`))
	storeArgs := []string{"--data", mnt}
	keys := newFaultKeys(t, storeArgs)
	p := startProc(t, nil, append([]string{"--config", file, "--skills", exSkills, "--scenario", exScenario}, storeArgs...)...)
	procs := []*proc{p}
	l := startFaultLoad(t, procs, keys)
	l.await("the process acknowledges turns, decisions, ticks and key listings", 60*time.Second, l.every(l.acks, 0, 3, kTurn, kDecision, kTick, kKeys))

	// Fill the file system: 1 MiB at a time, then 4 KiB, until it refuses.
	l.phase.Store(1)
	filler := filepath.Join(mnt, "filler")
	f, err := os.Create(filler)
	if err != nil {
		t.Fatal(err)
	}
	for _, chunk := range []int{1 << 20, 4 << 10} {
		buf := make([]byte, chunk)
		for {
			if _, err = f.Write(buf); err != nil {
				break
			}
		}
		if !errors.Is(err, syscall.ENOSPC) {
			t.Fatalf("filling the tmpfs: %v, want ENOSPC", err)
		}
	}
	f.Close()
	full := time.Now()
	l.await("every kind of write is refused 503 on the full disk", 60*time.Second, l.every(l.unavail, 1, 1, kTurn, kDecision, kTick))
	refused := time.Since(full)
	// Still full: the writes stay refused, and reads and /healthz answer.
	l.phase.Store(2)
	l.await("reads answer and writes are refused while the disk is full", 60*time.Second, func() bool {
		return l.every(l.acks, 2, 3, kKeys)() && l.every(l.unavail, 2, 3, kTurn, kDecision, kTick)()
	})
	resp, err := l.client.Get(p.url + "/healthz")
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("/healthz on the full disk: %v %v", resp, err)
	}
	resp.Body.Close()
	readyWhileFull := l.ready(0)

	// Space returns: the same process acknowledges every kind again.
	l.phase.Store(3)
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	freed := time.Now()
	l.await("every kind is acknowledged again once space returns", 60*time.Second, l.every(l.acks, 3, 1, kTurn, kDecision, kTick))
	back := time.Since(freed)
	l.await("every kind is acknowledged again once space returns", 60*time.Second, l.every(l.acks, 3, 3, kTurn, kDecision, kTick, kKeys))
	l.check()
	p.stop(t)
	t.Logf("the disk full: every kind of write refused 503 %v after; /readyz said %d meanwhile; space back: every kind acknowledged again %v after",
		refused.Round(time.Millisecond), readyWhileFull, back.Round(time.Millisecond))
	t.Logf("while full: %d key listings answered, %d decisions, %d ticks and %d turns refused 503",
		l.total(l.acks, 2, kKeys), l.total(l.unavail, 1, kDecision)+l.total(l.unavail, 2, kDecision),
		l.total(l.unavail, 1, kTick)+l.total(l.unavail, 2, kTick), l.total(l.unavail, 1, kTurn)+l.total(l.unavail, 2, kTurn))

	db, err := store.Open(context.Background(), "", mnt)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var integrity string
	if err := db.QueryRow(t.Context(), `PRAGMA integrity_check`).Scan(&integrity); err != nil || integrity != "ok" {
		t.Errorf("integrity check: %q %v", integrity, err)
	}
	l.checkStored(db, budgetMicros, turnMicros)
	code, out, errOut := cli(t, append([]string{"audit", "verify"}, storeArgs...)...)
	if code != 0 || !strings.HasPrefix(out, "ok: verified") {
		t.Errorf("audit verify: %d %s %s", code, out, errOut)
	}
	t.Logf("%s", strings.TrimSpace(out))
}
