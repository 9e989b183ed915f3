package gcfloor_test

import (
	"runtime"
	"runtime/debug"
	"testing"

	"github.com/caduceus-dev/caduceus/internal/gcfloor"
)

func TestPercent(t *testing.T) {
	const mib = 1 << 20
	for _, c := range []struct {
		live, scan, floor uint64
		base, want        int
	}{
		{live: 4 * mib, scan: 4 * mib, floor: 64 * mib, base: 100, want: 1500}, // 4 + 4 × 15 = 64
		{live: 3 * mib, scan: 4 * mib, floor: 64 * mib, base: 100, want: 1525}, // stacks and globals count
		{live: 16 * mib, scan: 16 * mib, floor: 64 * mib, base: 100, want: 300},
		{live: 32 * mib, scan: 32 * mib, floor: 64 * mib, base: 100, want: 100}, // half the floor: the process's own
		{live: 1024 * mib, scan: 1024 * mib, floor: 64 * mib, base: 100, want: 100},
		{live: 30 * mib, scan: 30 * mib, floor: 64 * mib, base: 200, want: 200}, // never below GOGC
		{live: 0, scan: 0, floor: 64 * mib, base: 100, want: 1600},              // nothing live yet: the runtime's 4 MiB minimum × 16
		{live: 64 << 10, scan: 256 << 10, floor: 64 * mib, base: 100, want: 1600},
	} {
		if got := gcfloor.Percent(c.live, c.scan, c.floor, c.base); got != c.want {
			t.Errorf("Percent(%d, %d, %d, %d) = %d; want %d", c.live, c.scan, c.floor, c.base, got, c.want)
		}
	}
}

func TestOffChangesNothing(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	if tu := gcfloor.Start(0, "off"); tu != nil {
		t.Fatal("GOGC=off armed a tuner")
	}
	if got := debug.SetGCPercent(100); got != 100 {
		t.Errorf("GOGC=off: percentage %d; want it left at 100", got)
	}
}

var sink []byte

// churn allocates n bytes of garbage in 32 KiB pieces while little is live.
func churn(n int) {
	for range n / (32 << 10) {
		sink = make([]byte, 32<<10)
	}
}

// TestFewerCycles: with a small live heap, 256 MiB of garbage is collected
// far less often with the floor than without it, and Stop puts the
// process's percentage back.
func TestFewerCycles(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	cycles := func() uint32 {
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return m.NumGC
	}
	runtime.GC()
	start := cycles()
	churn(256 << 20)
	without := cycles() - start

	tu := gcfloor.Start(64<<20, "")
	runtime.GC()
	start = cycles()
	churn(256 << 20)
	with := cycles() - start
	tu.Stop()

	t.Logf("collections over 256 MiB of garbage: %d without the floor, %d with it (the tuner saw %d)", without, with, tu.Cycles())
	if without < 16 {
		t.Fatalf("only %d collections without the floor: the test's live heap is not small", without)
	}
	if with*4 > without {
		t.Errorf("%d collections with the floor against %d without: want at most a quarter", with, without)
	}
	if tu.Cycles() == 0 {
		t.Error("the tuner saw no collection")
	}
	if got := debug.SetGCPercent(100); got != 100 {
		t.Errorf("after Stop the percentage is %d; want the process's 100", got)
	}
}
