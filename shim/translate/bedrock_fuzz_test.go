package translate

import (
	"encoding/json"
	"testing"

	"github.com/caduceus-dev/caduceus/shim/wire"
)

// FuzzConverse: any chat body becomes a Converse request that is JSON or
// is refused with an *Error; any Converse answer becomes a chat completion
// that is JSON or fails; any sequence of Converse stream events becomes
// chat events whose data is JSON, [DONE] last.
func FuzzConverse(f *testing.F) {
	f.Add(`{"model":"m","messages":[{"role":"system","content":"s"},{"role":"user","content":"hi"},{"role":"assistant","content":"","tool_calls":[{"id":"t","type":"function","function":{"name":"f","arguments":"{}"}}]},{"role":"tool","tool_call_id":"t","content":""}],"tools":[{"type":"function","function":{"name":"f"}}],"tool_choice":"required"}`,
		`{"output":{"message":{"role":"assistant","content":[{"text":"a"},{"toolUse":{"toolUseId":"t","name":"f","input":{}}}]}},"stopReason":"tool_use","usage":{"inputTokens":1,"outputTokens":2}}`,
		"contentBlockStart", `{"contentBlockIndex":1,"start":{"toolUse":{"toolUseId":"t","name":"f"}}}`)
	f.Add(`{"messages":[]}`, `{}`, "metadata", `{"usage":{"inputTokens":3}}`)
	f.Add(`{"model":"m","thinking":{"type":"enabled","budget_tokens":1024},"max_tokens":2000,"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":"a","thinking_blocks":[{"type":"thinking","thinking":"t","signature":"s"},{"type":"redacted_thinking","data":"d"}]}]}`,
		`{"output":{"message":{"role":"assistant","content":[{"reasoningContent":{"reasoningText":{"text":"t","signature":"s"}}},{"reasoningContent":{"redactedContent":"ZA=="}},{"text":"a"}]}},"stopReason":"end_turn"}`,
		"contentBlockDelta", `{"contentBlockIndex":0,"delta":{"reasoningContent":{"signature":"s"}}}`)
	f.Fuzz(func(t *testing.T, body, answer, name, data string) {
		if out, err := ChatToConverse([]byte(body), Options{Model: "m", MaxTokens: 10}); err != nil {
			if _, ok := err.(*Error); !ok {
				t.Fatalf("not an *Error: %T %v", err, err)
			}
		} else if !json.Valid(out) {
			t.Fatalf("request not JSON: %s", out)
		}
		if out, err := ConverseToChat([]byte(answer), 1); err == nil && !json.Valid(out) {
			t.Fatalf("answer not JSON: %s", out)
		}
		if out := ConverseError(400, "ValidationException:x", []byte(answer)); !json.Valid(out) {
			t.Fatalf("error not JSON: %s", out)
		}
		s := NewConverseStream(true, 1)
		evs := s.Event(wire.SSE{Name: name, Data: []byte(data)})
		evs = append(evs, s.Event(wire.SSE{Name: "messageStop", Data: []byte(data)})...)
		evs = append(evs, s.End()...)
		checkEvents(t, evs, func(wire.SSE) bool { return false })
	})
}
