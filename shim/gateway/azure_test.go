package gateway_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
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

// azureCall is what the fake Azure resource saw of one request.
type azureCall struct {
	Method, Path, Query, Key, Model string
	Auth                            string // the Authorization header
}

// fakeAzure is an Azure OpenAI resource: it records each request and
// answers a chat completion or a response, with usage.
func fakeAzure(t *testing.T) (*httptest.Server, func() []azureCall) {
	var mu sync.Mutex
	var calls []azureCall
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		var in struct {
			Model string `json:"model"`
		}
		_ = json.Unmarshal(b, &in)
		mu.Lock()
		calls = append(calls, azureCall{r.Method, r.URL.Path, r.URL.RawQuery, r.Header.Get("Api-Key"), in.Model, r.Header.Get("Authorization")})
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		if strings.HasSuffix(r.URL.Path, "/responses") {
			fmt.Fprint(w, `{"id":"resp_1","object":"response","created_at":1,"status":"completed","model":"x","output":[{"type":"message","id":"m1","role":"assistant","status":"completed","content":[{"type":"output_text","text":"hi","annotations":[]}]}],"usage":{"input_tokens":9,"output_tokens":4,"total_tokens":13}}`)
			return
		}
		fmt.Fprint(w, `{"id":"c1","object":"chat.completion","created":1,"model":"x","choices":[{"index":0,"finish_reason":"stop","message":{"role":"assistant","content":"hi"}}],"usage":{"prompt_tokens":9,"completion_tokens":4,"total_tokens":13}}`)
	}))
	t.Cleanup(srv.Close)
	return srv, func() []azureCall {
		mu.Lock()
		defer mu.Unlock()
		return append([]azureCall(nil), calls...)
	}
}

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
		{"POST", "/openai/deployments/prod-mini/chat/completions", "api-version=" + version, "sk-az", "gpt-4o-mini", ""},
		{"POST", "/openai/responses", "api-version=" + version, "sk-az", "prod-mini", ""},
	}
	for i, w := range mapped {
		if got[2+i] != w {
			t.Errorf("mapped call %d: the gateway sent %+v, want %+v", i, got[2+i], w)
		}
	}
}
