// Package guardrail applies the guardrails (package guard) to the shim's
// answers, in the client's wire: a whole answer's JSON, and a stream's
// events as they pass — the text deltas of chat completions (content and
// tool call arguments), Anthropic messages (text and input_json deltas)
// and the Responses API (output text and function call argument deltas)
// go through a guard.Stream per piece of text, which keeps back only the
// bytes a finding may still need and gives them back, redacted, in an
// event of the same wire before the piece ends. Every event it writes is
// one the client's SDK reads: JSON data on one line, the same event
// names.
package guardrail

import (
	"bytes"
	"encoding/json"
	"slices"
	"strconv"
	"strings"

	"github.com/caduceus-dev/caduceus/guard"
	"github.com/caduceus-dev/caduceus/shim/wire"
)

// Answer filters one answer of protocol p (a gateway.AnswerFilter). It is
// not safe for concurrent use; a request has its own.
type Answer struct {
	p wire.Protocol
	r *guard.Redactor
	// shadow redacts the summaries a Responses stream repeats its text in
	// (output_text.done, response.completed): the same placeholders as r,
	// without counting the values again.
	shadow  *guard.Redactor
	hold    int
	streams map[string]*piece
	order   []string // keys of streams, first seen first
}

// piece is one piece of streamed text: its redaction and what a delta
// event of it looks like (the event it last came in).
type piece struct {
	s    *guard.Stream
	last map[string]json.RawMessage // the last event's data (chat: the chunk)
	name string                     // the event name
	// where puts text into a copy of last: the delta event giving back
	// what the stream kept.
	where func(ev map[string]json.RawMessage, text string)
}

// New returns the filter of an answer in protocol p, redacting with r
// (whose direction is guard.Answer), keeping back hold bytes per piece of
// streamed text (0: guard.Hold).
func New(p wire.Protocol, r *guard.Redactor, shadow *guard.Redactor, hold int) *Answer {
	return &Answer{p: p, r: r, shadow: shadow, hold: hold, streams: map[string]*piece{}}
}

// Whole is a whole answer's body redacted (its JSON strings, ids and
// opaque members excepted).
func (a *Answer) Whole(body []byte) []byte {
	out, _ := guard.RedactJSON(body, a.r)
	return out
}

// Pending is how many bytes the filter keeps back across its pieces.
func (a *Answer) Pending() int {
	n := 0
	for _, p := range a.streams {
		n += p.s.Pending()
	}
	return n
}

// Events filters a stream's events; the terminal event ([DONE],
// message_stop, response.completed) comes after everything kept back.
func (a *Answer) Events(evs []wire.SSE) []wire.SSE {
	var out []wire.SSE
	for _, ev := range evs {
		out = a.event(ev, out)
	}
	return out
}

func (a *Answer) event(ev wire.SSE, out []wire.SSE) []wire.SSE {
	data := bytes.TrimSpace(ev.Data)
	if len(data) == 0 || data[0] != '{' {
		if bytes.Equal(data, []byte("[DONE]")) {
			out = a.flushAll(out)
		}
		return append(out, ev)
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(data, &m) != nil {
		// Not JSON: redact it as text, so nothing escapes.
		red, ch := a.r.Redact(string(ev.Data))
		if ch {
			ev = event(ev.Name, []byte(red))
		}
		return append(out, ev)
	}
	switch a.p {
	case wire.ChatCompletions:
		return a.chat(ev, m, out)
	case wire.Messages:
		return a.messages(ev, m, out)
	case wire.Responses:
		return a.responses(ev, m, out)
	}
	return append(out, ev)
}

func event(name string, data []byte) wire.SSE {
	return wire.SSE{Name: name, Data: data, Raw: wire.Event(name, data)}
}

func encode(m map[string]json.RawMessage) []byte {
	b, err := json.Marshal(m)
	if err != nil {
		return []byte("{}")
	}
	return b
}

func str(raw json.RawMessage) (string, bool) {
	var s string
	if len(raw) == 0 || raw[0] != '"' || json.Unmarshal(raw, &s) != nil {
		return "", false
	}
	return s, true
}

func quote(s string) json.RawMessage {
	b, _ := json.Marshal(s)
	return b
}

// write passes text of piece key through its stream, making the piece on
// first sight.
func (a *Answer) write(key, name string, last map[string]json.RawMessage, where func(map[string]json.RawMessage, string), text string, end bool) string {
	p, ok := a.streams[key]
	if !ok {
		p = &piece{s: guard.NewStream(a.r, a.hold)}
		a.streams[key] = p
		a.order = append(a.order, key)
	}
	p.last, p.name, p.where = last, name, where
	out := p.s.Write(text)
	if end {
		out += p.s.Flush()
	}
	return out
}

// flush gives back what piece key kept, as a delta event of its own (none
// when it kept nothing).
func (a *Answer) flush(key string, out []wire.SSE) []wire.SSE {
	p, ok := a.streams[key]
	if !ok {
		return out
	}
	text := p.s.Flush()
	if text == "" || p.last == nil {
		return out
	}
	ev := make(map[string]json.RawMessage, len(p.last))
	for k, v := range p.last {
		ev[k] = v
	}
	p.where(ev, text)
	return append(out, event(p.name, encode(ev)))
}

func (a *Answer) flushAll(out []wire.SSE) []wire.SSE {
	for _, k := range a.order {
		out = a.flush(k, out)
	}
	return out
}

// chat: a chunk's choices[].delta.content and
// choices[].delta.tool_calls[].function.arguments are streamed text; a
// choice's finish_reason ends its pieces.
func (a *Answer) chat(ev wire.SSE, m map[string]json.RawMessage, out []wire.SSE) []wire.SSE {
	var choices []map[string]json.RawMessage
	if raw, ok := m["choices"]; !ok || json.Unmarshal(raw, &choices) != nil {
		return append(out, a.whole(ev))
	}
	changed := false
	var finished []string
	for _, c := range choices {
		idx := string(c["index"])
		fr := c["finish_reason"]
		ends := len(fr) > 0 && string(fr) != "null"
		var here []string // the pieces this chunk carries text of
		var delta map[string]json.RawMessage
		if json.Unmarshal(c["delta"], &delta) == nil && delta != nil {
			if s, ok := str(delta["content"]); ok {
				key := "c" + idx
				delta["content"] = quote(a.write(key, ev.Name, chatShell(m, idx), chatContent, s, ends))
				here, changed = append(here, key), true
			}
			var calls []map[string]json.RawMessage
			if json.Unmarshal(delta["tool_calls"], &calls) == nil && len(calls) > 0 {
				for _, call := range calls {
					var fn map[string]json.RawMessage
					if json.Unmarshal(call["function"], &fn) != nil || fn == nil {
						continue
					}
					if s, ok := str(fn["arguments"]); ok {
						ti := string(call["index"])
						key := "t" + idx + "." + ti
						fn["arguments"] = quote(a.write(key, ev.Name, chatShell(m, idx), chatArgs(ti), s, ends))
						call["function"] = encode(fn)
						here, changed = append(here, key), true
					}
				}
				delta["tool_calls"], _ = json.Marshal(calls)
			}
			c["delta"] = encode(delta)
		}
		if ends {
			// the choice's other pieces give back what they kept before
			// the chunk that ends it
			for _, k := range a.order {
				if (k == "c"+idx || strings.HasPrefix(k, "t"+idx+".")) && !slices.Contains(here, k) {
					finished = append(finished, k)
				}
			}
		}
	}
	for _, k := range finished {
		out = a.flush(k, out)
	}
	if !changed {
		return append(out, ev)
	}
	m["choices"], _ = json.Marshal(choices)
	return append(out, event(ev.Name, encode(m)))
}

// chatShell is a chunk like m (id, model, created...) with one choice,
// index idx, and no usage: the chunk a flush fills.
func chatShell(m map[string]json.RawMessage, idx string) map[string]json.RawMessage {
	s := make(map[string]json.RawMessage, len(m))
	for k, v := range m {
		if k != "choices" && k != "usage" {
			s[k] = v
		}
	}
	s["choices"] = json.RawMessage(`[{"index":` + idx + `,"delta":{},"finish_reason":null}]`)
	return s
}

func chatContent(ev map[string]json.RawMessage, text string) {
	setChoiceDelta(ev, `{"content":`+string(quote(text))+`}`)
}

func chatArgs(ti string) func(map[string]json.RawMessage, string) {
	return func(ev map[string]json.RawMessage, text string) {
		setChoiceDelta(ev, `{"tool_calls":[{"index":`+ti+`,"function":{"arguments":`+string(quote(text))+`}}]}`)
	}
}

func setChoiceDelta(ev map[string]json.RawMessage, delta string) {
	var choices []map[string]json.RawMessage
	if json.Unmarshal(ev["choices"], &choices) != nil || len(choices) == 0 {
		return
	}
	choices[0]["delta"] = json.RawMessage(delta)
	ev["choices"], _ = json.Marshal(choices)
}

// messages: content_block_delta's text and partial_json are streamed
// text; content_block_stop ends its block's piece; other events (a
// block's start, message_delta) are redacted whole.
func (a *Answer) messages(ev wire.SSE, m map[string]json.RawMessage, out []wire.SSE) []wire.SSE {
	typ, _ := str(m["type"])
	idx := string(m["index"])
	switch typ {
	case "content_block_delta":
		var delta map[string]json.RawMessage
		if json.Unmarshal(m["delta"], &delta) != nil || delta == nil {
			return append(out, ev)
		}
		dt, _ := str(delta["type"])
		field := ""
		switch dt {
		case "text_delta":
			field = "text"
		case "input_json_delta":
			field = "partial_json"
		default:
			return append(out, ev) // thinking and its signature pass as they are
		}
		s, ok := str(delta[field])
		if !ok {
			return append(out, ev)
		}
		shell := map[string]json.RawMessage{"type": m["type"], "index": m["index"]}
		delta[field] = quote(a.write("b"+idx, ev.Name, shell, messagesDelta(dt, field), s, false))
		m["delta"] = encode(delta)
		return append(out, event(ev.Name, encode(m)))
	case "content_block_stop":
		out = a.flush("b"+idx, out)
		return append(out, ev)
	case "message_stop":
		out = a.flushAll(out)
		return append(out, ev)
	}
	return append(out, a.whole(ev))
}

func messagesDelta(dt, field string) func(map[string]json.RawMessage, string) {
	return func(ev map[string]json.RawMessage, text string) {
		ev["delta"] = json.RawMessage(`{"type":` + strconv.Quote(dt) + `,` + strconv.Quote(field) + `:` + string(quote(text)) + `}`)
	}
}

// responses: output_text and function_call_arguments deltas are streamed
// text; their done event ends the piece, and it and the summaries after it
// (content_part.done, output_item.done, response.completed) carry the
// whole text, redacted with the same placeholders.
func (a *Answer) responses(ev wire.SSE, m map[string]json.RawMessage, out []wire.SSE) []wire.SSE {
	typ, _ := str(m["type"])
	key := string(m["item_id"]) + "/" + string(m["content_index"])
	switch typ {
	case "response.output_text.delta", "response.function_call_arguments.delta", "response.refusal.delta":
		s, ok := str(m["delta"])
		if !ok {
			return append(out, ev)
		}
		shell := make(map[string]json.RawMessage, len(m))
		for k, v := range m {
			shell[k] = v
		}
		m["delta"] = quote(a.write(key, ev.Name, shell, responsesDelta, s, false))
		return append(out, event(ev.Name, encode(m)))
	case "response.output_text.done", "response.function_call_arguments.done", "response.refusal.done":
		out = a.flush(key, out)
	case "response.completed", "response.incomplete", "response.failed":
		out = a.flushAll(out)
	}
	return append(out, a.summary(ev))
}

func responsesDelta(ev map[string]json.RawMessage, text string) {
	ev["delta"] = quote(text)
}

// whole is ev with its data redacted whole.
func (a *Answer) whole(ev wire.SSE) wire.SSE {
	out, ch := guard.RedactJSON(ev.Data, a.r)
	if !ch {
		return ev
	}
	return event(ev.Name, out)
}

// summary is whole with the shadow redactor: text already counted.
func (a *Answer) summary(ev wire.SSE) wire.SSE {
	r := a.shadow
	if r == nil {
		r = a.r
	}
	out, ch := guard.RedactJSON(ev.Data, r)
	if !ch {
		return ev
	}
	return event(ev.Name, out)
}
