package wire

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"
)

// sameMembers checks that b's positions are what a fresh scan of its bytes
// finds, member by member (keys and spans).
func sameMembers(t *testing.T, what string, b Body) {
	t.Helper()
	fresh, err := objectMembers(b.Raw, span{0, len(b.Raw)})
	if err != nil {
		t.Fatalf("%s: %q is no longer an object: %v", what, b.Raw, err)
	}
	got := map[string]span{}
	for _, m := range b.top {
		got[m.Key] = m.Value
	}
	want := map[string]span{}
	for _, m := range fresh {
		want[m.Key] = m.Value
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("%s: positions %v, a fresh scan of %q finds %v", what, got, b.Raw, want)
	}
}

// checkEdits edits a body Parse accepted the way the shim and the gateway
// do (inject, another model, include_usage) and checks, after each edit,
// that the bytes are what the edit of the whole body gives and the kept
// positions are a fresh scan's.
func checkEdits(t *testing.T, p Protocol, raw []byte) {
	r, err := Parse(p, raw)
	if err != nil {
		return
	}
	b := r.Body()
	sameMembers(t, "parsed", b)
	if inj, err := b.Inject(p, "ctx \"q\""); err == nil {
		want, werr := Inject(p, raw, "ctx \"q\"")
		if werr != nil || !bytes.Equal(inj.Raw, want) {
			t.Fatalf("Body.Inject of %q = %q, Inject = %q, %v", raw, inj.Raw, want, werr)
		}
		sameMembers(t, "injected", inj)
		b = inj
	}
	b = b.WithModel("other/<model>")
	sameMembers(t, "with model", b)
	if v, ok := find(b.top, "model"); ok && string(b.Raw[v.Start:v.End]) != `"other/\u003cmodel\u003e"` {
		t.Fatalf("model is %s", b.Raw[v.Start:v.End])
	}
	if b.Model() != "" && b.Model() != "other/<model>" {
		t.Fatalf("Model() = %q", b.Model())
	}
	b = b.WithIncludeUsage()
	sameMembers(t, "with include_usage", b)
	again, err := Parse(p, b.Raw)
	if err != nil {
		t.Fatalf("the edited body %q no longer parses: %v", b.Raw, err)
	}
	if !again.IncludeUsage {
		t.Fatalf("the edited body %q does not ask for the usage chunk", b.Raw)
	}
	if !json.Valid(b.Raw) {
		t.Fatalf("edits made invalid JSON: %q", b.Raw)
	}
}

func TestBodyEdits(t *testing.T) {
	for p, seeds := range fuzzSeeds {
		for _, s := range seeds {
			checkEdits(t, p, []byte(s))
		}
	}
	for _, s := range []string{
		`{ }`,
		`{"model":"m","messages":[{"role":"user","content":"hi"}],"stream_options":{"include_usage":false,"x":1}}`,
		`{"messages":[{"role":"user","content":"hi"}],"model":"m","stream_options":null}`,
		`{"messages":[{"role":"user","content":"hi"}],"stream":true,"model":"m"}`,
	} {
		checkEdits(t, ChatCompletions, []byte(s))
	}
	r, err := Parse(ChatCompletions, []byte(`{"messages":[{"role":"user","content":"hi"}],"model":"m"}`))
	if err != nil {
		t.Fatal(err)
	}
	b, err := r.Body().Inject(ChatCompletions, "ctx")
	if err != nil {
		t.Fatal(err)
	}
	if got := string(b.WithModel("n").WithIncludeUsage().Raw); got != `{"stream_options":{"include_usage":true},"messages":[{"role":"system","content":"ctx"},{"role":"user","content":"hi"}],"model":"n"}` {
		t.Fatalf("edited: %s", got)
	}
}

// FuzzBodyEdits: on every body Parse accepts, the edits keep the member
// positions a fresh scan finds, and Body.Inject is Inject.
func FuzzBodyEdits(f *testing.F) {
	for _, ss := range fuzzSeeds {
		for _, s := range ss {
			f.Add([]byte(s))
		}
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		for _, p := range []Protocol{ChatCompletions, Responses, Messages} {
			checkEdits(t, p, raw)
		}
	})
}

// TestParseReadsTheGatewaysMembers: the token bounds, include_usage, the
// effort and max_tokens' presence come from the one parse, keys exact; a
// member of the wrong type is refused by name.
func TestParseReadsTheGatewaysMembers(t *testing.T) {
	msgs := `"messages":[{"role":"user","content":"hi"}]`
	for _, c := range []struct {
		p    Protocol
		body string
		want Request
		err  string
	}{
		{p: ChatCompletions, body: `{"model":"m",` + msgs + `,"stream":true,"stream_options":{"include_usage":true},"max_tokens":64}`, want: Request{MaxOut: 64, HasMaxTokens: true, IncludeUsage: true}},
		{p: ChatCompletions, body: `{"model":"m",` + msgs + `,"max_tokens":64,"max_completion_tokens":32,"reasoning_effort":"high"}`, want: Request{MaxOut: 32, HasMaxTokens: true, Effort: "high"}},
		{p: ChatCompletions, body: `{"model":"m",` + msgs + `,"max_completion_tokens":0,"max_output_tokens":null,"max_tokens":9}`, want: Request{MaxOut: 9, HasMaxTokens: true}},
		{p: ChatCompletions, body: `{"model":"m",` + msgs + `,"max_tokens":-5,"reasoning_effort":"minimal"}`, want: Request{HasMaxTokens: true}},
		{p: ChatCompletions, body: `{"model":"m",` + msgs + `,"MAX_TOKENS":7,"Stream_Options":{"include_usage":true}}`, want: Request{}},
		{p: ChatCompletions, body: `{"model":"m",` + msgs + `,"stream_options":null}`, want: Request{}},
		{p: Responses, body: `{"model":"m","input":"hi","max_output_tokens":12,"reasoning":{"effort":"low"}}`, want: Request{MaxOut: 12, Effort: "low"}},
		{p: Messages, body: `{"model":"m",` + msgs + `,"max_tokens":5,"output_config":{"effort":"xhigh"}}`, want: Request{MaxOut: 5, HasMaxTokens: true, Effort: "xhigh"}},
		{p: ChatCompletions, body: `{"model":"m",` + msgs + `,"max_tokens":1.5}`, err: "wire: field max_tokens: expected an integer"},
		{p: ChatCompletions, body: `{"model":"m",` + msgs + `,"max_tokens":99999999999999999999}`, err: "wire: field max_tokens: expected an integer"},
		{p: Responses, body: `{"model":"m","input":"hi","max_output_tokens":"12"}`, err: "wire: field max_output_tokens: expected an integer"},
		{p: ChatCompletions, body: `{"model":"m",` + msgs + `,"stream_options":[]}`, err: "wire: field stream_options: expected an object with a boolean include_usage"},
	} {
		r, err := Parse(c.p, []byte(c.body))
		if c.err != "" {
			if err == nil || err.Error() != c.err {
				t.Errorf("Parse(%s) error %v, want %q", c.body, err, c.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("Parse(%s): %v", c.body, err)
			continue
		}
		got := Request{MaxOut: r.MaxOut, HasMaxTokens: r.HasMaxTokens, IncludeUsage: r.IncludeUsage, Effort: r.Effort}
		if !reflect.DeepEqual(got, c.want) {
			t.Errorf("Parse(%s) read %+v, want %+v", c.body, got, c.want)
		}
		if r.Effort != PeekEffort(c.p, []byte(c.body)) {
			t.Errorf("Parse(%s) effort %q, PeekEffort %q", c.body, r.Effort, PeekEffort(c.p, []byte(c.body)))
		}
	}
}
