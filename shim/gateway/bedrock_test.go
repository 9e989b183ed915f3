package gateway_test

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/bedrockruntime"
	brtypes "github.com/aws/aws-sdk-go-v2/service/bedrockruntime/types"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/caduceus-dev/caduceus/shim/provider"
	"github.com/caduceus-dev/caduceus/shim/provider/providertest"
	"github.com/caduceus-dev/caduceus/shim/upstream"
	"github.com/caduceus-dev/caduceus/shim/wire"
)

// TestBedrockThroughTheSDKs: a bedrock route signs its requests with SigV4
// as the AWS SDK does (the fake checks every signature, the SDK's too),
// calls converse and converse-stream on the paths the AWS SDK's
// bedrockruntime client calls, reads the binary event stream, and carries
// a chat client of the official OpenAI SDK whole and streamed; spend
// settles at Bedrock's usage.
func TestBedrockThroughTheSDKs(t *testing.T) {
	creds := providertest.AWSEnv(t, "session-1")
	up, seen := fakeBedrock(t, creds, "us-east-1")
	model := "anthropic.claude-sonnet-4-5-v1:0"

	// The AWS SDK reads the fake as it reads Bedrock.
	br := bedrockruntime.New(bedrockruntime.Options{Region: "us-east-1", BaseEndpoint: aws.String(up.URL),
		Credentials: aws.NewCredentialsCache(aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) { return creds, nil }))})
	out, err := br.Converse(t.Context(), &bedrockruntime.ConverseInput{ModelId: aws.String(model),
		Messages: []brtypes.Message{{Role: brtypes.ConversationRoleUser, Content: []brtypes.ContentBlock{&brtypes.ContentBlockMemberText{Value: "hi"}}}}})
	if err != nil {
		t.Fatalf("the AWS SDK's Converse: %v", err)
	}
	if msg, ok := out.Output.(*brtypes.ConverseOutputMemberMessage); !ok || msg.Value.Content[0].(*brtypes.ContentBlockMemberText).Value != "hello" || *out.Usage.OutputTokens != 4 {
		t.Fatalf("the AWS SDK read %+v", out)
	}
	st, err := br.ConverseStream(t.Context(), &bedrockruntime.ConverseStreamInput{ModelId: aws.String(model),
		Messages: []brtypes.Message{{Role: brtypes.ConversationRoleUser, Content: []brtypes.ContentBlock{&brtypes.ContentBlockMemberText{Value: "hi"}}}}})
	if err != nil {
		t.Fatalf("the AWS SDK's ConverseStream: %v", err)
	}
	var streamed strings.Builder
	for ev := range st.GetStream().Events() {
		if d, ok := ev.(*brtypes.ConverseStreamOutputMemberContentBlockDelta); ok {
			if tx, ok := d.Value.Delta.(*brtypes.ContentBlockDeltaMemberText); ok {
				streamed.WriteString(tx.Value)
			}
		}
	}
	st.GetStream().Close()
	if streamed.String() != "hello" {
		t.Fatalf("the AWS SDK's stream read %q", streamed.String())
	}
	sdk := seen()
	if len(sdk) != 2 || !sdk[0].SignedOK || !sdk[1].SignedOK {
		t.Fatalf("the fake refused the AWS SDK's signatures: %+v", sdk)
	}

	price := upstream.Price{Input: 3_000_000, Output: 15_000_000, MaxOutputTokens: 1000}
	conf := upstream.Config{
		Routes: map[string]upstream.Route{"br": {Kind: provider.KindBedrock, BaseURL: up.URL, Region: "us-east-1", Models: []string{model}}},
		Plans: map[string]upstream.Plan{"main": {Failover: upstream.FailoverNone, Models: map[string][]upstream.Step{
			model: {{Route: "br", Translate: true}}}}},
		Prices: map[string]upstream.Price{"bedrock/" + model: price},
	}
	gw := gatewayOn(t, conf, nil)
	front, results := frontFor(t, gw, wire.ChatCompletions, "bedrock/"+model)
	client := openai.NewClient(option.WithBaseURL(front.URL+"/v1/"), option.WithAPIKey("cad_x"), option.WithMaxRetries(0))
	msgs := []openai.ChatCompletionMessageParamUnion{openai.SystemMessage("be brief"), openai.UserMessage("hi")}
	whole, err := client.Chat.Completions.New(t.Context(), openai.ChatCompletionNewParams{Model: model, Messages: msgs})
	if err != nil || whole.Choices[0].Message.Content != "hello" || whole.Usage.CompletionTokens != 4 {
		t.Fatalf("whole: %v %+v", err, whole)
	}
	stream := client.Chat.Completions.NewStreaming(t.Context(), openai.ChatCompletionNewParams{Model: model, Messages: msgs,
		StreamOptions: openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}})
	var acc openai.ChatCompletionAccumulator
	for stream.Next() {
		acc.AddChunk(stream.Current())
	}
	if err := stream.Err(); err != nil || acc.Choices[0].Message.Content != "hello" || acc.Usage.TotalTokens != 15 {
		t.Fatalf("stream: %v %+v", err, acc.ChatCompletion)
	}
	got := seen()[2:]
	if len(got) != 2 || got[0].Path != sdk[0].Path || got[1].Path != sdk[1].Path || !got[0].SignedOK || !got[1].SignedOK {
		t.Fatalf("the gateway called %+v, the AWS SDK %+v", got, sdk)
	}
	if sys, _ := json.Marshal(got[0].Body["system"]); !bytes.Contains(sys, []byte("be brief")) {
		t.Fatalf("the system prompt reached Bedrock as %s", sys)
	}
	want := int64(price.Cost(upstream.Usage{Input: 11, Output: 4}))
	for i, r := range results() {
		if r.Settled != want {
			t.Errorf("request %d settled %d, want %d", i, r.Settled, want)
		}
	}
}
