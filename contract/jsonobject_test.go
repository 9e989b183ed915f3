package contract

import (
	"bytes"
	"encoding/json"
	"math"
	"testing"
)

// canonicalOf is v's encoding/json form as CanonicalJSON writes it.
func canonicalOf(t *testing.T, v any) string {
	t.Helper()
	raw, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	c, err := CanonicalJSON(json.RawMessage(raw))
	if err != nil {
		t.Fatal(err)
	}
	return string(c)
}

// TestJSONObject: members in call order, a comma between them, {} for
// none, omitempty strings left out, the values as encoding/json writes
// them.
func TestJSONObject(t *testing.T) {
	for _, c := range []struct {
		name  string
		write func(o *JSONObject)
		want  string
	}{
		{"empty", func(o *JSONObject) {}, `{}`},
		{"one", func(o *JSONObject) { o.Str("a", "x") }, `{"a":"x"}`},
		{"empty optional only", func(o *JSONObject) { o.OptStr("a", "") }, `{}`},
		{"optional set", func(o *JSONObject) { o.OptStr("a", "y") }, `{"a":"y"}`},
		{"empty string kept by Str", func(o *JSONObject) { o.Str("a", "") }, `{"a":""}`},
		{"every kind", func(o *JSONObject) {
			o.OptStr("a", "")
			o.Bool("b", false)
			o.Int("c", math.MinInt64)
			o.Str("d", "q\"\n")
			o.Bool("e", true)
			o.Key("f")
			o.b.WriteString("[1]")
		}, `{"b":false,"c":-9223372036854775808,"d":"q\"\n","e":true,"f":[1]}`},
	} {
		var b bytes.Buffer
		b.WriteString("x")
		o := NewJSONObject(&b)
		c.write(&o)
		o.End()
		if got := b.String(); got != "x"+c.want {
			t.Errorf("%s: %s, want x%s", c.name, got, c.want)
		}
	}
}

// TestRouteCanonicalJSON: a route written by hand is its canonical JSON,
// with and without each optional member.
func TestRouteCanonicalJSON(t *testing.T) {
	for _, r := range []Route{
		{},
		{Requested: "gpt-4.1"},
		{Requested: "m", ResolvedTarget: "openai/gpt-4.1", Provider: "openai", Effort: "high"},
		{Requested: "m", Provider: "local"},
		{Requested: "m", Effort: "low"},
		{Requested: "m \"q\" \u2028", ResolvedTarget: "t"},
	} {
		var b bytes.Buffer
		r.WriteCanonicalJSON(&b)
		if got, want := b.String(), canonicalOf(t, r); got != want {
			t.Errorf("%+v: %s, want %s", r, got, want)
		}
	}
}
