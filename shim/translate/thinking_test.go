package translate

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/caduceus-dev/caduceus/shim/wire"
)

// refusedAt asserts err is an *Error naming field.
func refusedAt(t *testing.T, err error, field string) {
	t.Helper()
	var e *Error
	if !errors.As(err, &e) || e.Field != field {
		t.Fatalf("want a refusal of %s, got %v", field, err)
	}
}

// TestChatThinkingReachesAnthropic: a chat client's thinking_blocks (as
// LiteLLM carries them) go back to an Anthropic route as thinking and
// redacted_thinking blocks before the turn's text and tool use;
// reasoning_effort becomes a thinking budget below max_tokens, and one
// that cannot fit is refused naming it.
func TestChatThinkingReachesAnthropic(t *testing.T) {
	in := `{"model":"m","max_tokens":2000,"reasoning_effort":"high","messages":[
	  {"role":"user","content":"hi"},
	  {"role":"assistant","content":"hello","thinking_blocks":[
	     {"type":"thinking","thinking":"greet","signature":"sig1"},{"type":"redacted_thinking","data":"opaque"}]},
	  {"role":"user","content":"again"}]}`
	got, err := Request(wire.ChatCompletions, []byte(in), Options{})
	if err != nil {
		t.Fatal(err)
	}
	same(t, got, `{"model":"m","max_tokens":2000,"thinking":{"type":"enabled","budget_tokens":1999},"messages":[
	  {"role":"user","content":[{"type":"text","text":"hi"}]},
	  {"role":"assistant","content":[{"type":"thinking","thinking":"greet","signature":"sig1"},
	     {"type":"redacted_thinking","data":"opaque"},{"type":"text","text":"hello"}]},
	  {"role":"user","content":[{"type":"text","text":"again"}]}]}`)

	for body, field := range map[string]string{
		`{"model":"m","max_tokens":1000,"reasoning_effort":"low","messages":[{"role":"user","content":"hi"}]}`:                               "reasoning_effort",
		`{"model":"m","reasoning_effort":"extreme","messages":[{"role":"user","content":"hi"}]}`:                                             "reasoning_effort",
		`{"model":"m","thinking":{"type":"enabled","budget_tokens":10},"messages":[{"role":"user","content":"hi"}]}`:                         "thinking.budget_tokens",
		`{"model":"m","messages":[{"role":"user","content":"hi"},{"role":"assistant","content":"x","thinking_blocks":[{"type":"musing"}]}]}`: "messages[1].thinking_blocks[0].type",
	} {
		_, err := Request(wire.ChatCompletions, []byte(body), Options{})
		refusedAt(t, err, field)
	}
}

// TestAnthropicThinkingRoundTrip: an Anthropic answer's thinking reaches
// a chat client as reasoning_content and thinking_blocks, and a messages
// client through chat's shape as the same blocks, whole and streamed.
func TestAnthropicThinkingRoundTrip(t *testing.T) {
	answer := `{"id":"msg_1","type":"message","model":"claude","stop_reason":"end_turn","content":[
	  {"type":"thinking","thinking":"step one","signature":"sigA"},{"type":"redacted_thinking","data":"xyz"},
	  {"type":"text","text":"done"}],"usage":{"input_tokens":3,"output_tokens":5}}`
	chat, err := Answer(wire.ChatCompletions, []byte(answer), 1)
	if err != nil {
		t.Fatal(err)
	}
	var c struct {
		Choices []struct {
			Message struct {
				Content          string          `json:"content"`
				ReasoningContent string          `json:"reasoning_content"`
				ThinkingBlocks   []thinkingBlock `json:"thinking_blocks"`
			} `json:"message"`
		} `json:"choices"`
	}
	if err := json.Unmarshal(chat, &c); err != nil || c.Choices[0].Message.ReasoningContent != "step one" ||
		len(c.Choices[0].Message.ThinkingBlocks) != 2 || c.Choices[0].Message.ThinkingBlocks[0].Signature != "sigA" ||
		c.Choices[0].Message.ThinkingBlocks[1].Data != "xyz" {
		t.Fatalf("chat answer: %s", chat)
	}
	back, err := Answer(wire.Messages, chat, 1)
	if err != nil {
		t.Fatal(err)
	}
	var m struct {
		Content json.RawMessage `json:"content"`
	}
	_ = json.Unmarshal(back, &m)
	same(t, m.Content, `[{"type":"thinking","thinking":"step one","signature":"sigA"},{"type":"redacted_thinking","data":"xyz"},{"type":"text","text":"done"}]`)

	// Streamed: Anthropic events to chat chunks to Anthropic events.
	toChat := NewStream(wire.ChatCompletions, false, 1)
	toMessages := NewStream(wire.Messages, false, 1)
	var events []wire.SSE
	for _, ev := range []string{
		`{"type":"message_start","message":{"id":"msg_s","model":"claude","usage":{"input_tokens":3}}}`,
		`{"type":"content_block_start","index":0,"content_block":{"type":"thinking","thinking":""}}`,
		`{"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"step "}}`,
		`{"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"one"}}`,
		`{"type":"content_block_delta","index":0,"delta":{"type":"signature_delta","signature":"sigA"}}`,
		`{"type":"content_block_stop","index":0}`,
		`{"type":"content_block_start","index":1,"content_block":{"type":"redacted_thinking","data":"xyz"}}`,
		`{"type":"content_block_stop","index":1}`,
		`{"type":"content_block_start","index":2,"content_block":{"type":"text","text":""}}`,
		`{"type":"content_block_delta","index":2,"delta":{"type":"text_delta","text":"done"}}`,
		`{"type":"content_block_stop","index":2}`,
		`{"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":5}}`,
		`{"type":"message_stop"}`,
	} {
		for _, chunk := range toChat.Event(wire.SSE{Data: []byte(ev)}) {
			events = append(events, toMessages.Event(chunk)...)
		}
	}
	blocks := accumulate(t, events)
	same(t, blocks, `[{"type":"thinking","thinking":"step one","signature":"sigA"},{"type":"redacted_thinking","data":"xyz"},{"type":"text","text":"done"}]`)
}

// accumulate is the content blocks an Anthropic event stream makes.
func accumulate(t *testing.T, events []wire.SSE) []byte {
	t.Helper()
	var blocks []map[string]any
	for _, ev := range events {
		var e struct {
			Type         string         `json:"type"`
			Index        int            `json:"index"`
			ContentBlock map[string]any `json:"content_block"`
			Delta        map[string]any `json:"delta"`
		}
		if err := json.Unmarshal(ev.Data, &e); err != nil {
			t.Fatalf("event %s: %v", ev.Data, err)
		}
		switch e.Type {
		case "content_block_start":
			if e.Index != len(blocks) {
				t.Fatalf("block %d started at %d", e.Index, len(blocks))
			}
			blocks = append(blocks, e.ContentBlock)
		case "content_block_delta":
			b := blocks[e.Index]
			for k, field := range map[string]string{"text_delta": "text", "thinking_delta": "thinking", "signature_delta": "signature"} {
				if e.Delta["type"] == k {
					b[field] = b[field].(string) + e.Delta[field].(string)
				}
			}
		}
	}
	b, _ := json.Marshal(blocks)
	return b
}

// TestResponsesReasoningRoundTrip: a chat answer's thinking becomes
// reasoning items (encrypted_content the signature, or the redacted data
// marked), whole and streamed; those items sent back as input return as
// the assistant turn's thinking_blocks; include asks nothing else.
func TestResponsesReasoningRoundTrip(t *testing.T) {
	chat := `{"id":"chatcmpl-1","model":"m","choices":[{"index":0,"finish_reason":"tool_calls","message":{"role":"assistant","content":null,
	  "thinking_blocks":[{"type":"thinking","thinking":"plan","signature":"sigB"},{"type":"redacted_thinking","data":"hid"}],
	  "tool_calls":[{"id":"call_1","type":"function","function":{"name":"f","arguments":"{}"}}]}}]}`
	r, err := ChatToResponse([]byte(chat), 1)
	if err != nil {
		t.Fatal(err)
	}
	var resp struct {
		Output []json.RawMessage `json:"output"`
	}
	_ = json.Unmarshal(r, &resp)
	if len(resp.Output) != 3 {
		t.Fatalf("output: %s", r)
	}
	same(t, resp.Output[0], `{"type":"reasoning","id":"rs_chatcmpl-1_0","status":"completed","summary":[{"type":"summary_text","text":"plan"}],"encrypted_content":"sigB"}`)
	same(t, resp.Output[1], `{"type":"reasoning","id":"rs_chatcmpl-1_1","status":"completed","summary":[],"encrypted_content":"redacted_thinking:hid"}`)

	input := `{"model":"m","include":["reasoning.encrypted_content"],"reasoning":{"effort":"low"},"input":[
	  {"type":"message","role":"user","content":"go"},` + string(resp.Output[0]) + `,` + string(resp.Output[1]) + `,
	  {"type":"function_call","call_id":"call_1","name":"f","arguments":"{}"},
	  {"type":"function_call_output","call_id":"call_1","output":"ok"}]}`
	req, err := ResponsesToChat([]byte(input), Options{})
	if err != nil {
		t.Fatal(err)
	}
	same(t, req, `{"model":"m","reasoning_effort":"low","messages":[{"role":"user","content":"go"},
	  {"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"f","arguments":"{}"}}],
	   "thinking_blocks":[{"type":"thinking","thinking":"plan","signature":"sigB"},{"type":"redacted_thinking","data":"hid"}]},
	  {"role":"tool","content":"ok","tool_call_id":"call_1"}]}`)
	_, err = ResponsesToChat([]byte(`{"model":"m","include":["file_search_call.results"],"input":"x"}`), Options{})
	refusedAt(t, err, "include[0]")

	// Streamed: the reasoning item's summary deltas, then its end with the
	// signature, before the function call.
	s := NewResponsesStream(1)
	var types []string
	var done map[string]any
	for _, ch := range []string{
		`{"id":"chatcmpl-2","model":"m","choices":[{"index":0,"delta":{"role":"assistant","reasoning_content":"pl"}}]}`,
		`{"id":"chatcmpl-2","model":"m","choices":[{"index":0,"delta":{"reasoning_content":"an"}}]}`,
		`{"id":"chatcmpl-2","model":"m","choices":[{"index":0,"delta":{"thinking_blocks":[{"type":"thinking","signature":"sigB"}]}}]}`,
		`{"id":"chatcmpl-2","model":"m","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_1","function":{"name":"f","arguments":"{}"}}]},"finish_reason":"tool_calls"}]}`,
		`[DONE]`,
	} {
		for _, ev := range s.Event(wire.SSE{Data: []byte(ch)}) {
			types = append(types, ev.Name)
			if ev.Name == "response.output_item.done" && done == nil {
				var e struct {
					Item map[string]any `json:"item"`
				}
				_ = json.Unmarshal(ev.Data, &e)
				done = e.Item
			}
		}
	}
	want := "response.created response.in_progress response.output_item.added response.reasoning_summary_part.added " +
		"response.reasoning_summary_text.delta response.reasoning_summary_text.delta response.reasoning_summary_text.done " +
		"response.reasoning_summary_part.done response.output_item.done response.output_item.added " +
		"response.function_call_arguments.delta response.function_call_arguments.done response.output_item.done response.completed"
	if got := strings.Join(types, " "); got != want {
		t.Fatalf("events:\n got %s\nwant %s", got, want)
	}
	b, _ := json.Marshal(done)
	same(t, b, `{"type":"reasoning","id":"rs_chatcmpl-2_0","status":"completed","summary":[{"type":"summary_text","text":"plan"}],"encrypted_content":"sigB"}`)
}

// TestGeminiSignaturesGoBack: Gemini's thought summary and signatures
// reach chat's shape in the answer and go back on the parts Gemini signed:
// the first function call, or a text answer's last part.
func TestGeminiSignaturesGoBack(t *testing.T) {
	answer := `{"responseId":"r","modelVersion":"g","candidates":[{"finishReason":"STOP","content":{"role":"model","parts":[
	  {"text":"think","thought":true},{"functionCall":{"name":"a","args":{}},"thoughtSignature":"S1"},{"functionCall":{"name":"b","args":{}}}]}}]}`
	chat, err := GeminiToChat([]byte(answer), 1)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(chat), `"reasoning_content":"think","thinking_blocks":[{"type":"thinking","thinking":"think","signature":"S1"}]`) {
		t.Fatalf("chat answer: %s", chat)
	}
	req := `{"model":"g","messages":[{"role":"user","content":"x"},
	  {"role":"assistant","content":null,"thinking_blocks":[{"type":"thinking","thinking":"think","signature":"S1"}],
	   "tool_calls":[{"id":"call_0","type":"function","function":{"name":"a","arguments":"{}"}},{"id":"call_1","type":"function","function":{"name":"b","arguments":"{}"}}]},
	  {"role":"tool","tool_call_id":"call_0","content":"1"},{"role":"tool","tool_call_id":"call_1","content":"2"},
	  {"role":"assistant","content":"fine","thinking_blocks":[{"type":"thinking","signature":"S2"}]},
	  {"role":"user","content":"y"}]}`
	g, err := ChatToGemini([]byte(req), Options{})
	if err != nil {
		t.Fatal(err)
	}
	var out struct {
		Contents []struct {
			Parts []map[string]any `json:"parts"`
		} `json:"contents"`
	}
	_ = json.Unmarshal(g, &out)
	if out.Contents[1].Parts[0]["thoughtSignature"] != "S1" || out.Contents[1].Parts[1]["thoughtSignature"] != nil ||
		out.Contents[3].Parts[0]["thoughtSignature"] != "S2" {
		t.Fatalf("Gemini request: %s", g)
	}
}
