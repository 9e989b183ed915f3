package gateway_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
	aoption "github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"google.golang.org/genai"

	"github.com/caduceus-dev/caduceus/shim/provider"
	"github.com/caduceus-dev/caduceus/shim/upstream"
	"github.com/caduceus-dev/caduceus/shim/wire"
)

// TestGeminiThroughTheSDKs: a chat completions client of the official
// OpenAI SDK reaches a Gemini route through translation, whole and
// streamed, with tools, and gets what the fake Gemini API said — the same
// fake the official Gemini SDK (google.golang.org/genai) reads as the real
// API, called on the same path with the same key header. Spend settles at
// Gemini's usage (cached input apart, thoughts as output); Gemini's 404
// reaches the client as OpenAI's error with Gemini's status as its code.
func TestGeminiThroughTheSDKs(t *testing.T) {
	up, seen := fakeGemini(t)

	// The Gemini SDK reads the fake as it reads the API.
	gc, err := genai.NewClient(t.Context(), &genai.ClientConfig{APIKey: "gk-1", Backend: genai.BackendGeminiAPI,
		HTTPOptions: genai.HTTPOptions{BaseURL: up.URL, APIVersion: "v1beta"}})
	if err != nil {
		t.Fatal(err)
	}
	res, err := gc.Models.GenerateContent(t.Context(), "gemini-2.5-flash", genai.Text("hi"), nil)
	if err != nil || res.Text() != "hello" || res.UsageMetadata.PromptTokenCount != 12 || res.UsageMetadata.ThoughtsTokenCount != 2 {
		t.Fatalf("the Gemini SDK: %v %+v", err, res)
	}
	var streamed string
	for chunk, err := range gc.Models.GenerateContentStream(t.Context(), "gemini-2.5-flash", genai.Text("hi"), nil) {
		if err != nil {
			t.Fatalf("the Gemini SDK's stream: %v", err)
		}
		streamed += chunk.Text()
	}
	if streamed != "hello" {
		t.Fatalf("the Gemini SDK's stream read %q", streamed)
	}
	sdkCalls := seen()

	// The gateway, behind an OpenAI-compatible endpoint.
	price := upstream.Price{Input: 1_000_000, CachedInput: 250_000, Output: 4_000_000, MaxOutputTokens: 1000}
	conf := upstream.Config{
		Routes: map[string]upstream.Route{"g": {Kind: provider.KindGemini, BaseURL: up.URL, Models: []string{"gemini-2.5-flash", "gemini-missing"}}},
		Plans: map[string]upstream.Plan{"main": {Failover: upstream.FailoverNone, Models: map[string][]upstream.Step{
			"gemini-2.5-flash": {{Route: "g", Translate: true}}, "gemini-missing": {{Route: "g", Translate: true}}}}},
		Prices: map[string]upstream.Price{"gemini/gemini-2.5-flash": price, "gemini/gemini-missing": price},
	}
	gw := gatewayOn(t, conf, map[string]string{"g": "gk-1"})
	front, results := frontFor(t, gw, wire.ChatCompletions, "gemini/gemini-2.5-flash", "gemini/gemini-missing")
	client := openai.NewClient(option.WithBaseURL(front.URL+"/v1/"), option.WithAPIKey("cad_x"), option.WithMaxRetries(0))
	msgs := []openai.ChatCompletionMessageParamUnion{openai.SystemMessage("be brief"), openai.UserMessage("hi")}

	out, err := client.Chat.Completions.New(t.Context(), openai.ChatCompletionNewParams{Model: "gemini-2.5-flash", Messages: msgs, MaxTokens: openai.Int(64)})
	if err != nil || out.Choices[0].Message.Content != "hello" || out.Choices[0].FinishReason != "stop" ||
		out.Usage.PromptTokens != 12 || out.Usage.CompletionTokens != 7 || out.Usage.PromptTokensDetails.CachedTokens != 4 {
		t.Fatalf("whole: %v %+v", err, out)
	}
	stream := client.Chat.Completions.NewStreaming(t.Context(), openai.ChatCompletionNewParams{Model: "gemini-2.5-flash", Messages: msgs,
		StreamOptions: openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}})
	var acc openai.ChatCompletionAccumulator
	for stream.Next() {
		acc.AddChunk(stream.Current())
	}
	if err := stream.Err(); err != nil || acc.Choices[0].Message.Content != "hello" || acc.Choices[0].FinishReason != "stop" || acc.Usage.TotalTokens != 19 {
		t.Fatalf("stream: %v %+v", err, acc.ChatCompletion)
	}
	tools, err := client.Chat.Completions.New(t.Context(), openai.ChatCompletionNewParams{Model: "gemini-2.5-flash", Messages: msgs,
		Tools: []openai.ChatCompletionToolUnionParam{openai.ChatCompletionFunctionTool(openai.FunctionDefinitionParam{Name: "get_weather",
			Parameters: openai.FunctionParameters{"type": "object", "properties": map[string]any{"city": map[string]any{"type": "string"}}}})},
		ToolChoice: openai.ChatCompletionToolChoiceOptionUnionParam{OfAuto: openai.String("required")}})
	if err != nil || len(tools.Choices[0].Message.ToolCalls) != 1 || tools.Choices[0].FinishReason != "tool_calls" ||
		tools.Choices[0].Message.ToolCalls[0].Function.Name != "get_weather" || tools.Choices[0].Message.ToolCalls[0].Function.Arguments != `{"city":"Paris"}` {
		t.Fatalf("tools: %v %+v", err, tools)
	}
	_, err = client.Chat.Completions.New(t.Context(), openai.ChatCompletionNewParams{Model: "gemini-missing", Messages: msgs})
	var oe *openai.Error
	if !errors.As(err, &oe) || oe.StatusCode != 404 || oe.Code != "NOT_FOUND" || !strings.Contains(oe.Message, "is not found") {
		t.Fatalf("Gemini's 404: %v", err)
	}

	calls := seen()[len(sdkCalls):]
	if len(calls) != 4 {
		t.Fatalf("%d calls reached Gemini, want 4", len(calls))
	}
	if calls[0].Path != sdkCalls[0].Path || calls[0].Key != sdkCalls[0].Key || calls[1].Path != sdkCalls[1].Path || calls[1].Query != sdkCalls[1].Query {
		t.Fatalf("the gateway called %+v / %+v, the Gemini SDK %+v / %+v", calls[0], calls[1], sdkCalls[0], sdkCalls[1])
	}
	sys, _ := json.Marshal(calls[0].Body["systemInstruction"])
	cfg, _ := json.Marshal(calls[0].Body["generationConfig"])
	if string(sys) != `{"parts":[{"text":"be brief"}]}` || !strings.Contains(string(cfg), `"maxOutputTokens":64`) {
		t.Fatalf("the translated request: system %s, config %s", sys, cfg)
	}
	tc, _ := json.Marshal(calls[2].Body["toolConfig"])
	if string(tc) != `{"functionCallingConfig":{"mode":"ANY"}}` {
		t.Fatalf("tool_choice required became %s", tc)
	}
	want := int64(price.Cost(upstream.Usage{Input: 8, CachedInput: 4, Output: 7, Reasoning: 2}))
	for i, r := range results()[:3] {
		if r.Settled != want || r.UpstreamWire != "gemini" {
			t.Errorf("request %d settled %d over %q, want %d over gemini", i, r.Settled, r.UpstreamWire, want)
		}
	}
}

// TestGeminiForAMessagesClient: an Anthropic messages client of the
// official Anthropic SDK reaches a Gemini route too, through chat's shape
// both ways: whole, streamed (the accumulated message), and a tool call;
// spend settles at Gemini's usage.
func TestGeminiForAMessagesClient(t *testing.T) {
	up, seen := fakeGemini(t)
	price := upstream.Price{Input: 1_000_000, CachedInput: 250_000, Output: 4_000_000, MaxOutputTokens: 1000}
	conf := upstream.Config{
		Routes: map[string]upstream.Route{"g": {Kind: provider.KindGemini, BaseURL: up.URL, Models: []string{"gemini-2.5-flash"}}},
		Plans: map[string]upstream.Plan{"main": {Failover: upstream.FailoverNone, Models: map[string][]upstream.Step{
			"gemini-2.5-flash": {{Route: "g", Translate: true}}}}},
		Prices: map[string]upstream.Price{"gemini/gemini-2.5-flash": price},
	}
	gw := gatewayOn(t, conf, map[string]string{"g": "gk-1"})
	front, results := frontFor(t, gw, wire.Messages, "gemini/gemini-2.5-flash")
	client := anthropic.NewClient(aoption.WithBaseURL(front.URL), aoption.WithAPIKey("cad_x"), aoption.WithMaxRetries(0))
	params := anthropic.MessageNewParams{Model: "gemini-2.5-flash", MaxTokens: 64, System: []anthropic.TextBlockParam{{Text: "be brief"}},
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hi"))}}

	msg, err := client.Messages.New(t.Context(), params)
	if err != nil || len(msg.Content) != 1 || msg.Content[0].Text != "hello" || msg.StopReason != "end_turn" || msg.Usage.OutputTokens != 7 {
		t.Fatalf("whole: %v %+v", err, msg)
	}
	stream := client.Messages.NewStreaming(t.Context(), params)
	var acc anthropic.Message
	for stream.Next() {
		if err := acc.Accumulate(stream.Current()); err != nil {
			t.Fatal(err)
		}
	}
	if err := stream.Err(); err != nil || len(acc.Content) != 1 || acc.Content[0].Text != "hello" || acc.StopReason != "end_turn" || acc.Usage.OutputTokens != 7 {
		t.Fatalf("stream: %v %+v", err, acc)
	}
	params.Tools = []anthropic.ToolUnionParam{{OfTool: &anthropic.ToolParam{Name: "get_weather",
		InputSchema: anthropic.ToolInputSchemaParam{Properties: map[string]any{"city": map[string]any{"type": "string"}}}}}}
	tools, err := client.Messages.New(t.Context(), params)
	if err != nil || len(tools.Content) != 1 || tools.Content[0].Type != "tool_use" || tools.Content[0].Name != "get_weather" ||
		string(tools.Content[0].Input) != `{"city":"Paris"}` || tools.StopReason != "tool_use" {
		t.Fatalf("tools: %v %+v", err, tools)
	}
	calls := seen()
	if len(calls) != 3 || calls[0].Path != "/v1beta/models/gemini-2.5-flash:generateContent" || calls[1].Query != "alt=sse" {
		t.Fatalf("Gemini saw %+v", calls)
	}
	if sys, _ := json.Marshal(calls[0].Body["systemInstruction"]); string(sys) != `{"parts":[{"text":"be brief"}]}` {
		t.Fatalf("the system prompt reached Gemini as %s", sys)
	}
	want := int64(price.Cost(upstream.Usage{Input: 8, CachedInput: 4, Output: 7, Reasoning: 2}))
	for i, r := range results() {
		if r.Settled != want {
			t.Errorf("request %d settled %d, want %d", i, r.Settled, want)
		}
	}
}
