package contracttest

import "testing"

// Loop is the body of the benchmarks that set a hand-written encoder or
// parser against the library it replaces: it runs f until b.Loop ends,
// reports allocations, and reports the process's CPU time per operation
// (cpu-ns/op) beside the wall time. CPU time is what another process's
// load on a shared machine disturbs least (it does not count the time
// the benchmark waits for a core), so it is the figure the two sides
// are compared by; it is missing where the platform cannot tell it.
func Loop(b *testing.B, f func()) {
	b.Helper()
	b.ReportAllocs()
	start, ok := cpuTime()
	for b.Loop() {
		f()
	}
	if end, ok2 := cpuTime(); ok && ok2 {
		b.ReportMetric(float64(end-start)/float64(b.N), "cpu-ns/op")
	}
}
