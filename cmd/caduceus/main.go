// Command caduceus is the governed edge of an AI agent: one binary that
// serves the trader, executor, shim and relay gates and manages keys and the
// audit trail. See README.md.
package main

import (
	"context"
	"os"
)

func main() {
	os.Exit(run(context.Background(), os.Args[1:], os.Getenv, os.Stdin, os.Stdout, os.Stderr))
}
