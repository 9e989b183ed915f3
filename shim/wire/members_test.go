package wire

import (
	"encoding/json"
	"testing"
)

// membersByDecoding is readMembers written with encoding/json alone: the
// whole body decoded into its members (exact keys, the last of
// duplicates), then the four the gateway reads.
func membersByDecoding(body []byte) (maxOut int64, includeUsage bool, ok bool) {
	var ms map[string]json.RawMessage
	if json.Unmarshal(body, &ms) != nil {
		return 0, false, false
	}
	for _, k := range []string{"max_completion_tokens", "max_output_tokens", "max_tokens"} {
		var n *int64
		if v, ok := ms[k]; ok && json.Unmarshal(v, &n) != nil {
			return 0, false, false
		}
		if n != nil && *n > 0 && maxOut == 0 {
			maxOut = *n
		}
	}
	var so *struct {
		IncludeUsage bool `json:"include_usage"`
	}
	if v, ok := ms["stream_options"]; ok && json.Unmarshal(v, &so) != nil {
		return 0, false, false
	}
	return maxOut, so != nil && so.IncludeUsage, true
}

// FuzzReadMembers: on every JSON object, readMembers, which decodes only
// the members it needs from the one scan, agrees with decoding the whole
// body.
func FuzzReadMembers(f *testing.F) {
	for _, s := range []string{
		`{"model":"m","stream":true,"stream_options":{"include_usage":false},"max_tokens":10,"messages":[{"role":"user","content":"a\"b"}]}`,
		`{"max_output_tokens":5,"max_tokens":6,"stream":false}`,
		`{"max_tokens":6,"max_tokens":-1}`, `{}`, `{"a":{"max_tokens":3}}`, `{"stream_options":{"include_usage":null}}`,
		`{"MAX_TOKENS":7}`, `{"max_tokens":1e2}`, `{"stream_options":{"include_usage":1}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		if !json.Valid(body) {
			return
		}
		top, err := objectMembers(body, span{0, len(body)})
		if err != nil {
			return // not an object
		}
		r := &Request{Protocol: ChatCompletions, Raw: body, top: top}
		err = r.readMembers()
		maxOut, usage, ok := membersByDecoding(body)
		if (err == nil) != ok || (ok && (r.MaxOut != maxOut || r.IncludeUsage != usage)) {
			t.Fatalf("readMembers(%q) = %d, %v, %v; decoding the body gives %d, %v, %v", body, r.MaxOut, r.IncludeUsage, err, maxOut, usage, ok)
		}
	})
}
