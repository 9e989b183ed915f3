package gateway_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
	aoption "github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/bedrockruntime"
	"github.com/aws/aws-sdk-go-v2/service/bedrockruntime/document"
	brtypes "github.com/aws/aws-sdk-go-v2/service/bedrockruntime/types"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"
	"google.golang.org/genai"

	"github.com/caduceus-dev/caduceus/shim/provider"
	"github.com/caduceus-dev/caduceus/shim/provider/providertest"
	"github.com/caduceus-dev/caduceus/shim/upstream"
	"github.com/caduceus-dev/caduceus/shim/wire"
)

// weatherTool is the get_weather tool of an Anthropic client.
var weatherTool = []anthropic.ToolUnionParam{{OfTool: &anthropic.ToolParam{Name: "get_weather",
	InputSchema: anthropic.ToolInputSchemaParam{Properties: map[string]any{"city": map[string]any{"type": "string"}}}}}}

// twoTurns runs a thinking tool turn of an Anthropic client whole (or
// streamed, accumulated) and sends its answer back with the tool's result,
// as a client does: the answer it got for the first turn.
func twoTurns(t *testing.T, client anthropic.Client, model string, stream bool) anthropic.Message {
	t.Helper()
	params := anthropic.MessageNewParams{Model: anthropic.Model(model), MaxTokens: 4096, Tools: weatherTool,
		Thinking: anthropic.ThinkingConfigParamOfEnabled(2048),
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("weather in Paris?"))}}
	var first anthropic.Message
	if stream {
		s := client.Messages.NewStreaming(t.Context(), params)
		for s.Next() {
			if err := first.Accumulate(s.Current()); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.Err(); err != nil {
			t.Fatalf("first turn, streamed: %v", err)
		}
	} else {
		m, err := client.Messages.New(t.Context(), params)
		if err != nil {
			t.Fatalf("first turn: %v", err)
		}
		first = *m
	}
	var toolID string
	for _, b := range first.Content {
		if b.Type == "tool_use" {
			toolID = b.ID
		}
	}
	params.Messages = append(params.Messages, first.ToParam(),
		anthropic.NewUserMessage(anthropic.NewToolResultBlock(toolID, "sunny", false)))
	if _, err := client.Messages.New(t.Context(), params); err != nil {
		t.Fatalf("second turn: %v", err)
	}
	return first
}

// thinkingOf is the first thinking block of m.
func thinkingOf(m anthropic.Message) (text, signature string) {
	for _, b := range m.Content {
		if b.Type == "thinking" {
			return b.Thinking, b.Signature
		}
	}
	return "", ""
}

// TestThinkingAcrossTurnsOnGemini: an Anthropic client's thinking reaches
// a Gemini route as a thinkingConfig; Gemini's thought summary comes back
// as a thinking block whose signature is Gemini's thoughtSignature, whole
// and streamed, and the client's next turn puts that signature back on the
// function call Gemini signed — as the official Gemini SDK reads the same
// fake's signature.
func TestThinkingAcrossTurnsOnGemini(t *testing.T) {
	up, seen := fakeGemini(t)
	gc, err := genai.NewClient(t.Context(), &genai.ClientConfig{APIKey: "gk-1", Backend: genai.BackendGeminiAPI,
		HTTPOptions: genai.HTTPOptions{BaseURL: up.URL, APIVersion: "v1beta"}})
	if err != nil {
		t.Fatal(err)
	}
	res, err := gc.Models.GenerateContent(t.Context(), "gemini-2.5-flash", genai.Text("weather in Paris?"), &genai.GenerateContentConfig{
		ThinkingConfig: &genai.ThinkingConfig{IncludeThoughts: true},
		Tools:          []*genai.Tool{{FunctionDeclarations: []*genai.FunctionDeclaration{{Name: "get_weather"}}}}})
	if err != nil || len(res.Candidates[0].Content.Parts) != 2 || !res.Candidates[0].Content.Parts[0].Thought ||
		string(res.Candidates[0].Content.Parts[1].ThoughtSignature) != "sig-gemini" {
		t.Fatalf("the Gemini SDK read %v %+v", err, res)
	}

	conf := upstream.Config{
		Routes: map[string]upstream.Route{"g": {Kind: provider.KindGemini, BaseURL: up.URL, Models: []string{"gemini-2.5-flash"}}},
		Plans: map[string]upstream.Plan{"main": {Failover: upstream.FailoverNone, Models: map[string][]upstream.Step{
			"gemini-2.5-flash": {{Route: "g", Translate: true}}}}},
		Prices: map[string]upstream.Price{"gemini/gemini-2.5-flash": {Input: 1_000_000, Output: 4_000_000, MaxOutputTokens: 8192}},
	}
	front, _ := frontFor(t, gatewayOn(t, conf, map[string]string{"g": "gk-1"}), wire.Messages, "gemini/gemini-2.5-flash")
	client := anthropic.NewClient(aoption.WithBaseURL(front.URL), aoption.WithAPIKey("cad_x"), aoption.WithMaxRetries(0))
	for _, stream := range []bool{false, true} {
		before := len(seen())
		first := twoTurns(t, client, "gemini-2.5-flash", stream)
		if text, sig := thinkingOf(first); text != "Paris needs a lookup" || sig != geminiSignature {
			t.Fatalf("stream %v: the thinking block is %q signed %q, want Gemini's summary and signature: %+v", stream, text, sig, first.Content)
		}
		calls := seen()[before:]
		tc, _ := json.Marshal(calls[0].Body["generationConfig"])
		if !strings.Contains(string(tc), `"thinkingConfig":{"includeThoughts":true,"thinkingBudget":2048}`) {
			t.Fatalf("stream %v: the thinking reached Gemini as %s", stream, tc)
		}
		second, _ := json.Marshal(calls[1].Body["contents"])
		if !strings.Contains(string(second), `{"functionCall":{"args":{"city":"Paris"},"name":"get_weather"},"thoughtSignature":"`+geminiSignature+`"}`) {
			t.Fatalf("stream %v: the second turn reached Gemini without the call's signature: %s", stream, second)
		}
	}
}

// TestThinkingAcrossTurnsOnBedrock: an Anthropic client's thinking
// reaches a Claude model on Bedrock as additionalModelRequestFields; the
// reasoning block comes back as a thinking block with Bedrock's
// signature, whole and streamed, and goes back as a reasoningContent
// block on the next turn — the shapes the AWS SDK reads from the same
// fake.
func TestThinkingAcrossTurnsOnBedrock(t *testing.T) {
	creds := providertest.AWSEnv(t, "")
	up, seen := fakeBedrock(t, creds, "us-east-1")
	model := "anthropic.claude-sonnet-4-5-v1:0"

	br := bedrockruntime.New(bedrockruntime.Options{Region: "us-east-1", BaseEndpoint: aws.String(up.URL),
		Credentials: aws.NewCredentialsCache(aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) { return creds, nil }))})
	out, err := br.Converse(t.Context(), &bedrockruntime.ConverseInput{ModelId: aws.String(model),
		AdditionalModelRequestFields: document.NewLazyDocument(map[string]any{"thinking": map[string]any{"type": "enabled", "budget_tokens": 2048}}),
		Messages:                     []brtypes.Message{{Role: brtypes.ConversationRoleUser, Content: []brtypes.ContentBlock{&brtypes.ContentBlockMemberText{Value: "hi"}}}}})
	if err != nil {
		t.Fatalf("the AWS SDK's Converse: %v", err)
	}
	msg := out.Output.(*brtypes.ConverseOutputMemberMessage).Value
	rc, ok := msg.Content[0].(*brtypes.ContentBlockMemberReasoningContent)
	if !ok || *rc.Value.(*brtypes.ReasoningContentBlockMemberReasoningText).Value.Signature != bedrockSignature {
		t.Fatalf("the AWS SDK read %+v", msg.Content)
	}

	conf := upstream.Config{
		Routes: map[string]upstream.Route{"br": {Kind: provider.KindBedrock, BaseURL: up.URL, Region: "us-east-1", Models: []string{model}}},
		Plans: map[string]upstream.Plan{"main": {Failover: upstream.FailoverNone, Models: map[string][]upstream.Step{
			model: {{Route: "br", Translate: true}}}}},
		Prices: map[string]upstream.Price{"bedrock/" + model: {Input: 3_000_000, Output: 15_000_000, MaxOutputTokens: 8192}},
	}
	front, _ := frontFor(t, gatewayOn(t, conf, nil), wire.Messages, "bedrock/"+model)
	client := anthropic.NewClient(aoption.WithBaseURL(front.URL), aoption.WithAPIKey("cad_x"), aoption.WithMaxRetries(0))
	for _, stream := range []bool{false, true} {
		before := len(seen())
		first := twoTurns(t, client, model, stream)
		if text, sig := thinkingOf(first); text != "Look it up" || sig != bedrockSignature {
			t.Fatalf("stream %v: the thinking block is %q signed %q: %+v", stream, text, sig, first.Content)
		}
		calls := seen()[before:]
		extra, _ := json.Marshal(calls[0].Body["additionalModelRequestFields"])
		if string(extra) != `{"thinking":{"budget_tokens":2048,"type":"enabled"}}` {
			t.Fatalf("stream %v: the thinking reached Bedrock as %s", stream, extra)
		}
		second, _ := json.Marshal(calls[1].Body["messages"])
		if !strings.Contains(string(second), `{"reasoningContent":{"reasoningText":{"signature":"`+bedrockSignature+`","text":"Look it up"}}}`) {
			t.Fatalf("stream %v: the second turn reached Bedrock without its reasoning: %s", stream, second)
		}
	}
}

// TestThinkingAcrossTurnsForAResponsesClient: a Responses client of the
// official OpenAI SDK asking a Claude route for reasoning (effort, and
// the encrypted content included) gets Claude's thinking as a reasoning
// item, its summary the thinking and its encrypted_content the signature,
// whole and streamed; sending the output back as the next turn's input
// gives Claude its thinking block back, signature intact, before the tool
// use it led to.
func TestThinkingAcrossTurnsForAResponsesClient(t *testing.T) {
	up, seen := fakeClaude(t)
	gw := translatedRig(t, up.URL, false)
	front, _ := frontFor(t, gw, wire.Responses, "anthropic/claude-sonnet-4-5")
	client := openai.NewClient(option.WithBaseURL(front.URL+"/v1/"), option.WithAPIKey("cad_x"), option.WithMaxRetries(0))
	tools := []responses.ToolUnionParam{responses.ToolParamOfFunction("get_weather",
		map[string]any{"type": "object", "properties": map[string]any{"city": map[string]any{"type": "string"}}}, false)}
	ask := responses.ResponseInputParam{responses.ResponseInputItemParamOfMessage("weather in Paris?", responses.EasyInputMessageRoleUser)}
	params := responses.ResponseNewParams{Model: "claude-sonnet-4-5", Tools: tools, MaxOutputTokens: openai.Int(4096),
		Reasoning: openai.ReasoningParam{Effort: openai.ReasoningEffortMedium},
		Include:   []responses.ResponseIncludable{responses.ResponseIncludableReasoningEncryptedContent},
		Input:     responses.ResponseNewParamsInputUnion{OfInputItemList: ask}}

	for _, stream := range []bool{false, true} {
		before := len(seen())
		var r *responses.Response
		if stream {
			s := client.Responses.NewStreaming(t.Context(), params)
			var summary strings.Builder
			for s.Next() {
				ev := s.Current()
				switch ev.Type {
				case "response.reasoning_summary_text.delta":
					summary.WriteString(ev.Delta)
				case "response.completed":
					c := ev.AsResponseCompleted().Response
					r = &c
				}
			}
			if err := s.Err(); err != nil || r == nil || summary.String() != "Look it up" {
				t.Fatalf("streamed: %v %q %+v", err, summary.String(), r)
			}
		} else {
			var err error
			if r, err = client.Responses.New(t.Context(), params); err != nil {
				t.Fatal(err)
			}
		}
		if len(r.Output) != 2 || r.Output[0].Type != "reasoning" || r.Output[0].EncryptedContent != claudeSignature ||
			len(r.Output[0].Summary) != 1 || r.Output[0].Summary[0].Text != "Look it up" || r.Output[1].Type != "function_call" {
			t.Fatalf("stream %v: the output is %+v", stream, r.Output)
		}
		next := append(responses.ResponseInputParam{}, ask...)
		rs := r.Output[0].AsReasoning().ToParam()
		fc := r.Output[1]
		next = append(next, responses.ResponseInputItemUnionParam{OfReasoning: &rs},
			responses.ResponseInputItemParamOfFunctionCall(fc.Arguments.OfString, fc.CallID, fc.Name), fnOutput(fc.CallID, "sunny"))
		p2 := params
		p2.Input = responses.ResponseNewParamsInputUnion{OfInputItemList: next}
		if _, err := client.Responses.New(t.Context(), p2); err != nil {
			t.Fatalf("stream %v: the second turn: %v", stream, err)
		}
		bodies := seen()[before:]
		if th, _ := json.Marshal(bodies[0]["thinking"]); string(th) != `{"budget_tokens":4095,"type":"enabled"}` {
			t.Fatalf("stream %v: the effort reached Claude as %s", stream, th)
		}
		second, _ := json.Marshal(bodies[1]["messages"])
		if !strings.Contains(string(second), `{"content":[{"signature":"`+claudeSignature+`","thinking":"Look it up","type":"thinking"},{"id":"toolu_1"`) {
			t.Fatalf("stream %v: the second turn reached Claude as %s", stream, second)
		}
	}
}
