// Package lazyre holds regular expressions that are compiled on their
// first use, not at package initialisation: a package-level
// regexp.MustCompile runs in every process that links the package, before
// main, whether or not it ever matches anything. The edge's Worker starts
// an isolate for a request (docs/edge.md, cold start), so its package
// initialisation is on a request's path. contract uses it too (it imports
// no package of this module with I/O: TestNoIODependencies).
package lazyre

import (
	"regexp"
	"sync"
)

// New returns a function that compiles expr on its first call and returns
// the same *regexp.Regexp from then on. Like regexp.MustCompile, it panics
// (on every call) if expr does not compile. It is not inlined: inlined,
// each caller would carry its own copy of sync.OnceValue's closures (about
// 2 KB of WebAssembly per expression).
//
//go:noinline
func New(expr string) func() *regexp.Regexp {
	return sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(expr) })
}
