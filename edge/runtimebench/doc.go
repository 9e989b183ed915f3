// Package runtimebench holds BenchmarkShimTurn, which measures what the Go
// runtime under WebAssembly costs the edge's own code: the shim's turn (a
// direct answer, and a context shim forwarded to an upstream in memory),
// with no database and no network under it, run natively and as js/wasm
// under Node. The ratio of the two is the runtime's own factor, which
// docs/edge.md ("CPU per request") sets beside the Worker's figures.
//
//	go test -run '^$' -bench ShimTurn ./edge/runtimebench
//	GOOS=js GOARCH=wasm go test -exec "$(go env GOROOT)/lib/wasm/go_js_wasm_exec" -run '^$' -bench ShimTurn ./edge/runtimebench
package runtimebench
