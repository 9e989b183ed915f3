package gateway_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/azure"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"

	"github.com/caduceus-dev/caduceus/shim/gateway"
	"github.com/caduceus-dev/caduceus/shim/provider"
	"github.com/caduceus-dev/caduceus/shim/upstream"
	"github.com/caduceus-dev/caduceus/shim/wire"
)

// TestAzureSpeaksAsTheAzureSDK: an azure route sends chat completions and
// the Responses API to an Azure OpenAI resource exactly where, and with
// the credential and api-version, the official OpenAI SDK's azure package
// sends them; a model mapped to another deployment goes to that one; the
// gateway settles at the usage Azure reports.
func TestAzureSpeaksAsTheAzureSDK(t *testing.T) {
	const version = "2024-10-21"
	up, seen := fakeAzure(t)

	// The official SDK, straight to the fake resource.
	sdk := openai.NewClient(azure.WithEndpoint(up.URL, version), azure.WithAPIKey("sk-az"), azure.WithUnsafeAllowHTTP(), option.WithMaxRetries(0))
	if _, err := sdk.Chat.Completions.New(t.Context(), openai.ChatCompletionNewParams{Model: "gpt-4o",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")}}); err != nil {
		t.Fatalf("the SDK's chat completion: %v", err)
	}
	if _, err := sdk.Responses.New(t.Context(), responses.ResponseNewParams{Model: "gpt-4o",
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("hi")}}); err != nil {
		t.Fatalf("the SDK's response: %v", err)
	}
	want := seen()
	if len(want) != 2 {
		t.Fatalf("the SDK made %d calls", len(want))
	}

	// The gateway, an azure route to the same resource.
	price := upstream.Price{Input: 1_000_000, Output: 2_000_000, MaxOutputTokens: 100}
	conf := upstream.Config{
		Routes: map[string]upstream.Route{"az": {Kind: provider.KindAzure, BaseURL: up.URL, Models: []string{"gpt-4o", "gpt-4o-mini"}, APIVersion: version,
			Deployments: map[string]string{"gpt-4o-mini": "prod-mini"}}},
		Plans: map[string]upstream.Plan{"main": {Failover: upstream.FailoverNone, Models: map[string][]upstream.Step{
			"gpt-4o": {{Route: "az"}}, "gpt-4o-mini": {{Route: "az"}}}}},
		Prices: map[string]upstream.Price{"azure/gpt-4o": price, "azure/gpt-4o-mini": price},
	}
	gw := gatewayOn(t, conf, map[string]string{"az": "sk-az"})
	forward := func(p wire.Protocol, body string) {
		t.Helper()
		pr, b := parsed(t, p, body)
		rec := httptest.NewRecorder()
		res := gw.Forward(t.Context(), gateway.Writer{ResponseWriter: rec}, gateway.Request{Protocol: p, Caller: caller("azure/gpt-4o", "azure/gpt-4o-mini"),
			Parsed: pr, Body: b, Header: http.Header{}, RawQuery: "beta=true", ID: fmt.Sprintf("rct_az_%d", reqN.Add(1))})
		if res.Refusal != nil || res.Err != nil || rec.Code != 200 {
			t.Fatalf("%s: %+v %v %d %s", body, res.Refusal, res.Err, rec.Code, rec.Body)
		}
		if want := int64(price.Cost(upstream.Usage{Input: 9, Output: 4})); res.Settled != want {
			t.Fatalf("%s: settled %d, want %d (Azure's usage)", body, res.Settled, want)
		}
	}
	forward(wire.ChatCompletions, `{"model":"gpt-4o","messages":[{"role":"user","content":"hi"}]}`)
	forward(wire.Responses, `{"model":"gpt-4o","input":"hi"}`)
	forward(wire.ChatCompletions, `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}]}`)
	forward(wire.Responses, `{"model":"gpt-4o-mini","input":"hi"}`)
	got := seen()[2:]
	for i, w := range want {
		if got[i] != w {
			t.Errorf("call %d: the gateway sent %+v, the SDK %+v", i, got[i], w)
		}
	}
	mapped := []azureCall{
		{Method: "POST", Path: "/openai/deployments/prod-mini/chat/completions", Query: "api-version=" + version, Key: "sk-az", Model: "gpt-4o-mini"},
		{Method: "POST", Path: "/openai/responses", Query: "api-version=" + version, Key: "sk-az", Model: "prod-mini"},
	}
	for i, w := range mapped {
		if got[2+i] != w {
			t.Errorf("mapped call %d: the gateway sent %+v, want %+v", i, got[2+i], w)
		}
	}
}
