package wire

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"testing"
)

var fuzzSeeds = map[Protocol][]string{
	ChatCompletions: {
		`{"model":"gpt-4o","messages":[{"role":"user","content":"hi"}]}`,
		`{"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"a"}]},{"role":"assistant","tool_calls":[{"function":{"name":"f","arguments":"{\"path\":\"a/b\"}"}}]}]}`,
		`{"model":"m","messages":[]}`,
	},
	Responses: {
		`{"model":"m","input":"hi"}`,
		`{"model":"m","input":[{"role":"user","content":[{"type":"input_text","text":"x"}]},{"type":"function_call","name":"f","arguments":"{}"}]}`,
	},
	Messages: {
		`{"model":"m","messages":[{"role":"user","content":"hi"}]}`,
		`{"model":"m","system":"s","messages":[{"role":"user","content":[{"type":"tool_result","tool_use_id":"t"},{"type":"text","text":"x"}]}]}`,
	},
}

// fuzzParse checks that Parse never panics and that, when it accepts a body,
// Inject either refuses it or yields JSON that still parses and that
// contains the original bytes around exactly one insertion.
func fuzzParse(f *testing.F, p Protocol) {
	for _, s := range fuzzSeeds[p] {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := Parse(p, b)
		if err != nil {
			return
		}
		_ = r.LastUserText()
		out, err := Inject(p, b, "ctx")
		if err != nil {
			return
		}
		if !json.Valid(out) {
			t.Fatalf("inject produced invalid JSON from %q: %q", b, out)
		}
		if _, err := Parse(p, out); err != nil {
			t.Fatalf("injected body no longer parses: %v\n%q", err, out)
		}
		if len(out) <= len(b) {
			t.Fatalf("inject removed bytes: %q -> %q", b, out)
		}
	})
}

func FuzzParseChat(f *testing.F)      { fuzzParse(f, ChatCompletions) }
func FuzzParseResponses(f *testing.F) { fuzzParse(f, Responses) }
func FuzzParseMessages(f *testing.F)  { fuzzParse(f, Messages) }

func FuzzSSEReader(f *testing.F) {
	f.Add([]byte("event: a\ndata: 1\n\ndata: [DONE]\n\n"))
	f.Add([]byte(": c\r\n\r\ndata:x\r\ndata: y\r\n\r\nid: 3\n"))
	f.Add([]byte("\n\n\ndata"))
	f.Fuzz(func(t *testing.T, b []byte) {
		sr := NewSSEReader(bytes.NewReader(b))
		var raw bytes.Buffer
		for i := 0; ; i++ {
			e, err := sr.Next()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			raw.Write(e.Raw)
			if i > len(b)+1 {
				t.Fatal("reader does not terminate")
			}
		}
		if !bytes.Equal(raw.Bytes(), b) && len(bytes.TrimSpace(b)) > 0 {
			// trailing blank lines after the last event may be dropped, nothing else
			if !bytes.HasPrefix(b, raw.Bytes()) || len(bytes.TrimSpace(b[raw.Len():])) != 0 {
				t.Fatalf("raw bytes not preserved: %q -> %q", b, raw.Bytes())
			}
		}
	})
}

// FuzzMembers checks Members against encoding/json: for a valid JSON object
// it finds what a map of raw members holds (the last of duplicates), and it
// never accepts what is not an object.
func FuzzMembers(f *testing.F) {
	for _, s := range []string{
		`{"usage":{"prompt_tokens":3},"choices":[]}`,
		` {"type":"response.completed","response":{"id":"r","usage":{"input_tokens":1}}}`,
		`{"usage":1,"usage":{"output_tokens":2}}`,
		`{"message":null}`,
		`[1]`,
		`{"a\u0062":1}`,
	} {
		f.Add([]byte(s))
	}
	keys := []string{"usage", "response", "message", "choices", "ab"}
	f.Fuzz(func(t *testing.T, b []byte) {
		got, ok := Members(b, keys...)
		var want map[string]json.RawMessage
		if json.Unmarshal(b, &want) != nil || want == nil {
			if ok && json.Valid(b) {
				t.Fatalf("Members accepted %q, which is not an object", b)
			}
			return
		}
		if !ok {
			t.Fatalf("Members refused the object %q", b)
		}
		if bytes.IndexByte(b, '\\') >= 0 {
			return // a key with an escape is not decoded
		}
		for i, k := range keys {
			if w, has := want[k]; !bytes.Equal(got[i], w) || has != (got[i] != nil) {
				t.Fatalf("Members(%q)[%s] = %q, encoding/json: %q", b, k, got[i], w)
			}
		}
	})
}
