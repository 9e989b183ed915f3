package gateway_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"

	"github.com/caduceus-dev/caduceus/shim/upstream"
	"github.com/caduceus-dev/caduceus/shim/wire"
)

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
