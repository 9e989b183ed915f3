// Package gcfloor keeps Go's garbage collector from running while a
// process's heap is small.
//
// With GOGC=100 the collector runs when the heap has grown by as much as
// was live after the last cycle, and never later than at 4 MB. A gateway
// keeps little alive between requests (about 3 MB in `caduceus serve`) and
// allocates tens of kilobytes for each one, so it collected every 60 or so
// requests, and each cycle's fixed cost (waking the mark workers on every
// P, the stop-the-world phases) was about 6% of the CPU a request cost.
//
// Start raises the collector's percentage after each cycle so that the next
// goal is at least a floor (Floor, 32 MiB): with 3 MB live, a cycle every
// ~29 MB allocated instead of every ~4 MB. The percentage is never below
// the process's own (GOGC, 100 unset), so a heap of more than half the
// floor grows as it would without it. GOMEMLIMIT still holds: the
// runtime collects when the limit is near whatever the percentage. With
// GOGC=off the process has asked for no collections and Start does nothing.
//
// It works the way Go's own finalizer-driven tuners do: an object with a
// finalizer is made unreachable; the finalizer runs after the cycle that
// found it, reads the live heap, sets the percentage and arms the next one.
package gcfloor

import (
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"strconv"
	"strings"
	"sync/atomic"
)

// Floor is the heap goal below which serve's collector does not run: it
// costs up to 28 MiB more heap than the runtime's own 4 MiB minimum.
const Floor = 32 << 20

// Tuner raises the GC percentage while the live heap is under its floor.
type Tuner struct {
	floor   uint64
	base    int // the percentage the process asked for (GOGC)
	stopped atomic.Bool
	cycles  atomic.Int64
	sample  []metrics.Sample
}

// Start arms a Tuner with floor bytes (Floor when 0) and the base
// percentage gogc, the process's GOGC (100 when empty or unreadable). It
// returns nil, and changes nothing, when gogc is off.
func Start(floor uint64, gogc string) *Tuner {
	base, ok := percent(gogc)
	if !ok {
		return nil
	}
	if floor == 0 {
		floor = Floor
	}
	t := &Tuner{floor: floor, base: base, sample: []metrics.Sample{
		{Name: "/gc/heap/live:bytes"}, {Name: "/gc/scan/stack:bytes"}, {Name: "/gc/scan/globals:bytes"}}}
	t.tune()
	t.arm()
	return t
}

// percent reads a GOGC value: ok is false for "off".
func percent(v string) (p int, ok bool) {
	v = strings.TrimSpace(v)
	if strings.EqualFold(v, "off") {
		return 0, false
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 { // the runtime reads these as 100 too
		return 100, true
	}
	return n, true
}

// Stop puts the process's own percentage back; the armed finalizer then
// does nothing.
func (t *Tuner) Stop() {
	if t == nil || t.stopped.Swap(true) {
		return
	}
	debug.SetGCPercent(t.base)
}

// Cycles is how many collections the Tuner has seen.
func (t *Tuner) Cycles() int64 {
	if t == nil {
		return 0
	}
	return t.cycles.Load()
}

// heapMinimum is the runtime's smallest goal at GOGC=100; it scales with
// the percentage, so a percentage above floor/heapMinimum × 100 would put
// the goal past the floor however little is live.
const heapMinimum = 4 << 20

// Percent is the percentage that puts the next goal at floor bytes, and
// never below base. The runtime's goal is live + scan × percent / 100,
// where live is the heap marked live by the last cycle and scan that plus
// the stacks and globals it scans, and at least heapMinimum × percent / 100.
func Percent(live, scan, floor uint64, base int) int {
	if live >= floor {
		return base
	}
	p := min(float64(floor-live)*100/float64(max(scan, 1)), float64(floor)*100/heapMinimum)
	return max(int(p), base)
}

func (t *Tuner) tune() {
	metrics.Read(t.sample)
	var v [3]uint64
	for i, s := range t.sample {
		if s.Value.Kind() == metrics.KindUint64 {
			v[i] = s.Value.Uint64()
		}
	}
	debug.SetGCPercent(Percent(v[0], v[0]+v[1]+v[2], t.floor, t.base))
}

// sentinel is what the finalizer hangs on; it must be allocated on the heap
// and hold a pointer, so it is a struct with one.
type sentinel struct{ t *Tuner }

func (t *Tuner) arm() {
	s := &sentinel{t: t}
	runtime.SetFinalizer(s, func(s *sentinel) {
		if s.t.stopped.Load() {
			return
		}
		s.t.cycles.Add(1)
		s.t.tune()
		s.t.arm()
	})
}
