package guardrail_test

import (
	"bytes"
	"encoding/json"
	"io"
	"strings"
	"testing"

	"github.com/caduceus-dev/caduceus/guard"
	"github.com/caduceus-dev/caduceus/guard/detect"
	"github.com/caduceus-dev/caduceus/guard/guardtest"
	"github.com/caduceus-dev/caduceus/shim/guardrail"
	"github.com/caduceus-dev/caduceus/shim/wire"
)

var protocols = []wire.Protocol{wire.ChatCompletions, wire.Responses, wire.Messages}

// streamOf is a direct answer's stream in protocol p whose text comes in
// pieces, one delta event each (the summaries carry the whole text).
func streamOf(p wire.Protocol, pieces []string) []wire.SSE {
	const mark = "QQMARKQQ"
	full, _ := json.Marshal(strings.Join(pieces, ""))
	var raw []byte
	for _, ev := range wire.DirectEvents(p, wire.Direct{ID: "x1", Model: "m", Text: mark, Created: 1}) {
		s := string(ev)
		delta := strings.HasPrefix(s, "data: ") || strings.HasPrefix(s, "event: response.output_text.delta") || strings.HasPrefix(s, "event: content_block_delta")
		if !strings.Contains(s, mark) || !delta {
			raw = append(raw, strings.ReplaceAll(s, mark, string(full[1:len(full)-1]))...)
			continue
		}
		for _, piece := range pieces {
			pj, _ := json.Marshal(piece)
			raw = append(raw, strings.ReplaceAll(s, mark, string(pj[1:len(pj)-1]))...)
		}
	}
	return readEvents(raw)
}

func readEvents(raw []byte) []wire.SSE {
	r := wire.NewSSEReader(bytes.NewReader(raw))
	var out []wire.SSE
	for {
		ev, err := r.Next()
		if err == io.EOF {
			return out
		}
		if err != nil || ev.Incomplete {
			return append(out, wire.SSE{Name: "broken", Data: []byte(err.Error())})
		}
		out = append(out, ev)
	}
}

// text reassembles a stream's text as its SDK would: chat's content
// deltas, the Responses API's output_text deltas, Anthropic's text
// deltas; and checks the wire on the way: every event's data is JSON (or
// [DONE]) and the stream ends with its terminal event.
func text(t *testing.T, p wire.Protocol, evs []wire.SSE) string {
	t.Helper()
	var b strings.Builder
	for i, ev := range evs {
		if string(ev.Data) == "[DONE]" {
			if p != wire.ChatCompletions || i != len(evs)-1 {
				t.Fatalf("[DONE] at %d of %d", i, len(evs))
			}
			continue
		}
		var m struct {
			Type    string `json:"type"`
			Delta   any    `json:"delta"`
			Choices []struct {
				Delta struct {
					Content string `json:"content"`
				} `json:"delta"`
			} `json:"choices"`
		}
		if err := json.Unmarshal(ev.Data, &m); err != nil {
			t.Fatalf("event %d (%s) is not JSON: %q", i, ev.Name, ev.Data)
		}
		switch p {
		case wire.ChatCompletions:
			for _, c := range m.Choices {
				b.WriteString(c.Delta.Content)
			}
		case wire.Responses:
			if ev.Name != m.Type {
				t.Fatalf("event %q carries type %q", ev.Name, m.Type)
			}
			if m.Type == "response.output_text.delta" {
				b.WriteString(m.Delta.(string))
			}
		case wire.Messages:
			if ev.Name != m.Type {
				t.Fatalf("event %q carries type %q", ev.Name, m.Type)
			}
			if d, ok := m.Delta.(map[string]any); ok && d["type"] == "text_delta" {
				b.WriteString(d["text"].(string))
			}
		}
	}
	last := evs[len(evs)-1]
	want := map[wire.Protocol]string{wire.ChatCompletions: "", wire.Responses: "response.completed", wire.Messages: "message_stop"}[p]
	if last.Name != want {
		t.Fatalf("the stream ends with %q, want %q", last.Name, want)
	}
	return b.String()
}

func filter(p wire.Protocol) *guardrail.Answer {
	pol := guard.Config{Actions: guard.Actions{"default": guard.Redact}}.Policy("")
	d := detect.MustDefault()
	return guardrail.New(p, guard.NewRedactor(d, pol, guard.Answer), guard.NewRedactor(d, pol, guard.Answer), 0)
}

// run passes evs through f one upstream event at a time, as the gateway
// does, and re-reads what it wrote as the client would.
func run(f *guardrail.Answer, evs []wire.SSE) []wire.SSE {
	var raw []byte
	for _, ev := range evs {
		for _, o := range f.Events([]wire.SSE{ev}) {
			raw = append(raw, o.Raw...)
		}
	}
	return readEvents(raw)
}

// TestAnswerStreamEveryWire: a value split over two delta events never
// reaches the client; the text reads as its whole redaction; a Responses
// stream's summaries carry the same placeholders.
func TestAnswerStreamEveryWire(t *testing.T) {
	for _, v := range guardtest.Values {
		for _, p := range protocols {
			cut := len(v.Value) / 2
			evs := run(filter(p), streamOf(p, []string{"Here: " + v.Value[:cut], v.Value[cut:] + " is it."}))
			got := text(t, p, evs)
			want := "Here: " + guard.Placeholder(v.Kind, 1) + " is it."
			if got != want {
				t.Errorf("%s %s: text %q, want %q", p, v.Kind, got, want)
			}
			for _, ev := range evs {
				if leaks := guardtest.Leaks(ev.Raw, []guardtest.Planted{v}); len(leaks) > 0 {
					t.Errorf("%s: event %s holds the %s", p, ev.Name, v.Kind)
				}
			}
		}
	}
}

// FuzzAnswerStream: however the upstream splits a text holding a planted
// value into delta events, on every wire, the client's events are a
// well-formed stream of its wire (JSON data, its terminal event last)
// whose text never holds the value when redacting the text whole would
// remove it.
func FuzzAnswerStream(f *testing.F) {
	f.Add("Here: ", " is it.", uint8(0), uint8(0), []byte{5, 11})
	f.Add("", "", uint8(2), uint8(1), []byte{1, 2, 3, 4, 5, 6, 7, 8})
	f.Add("a\"b\\", "\n\u2028", uint8(3), uint8(2), []byte{60})
	d := detect.MustDefault()
	pol := guard.Config{Actions: guard.Actions{"default": guard.Redact}}.Policy("")
	f.Fuzz(func(t *testing.T, before, after string, which, proto uint8, cuts []byte) {
		if !json.Valid(mustJSON(before)) || !json.Valid(mustJSON(after)) {
			return
		}
		before, after = before[:min(len(before), 200)], after[:min(len(after), 200)]
		p := protocols[int(proto)%len(protocols)]
		v := guardtest.Values[int(which)%len(guardtest.Values)].Value
		full := before + v + after
		if whole, _ := guard.NewRedactor(d, pol, guard.Answer).Redact(full); strings.Contains(whole, v) {
			return
		}
		var pieces []string
		i := 0
		for _, c := range cuts {
			n := min(int(c)%48+1, len(full)-i)
			pieces = append(pieces, full[i:i+n])
			if i += n; i == len(full) {
				break
			}
		}
		if i < len(full) {
			pieces = append(pieces, full[i:])
		}
		evs := run(filter(p), streamOf(p, pieces))
		if got := text(t, p, evs); strings.Contains(got, v) {
			t.Fatalf("%s: the client read %q", p, got)
		}
	})
}

func mustJSON(s string) []byte {
	b, _ := json.Marshal(s)
	return b
}
