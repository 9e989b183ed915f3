package gateway

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"

	"github.com/caduceus-dev/caduceus/shim/upstream"
	"github.com/caduceus-dev/caduceus/shim/wire"
)

func TestWithoutNullUsage(t *testing.T) {
	for in, want := range map[string]string{
		`{"id":"c","choices":[],"usage":null}`:   `{"id":"c","choices":[]}`,
		`{"usage":null,"id":"c"}`:                `{"id":"c"}`,
		`{ "usage" : null , "id":"c"}`:           `{"id":"c"}`,
		`{"usage":null}`:                         `{}`,
		`{"id":"c", "usage": null, "x":1}`:       `{"id":"c", "x":1}`,
		`{"id":"c","usage":{"prompt_tokens":1}}`: ``,
		`{"id":"c","choices":[{"usage":null}]}`:  ``,
		`[1]`:                                    ``,
		`{"id":`:                                 ``,
	} {
		got, ok := withoutNullUsage([]byte(in))
		if want == "" {
			if ok || string(got) != in {
				t.Errorf("%s: changed to %s", in, got)
			}
			continue
		}
		if !ok || string(got) != want {
			t.Errorf("%s: got %s %v, want %s", in, got, ok, want)
		}
	}
}

// FuzzWithoutNullUsage: whatever the upstream sends, the result is the
// input untouched, or valid JSON meaning the input without its null usage.
func FuzzWithoutNullUsage(f *testing.F) {
	for _, s := range []string{`{"id":"c","usage":null}`, `{"usage":null,"a":[1,{"b":null}]}`, `{"usage": null }`, `{}`, `{"a":"\"usage\":null"}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		out, ok := withoutNullUsage(in)
		if !ok {
			if !bytes.Equal(out, in) {
				t.Fatalf("not ok but changed: %q -> %q", in, out)
			}
			return
		}
		var a, b map[string]any
		if err := json.Unmarshal(in, &a); err != nil {
			return // invalid input the decoder read part of: only ok matters below
		}
		if err := json.Unmarshal(out, &b); err != nil {
			t.Fatalf("%q -> invalid %q: %v", in, out, err)
		}
		delete(a, "usage")
		delete(b, "usage")
		if !reflect.DeepEqual(a, b) {
			t.Fatalf("%q -> %q changed more than the usage", in, out)
		}
	})
}

// TestUsageDetails: OpenAI's detail objects count when present and as zero
// when absent or null.
func TestUsageDetails(t *testing.T) {
	for _, c := range []struct {
		p    wire.Protocol
		in   string
		want upstream.Usage
	}{
		{wire.ChatCompletions, `{"prompt_tokens":100,"completion_tokens":20,"prompt_tokens_details":{"cached_tokens":40},"completion_tokens_details":{"reasoning_tokens":5}}`,
			upstream.Usage{Input: 60, CachedInput: 40, Output: 20, Reasoning: 5}},
		{wire.ChatCompletions, `{"prompt_tokens":100,"completion_tokens":20,"prompt_tokens_details":null,"completion_tokens_details":null}`,
			upstream.Usage{Input: 100, Output: 20}},
		{wire.ChatCompletions, `{"prompt_tokens":100,"completion_tokens":20}`, upstream.Usage{Input: 100, Output: 20}},
		{wire.Responses, `{"input_tokens":100,"output_tokens":20,"input_tokens_details":{"cached_tokens":30},"output_tokens_details":{"reasoning_tokens":7}}`,
			upstream.Usage{Input: 70, CachedInput: 30, Output: 20, Reasoning: 7}},
		{wire.Responses, `{"input_tokens":100,"output_tokens":20,"input_tokens_details":null,"output_tokens_details":null}`,
			upstream.Usage{Input: 100, Output: 20}},
	} {
		var ru rawUsage
		if err := json.Unmarshal([]byte(c.in), &ru); err != nil {
			t.Fatal(err)
		}
		if got := ru.usage(c.p); got != c.want {
			t.Errorf("%s %s: %+v, want %+v", c.p, c.in, got, c.want)
		}
	}
}
