package gateway_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/protocol/eventstream"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/aws/aws-sdk-go-v2/service/bedrockruntime"
	brtypes "github.com/aws/aws-sdk-go-v2/service/bedrockruntime/types"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/caduceus-dev/caduceus/shim/provider"
	"github.com/caduceus-dev/caduceus/shim/upstream"
	"github.com/caduceus-dev/caduceus/shim/wire"
)

// bedrockCall is what the fake Bedrock saw of one request.
type bedrockCall struct {
	Path     string
	SignedOK bool
	Body     map[string]any
}

// fakeBedrock is Bedrock's runtime: it checks each request's SigV4
// signature by signing a copy of it again with the known credentials at
// the request's own time, and answers converse with JSON and
// converse-stream with AWS's binary event stream. A request asking a
// Claude model for thinking (additionalModelRequestFields) is answered a
// reasoning block signed bedrockSignature first.
func fakeBedrock(t *testing.T, creds aws.Credentials, region string) (*httptest.Server, func() []bedrockCall) {
	var mu sync.Mutex
	var calls []bedrockCall
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		var body map[string]any
		_ = json.Unmarshal(b, &body)
		at, _ := time.Parse("20060102T150405Z", r.Header.Get("X-Amz-Date"))
		// The copy carries exactly the headers the request says it signed.
		check := r.Clone(context.Background())
		check.Header = http.Header{}
		_, signed, _ := strings.Cut(r.Header.Get("Authorization"), "SignedHeaders=")
		signed, _, _ = strings.Cut(signed, ",")
		for h := range strings.SplitSeq(signed, ";") {
			if h != "host" && h != "x-amz-date" {
				check.Header[http.CanonicalHeaderKey(h)] = r.Header.Values(h)
			}
		}
		check.ContentLength = int64(len(b))
		sum := sha256.Sum256(b)
		_ = v4.NewSigner().SignHTTP(context.Background(), creds, check, hex.EncodeToString(sum[:]), "bedrock", region, at)
		ok := sigOf(check.Header.Get("Authorization")) != "" && sigOf(check.Header.Get("Authorization")) == sigOf(r.Header.Get("Authorization"))
		mu.Lock()
		calls = append(calls, bedrockCall{r.URL.Path, ok, body})
		mu.Unlock()
		if !ok {
			w.Header().Set("X-Amzn-Errortype", "InvalidSignatureException")
			http.Error(w, `{"message":"The request signature we calculated does not match the signature you provided."}`, http.StatusForbidden)
			return
		}
		usage := `{"inputTokens":11,"outputTokens":4,"totalTokens":15}`
		extra, _ := body["additionalModelRequestFields"].(map[string]any)
		_, thinks := extra["thinking"]
		_, tools := body["toolConfig"]
		if strings.HasSuffix(r.URL.Path, "/converse-stream") {
			w.Header().Set("Content-Type", "application/vnd.amazon.eventstream")
			enc := eventstream.NewEncoder()
			events := [][2]string{
				{"messageStart", `{"role":"assistant"}`},
				{"contentBlockDelta", `{"contentBlockIndex":0,"delta":{"text":"hel"}}`},
				{"contentBlockDelta", `{"contentBlockIndex":0,"delta":{"text":"lo"}}`},
				{"contentBlockStop", `{"contentBlockIndex":0}`},
				{"messageStop", `{"stopReason":"end_turn"}`},
				{"metadata", `{"usage":` + usage + `,"metrics":{"latencyMs":5}}`},
			}
			if tools {
				events[1] = [2]string{"contentBlockStart", `{"contentBlockIndex":0,"start":{"toolUse":{"toolUseId":"tooluse_1","name":"get_weather"}}}`}
				events[2] = [2]string{"contentBlockDelta", `{"contentBlockIndex":0,"delta":{"toolUse":{"input":"{\"city\":\"Paris\"}"}}}`}
				events[4] = [2]string{"messageStop", `{"stopReason":"tool_use"}`}
			}
			if thinks {
				for i := 1; i <= 3; i++ { // the text block is the second
					events[i][1] = strings.Replace(events[i][1], `"contentBlockIndex":0`, `"contentBlockIndex":1`, 1)
				}
				events = append(events[:1], append([][2]string{
					{"contentBlockDelta", `{"contentBlockIndex":0,"delta":{"reasoningContent":{"text":"Look it "}}}`},
					{"contentBlockDelta", `{"contentBlockIndex":0,"delta":{"reasoningContent":{"text":"up"}}}`},
					{"contentBlockDelta", `{"contentBlockIndex":0,"delta":{"reasoningContent":{"signature":"` + bedrockSignature + `"}}}`},
					{"contentBlockStop", `{"contentBlockIndex":0}`},
				}, events[1:]...)...)
			}
			for _, ev := range events {
				var m eventstream.Message
				m.Headers.Set(":message-type", eventstream.StringValue("event"))
				m.Headers.Set(":event-type", eventstream.StringValue(ev[0]))
				m.Headers.Set(":content-type", eventstream.StringValue("application/json"))
				m.Payload = []byte(ev[1])
				if err := enc.Encode(w, m); err != nil {
					return
				}
			}
			return
		}
		w.Header().Set("Content-Type", "application/json")
		content, stop := `[{"text":"hello"}]`, "end_turn"
		if tools {
			content, stop = `[{"toolUse":{"toolUseId":"tooluse_1","name":"get_weather","input":{"city":"Paris"}}}]`, "tool_use"
		}
		if thinks {
			content = `[{"reasoningContent":{"reasoningText":{"text":"Look it up","signature":"` + bedrockSignature + `"}}},` + content[1:]
		}
		fmt.Fprint(w, `{"output":{"message":{"role":"assistant","content":`+content+`}},"stopReason":"`+stop+`","usage":`+usage+`,"metrics":{"latencyMs":5}}`)
	}))
	t.Cleanup(srv.Close)
	return srv, func() []bedrockCall {
		mu.Lock()
		defer mu.Unlock()
		return append([]bedrockCall(nil), calls...)
	}
}

// sigOf is the Signature of a SigV4 Authorization header.
func sigOf(auth string) string {
	_, sig, _ := strings.Cut(auth, "Signature=")
	return sig
}

// TestBedrockThroughTheSDKs: a bedrock route signs its requests with SigV4
// as the AWS SDK does (the fake checks every signature, the SDK's too),
// calls converse and converse-stream on the paths the AWS SDK's
// bedrockruntime client calls, reads the binary event stream, and carries
// a chat client of the official OpenAI SDK whole and streamed; spend
// settles at Bedrock's usage.
func TestBedrockThroughTheSDKs(t *testing.T) {
	creds := aws.Credentials{AccessKeyID: "AKIDEXAMPLE", SecretAccessKey: "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY", SessionToken: "session-1"}
	t.Setenv("AWS_ACCESS_KEY_ID", creds.AccessKeyID)
	t.Setenv("AWS_SECRET_ACCESS_KEY", creds.SecretAccessKey)
	t.Setenv("AWS_SESSION_TOKEN", creds.SessionToken)
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
