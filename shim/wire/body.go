package wire

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// Body is a request body with the positions of its top-level members, kept
// right across the edits the shim and the gateway make (Inject, WithModel,
// WithIncludeUsage): no edit scans the body's top level again, and every
// byte an edit does not touch is kept as it came.
type Body struct {
	Raw []byte
	top []member
}

// Body is r's body as it was parsed.
func (r *Request) Body() Body { return Body{Raw: r.Raw, top: r.top} }

// BodyOf scans raw, a JSON object that was not parsed (a token count's
// body, a test's), for its top-level members.
func BodyOf(raw []byte) (Body, error) {
	parses.Add(1)
	top, err := objectMembers(raw, span{0, len(raw)})
	if err != nil {
		return Body{}, fmt.Errorf("wire: request body must be a JSON object")
	}
	return Body{Raw: raw, top: top}, nil
}

// Model is the body's model member when it is a string ("" otherwise).
func (b Body) Model() string {
	v, ok := find(b.top, "model")
	if !ok {
		return ""
	}
	s, _ := fastString(b.Raw, v)
	return s
}

// edit is b with b.Raw[s.Start:s.End] replaced by repl: a member after s
// moves, the member holding s grows or shrinks with it.
func (b Body) edit(s span, repl []byte) Body {
	d := len(repl) - (s.End - s.Start)
	top := make([]member, len(b.top), len(b.top)+1)
	for i, m := range b.top {
		switch v := &m.Value; {
		case v.Start >= s.End && v.Start > s.Start:
			v.Start, v.End = v.Start+d, v.End+d
		case v.Start <= s.Start && v.End >= s.End:
			v.End += d
		}
		top[i] = m
	}
	return Body{Raw: splice(b.Raw, s, repl), top: top}
}

// WithModel is b asking for model instead (a failover step to another
// model); a body without a model member is b.
func (b Body) WithModel(model string) Body {
	v, ok := find(b.top, "model")
	if !ok {
		return b
	}
	q, _ := json.Marshal(model)
	return b.edit(v, q)
}

// WithIncludeUsage is a chat completions body whose stream ends with a
// usage chunk: stream_options.include_usage set, every other member kept.
func (b Body) WithIncludeUsage() Body {
	if v, ok := find(b.top, "stream_options"); ok {
		var opts map[string]json.RawMessage
		if json.Unmarshal(b.Raw[v.Start:v.End], &opts) != nil || opts == nil {
			opts = map[string]json.RawMessage{}
		}
		opts["include_usage"] = json.RawMessage("true")
		repl, _ := json.Marshal(opts)
		return b.edit(v, repl)
	}
	open := bytes.IndexByte(b.Raw, '{')
	if open < 0 {
		return b
	}
	const key, value = `"stream_options":`, `{"include_usage":true}`
	ins := key + value
	if len(b.top) > 0 {
		ins += ","
	}
	out := b.edit(span{open + 1, open + 1}, []byte(ins))
	start := open + 1 + len(key)
	out.top = append(out.top, member{Key: "stream_options", Value: span{start, start + len(value)}})
	return out
}

// Inject is b with text added where DESIGN §7 places shimmed context (see
// Inject).
func (b Body) Inject(p Protocol, text string) (Body, error) {
	s, repl, err := injection(p, b.Raw, b.top, text)
	if err != nil {
		return Body{}, err
	}
	return b.edit(s, repl), nil
}
