package gateway

import (
	"encoding/json"
	"testing"
)

// metaByDecoding is readMeta written with encoding/json alone: the whole
// body decoded into its members (exact keys, the last of duplicates), then
// the five the gateway reads. readMeta must agree with it on every valid
// JSON object.
func metaByDecoding(body []byte) (meta, bool) {
	var ms map[string]json.RawMessage
	if json.Unmarshal(body, &ms) != nil {
		return meta{}, false
	}
	var out meta
	if v, ok := ms["stream"]; ok && json.Unmarshal(v, &out.stream) != nil {
		return meta{}, false
	}
	for _, k := range []string{"max_completion_tokens", "max_output_tokens", "max_tokens"} {
		var n *int64
		if v, ok := ms[k]; ok && json.Unmarshal(v, &n) != nil {
			return meta{}, false
		}
		if n != nil && *n > 0 && out.maxOut == 0 {
			out.maxOut = *n
		}
	}
	var so *struct {
		IncludeUsage bool `json:"include_usage"`
	}
	if v, ok := ms["stream_options"]; ok && json.Unmarshal(v, &so) != nil {
		return meta{}, false
	}
	if so != nil {
		out.includeUsage = so.IncludeUsage
	}
	return out, true
}

func TestReadMeta(t *testing.T) {
	for _, c := range []struct {
		body string
		want meta
		bad  bool
	}{
		{body: `{"model":"m","messages":[{"role":"user","content":"hi"}]}`},
		{body: `{"stream":true,"stream_options":{"include_usage":true},"max_tokens":64}`, want: meta{stream: true, includeUsage: true, maxOut: 64}},
		{body: `{"max_tokens":64,"max_completion_tokens":32}`, want: meta{maxOut: 32}},
		{body: `{"max_completion_tokens":0,"max_output_tokens":null,"max_tokens":9}`, want: meta{maxOut: 9}},
		{body: `{"max_tokens":-5}`, want: meta{}},
		{body: `{"stream":false,"stream":true}`, want: meta{stream: true}},
		{body: `{"Stream":true,"MAX_TOKENS":7}`, want: meta{}}, // keys match exactly, as providers read them
		{body: `{"stream":null,"stream_options":null}`, want: meta{}},
		{body: `{"stream":"yes"}`, bad: true},
		{body: `{"max_tokens":1.5}`, bad: true},
		{body: `{"max_tokens":99999999999999999999}`, bad: true},
		{body: `{"stream_options":[]}`, bad: true},
		{body: `{"max_output_tokens":"12"}`, bad: true},
		{body: `[1,2]`, bad: true},
	} {
		got, err := readMeta([]byte(c.body))
		if (err != nil) != c.bad || got != c.want {
			t.Errorf("readMeta(%s) = %+v, %v; want %+v, bad %v", c.body, got, err, c.want, c.bad)
		}
		if ref, ok := metaByDecoding([]byte(c.body)); ok != !c.bad || ref != c.want {
			t.Errorf("the reference on %s: %+v, %v", c.body, ref, ok)
		}
	}
}

// FuzzReadMeta: on every valid JSON body, readMeta, which scans the body
// and decodes five members, agrees with decoding the whole body.
func FuzzReadMeta(f *testing.F) {
	for _, s := range []string{
		`{"model":"m","stream":true,"stream_options":{"include_usage":false},"max_tokens":10,"messages":[{"role":"user","content":"a\"b"}]}`,
		`{"max_output_tokens":5,"max_tokens":6,"stream":false}`,
		`{"stream":1}`, `{}`, `{"a":{"stream":true}}`, `{"stream_options":{"include_usage":null}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		if !json.Valid(body) {
			return
		}
		want, ok := metaByDecoding(body)
		got, err := readMeta(body)
		if (err == nil) != ok || got != want {
			t.Fatalf("readMeta(%q) = %+v, %v; decoding the body gives %+v, %v", body, got, err, want, ok)
		}
	})
}

// BenchmarkReadMeta: readMeta against decoding the body into the five
// fields with encoding/json (what it did before), on a small chat body
// and on one with ~8 KB of messages.
func BenchmarkReadMeta(b *testing.B) {
	small := []byte(`{"model":"gpt-4o-mini","messages":[{"role":"system","content":"You are a helpful assistant."},{"role":"user","content":"Summarise the release notes of version 2.3 in three bullet points."}],"max_tokens":128}`)
	var big []byte
	big = append(big, `{"model":"gpt-4o-mini","stream":true,"messages":[`...)
	for i := range 40 {
		if i > 0 {
			big = append(big, ',')
		}
		big = append(big, `{"role":"user","content":"Summarise the release notes of version 2.3 in three bullet points, and say which of them changes the API for clients that stream. Thank you."}`...)
	}
	big = append(big, `],"max_tokens":128}`...)
	decodeStruct := func(body []byte) {
		var m struct {
			Stream              bool   `json:"stream"`
			MaxTokens           *int64 `json:"max_tokens"`
			MaxCompletionTokens *int64 `json:"max_completion_tokens"`
			MaxOutputTokens     *int64 `json:"max_output_tokens"`
			StreamOptions       *struct {
				IncludeUsage bool `json:"include_usage"`
			} `json:"stream_options"`
		}
		if err := json.Unmarshal(body, &m); err != nil {
			b.Fatal(err)
		}
	}
	for _, body := range []struct {
		name string
		b    []byte
	}{{"small", small}, {"8KB", big}} {
		b.Run(body.name+"/scan", func(b *testing.B) {
			b.SetBytes(int64(len(body.b)))
			for b.Loop() {
				if _, err := readMeta(body.b); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(body.name+"/decode-struct", func(b *testing.B) {
			b.SetBytes(int64(len(body.b)))
			for b.Loop() {
				decodeStruct(body.b)
			}
		})
	}
}
