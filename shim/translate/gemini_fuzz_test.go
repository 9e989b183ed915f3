package translate

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/caduceus-dev/caduceus/shim/wire"
)

// FuzzGemini: any chat body translates to a Gemini request that is JSON
// or is refused with an *Error; any Gemini answer, error body or stream
// (cut anywhere) translates without a panic into JSON chat answers and
// events, and nothing follows [DONE].
func FuzzGemini(f *testing.F) {
	f.Add(`{"model":"m","messages":[{"role":"system","content":"s"},{"role":"user","content":[{"type":"text","text":"hi"},{"type":"image_url","image_url":{"url":"data:image/png;base64,AA=="}}]},{"role":"assistant","tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":"{}"}}]},{"role":"tool","tool_call_id":"c","content":"ok"}],"tools":[{"type":"function","function":{"name":"f"}}],"tool_choice":"required","stop":"x","response_format":{"type":"json_schema","json_schema":{"schema":{}}}}`,
		`{"candidates":[{"content":{"parts":[{"text":"a"},{"thought":true,"text":"t"},{"functionCall":{"name":"f","args":{"x":1}}}]},"finishReason":"MAX_TOKENS"}],"usageMetadata":{"promptTokenCount":3}}`,
		"data: {\"candidates\":[{\"content\":{\"parts\":[{\"text\":\"h\"}]}}]}\r\n\r\ndata: {\"candidates\":[{\"content\":{\"parts\":[{\"functionCall\":{\"name\":\"f\"}}]},\"finishReason\":\"STOP\"}],\"usageMetadata\":{\"totalTokenCount\":2}}\r\n\r\n")
	f.Add(`{"messages":[{"role":"tool","tool_call_id":"x","content":"{}"}]}`, `{"error":{"code":429,"message":"slow down","status":"RESOURCE_EXHAUSTED"}}`, "data: {}\n\n")
	f.Add(`{"model":"m","reasoning_effort":"medium","messages":[{"role":"user","content":"q"},{"role":"assistant","content":null,"thinking_blocks":[{"type":"thinking","signature":"S"}]}]}`,
		`{"candidates":[{"content":{"parts":[{"thought":true,"text":"t","thoughtSignature":"S"},{"text":"a","thoughtSignature":"T"}]}}]}`,
		"data: {\"candidates\":[{\"content\":{\"parts\":[{\"thought\":true,\"text\":\"t\"},{\"functionCall\":{\"name\":\"f\"},\"thoughtSignature\":\"S\"}]}}]}\r\n\r\n")
	f.Fuzz(func(t *testing.T, body, answer, stream string) {
		if out, err := ChatToGemini([]byte(body), Options{Model: "m", MaxTokens: 10}); err != nil {
			if _, ok := err.(*Error); !ok {
				t.Fatalf("not an *Error: %T %v", err, err)
			}
		} else if !json.Valid(out) {
			t.Fatalf("request not JSON: %s", out)
		}
		if out, err := GeminiToChat([]byte(answer), 1); err == nil && !json.Valid(out) {
			t.Fatalf("answer not JSON: %s", out)
		}
		if out := GeminiError(400, []byte(answer)); !json.Valid(out) {
			t.Fatalf("error not JSON: %s", out)
		}
		checkEvents(t, feedAll(NewGeminiStream(true, 1), stream), func(wire.SSE) bool { return false })
	})
}

// eventStream is what the stream fuzz targets translate: one answer's
// events, then its end.
type eventStream interface {
	Event(wire.SSE) []wire.SSE
	End() []wire.SSE
}

// feedAll feeds s every event of raw (an SSE stream, cut anywhere)
// and its end.
func feedAll(s eventStream, raw string) []wire.SSE {
	r := wire.NewSSEReader(strings.NewReader(raw))
	var evs []wire.SSE
	for {
		ev, err := r.Next()
		if err != nil {
			break
		}
		evs = append(evs, s.Event(ev)...)
	}
	return append(evs, s.End()...)
}

// checkEvents fails t unless every event's data is JSON or [DONE], and
// nothing follows a terminal event ([DONE], or one terminal says is).
func checkEvents(t *testing.T, evs []wire.SSE, terminal func(wire.SSE) bool) {
	t.Helper()
	for i, ev := range evs {
		end := string(ev.Data) == "[DONE]" || terminal(ev)
		if end && i != len(evs)-1 {
			t.Fatalf("%d events after the terminal one", len(evs)-1-i)
		}
		if string(ev.Data) != "[DONE]" && !json.Valid(ev.Data) {
			t.Fatalf("event data not JSON: %s", ev.Data)
		}
	}
}
