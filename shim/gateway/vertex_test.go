package gateway_test

import (
	"crypto/rand"
	"crypto/rsa"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
	aoption "github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/anthropics/anthropic-sdk-go/v2/vertex"
	"golang.org/x/oauth2"
	"golang.org/x/oauth2/google"
	"google.golang.org/genai"

	"github.com/caduceus-dev/caduceus/shim/gateway"
	"github.com/caduceus-dev/caduceus/shim/provider"
	"github.com/caduceus-dev/caduceus/shim/upstream"
	"github.com/caduceus-dev/caduceus/shim/wire"
)

// TestVertexThroughTheSDKs: a vertex route fetches its OAuth token from
// the service account's token_uri (a signed JWT, checked) once for many
// requests, and calls Claude (rawPredict, the model in the URL, the
// anthropic_version in the body) and Gemini (generateContent) models on
// the paths the official Anthropic SDK's vertex package and Google's genai
// SDK use with the same credentials; a messages client reaches Claude as
// it is, whole and streamed, a chat client reaches both through
// translation; spend settles at the usage Vertex reports.
func TestVertexThroughTheSDKs(t *testing.T) {
	var tokens atomic.Int64
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	tokenSrv := fakeGoogleToken(t, &key.PublicKey, &tokens)
	sa := serviceAccount(t, key, tokenSrv.URL+"/token")
	up, seen := fakeVertex(t)

	// The official SDKs with the same service account, at the fake.
	b, _ := os.ReadFile(sa)
	creds, err := google.CredentialsFromJSON(t.Context(), b, "https://www.googleapis.com/auth/cloud-platform")
	if err != nil {
		t.Fatal(err)
	}
	ac := anthropic.NewClient(vertex.WithCredentials(t.Context(), "us-east5", "proj-1", creds), aoption.WithBaseURL(up.URL), aoption.WithMaxRetries(0))
	if _, err := ac.Messages.New(t.Context(), anthropic.MessageNewParams{Model: "claude-sonnet-4-5", MaxTokens: 64,
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hi"))}}); err != nil {
		t.Fatalf("the Anthropic SDK on Vertex: %v", err)
	}
	gc, err := genai.NewClient(t.Context(), &genai.ClientConfig{Backend: genai.BackendVertexAI, Project: "proj-1", Location: "us-east5",
		HTTPClient:  &http.Client{Transport: &oauth2.Transport{Source: creds.TokenSource}},
		HTTPOptions: genai.HTTPOptions{BaseURL: up.URL, APIVersion: "v1"}})
	if err != nil {
		t.Fatal(err)
	}
	if res, err := gc.Models.GenerateContent(t.Context(), "gemini-2.5-pro", genai.Text("hi"), nil); err != nil || res.Text() != "hello" {
		t.Fatalf("the Gemini SDK on Vertex: %v %+v", err, res)
	}
	sdk := seen()

	price := upstream.Price{Input: 1_000_000, Output: 2_000_000, MaxOutputTokens: 1000}
	conf := upstream.Config{
		Routes: map[string]upstream.Route{"v": {Kind: provider.KindVertex, BaseURL: up.URL, Project: "proj-1", Location: "us-east5",
			CredentialsFile: sa, Models: []string{"claude-sonnet-4-5", "gemini-2.5-pro"}}},
		Plans: map[string]upstream.Plan{"main": {Failover: upstream.FailoverNone, Models: map[string][]upstream.Step{
			"claude-sonnet-4-5": {{Route: "v", Translate: true}}, "gemini-2.5-pro": {{Route: "v", Translate: true}}}}},
		Prices: map[string]upstream.Price{"vertex/claude-sonnet-4-5": price, "vertex/gemini-2.5-pro": price},
	}
	gw := gatewayOn(t, conf, nil)
	forward := func(p wire.Protocol, body string) string {
		t.Helper()
		pr, b := parsed(t, p, body)
		rec := httptest.NewRecorder()
		res := gw.Forward(t.Context(), gateway.Writer{ResponseWriter: rec}, gateway.Request{Protocol: p, Caller: caller("vertex/claude-sonnet-4-5", "vertex/gemini-2.5-pro"),
			Parsed: pr, Body: b, Header: http.Header{"Anthropic-Version": {"2023-06-01"}}, ID: fmt.Sprintf("rct_v_%d", reqN.Add(1))})
		if res.Refusal != nil || res.Err != nil || rec.Code != 200 || !strings.Contains(rec.Body.String(), "hello") {
			t.Fatalf("%s: %+v %v %d %s", body, res.Refusal, res.Err, rec.Code, rec.Body)
		}
		if want := int64(price.Cost(upstream.Usage{Input: 10, Output: 3})); res.Settled != want {
			t.Fatalf("%s: settled %d, want %d (Vertex's usage)", body, res.Settled, want)
		}
		return rec.Body.String() + string(res.Final)
	}
	forward(wire.Messages, `{"model":"claude-sonnet-4-5","max_tokens":64,"messages":[{"role":"user","content":"hi"}]}`)
	if s := forward(wire.Messages, `{"model":"claude-sonnet-4-5","max_tokens":64,"stream":true,"messages":[{"role":"user","content":"hi"}]}`); !strings.Contains(s, "message_stop") {
		t.Fatalf("the stream did not end: %s", s)
	}
	forward(wire.ChatCompletions, `{"model":"claude-sonnet-4-5","messages":[{"role":"user","content":"hi"}]}`)
	forward(wire.ChatCompletions, `{"model":"gemini-2.5-pro","messages":[{"role":"user","content":"hi"}]}`)

	got := seen()[len(sdk):]
	if len(got) != 4 {
		t.Fatalf("%d calls reached Vertex, want 4", len(got))
	}
	claudeWhole, claudeStream, chatClaude, chatGemini := got[0], got[1], got[2], got[3]
	if claudeWhole.Path != sdk[0].Path || claudeWhole.Auth != sdk[0].Auth || chatClaude.Path != sdk[0].Path || chatGemini.Path != sdk[1].Path || chatGemini.Auth != sdk[1].Auth {
		t.Fatalf("the gateway called\n%+v\n%+v\n%+v\nthe SDKs\n%+v\n%+v", claudeWhole, chatClaude, chatGemini, sdk[0], sdk[1])
	}
	if !strings.HasSuffix(claudeStream.Path, "/publishers/anthropic/models/claude-sonnet-4-5:streamRawPredict") {
		t.Fatalf("the stream went to %s", claudeStream.Path)
	}
	for _, c := range got[:3] {
		if _, ok := c.Body["model"]; ok || c.Body["anthropic_version"] != provider.VertexAnthropicVersion {
			t.Fatalf("a Claude body on Vertex: %+v", c.Body)
		}
	}
	if claudeWhole.Auth != "Bearer ya29.fake" || tokens.Load() != 2 { // one for the SDKs' credentials, one for the route's
		t.Fatalf("auth %q after %d token grants", claudeWhole.Auth, tokens.Load())
	}
}
