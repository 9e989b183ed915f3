// Package contract holds the HUX shared definitions (seed 002) as Go types:
// identity, provenance, audit outcome, idempotency key, revision and the rest
// of the common schema's $defs, the one Error type every gate returns, id
// helpers, canonical JSON, and the embedded JSON Schemas that validate all of
// them at the edge.
//
// The package does no I/O: it imports only the standard library and the JSON
// Schema validator. TestNoIODependencies keeps it that way.
//
// CanonicalJSON (one pass, no tree) and AppendJSONString (the escaper
// every hand-written encoder of the program appends with) are written by
// hand. On 2 shared cores (CPU time per op, median of six runs)
// BenchmarkCanonicalJSON canonicalizes a 9 KB audit payload in 121 µs and
// 6 allocs against 763 µs and 3061 allocs for encoding/json's decode into
// a tree and re-encode (6.2×), and BenchmarkAppendJSONString escapes a
// 250-byte string in 0.78 µs and 0 allocs against 1.2 µs and 1 for
// encoding/json's Encoder (1.5×); the reference tests and
// FuzzCanonicalMatchesReference and FuzzAppendJSONString hold them to the
// same bytes. Reproduce with
// go test -run '^$' -bench 'CanonicalJSON$|AppendJSONString' -benchmem -count 6 ./contract/
package contract

// Version is the HUX contract version this build speaks (schema pattern
// ^1\.[0-9]+\.[0-9]+$).
//
// History:
//   - 1.0.0 (2026-11-29): the common schema of seed 002, verbatim.
const Version = "1.0.0"
