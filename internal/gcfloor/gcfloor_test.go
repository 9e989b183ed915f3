package gcfloor_test

import (
	"runtime"
	"runtime/debug"
	"runtime/metrics"
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

// goal is the runtime's heap goal now.
func goal() uint64 {
	s := []metrics.Sample{{Name: "/gc/heap/goal:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// TestGoalAtTheFloor: with little live, the tuner puts the runtime's heap
// goal at the floor, keeps it there after a collection (its finalizer),
// and Stop puts the process's own goal and percentage back. (How many
// collections that saves depends on the machine's load, so the test reads
// the goal, not a count.)
func TestGoalAtTheFloor(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	const floor = 32 << 20
	near := func(g uint64) bool { return g > floor*15/16 && g < floor*17/16 }
	runtime.GC()
	if g := goal(); g >= floor/2 {
		t.Fatalf("goal %d before the tuner: the test's heap is not small", g)
	}
	tu := gcfloor.Start(floor, "")
	if g := goal(); !near(g) {
		t.Errorf("goal %d with a %d floor", g, floor)
	}
	for tu.Cycles() == 0 { // the finalizer runs after a collection
		runtime.GC()
		runtime.Gosched()
	}
	if g := goal(); !near(g) {
		t.Errorf("goal %d after a collection; want about %d", g, floor)
	}
	tu.Stop()
	if g := goal(); g >= floor/2 {
		t.Errorf("goal %d after Stop; want the process's own", g)
	}
	if got := debug.SetGCPercent(100); got != 100 {
		t.Errorf("after Stop the percentage is %d; want the process's 100", got)
	}
}
