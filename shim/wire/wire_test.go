package wire

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"reflect"
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	cases := []struct {
		name      string
		p         Protocol
		body      string
		model     string
		last      string
		lastIsTxt bool
		tools     []string
		used      []string
		paths     []string
		err       string
	}{
		{name: "chat string content", p: ChatCompletions,
			body:  `{"model":"gpt-4o","messages":[{"role":"system","content":"be brief"},{"role":"user","content":"deploy deploy/app.tf now"}],"tools":[{"type":"function","function":{"name":"Bash"}}]}`,
			model: "gpt-4o", last: "deploy deploy/app.tf now", lastIsTxt: true, tools: []string{"Bash"}, paths: []string{"deploy/app.tf"}},
		{name: "chat parts and tool turn", p: ChatCompletions,
			body:  `{"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"a"},{"type":"image_url","image_url":{"url":"x"}},{"type":"text","text":"b"}]},{"role":"assistant","content":null,"tool_calls":[{"id":"1","type":"function","function":{"name":"Read","arguments":"{\"file_path\":\"src/main.go\"}"}}]},{"role":"tool","tool_call_id":"1","content":"ok"}]}`,
			model: "m", last: "a\nb", lastIsTxt: false, used: []string{"Read"}, paths: []string{"src/main.go"}},
		{name: "responses string input", p: Responses, body: `{"model":"gpt-5","input":"hello there","instructions":"sys"}`,
			model: "gpt-5", last: "hello there", lastIsTxt: true},
		{name: "responses items", p: Responses,
			body:  `{"model":"gpt-5","input":[{"role":"user","content":[{"type":"input_text","text":"fix it"}]},{"type":"function_call","call_id":"c","name":"shell","arguments":"{\"path\":\"a/b.py\"}"},{"type":"function_call_output","call_id":"c","output":"done"}],"tools":[{"type":"function","name":"shell"}]}`,
			model: "gpt-5", last: "fix it", lastIsTxt: false, tools: []string{"shell"}, used: []string{"shell"}, paths: []string{"a/b.py"}},
		{name: "messages blocks", p: Messages,
			body:  `{"model":"claude-x","max_tokens":10,"system":[{"type":"text","text":"sys"}],"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":[{"type":"tool_use","id":"t","name":"Edit","input":{"file_path":"x/y.go"}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":"ok"}]}],"tools":[{"name":"Edit","input_schema":{}}]}`,
			model: "claude-x", last: "hi", lastIsTxt: false, tools: []string{"Edit"}, used: []string{"Edit"}, paths: []string{"x/y.go"}},
		{name: "messages text last", p: Messages, body: `{"model":"claude-x","messages":[{"role":"user","content":[{"type":"text","text":"what is up"}]}]}`,
			model: "claude-x", last: "what is up", lastIsTxt: true},
		{name: "not json", p: ChatCompletions, body: `{"model":`, err: "not valid JSON"},
		{name: "array body", p: Messages, body: `[1]`, err: "must be a JSON object"},
		{name: "missing model", p: ChatCompletions, body: `{"messages":[]}`, err: "model is required"},
		{name: "missing messages", p: Messages, body: `{"model":"m"}`, err: "messages is required"},
		{name: "missing input", p: Responses, body: `{"model":"m"}`, err: "input is required"},
		{name: "wrong type", p: ChatCompletions, body: `{"model":"m","stream":"yes","messages":[]}`, err: "field stream"},
		{name: "bad content", p: Messages, body: `{"model":"m","messages":[{"role":"user","content":5}]}`, err: "messages[0].content"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r, err := Parse(c.p, []byte(c.body))
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("error %v, want one containing %q", err, c.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if r.Model != c.model || r.LastUserText() != c.last || r.LastTurnIsUserText() != c.lastIsTxt {
				t.Fatalf("model %q last %q lastIsText %v", r.Model, r.LastUserText(), r.LastTurnIsUserText())
			}
			if !reflect.DeepEqual(r.Tools, c.tools) || !reflect.DeepEqual(r.Used, c.used) || !reflect.DeepEqual(r.AllPaths(), c.paths) {
				t.Fatalf("tools %v used %v paths %v", r.Tools, r.Used, r.AllPaths())
			}
		})
	}
}

// removed reports whether out is in with exactly one insertion of ins (and
// nothing else changed), returning the offset.
func insertedOnce(in, out, ins []byte) bool {
	i := bytes.Index(out, ins)
	if i < 0 {
		return false
	}
	return bytes.Equal(append(append([]byte{}, out[:i]...), out[i+len(ins):]...), in)
}

func TestInject(t *testing.T) {
	shim := "<caduceus-shim provision=\"P\" version=\"1\">\nctx \"q\"\n</caduceus-shim>"
	q := string(quote(shim))
	cases := []struct {
		name string
		p    Protocol
		in   string
		want string // exact expected output
	}{
		{"chat before last user", ChatCompletions,
			`{"model":"m","x_unknown":{"keep":[1,2]},"messages":[{"role":"user","content":"one"},{"role":"assistant","content":"two"},{"role":"user","content":"three","name":"n"}]}`,
			`{"model":"m","x_unknown":{"keep":[1,2]},"messages":[{"role":"user","content":"one"},{"role":"assistant","content":"two"},{"role":"system","content":` + q + `},{"role":"user","content":"three","name":"n"}]}`},
		{"chat whitespace kept", ChatCompletions,
			"{\n  \"model\": \"m\",\n  \"messages\": [\n    {\"role\": \"user\", \"content\": \"hi\"}\n  ]\n}",
			"{\n  \"model\": \"m\",\n  \"messages\": [\n    {\"role\":\"system\",\"content\":" + q + "},{\"role\": \"user\", \"content\": \"hi\"}\n  ]\n}"},
		{"responses string input", Responses, `{"model":"m","input":"hello","store":false}`,
			`{"model":"m","input":[{"role":"developer","content":` + q + `},{"role":"user","content":"hello"}],"store":false}`},
		{"responses items", Responses, `{"model":"m","input":[{"role":"user","content":"a"},{"type":"message","role":"user","content":[{"type":"input_text","text":"b"}]}]}`,
			`{"model":"m","input":[{"role":"user","content":"a"},{"type":"message","role":"developer","content":` + q + `},{"type":"message","role":"user","content":[{"type":"input_text","text":"b"}]}]}`},
		{"messages string content", Messages, `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"hi"}],"metadata":{"user_id":"u"}}`,
			`{"model":"m","max_tokens":5,"messages":[{"role":"user","content":[{"type":"text","text":` + q + `},{"type":"text","text":"hi"}]}],"metadata":{"user_id":"u"}}`},
		{"messages after tool results", Messages, `{"model":"m","messages":[{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":"r"},{"type":"text","text":"next","cache_control":{"type":"ephemeral"}}]}]}`,
			`{"model":"m","messages":[{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":"r"},{"type":"text","text":` + q + `},{"type":"text","text":"next","cache_control":{"type":"ephemeral"}}]}]}`},
		{"messages only tool results", Messages, `{"model":"m","messages":[{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":"r"}]}]}`,
			`{"model":"m","messages":[{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":"r"},{"type":"text","text":` + q + `}]}]}`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out, err := Inject(c.p, []byte(c.in), shim)
			if err != nil {
				t.Fatal(err)
			}
			if string(out) != c.want {
				t.Fatalf("got\n%s\nwant\n%s", out, c.want)
			}
			if !json.Valid(out) {
				t.Fatal("output is not JSON")
			}
			if _, err := Parse(c.p, out); err != nil {
				t.Fatalf("injected request does not parse: %v", err)
			}
		})
	}
	if _, err := Inject(Messages, []byte(`{"model":"m","messages":[{"role":"assistant","content":"x"}]}`), "s"); err == nil {
		t.Fatal("messages without a user turn accepted")
	}
}

func TestDirectBodies(t *testing.T) {
	d := Direct{ID: "01X", Model: "m", Text: "Deploy with make deploy-staging.", Created: 1}
	for _, p := range Protocols {
		if b := DirectJSON(p, d); !json.Valid(b) || !bytes.Contains(b, []byte(d.Text)) {
			t.Fatalf("%s: bad direct body %s", p, b)
		}
		evs := DirectEvents(p, d)
		var text strings.Builder
		for _, ev := range evs {
			sr := NewSSEReader(bytes.NewReader(ev))
			e, err := sr.Next()
			if err != nil || e.Incomplete {
				t.Fatalf("%s: event %q does not read back: %v", p, ev, err)
			}
			if p != ChatCompletions && e.Name == "" {
				t.Fatalf("%s: event without event: line: %q", p, ev)
			}
			if string(e.Data) == "[DONE]" {
				continue
			}
			var m map[string]any
			if err := json.Unmarshal(e.Data, &m); err != nil {
				t.Fatalf("%s: data is not JSON: %q", p, e.Data)
			}
			if p != ChatCompletions && m["type"] != e.Name {
				t.Fatalf("%s: event %q carries type %v", p, e.Name, m["type"])
			}
			switch p {
			case ChatCompletions:
				ch := m["choices"].([]any)[0].(map[string]any)["delta"].(map[string]any)
				if c, ok := ch["content"].(string); ok {
					text.WriteString(c)
				}
			case Responses:
				if e.Name == "response.output_text.delta" {
					text.WriteString(m["delta"].(string))
				}
			case Messages:
				if e.Name == "content_block_delta" {
					text.WriteString(m["delta"].(map[string]any)["text"].(string))
				}
			}
		}
		if text.String() != d.Text {
			t.Fatalf("%s: streamed text %q, want %q", p, text.String(), d.Text)
		}
		last := string(evs[len(evs)-1])
		want := map[Protocol]string{ChatCompletions: "data: [DONE]\n\n", Responses: "event: response.completed\n", Messages: "event: message_stop\n"}[p]
		if !strings.HasPrefix(last, want) {
			t.Fatalf("%s: stream ends with %q", p, last)
		}
	}
}

// TestErrorBody: each protocol's envelope, the message led by the code on
// both (once, however the caller wrote it).
func TestErrorBody(t *testing.T) {
	var oa struct {
		Error struct{ Message, Type, Code string }
	}
	if err := json.Unmarshal(ErrorBody(ChatCompletions, 403, "contributor_model_refused", "no"), &oa); err != nil ||
		oa.Error.Type != "permission_error" || oa.Error.Code != "contributor_model_refused" || oa.Error.Message != "contributor_model_refused: no" {
		t.Fatalf("openai envelope %+v %v", oa, err)
	}
	var an struct {
		Type  string
		Error struct{ Type, Message string }
	}
	if err := json.Unmarshal(ErrorBody(Messages, 400, "x", "bad"), &an); err != nil || an.Type != "error" || an.Error.Type != "invalid_request_error" || an.Error.Message != "x: bad" {
		t.Fatalf("anthropic envelope %+v %v", an, err)
	}
	if err := json.Unmarshal(ErrorBody(Messages, 400, "x", "x: bad"), &an); err != nil || an.Error.Message != "x: bad" {
		t.Fatalf("a message led by its code already: %+v %v", an, err)
	}
}

func TestSSEReader(t *testing.T) {
	in := ": comment\n\nevent: a\ndata: {\"x\":1}\nid: 7\n\ndata: line1\r\ndata:line2\r\n\r\n\n\ndata: [DONE]\n\ndata: partial"
	sr := NewSSEReader(strings.NewReader(in))
	var got []SSE
	var raw bytes.Buffer
	for {
		e, err := sr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, e)
		raw.Write(e.Raw)
	}
	if raw.String() != in {
		t.Fatalf("raw bytes not preserved:\n%q\n%q", raw.String(), in)
	}
	want := []struct {
		name, data, id string
		incomplete     bool
	}{{"", "", "", false}, {"a", `{"x":1}`, "7", false}, {"", "line1\nline2", "", false}, {"", "[DONE]", "", false}, {"", "partial", "", true}}
	if len(got) != len(want) {
		t.Fatalf("got %d events: %+v", len(got), got)
	}
	for i, w := range want {
		g := got[i]
		if g.Name != w.name || string(g.Data) != w.data || g.ID != w.id || g.Incomplete != w.incomplete {
			t.Fatalf("event %d: %+v, want %+v", i, g, w)
		}
	}
}

func TestSSEReaderTooLarge(t *testing.T) {
	big := "data: " + strings.Repeat("x", MaxEventSize+10) + "\n\n"
	_, err := NewSSEReader(strings.NewReader(big)).Next()
	if !errors.Is(err, ErrEventTooLarge) {
		t.Fatalf("got %v, want ErrEventTooLarge", err)
	}
}

// TestPeekEffort: the reasoning effort of each protocol's field, only the
// HUX enum's values, and nothing from a malformed or misplaced field.
func TestPeekEffort(t *testing.T) {
	for _, c := range []struct {
		p    Protocol
		body string
		want string
	}{
		{ChatCompletions, `{"model":"m","reasoning_effort":"medium"}`, "medium"},
		{ChatCompletions, `{"model":"m","reasoning_effort":"minimal"}`, ""},
		{ChatCompletions, `{"model":"m","reasoning_effort":5}`, ""},
		{ChatCompletions, `{"model":"m","reasoning":{"effort":"high"}}`, ""},
		{Responses, `{"model":"m","reasoning":{"effort":"xhigh"}}`, "xhigh"},
		{Responses, `{"model":"m","reasoning":"high"}`, ""},
		{Responses, `{"model":"m","reasoning_effort":"high"}`, ""},
		{Messages, `{"model":"m","output_config":{"effort":"low"}}`, "low"},
		{Messages, `{"model":"m","output_config":{"effort":"max"}}`, ""},
		{Messages, `{"model":"m","thinking":{"type":"enabled","budget_tokens":1024}}`, ""},
		{Embeddings, `{"model":"m","reasoning_effort":"high"}`, ""},
		{ChatCompletions, `not json`, ""},
	} {
		if got := PeekEffort(c.p, []byte(c.body)); got != c.want {
			t.Errorf("PeekEffort(%s, %s) = %q, want %q", c.p, c.body, got, c.want)
		}
	}
}
