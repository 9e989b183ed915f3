package translate

import (
	"encoding/json"
	"testing"

	"github.com/caduceus-dev/caduceus/shim/wire"
)

// FuzzResponses: any Responses body becomes a chat request that is JSON or
// is refused with an *Error; any chat completion becomes a Response that
// is JSON or fails; any chat stream (cut anywhere) becomes response events
// whose data is JSON, and nothing follows the terminal one.
func FuzzResponses(f *testing.F) {
	f.Add(`{"model":"m","instructions":"s","input":[{"role":"user","content":[{"type":"input_text","text":"hi"},{"type":"input_image","image_url":"data:image/png;base64,AA=="}]},{"type":"function_call","call_id":"c","name":"f","arguments":"{}"},{"type":"function_call_output","call_id":"c","output":"ok"},{"type":"reasoning"}],"tools":[{"type":"function","name":"f","parameters":{}}],"tool_choice":{"type":"function","name":"f"},"text":{"format":{"type":"json_schema","name":"x","schema":{}}},"stream":true}`,
		`{"id":"c1","model":"m","choices":[{"message":{"content":"hi","tool_calls":[{"id":"t","function":{"name":"f","arguments":"{}"}}]},"finish_reason":"length"}],"usage":{"prompt_tokens":3,"completion_tokens":2}}`,
		"data: {\"id\":\"c\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"h\"}}]}\n\ndata: {\"id\":\"c\",\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"id\":\"t\",\"function\":{\"name\":\"f\",\"arguments\":\"{\"}}]},\"finish_reason\":\"tool_calls\"}]}\n\ndata: [DONE]\n\n")
	f.Add(`{"input":"x","previous_response_id":"r"}`, `{}`, "data: {}\n\n")
	f.Add(`{"model":"m","reasoning":{"effort":"high"},"include":["reasoning.encrypted_content"],"input":[{"role":"user","content":"q"},{"type":"reasoning","summary":[{"type":"summary_text","text":"t"}],"encrypted_content":"redacted_thinking:d"},{"type":"message","role":"assistant","content":"a"}]}`,
		`{"id":"c","choices":[{"message":{"content":"a","reasoning_content":"t","thinking_blocks":[{"type":"thinking","thinking":"t","signature":"s"}]},"finish_reason":"stop"}]}`,
		"data: {\"id\":\"c\",\"choices\":[{\"index\":0,\"delta\":{\"reasoning_content\":\"t\"}}]}\n\ndata: {\"id\":\"c\",\"choices\":[{\"index\":0,\"delta\":{\"thinking_blocks\":[{\"type\":\"redacted_thinking\",\"data\":\"d\"}]}}]}\n\ndata: [DONE]\n\n")
	f.Fuzz(func(t *testing.T, body, completion, stream string) {
		if out, err := ResponsesToChat([]byte(body), Options{Model: "m"}); err != nil {
			if _, ok := err.(*Error); !ok {
				t.Fatalf("not an *Error: %T %v", err, err)
			}
		} else if !json.Valid(out) {
			t.Fatalf("request not JSON: %s", out)
		}
		if out, err := ChatToResponse([]byte(completion), 1); err == nil && !json.Valid(out) {
			t.Fatalf("response not JSON: %s", out)
		}
		checkEvents(t, feedAll(NewResponsesStream(1), stream), func(ev wire.SSE) bool {
			return ev.Name == "response.completed" || ev.Name == "response.incomplete"
		})
	})
}
