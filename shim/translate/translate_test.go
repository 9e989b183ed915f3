package translate

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/caduceus-dev/caduceus/shim/wire"
)

// same reports whether two JSON documents are equal as values.
func same(t *testing.T, got []byte, want string) {
	t.Helper()
	var g, w any
	if err := json.Unmarshal(got, &g); err != nil {
		t.Fatalf("got is not JSON: %s", got)
	}
	if err := json.Unmarshal([]byte(want), &w); err != nil {
		t.Fatalf("want is not JSON: %s", want)
	}
	if !reflect.DeepEqual(g, w) {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
}

// TestChatToMessagesRequest: system messages gather into system, tool
// calls become tool_use blocks and tool messages tool_result blocks in one
// user message (consecutive roles merged), images as base64 or url
// sources, tools and tool_choice, stop as stop_sequences, max_tokens from
// the client or the route's bound.
func TestChatToMessagesRequest(t *testing.T) {
	in := `{"model":"gpt-4o","messages":[
	  {"role":"system","content":"Be brief."},
	  {"role":"developer","content":[{"type":"text","text":"Use tools."}]},
	  {"role":"user","content":[{"type":"text","text":"What is in this picture, and the weather?"},
	     {"type":"image_url","image_url":{"url":"data:image/png;base64,iVBORw0KGgo="}},
	     {"type":"image_url","image_url":{"url":"https://example.com/cat.jpg","detail":"low"}}]},
	  {"role":"assistant","content":null,"tool_calls":[
	     {"id":"call_1","type":"function","function":{"name":"weather","arguments":"{\"city\":\"Paris\"}"}},
	     {"id":"call_2","type":"function","function":{"name":"weather","arguments":""}}]},
	  {"role":"tool","tool_call_id":"call_1","content":"18C"},
	  {"role":"tool","tool_call_id":"call_2","content":[{"type":"text","text":"rain"}]},
	  {"role":"user","content":"thanks"}],
	 "tools":[{"type":"function","function":{"name":"weather","description":"Weather now","parameters":{"type":"object","properties":{"city":{"type":"string"}}}}}],
	 "tool_choice":"required","parallel_tool_calls":false,"stop":"END","temperature":0.2,"top_p":0.9,
	 "stream":true,"stream_options":{"include_usage":true},"seed":7,"user":"u-1","n":1}`
	got, err := Request(wire.ChatCompletions, []byte(in), Options{Model: "claude-sonnet-4-5", MaxTokens: 64000})
	if err != nil {
		t.Fatal(err)
	}
	same(t, got, `{"model":"claude-sonnet-4-5",
	 "system":[{"type":"text","text":"Be brief."},{"type":"text","text":"Use tools."}],
	 "messages":[
	  {"role":"user","content":[{"type":"text","text":"What is in this picture, and the weather?"},
	     {"type":"image","source":{"type":"base64","media_type":"image/png","data":"iVBORw0KGgo="}},
	     {"type":"image","source":{"type":"url","url":"https://example.com/cat.jpg"}}]},
	  {"role":"assistant","content":[{"type":"tool_use","id":"call_1","name":"weather","input":{"city":"Paris"}},
	     {"type":"tool_use","id":"call_2","name":"weather","input":{}}]},
	  {"role":"user","content":[{"type":"tool_result","tool_use_id":"call_1","content":"18C"},
	     {"type":"tool_result","tool_use_id":"call_2","content":"rain"},{"type":"text","text":"thanks"}]}],
	 "max_tokens":64000,"temperature":0.2,"top_p":0.9,"stop_sequences":["END"],"stream":true,
	 "tools":[{"name":"weather","description":"Weather now","input_schema":{"type":"object","properties":{"city":{"type":"string"}}}}],
	 "tool_choice":{"type":"any","disable_parallel_tool_use":true},"metadata":{"user_id":"u-1"}}`)

	// The client's bound wins; without any, DefaultMaxTokens.
	got, _ = Request(wire.ChatCompletions, []byte(`{"model":"m","max_completion_tokens":50,"messages":[{"role":"user","content":"hi"}]}`), Options{MaxTokens: 64000})
	same(t, got, `{"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"hi"}]}],"max_tokens":50}`)
	got, _ = Request(wire.ChatCompletions, []byte(`{"model":"m","messages":[{"role":"user","content":"hi"}]}`), Options{})
	same(t, got, `{"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"hi"}]}],"max_tokens":4096}`)
}

// TestMessagesToChatRequest: the reverse — system first, tool results as
// tool messages right after the assistant's tool calls, images as data or
// http URLs, tools with their input_schema as parameters, stop_sequences,
// and a stream that always asks for its usage.
func TestMessagesToChatRequest(t *testing.T) {
	in := `{"model":"claude-sonnet-4-5","max_tokens":300,"system":[{"type":"text","text":"Be brief.","cache_control":{"type":"ephemeral"}}],
	 "messages":[
	  {"role":"user","content":[{"type":"text","text":"Weather and this image?"},
	     {"type":"image","source":{"type":"base64","media_type":"image/png","data":"iVBORw0KGgo="}},
	     {"type":"image","source":{"type":"url","url":"https://example.com/cat.jpg"}}]},
	  {"role":"assistant","content":[{"type":"text","text":"Checking."},{"type":"tool_use","id":"toolu_1","name":"weather","input":{"city":"Paris"}}]},
	  {"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":[{"type":"text","text":"18C"}]},{"type":"text","text":"thanks"}]}],
	 "tools":[{"name":"weather","description":"Weather now","input_schema":{"type":"object","properties":{"city":{"type":"string"}}}}],
	 "tool_choice":{"type":"tool","name":"weather","disable_parallel_tool_use":true},
	 "stop_sequences":["END"],"temperature":0.5,"stream":true,"metadata":{"user_id":"u-1"}}`
	got, err := Request(wire.Messages, []byte(in), Options{Model: "gpt-4.1"})
	if err != nil {
		t.Fatal(err)
	}
	same(t, got, `{"model":"gpt-4.1","messages":[
	  {"role":"system","content":"Be brief."},
	  {"role":"user","content":[{"type":"text","text":"Weather and this image?"},
	     {"type":"image_url","image_url":{"url":"data:image/png;base64,iVBORw0KGgo="}},
	     {"type":"image_url","image_url":{"url":"https://example.com/cat.jpg"}}]},
	  {"role":"assistant","content":"Checking.","tool_calls":[{"id":"toolu_1","type":"function","function":{"name":"weather","arguments":"{\"city\":\"Paris\"}"}}]},
	  {"role":"tool","tool_call_id":"toolu_1","content":"18C"},
	  {"role":"user","content":"thanks"}],
	 "max_completion_tokens":300,"temperature":0.5,"stop":["END"],"stream":true,"stream_options":{"include_usage":true},
	 "tools":[{"type":"function","function":{"name":"weather","description":"Weather now","parameters":{"type":"object","properties":{"city":{"type":"string"}}}}}],
	 "tool_choice":{"type":"function","function":{"name":"weather"}},"parallel_tool_calls":false,"user":"u-1"}`)
}

// TestUntranslatableRefusedNamingTheField: what the other wire cannot say
// is refused with the field that says it.
func TestUntranslatableRefusedNamingTheField(t *testing.T) {
	for _, tc := range []struct {
		p          wire.Protocol
		body, want string
	}{
		{wire.ChatCompletions, `{"model":"m","n":2,"messages":[{"role":"user","content":"hi"}]}`, "n: 2 choices"},
		{wire.ChatCompletions, `{"model":"m","messages":[{"role":"user","content":[{"type":"input_audio","input_audio":{"data":"AAAA","format":"wav"}}]}]}`, `messages[0].content[0].type: "input_audio"`},
		{wire.ChatCompletions, `{"model":"m","logprobs":true,"messages":[{"role":"user","content":"hi"}]}`, "logprobs:"},
		{wire.ChatCompletions, `{"model":"m","audio":{"voice":"x"},"messages":[{"role":"user","content":"hi"}]}`, "audio:"},
		{wire.ChatCompletions, `{"model":"m","response_format":{"type":"json_object"},"messages":[{"role":"user","content":"hi"}]}`, "response_format.type"},
		{wire.ChatCompletions, `{"model":"m","messages":[{"role":"assistant","tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":"[1]"}}]}]}`, "messages[0].tool_calls[0].function.arguments"},
		{wire.ChatCompletions, `{"model":"m","messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"data:image/tiff;base64,AAAA"}}]}]}`, "messages[0].content[0].image_url.url"},
		{wire.ChatCompletions, `{"model":"m","messages":[]}`, "messages:"},
		{wire.ChatCompletions, `[1]`, "want a JSON object"},
		{wire.Messages, `{"model":"m","max_tokens":5,"top_k":3,"messages":[{"role":"user","content":"hi"}]}`, "top_k:"},
		{wire.Messages, `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":[{"type":"document","source":{}}]}]}`, `messages[0].content[0].type: "document"`},
		{wire.Messages, `{"model":"m","max_tokens":5,"tools":[{"type":"web_search_20250305","name":"web_search"}],"messages":[{"role":"user","content":"hi"}]}`, "tools[0].type"},
		{wire.Messages, `{"model":"m","max_tokens":5,"thinking":{"type":"enabled","budget_tokens":1024},"messages":[{"role":"user","content":"hi"}]}`, "thinking:"},
		{wire.Messages, `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":[{"type":"image","source":{"type":"url","url":"https://x"}}]}]}]}`, "messages[0].content[0].content[0].type"},
		{wire.Responses, `{"model":"m","input":"hi"}`, "not translated"},
	} {
		_, err := Request(tc.p, []byte(tc.body), Options{})
		var e *Error
		if !errors.As(err, &e) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s %s: %v; want an error saying %q", tc.p, tc.body, err, tc.want)
		}
	}
}

// TestAnswers: a message as a chat completion and a chat completion as a
// message — text, tool calls, the stop reason, usage with cached tokens.
func TestAnswers(t *testing.T) {
	got, err := Answer(wire.ChatCompletions, []byte(`{"id":"msg_1","type":"message","role":"assistant","model":"claude-sonnet-4-5",
	 "content":[{"type":"text","text":"Checking."},{"type":"tool_use","id":"toolu_1","name":"weather","input":{"city":"Paris"}}],
	 "stop_reason":"tool_use","stop_sequence":null,"usage":{"input_tokens":600,"cache_read_input_tokens":400,"cache_creation_input_tokens":0,"output_tokens":100}}`), 1700000000)
	if err != nil {
		t.Fatal(err)
	}
	same(t, got, `{"id":"msg_1","object":"chat.completion","created":1700000000,"model":"claude-sonnet-4-5",
	 "choices":[{"index":0,"message":{"role":"assistant","content":"Checking.","refusal":null,
	   "tool_calls":[{"id":"toolu_1","type":"function","function":{"name":"weather","arguments":"{\"city\":\"Paris\"}"}}]},
	   "logprobs":null,"finish_reason":"tool_calls"}],
	 "usage":{"prompt_tokens":1000,"completion_tokens":100,"total_tokens":1100,"prompt_tokens_details":{"cached_tokens":400}}}`)

	got, err = Answer(wire.Messages, []byte(`{"id":"chatcmpl-1","object":"chat.completion","created":1,"model":"gpt-4.1",
	 "choices":[{"index":0,"message":{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"weather","arguments":"{\"city\":\"Paris\"}"}}]},"finish_reason":"tool_calls"}],
	 "usage":{"prompt_tokens":1000,"completion_tokens":100,"total_tokens":1100,"prompt_tokens_details":{"cached_tokens":400}}}`), 1)
	if err != nil {
		t.Fatal(err)
	}
	same(t, got, `{"id":"chatcmpl-1","type":"message","role":"assistant","model":"gpt-4.1",
	 "content":[{"type":"tool_use","id":"call_1","name":"weather","input":{"city":"Paris"}}],
	 "stop_reason":"tool_use","stop_sequence":null,
	 "usage":{"input_tokens":600,"cache_creation_input_tokens":0,"cache_read_input_tokens":400,"output_tokens":100}}`)
	for _, f := range []struct{ finish, stop string }{{"stop", "end_turn"}, {"length", "max_tokens"}, {"content_filter", "refusal"}} {
		got, _ := Answer(wire.Messages, []byte(`{"choices":[{"message":{"content":"x"},"finish_reason":"`+f.finish+`"}]}`), 1)
		if !strings.Contains(string(got), `"stop_reason":"`+f.stop+`"`) {
			t.Errorf("finish %s: %s", f.finish, got)
		}
	}
}

// TestErrorAnswers: each envelope as the other, the status's type, the
// message kept.
func TestErrorAnswers(t *testing.T) {
	same(t, ErrorAnswer(wire.ChatCompletions, 529, []byte(`{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`)),
		`{"error":{"message":"Overloaded","type":"server_error","param":null,"code":"overloaded_error"}}`)
	same(t, ErrorAnswer(wire.ChatCompletions, 400, []byte(`{"type":"error","error":{"type":"invalid_request_error","message":"max_tokens: too big"}}`)),
		`{"error":{"message":"max_tokens: too big","type":"invalid_request_error","param":null,"code":"invalid_request_error"}}`)
	same(t, ErrorAnswer(wire.Messages, 429, []byte(`{"error":{"message":"Rate limit reached","type":"requests","param":null,"code":"rate_limit_exceeded"}}`)),
		`{"type":"error","error":{"type":"rate_limit_error","message":"Rate limit reached"}}`)
	same(t, ErrorAnswer(wire.Messages, 502, []byte(`<html>bad gateway</html>`)),
		`{"type":"error","error":{"type":"api_error","message":"<html>bad gateway</html>"}}`)
}

// events reads the SSE events of a stream's bytes.
func events(t *testing.T, raw string) []wire.SSE {
	t.Helper()
	r := wire.NewSSEReader(strings.NewReader(raw))
	var out []wire.SSE
	for {
		ev, err := r.Next()
		if err != nil {
			return out
		}
		out = append(out, ev)
	}
}

// translateAll runs a whole upstream stream through a Stream.
func translateAll(t *testing.T, client wire.Protocol, includeUsage bool, raw string) string {
	s := NewStream(client, includeUsage, 1700000000)
	var b strings.Builder
	for _, ev := range events(t, raw) {
		for _, o := range s.Event(ev) {
			b.Write(o.Raw)
		}
	}
	for _, o := range s.End() {
		b.Write(o.Raw)
	}
	return b.String()
}

// anthropicStream is Anthropic's event sequence for a text block and a
// tool_use block, as its documentation shows it.
const anthropicStream = "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"claude-sonnet-4-5\",\"content\":[],\"stop_reason\":null,\"stop_sequence\":null,\"usage\":{\"input_tokens\":600,\"cache_read_input_tokens\":400,\"output_tokens\":1}}}\n\n" +
	"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n" +
	"event: ping\ndata: {\"type\": \"ping\"}\n\n" +
	"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"Checking.\"}}\n\n" +
	"event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n" +
	"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":1,\"content_block\":{\"type\":\"tool_use\",\"id\":\"toolu_1\",\"name\":\"weather\",\"input\":{}}}\n\n" +
	"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":1,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"{\\\"city\\\": \"}}\n\n" +
	"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":1,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"\\\"Paris\\\"}\"}}\n\n" +
	"event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":1}\n\n" +
	"event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"tool_use\",\"stop_sequence\":null},\"usage\":{\"output_tokens\":100}}\n\n" +
	"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"

func TestStreamMessagesToChat(t *testing.T) {
	got := translateAll(t, wire.ChatCompletions, true, anthropicStream)
	const head = `{"id":"msg_1","object":"chat.completion.chunk","created":1700000000,"model":"claude-sonnet-4-5","choices":[`
	want := "data: " + head + `{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}` + "\n\n" +
		"data: " + head + `{"index":0,"delta":{"content":"Checking."},"finish_reason":null}]}` + "\n\n" +
		"data: " + head + `{"index":0,"delta":{"tool_calls":[{"index":0,"id":"toolu_1","type":"function","function":{"name":"weather","arguments":""}}]},"finish_reason":null}]}` + "\n\n" +
		"data: " + head + `{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"city\": "}}]},"finish_reason":null}]}` + "\n\n" +
		"data: " + head + `{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"\"Paris\"}"}}]},"finish_reason":null}]}` + "\n\n" +
		"data: " + head + `{"index":0,"delta":{},"finish_reason":"tool_calls"}]}` + "\n\n" +
		"data: " + head + `],"usage":{"prompt_tokens":1000,"completion_tokens":100,"total_tokens":1100,"prompt_tokens_details":{"cached_tokens":400}}}` + "\n\n" +
		"data: [DONE]\n\n"
	if got != want {
		t.Fatalf("got\n%s\nwant\n%s", got, want)
	}
	// Without include_usage, no usage chunk.
	if got := translateAll(t, wire.ChatCompletions, false, anthropicStream); strings.Contains(got, `"usage"`) || !strings.HasSuffix(got, "data: [DONE]\n\n") {
		t.Fatalf("without include_usage:\n%s", got)
	}
	// An error event mid-stream is OpenAI's error data, and the end.
	got = translateAll(t, wire.ChatCompletions, false, anthropicStream[:strings.Index(anthropicStream, "event: content_block_stop")]+
		"event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}\n\n")
	if !strings.HasSuffix(got, `data: {"error":{"code":"overloaded_error","message":"Overloaded","param":null,"type":"server_error"}}`+"\n\n") {
		t.Fatalf("error event:\n%s", got)
	}
}

// chatStream is a chat completions stream with text, one tool call in
// fragments, the finish chunk and the usage chunk, as OpenAI sends them.
const chatStream = `data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"gpt-4.1","choices":[{"index":0,"delta":{"role":"assistant","content":"","refusal":null},"finish_reason":null}],"usage":null}

data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"gpt-4.1","choices":[{"index":0,"delta":{"content":"Checking."},"finish_reason":null}],"usage":null}

data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"gpt-4.1","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"weather","arguments":""}}]},"finish_reason":null}],"usage":null}

data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"gpt-4.1","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"city\":"}}]},"finish_reason":null}],"usage":null}

data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"gpt-4.1","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"\"Paris\"}"}}]},"finish_reason":null}],"usage":null}

data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"gpt-4.1","choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}],"usage":null}

data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"gpt-4.1","choices":[],"usage":{"prompt_tokens":1000,"completion_tokens":100,"total_tokens":1100,"prompt_tokens_details":{"cached_tokens":400}}}

data: [DONE]

`

func TestStreamChatToMessages(t *testing.T) {
	got := translateAll(t, wire.Messages, false, chatStream)
	want := "event: message_start\ndata: " + `{"type":"message_start","message":{"id":"chatcmpl-1","type":"message","role":"assistant","model":"gpt-4.1","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":0,"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"output_tokens":0}}}` + "\n\n" +
		"event: content_block_start\ndata: " + `{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}` + "\n\n" +
		"event: content_block_delta\ndata: " + `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Checking."}}` + "\n\n" +
		"event: content_block_stop\ndata: " + `{"type":"content_block_stop","index":0}` + "\n\n" +
		"event: content_block_start\ndata: " + `{"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"call_1","name":"weather","input":{}}}` + "\n\n" +
		"event: content_block_delta\ndata: " + `{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"{\"city\":"}}` + "\n\n" +
		"event: content_block_delta\ndata: " + `{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"\"Paris\"}"}}` + "\n\n" +
		"event: content_block_stop\ndata: " + `{"type":"content_block_stop","index":1}` + "\n\n" +
		"event: message_delta\ndata: " + `{"type":"message_delta","delta":{"stop_reason":"tool_use","stop_sequence":null},"usage":{"input_tokens":600,"cache_creation_input_tokens":0,"cache_read_input_tokens":400,"output_tokens":100}}` + "\n\n" +
		"event: message_stop\ndata: " + `{"type":"message_stop"}` + "\n\n"
	if got != want {
		t.Fatalf("got\n%s\nwant\n%s", got, want)
	}
	// A stream that ends without [DONE] still closes the message.
	cut := chatStream[:strings.Index(chatStream, "data: [DONE]")]
	if got := translateAll(t, wire.Messages, false, cut); got != want {
		t.Fatalf("without [DONE]:\n%s", got)
	}
	// One that ended before its finish_reason ends as short: no
	// message_delta, no message_stop.
	early := chatStream[:strings.Index(chatStream, `data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"gpt-4.1","choices":[{"index":0,"delta":{},"finish_reason"`)]
	if got := translateAll(t, wire.Messages, false, early); strings.Contains(got, "message_delta") || strings.Contains(got, "message_stop") {
		t.Fatalf("ended before its finish:\n%s", got)
	}
	early = anthropicStream[:strings.Index(anthropicStream, "event: message_delta")]
	if got := translateAll(t, wire.ChatCompletions, true, early); strings.Contains(got, "finish_reason\":\"") || strings.Contains(got, "[DONE]") {
		t.Fatalf("ended before its message_delta:\n%s", got)
	}
}
