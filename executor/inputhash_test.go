package executor

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

// FuzzTickInputHash: the directly written canonical input hashes exactly as
// the marshalled-then-canonicalized definition, so keys stored before keep
// matching their retries; any payload and message.
func FuzzTickInputHash(f *testing.F) {
	if b, err := os.ReadFile(filepath.Join("testdata", "payloads", "buy_spy.json")); err == nil {
		f.Add(b, "")
		f.Add(b, "EXECUTE: buy SPY 1")
	}
	f.Add([]byte(`{"strategy":"momentum","intents":[]}`), "")
	f.Add([]byte(` { "b" : 1.50, "a" : ["<&>", "\u2028", "\ud800"] } `), "é \u2028 <tag> \"q\" \\")
	f.Add([]byte(`{"strategy":"x","strategy":"y"}`), "\xff\xfe bad utf-8")
	f.Add([]byte(`"text"`), "\x00\x1f")
	f.Add([]byte(`{"a":`), "")
	f.Add([]byte(`{}`), "\t\n")
	f.Fuzz(func(t *testing.T, payload []byte, message string) {
		want, werr := tickInputHashMarshalled(payload, message)
		got, gerr := TickInputHash(payload, message)
		if werr != nil {
			if gerr == nil && json.Valid(payload) {
				// Only nesting one level short of CanonicalJSON's depth
				// limit is accepted directly and refused wrapped.
				return
			}
			if gerr == nil {
				t.Fatalf("invalid payload %q hashed to %s; the definition says %v", payload, got, werr)
			}
			return
		}
		if gerr != nil || got != want {
			t.Fatalf("TickInputHash(%q, %q) = %s, %v; want %s", payload, message, got, gerr, want)
		}
	})
}
