package shim_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/caduceus-dev/caduceus/guard"
	"github.com/caduceus-dev/caduceus/guard/detect"
	"github.com/caduceus-dev/caduceus/shim"
	"github.com/caduceus-dev/caduceus/shim/shimtest"
	"github.com/caduceus-dev/caduceus/shim/wire"
)

// promptOf is a chat completions request of about kb KB of code-review
// text (paths, versions, hashes, an e-mail address every 4 KB).
func promptOf(kb int) []byte {
	var text strings.Builder
	for i := 0; text.Len() < kb<<10; i++ {
		fmt.Fprintf(&text, "internal/store/sqlite.go:%d: commit 3f786850e387550fdab836ed7e6dc881de23001b bumped modernc.org/sqlite to v1.62.0; ", i)
		if i%40 == 0 {
			fmt.Fprintf(&text, "reviewed by ann.lee%d@example.org. ", i)
		}
	}
	return []byte(fmt.Sprintf(`{"model":"gpt-4o","messages":[{"role":"user","content":%q}]}`, text.String()))
}

// BenchmarkGuardrails is the shim's handler (receipts sealed, an in-memory
// upstream) on chat completions requests of 1, 8 and 64 KB with the
// guardrails off and with every kind at redact: the difference of ns/op
// between on and off, over the size, is the added latency per KB of
// prompt; off must equal the handler without a policy.
//
//	go test -run '^$' -bench Guardrails -benchmem -count 6 ./shim/
func BenchmarkGuardrails(b *testing.B) {
	det := detect.MustDefault()
	for _, kb := range []int{1, 8, 64} {
		body := promptOf(kb)
		for _, on := range []bool{false, true} {
			cfg := shim.Config{Store: shimtest.DropReceipts{Memory: shimtest.NewMemory()}, Audit: &shimtest.SealLog{},
				Upstreams: map[string]shim.Upstream{"openai": {BaseURL: "http://upstream"}},
				Client:    &http.Client{Transport: shimtest.MemUpstream{Body: upstreamReply}}}
			if on {
				cfg.Guardrails, cfg.Scanner = &guard.Config{Actions: guard.Actions{"default": guard.Redact}}, det
			}
			h := shim.New(cfg).Handler(wire.ChatCompletions)
			b.Run(fmt.Sprintf("%dKB/%s", kb, map[bool]string{false: "off", true: "redact"}[on]), func(b *testing.B) {
				b.SetBytes(int64(len(body)))
				b.ReportAllocs()
				for b.Loop() {
					serve(b, h, body)
				}
			})
		}
	}
}
