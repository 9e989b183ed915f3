// Package examples holds the runnable examples of the README's walkthrough
// as files (read them, copy them) and embeds them, so `caduceus demo` works
// from any working directory. Every file here is loaded by a test
// (cmd/caduceus/examples_test.go), so none of them can rot.
package examples

import "embed"

// FS is every example file, by its path under examples/.
//
//go:embed caduceus.yaml README.md shim trader executor relay systemd
var FS embed.FS
