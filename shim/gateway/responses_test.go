package gateway_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"

	"github.com/caduceus-dev/caduceus/shim/upstream"
	"github.com/caduceus-dev/caduceus/shim/wire"
)

// fakeClaude is Anthropic's messages API: text, or a tool call when the
// request declares tools; streamed when asked; with usage. A request with
// thinking is answered a thinking block signed claudeSignature first.
func fakeClaude(t *testing.T) (*fake, func() []map[string]any) {
	var mu sync.Mutex
	var bodies []map[string]any
	f := newFake(t, func(w http.ResponseWriter, r *http.Request) {})
	f.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.calls.Add(1)
		b, _ := io.ReadAll(r.Body)
		var body map[string]any
		_ = json.Unmarshal(b, &body)
		mu.Lock()
		bodies = append(bodies, body)
		mu.Unlock()
		_, tools := body["tools"]
		_, thinks := body["thinking"]
		if body["stream"] == true {
			w.Header().Set("Content-Type", "text/event-stream")
			events := []string{
				`{"type":"message_start","message":{"id":"msg_s","type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[],"usage":{"input_tokens":10,"output_tokens":1}}}`,
				`{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`,
				`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"hel"}}`,
				`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"lo"}}`,
				`{"type":"content_block_stop","index":0}`,
				`{"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":3}}`,
				`{"type":"message_stop"}`,
			}
			if tools {
				events[1] = `{"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"toolu_1","name":"get_weather","input":{}}}`
				events[2] = `{"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"{\"city\":"}}`
				events[3] = `{"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"\"Paris\"}"}}`
				events[5] = `{"type":"message_delta","delta":{"stop_reason":"tool_use"},"usage":{"output_tokens":3}}`
			}
			if thinks {
				thinking := []string{
					`{"type":"content_block_start","index":0,"content_block":{"type":"thinking","thinking":"","signature":""}}`,
					`{"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"Look it "}}`,
					`{"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"up"}}`,
					`{"type":"content_block_delta","index":0,"delta":{"type":"signature_delta","signature":"` + claudeSignature + `"}}`,
					`{"type":"content_block_stop","index":0}`,
				}
				for i := 1; i <= 4; i++ { // the text block is the second
					events[i] = strings.Replace(events[i], `"index":0`, `"index":1`, 1)
				}
				events = append(events[:1], append(thinking, events[1:]...)...)
			}
			for _, ev := range events {
				var head struct{ Type string }
				_ = json.Unmarshal([]byte(ev), &head)
				fmt.Fprintf(w, "event: %s\ndata: %s\n\n", head.Type, ev)
			}
			return
		}
		w.Header().Set("Content-Type", "application/json")
		content := `[{"type":"text","text":"hello"}]`
		stop := "end_turn"
		if tools {
			content, stop = `[{"type":"tool_use","id":"toolu_1","name":"get_weather","input":{"city":"Paris"}}]`, "tool_use"
		}
		if thinks {
			content = `[{"type":"thinking","thinking":"Look it up","signature":"` + claudeSignature + `"},` + content[1:]
		}
		fmt.Fprintf(w, `{"id":"msg_1","type":"message","role":"assistant","model":"claude-sonnet-4-5","content":%s,"stop_reason":%q,"usage":{"input_tokens":10,"output_tokens":3}}`, content, stop)
	})
	return f, func() []map[string]any {
		mu.Lock()
		defer mu.Unlock()
		return append([]map[string]any(nil), bodies...)
	}
}

// TestResponsesClientReachesClaude: the official OpenAI SDK's Responses
// API reaches a Claude route (translate: true), whole, streamed and with
// tools, its instructions and function results carried, and spend settles
// at Anthropic's usage.
func TestResponsesClientReachesClaude(t *testing.T) {
	up, seen := fakeClaude(t)
	gw := translatedRig(t, up.URL, false)
	front, results := frontFor(t, gw, wire.Responses, "anthropic/claude-sonnet-4-5")
	client := openai.NewClient(option.WithBaseURL(front.URL+"/v1/"), option.WithAPIKey("cad_x"), option.WithMaxRetries(0))
	params := responses.ResponseNewParams{Model: "claude-sonnet-4-5", Instructions: openai.String("be brief"),
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("hi")}}

	r, err := client.Responses.New(t.Context(), params)
	if err != nil || r.OutputText() != "hello" || r.Status != "completed" || r.Usage.InputTokens != 10 || r.Usage.OutputTokens != 3 {
		t.Fatalf("whole: %v %+v", err, r)
	}
	stream := client.Responses.NewStreaming(t.Context(), params)
	var text strings.Builder
	var completed *responses.Response
	for stream.Next() {
		ev := stream.Current()
		switch ev.Type {
		case "response.output_text.delta":
			text.WriteString(ev.Delta)
		case "response.completed":
			c := ev.AsResponseCompleted().Response
			completed = &c
		}
	}
	if err := stream.Err(); err != nil || text.String() != "hello" || completed == nil || completed.OutputText() != "hello" || completed.Usage.OutputTokens != 3 {
		t.Fatalf("stream: %v %q %+v", err, text.String(), completed)
	}
	params.Tools = []responses.ToolUnionParam{responses.ToolParamOfFunction("get_weather",
		map[string]any{"type": "object", "properties": map[string]any{"city": map[string]any{"type": "string"}}}, false)}
	tools, err := client.Responses.New(t.Context(), params)
	if err != nil || len(tools.Output) != 1 || tools.Output[0].Type != "function_call" || tools.Output[0].Name != "get_weather" ||
		tools.Output[0].Arguments.OfString != `{"city":"Paris"}` || tools.Output[0].CallID != "toolu_1" {
		t.Fatalf("tools: %v %+v", err, tools)
	}
	// The function's result goes back as the next turn's input.
	params.Input = responses.ResponseNewParamsInputUnion{OfInputItemList: responses.ResponseInputParam{
		responses.ResponseInputItemParamOfMessage("weather in Paris?", responses.EasyInputMessageRoleUser),
		responses.ResponseInputItemParamOfFunctionCall(`{"city":"Paris"}`, "toolu_1", "get_weather"),
		fnOutput("toolu_1", "sunny"),
	}}
	if _, err := client.Responses.New(t.Context(), params); err != nil {
		t.Fatalf("the function's result: %v", err)
	}
	bodies := seen()
	if len(bodies) != 4 {
		t.Fatalf("%d calls reached Anthropic, want 4", len(bodies))
	}
	if sys, _ := json.Marshal(bodies[0]["system"]); !strings.Contains(string(sys), "be brief") {
		t.Fatalf("the instructions reached Anthropic as %s", sys)
	}
	last, _ := json.Marshal(bodies[3]["messages"])
	if !strings.Contains(string(last), `"tool_use_id":"toolu_1"`) || !strings.Contains(string(last), `"sunny"`) {
		t.Fatalf("the function's result reached Anthropic as %s", last)
	}
	price := upstream.Price{Input: 3_000_000, CachedInput: 300_000, Output: 15_000_000, MaxOutputTokens: 1000}
	want := int64(price.Cost(upstream.Usage{Input: 10, Output: 3}))
	for i, r := range results() {
		if r.Settled != want {
			t.Errorf("request %d settled %d, want %d", i, r.Settled, want)
		}
	}
}

// fnOutput is a function_call_output item answering call id.
func fnOutput(id, output string) responses.ResponseInputItemUnionParam {
	item := responses.ResponseInputItemParamOfFunctionCallOutput(output)
	item.OfFunctionCallOutput.CallID = openai.String(id)
	return item
}
