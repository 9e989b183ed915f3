package gateway

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"
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
