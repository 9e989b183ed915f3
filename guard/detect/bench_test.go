package detect_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/caduceus-dev/caduceus/guard"
	"github.com/caduceus-dev/caduceus/guard/detect"
)

// text is about kb KB of code-review text (paths, versions, hashes, an
// e-mail address every 4 KB).
func text(kb int) string {
	var t strings.Builder
	for i := 0; t.Len() < kb<<10; i++ {
		fmt.Fprintf(&t, "internal/store/sqlite.go:%d: commit 3f786850e387550fdab836ed7e6dc881de23001b bumped modernc.org/sqlite to v1.62.0; ", i)
		if i%40 == 0 {
			fmt.Fprintf(&t, "reviewed by ann.lee%d@example.org. ", i)
		}
	}
	return t.String()
}

// BenchmarkScan is the detectors over 8 KB of text, every kind looked
// for, and each kind alone.
//
//	go test -run '^$' -bench Scan -benchmem ./guard/detect/
func BenchmarkScan(b *testing.B) {
	d := detect.MustDefault()
	s := text(8)
	b.Run("all", func(b *testing.B) {
		want := guard.Config{Actions: guard.Actions{"default": guard.Flag}}.Policy("").Want()
		b.SetBytes(int64(len(s)))
		for b.Loop() {
			d.Scan(s, want)
		}
	})
	for _, k := range guard.Kinds {
		b.Run(string(k), func(b *testing.B) {
			want := guard.Policy{k: guard.Flag}.Want()
			b.SetBytes(int64(len(s)))
			for b.Loop() {
				d.Scan(s, want)
			}
		})
	}
}
