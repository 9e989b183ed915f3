// Package contract holds the HUX shared definitions (seed 002) as Go types:
// identity, provenance, audit outcome, idempotency key, revision and the rest
// of the common schema's $defs, the one Error type every gate returns, id
// helpers, canonical JSON, and the embedded JSON Schemas that validate all of
// them at the edge.
//
// The package does no I/O: it imports only the standard library and the JSON
// Schema validator. TestNoIODependencies keeps it that way.
package contract

// Version is the HUX contract version this build speaks (schema pattern
// ^1\.[0-9]+\.[0-9]+$).
//
// History:
//   - 1.0.0 (2026-11-29): the common schema of seed 002, verbatim.
const Version = "1.0.0"
