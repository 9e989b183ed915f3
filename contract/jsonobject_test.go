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
			o.OptRoute("g", &Route{Requested: "r"})
			o.OptRoute("h", nil)
		}, `{"b":false,"c":-9223372036854775808,"d":"q\"\n","e":true,"f":[1],"g":{"requested":"r"}}`},
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

// TestProvenanceCanonicalJSON: a provenance (its actor, build and route)
// written by hand is its canonical JSON, with and without each optional
// member.
func TestProvenanceCanonicalJSON(t *testing.T) {
	full := Provenance{Surface: SurfaceTelegram, Actor: Actor{Type: ActorOperator, ID: "op\"1", Display: "Ôp <x>"},
		RecordedAt: "2026-11-29T20:00:00Z", SessionID: "s", ConversationID: "c", MessageID: "m", RunID: "r",
		Route: &Route{Requested: "fast", ResolvedTarget: "t", Provider: ProviderLocal, Effort: EffortHigh},
		Build: &Build{Commit: "abc", ImageDigest: "sha256:00"}}
	cases := []Provenance{{}, full,
		{Surface: SurfaceAPI, Actor: Actor{Type: ActorUser, ID: "u"}, RecordedAt: "x", Route: &Route{}, Build: &Build{}}}
	for _, r := range []Route{{}, {Requested: "gpt-4.1"}, {Requested: "m", Provider: "local"}, {Requested: "m", Effort: "low"},
		{Requested: "m \"q\" \u2028", ResolvedTarget: "t"}} {
		p := full
		p.Route = &r
		cases = append(cases, p)
	}
	for _, bd := range []Build{{Commit: "abc"}, {ImageDigest: "d"}} {
		p := full
		p.Build = &bd
		cases = append(cases, p)
	}
	p := full
	p.Actor.Display, p.Route, p.Build, p.SessionID, p.ConversationID, p.MessageID, p.RunID = "", nil, nil, "", "", "", ""
	cases = append(cases, p)
	for _, p := range cases {
		var b bytes.Buffer
		p.WriteCanonicalJSON(&b)
		if got, want := b.String(), canonicalOf(t, p); got != want {
			t.Errorf("%+v:\n got %s\nwant %s", p, got, want)
		}
	}
}
