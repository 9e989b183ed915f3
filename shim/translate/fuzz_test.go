package translate

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/caduceus-dev/caduceus/shim/wire"
)

// FuzzRequest: any client body, either wire, translates or is refused with
// an *Error — never a panic — and what it translates to is JSON.
func FuzzRequest(f *testing.F) {
	f.Add(true, `{"model":"m","messages":[{"role":"system","content":"s"},{"role":"user","content":[{"type":"text","text":"hi"},{"type":"image_url","image_url":{"url":"data:image/png;base64,AA=="}}]},{"role":"assistant","tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":"{}"}}]},{"role":"tool","tool_call_id":"c","content":"ok"}],"tools":[{"type":"function","function":{"name":"f"}}],"tool_choice":"auto","stop":["x"]}`)
	f.Add(false, `{"model":"m","max_tokens":5,"system":"s","messages":[{"role":"user","content":[{"type":"image","source":{"type":"url","url":"https://x"}}]},{"role":"assistant","content":[{"type":"tool_use","id":"t","name":"f","input":{}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":"ok","is_error":true}]}],"tools":[{"name":"f","input_schema":{}}],"tool_choice":{"type":"any"},"stream":true}`)
	f.Add(true, `{"messages":[{"role":"user","content":null}]}`)
	f.Add(false, `{"messages":"x","tool_choice":1}`)
	f.Fuzz(func(t *testing.T, chat bool, body string) {
		p := wire.Messages
		if chat {
			p = wire.ChatCompletions
		}
		out, err := Request(p, []byte(body), Options{Model: "m", MaxTokens: 10})
		if err != nil {
			if _, ok := err.(*Error); !ok {
				t.Fatalf("not an *Error: %T %v", err, err)
			}
			return
		}
		if !json.Valid(out) {
			t.Fatalf("not JSON: %s", out)
		}
	})
}

// FuzzAnswer: any upstream answer body translates or fails; an error body
// always becomes the client's envelope.
func FuzzAnswer(f *testing.F) {
	f.Add(true, 200, `{"id":"msg_1","type":"message","content":[{"type":"text","text":"hi"},{"type":"tool_use","id":"t","name":"f","input":{"a":1}}],"stop_reason":"tool_use","usage":{"input_tokens":1,"output_tokens":2}}`)
	f.Add(false, 200, `{"id":"c","choices":[{"message":{"content":"hi","tool_calls":[{"id":"c","function":{"name":"f","arguments":"{"}}]},"finish_reason":"length"}],"usage":{"prompt_tokens":3}}`)
	f.Add(true, 529, `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`)
	f.Add(false, 400, `{"error":"plain"}`)
	f.Fuzz(func(t *testing.T, chat bool, status int, body string) {
		p := wire.Messages
		if chat {
			p = wire.ChatCompletions
		}
		if out, err := Answer(p, []byte(body), 1); err == nil && !json.Valid(out) {
			t.Fatalf("answer not JSON: %s", out)
		}
		if out := ErrorAnswer(p, status, []byte(body)); !json.Valid(out) {
			t.Fatalf("error not JSON: %s", out)
		}
	})
}

// FuzzStream: any upstream stream, cut anywhere, translates event by event
// without a panic into events whose data is JSON (or [DONE]), and nothing
// follows the client's terminal event.
func FuzzStream(f *testing.F) {
	f.Add(true, anthropicStream)
	f.Add(false, chatStream)
	f.Add(true, "event: error\ndata: {\"type\":\"error\",\"error\":{}}\n\n")
	f.Add(false, "data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":3,\"function\":{\"arguments\":\"x\"}}]}}]}\n\ndata: {\"error\":{\"message\":\"x\"}}\n\n")
	f.Fuzz(func(t *testing.T, chat bool, raw string) {
		p := wire.Messages
		if chat {
			p = wire.ChatCompletions
		}
		s := NewStream(p, true, 1)
		r := wire.NewSSEReader(strings.NewReader(raw))
		ended := false
		check := func(evs []wire.SSE) {
			for _, ev := range evs {
				if ended {
					t.Fatalf("an event after the terminal one: %s", ev.Raw)
				}
				if string(ev.Data) == "[DONE]" || ev.Name == "message_stop" {
					ended = true
					continue
				}
				if !json.Valid(ev.Data) {
					t.Fatalf("event data not JSON: %s", ev.Data)
				}
			}
		}
		for {
			ev, err := r.Next()
			if err != nil {
				break
			}
			check(s.Event(ev))
		}
		check(s.End())
		if !ended && !s.done {
			t.Fatal("the stream did not end")
		}
	})
}
