package wire

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
)

func TestConversationNames(t *testing.T) {
	for _, tc := range []struct {
		p    Protocol
		body string
		want []string
	}{
		{ChatCompletions, `{"model":"m","user":"u","metadata":{"session_key":"s","conversation":"c"}}`, []string{"c", "s", "u"}},
		{ChatCompletions, `{"model":"m","metadata":{"conversation":7,"user_id":"x"},"user":null}`, nil},
		{ChatCompletions, `{"model":"m","metadata":"c","user":"caf\u00e9"}`, []string{"café"}},
		{Responses, `{"model":"m","metadata":{"conversation":"c"}}`, []string{"c"}},
		{Messages, `{"model":"m","user":"u","metadata":{"user_id":"agent:main:x","conversation":"c"}}`, []string{"agent:main:x"}},
		{Messages, `not json`, nil},
	} {
		if got := ConversationNames(tc.p, []byte(tc.body)); !slices.Equal(got, tc.want) {
			t.Errorf("%s %s: %q, want %q", tc.p, tc.body, got, tc.want)
		}
	}
}

// BenchmarkConversationNames: the names of a 256 KiB chat request whose
// metadata comes last, by the top-level scan and (for comparison) by
// decoding the two fields with encoding/json.
func BenchmarkConversationNames(b *testing.B) {
	msg := strings.Repeat("lorem ipsum dolor sit amet ", 10000)
	body, _ := json.Marshal(map[string]any{"model": "gpt-4o-mini",
		"messages": []any{map[string]any{"role": "user", "content": msg}},
		"metadata": map[string]string{"conversation": "agent:main:telegram:dm:42"}})
	b.Run("scan", func(b *testing.B) {
		b.SetBytes(int64(len(body)))
		for b.Loop() {
			if n := ConversationNames(ChatCompletions, body); len(n) != 1 {
				b.Fatal(n)
			}
		}
	})
	b.Run("encoding_json", func(b *testing.B) {
		b.SetBytes(int64(len(body)))
		for b.Loop() {
			var v struct {
				Metadata map[string]any `json:"metadata"`
				User     any            `json:"user"`
			}
			if json.Unmarshal(body, &v) != nil || v.Metadata["conversation"] == nil {
				b.Fatal(v)
			}
		}
	})
}
